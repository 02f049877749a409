"""Q43 (exercises/paging_waste_bound): the worked numbers of the facts notes, sensible variants,
distinct mistakes, and a brute-force allocator that checks the bound and the expectation."""
from __future__ import annotations

import math
import random
import re

import pytest

from exercises import templating
from exercises.spec import ExerciseSpec
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("paging_waste_bound")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
VARIANTS = EX.variants()
spec = EX.spec_fixture()


# --- shape -----------------------------------------------------------------------------------

def test_parts_and_tolerances_agree_with_the_module() -> None:
    assert all("unit" in PARTS[pid] for pid in NUMBER_PARTS)


# --- the facts notes' worked numbers (facts-q26-q49.md, Q43) ---------------------------------

def test_canonical_reproduces_the_worked_numbers() -> None:
    p = ex.CANONICAL
    assert (p["n_seqs"], p["mean_len"], p["block_small"], p["block_large"],
            p["shared_prefix"]) == (256, 1000, 16, 128, 2000)
    s = ex.solve(p)
    # B = 16: expected 7.5 x 256 = 1,920 tokens = 0.75 %; worst 3,840 = 1.5 %.
    assert s["expected_tokens_small"] == 1920 and s["expected_pct_small"] == pytest.approx(0.75)
    assert s["worst_tokens_small"] == 3840 and s["worst_pct_small"] == pytest.approx(1.5)
    # B = 128: expected 63.5 x 256 = 16,256 = 6.35 %; worst 12.7 %.
    assert s["expected_tokens_large"] == 16256
    assert s["expected_pct"].value == pytest.approx(6.35)
    assert s["worst_pct_large"] == pytest.approx(12.7)
    # Prefix granularity: 2,000 shared tokens hit 2,000 at B = 16 and 1,920 at B = 128; an exact
    # repeat of the 2,000 tokens hits 1,984 at 16 (last-token rule) and 1,920 at 128.
    assert s["hit_small"] == 2000 and s["prefix_hit"].value == 1920 and s["lost_large"] == 80
    assert s["repeat_hit_small"] == 1984 and s["repeat_hit_large"] == 1920
    # In bytes (our addition, Llama-3.1-70B BF16: 327,680 B/token): 32,512 x 327,680 B.
    assert s["kappa"] == 327_680
    assert s["worst_tokens_large"] == 32_512
    assert s["worst_gb"].value == pytest.approx(10.653532, rel=1e-6)
    assert s["bound"] == "N*(B-1)"


# --- a brute-force allocator: the bound holds, is tight, and the mean is (B - 1)/2 -----------

def _allocated_slots(length: int, block: int) -> int:
    """Slots a sequence holds when blocks are taken one at a time, on demand."""
    blocks = 0
    for written in range(length):
        if written == blocks * block:  # the last block is full (or there is none): take one
            blocks += 1
    return blocks * block


def test_on_demand_allocation_meets_the_bound_and_the_expectation() -> None:
    rng = random.Random(43)
    for block in (16, 64, 128):
        lengths = [rng.randint(1, 5000) for _ in range(300)]
        waste = [_allocated_slots(n, block) - n for n in lengths]
        assert all(0 <= w <= block - 1 for w in waste)
        assert sum(waste) <= len(lengths) * (block - 1)
        # Tight: lengths of the form kB + 1 waste exactly B - 1 each.
        tight = [3 * block + 1] * 10
        assert sum(_allocated_slots(n, block) - n for n in tight) == 10 * (block - 1)
        # Lengths covering every remainder equally: the mean waste is (B - 1)/2 exactly.
        even = range(block, 3 * block)
        mean = sum(_allocated_slots(n, block) - n for n in even) / len(even)
        assert mean == pytest.approx((block - 1) / 2)


def test_prefix_hit_is_whole_blocks_of_the_shared_part() -> None:
    # A direct model of the block-wise lookup: compare block by block, stop at the first that
    # differs; only full blocks of the cached prompt exist.
    rng = random.Random(7)
    for _ in range(200):
        block = rng.choice((16, 64, 128, 256))
        shared = rng.randint(1, 6000)
        cached = list(range(shared)) + [-1] * rng.randint(1, 500)
        new = list(range(shared)) + [-2] * rng.randint(1, 500)
        hit = 0
        while (hit + block <= len(cached) and hit + block <= len(new)
               and cached[hit:hit + block] == new[hit:hit + block]):
            hit += block
        assert hit == shared // block * block


# --- variants --------------------------------------------------------------------------------

def test_variants_are_sensible_and_differ() -> None:
    seen = {"model": set(), "block_large": set(), "kv_dtype": set()}
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        for pid in NUMBER_PARTS:
            assert math.isfinite(s[pid].value) and s[pid].value > 0, (pid, p)
        assert 0 < s["prefix_hit"].value < p["shared_prefix"]
        assert s["live_gb"] <= s["pool_gb"]
        for k in seen:
            seen[k].add(p[k])
    assert len({tuple(sorted(p.items())) for p in VARIANTS}) >= 190
    answers = {tuple(ex.solve(p)[pid].value for pid in NUMBER_PARTS) for p in VARIANTS}
    assert len(answers) >= 190
    assert len({ex.solve(p)["worst_gb"].value for p in VARIANTS}) >= 150
    for p in VARIANTS:
        assert ex.SEQS[0] <= p["n_seqs"] <= ex.SEQS[1]
        assert ex.MEAN_LENS[0] <= p["mean_len"] <= ex.MEAN_LENS[1] and p["mean_len"] % 100 == 0
    assert seen["block_large"] == set(ex.LARGE_BLOCKS) and seen["kv_dtype"] == {"BF16", "FP8"}
    assert len(seen["model"]) >= 4


def test_deployments_exist_in_the_catalog() -> None:
    from exercises.catalog import gpu, model
    for name, gpu_name, tp in ex.DEPLOYMENTS:
        m = model(name)
        assert m.kv_heads % tp == 0 and gpu(gpu_name).hbm_gb > 0


# --- mistakes --------------------------------------------------------------------------------

def test_bound_formula_and_its_mistakes(spec: ExerciseSpec) -> None:
    EX.assert_formula_grader_separates(spec, "bound", "N*B - N")


# --- templates -------------------------------------------------------------------------------

STATEMENT_GIVENS = {"layers", "kv_heads", "q_heads", "head_dim", "dtype_bytes", "attn_desc"}


def test_templates_render_for_every_variant() -> None:
    for which in ("statement.md", "solution.md"):
        for text in EX.rendered(which, VARIANTS):
            assert "nan" not in text.lower().split()


def test_statement_shows_only_givens() -> None:
    EX.assert_statement_shows_only_givens(STATEMENT_GIVENS)


def test_canonical_solution_quotes_the_worked_numbers(spec: ExerciseSpec) -> None:
    text = templating.render(spec.solution_template, ex.CANONICAL, ex.solve(ex.CANONICAL))
    for figure in ["327,680", "32,512", "10.65 GB", "12.7 %", "6.35 %", "0.75 %", "1,920 tokens",
                   "1,984", "80 shared tokens"]:
        assert figure in text, figure
    assert not re.search(r"\{\{|\}\}", text)


def test_selftest_has_the_required_cases() -> None:
    # "21.3 GB" is off by 2x; "9.92 GiB" is right, in another unit.
    EX.assert_selftest_cases_well_formed("21.3 GB", "9.92 GiB")
