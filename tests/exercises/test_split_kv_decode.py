"""Q14 (exercises/split_kv_decode): FlashAttention-2's split heuristic reproduced on its own
examples and the research notes' table, sensible variants, distinct mistakes, and the kernel
task's cases.

The kernel itself (reference scores 1, each mutant below 1 and failing its own check) is run by
the selftest in the real sandbox (tests/test_every_exercise.py and selftest.toml)."""
from __future__ import annotations

import math

import pytest

from exercises.catalog import gpu, model
from tests.exercises.support import EXERCISES, ExerciseUnderTest, load_by_path, load_file

ex = load_by_path("split_kv_decode")
EX = ExerciseUnderTest.load(ex)
PARTS = EX.parts
VARIANTS = EX.variants(200)
spec = EX.spec_fixture()


# task.py needs torch only inside make()/reference(), which get it as an argument.
TASK = load_file(EXERCISES / "split_kv_decode" / "kernel" / "task.py", "split_kv_decode_task")


# ---------------------------------------------------------------------------------------------
# Shape


def test_parts_and_tolerances_agree_with_the_module() -> None:
    s = ex.solve(ex.CANONICAL)
    assert s["judgement"] in {o["id"] for o in PARTS["judgement"]["options"]}
    assert PARTS["kernel"]["type"] == "kernel" and s["kernel"] == "kernel/reference.py"


# ---------------------------------------------------------------------------------------------
# The heuristic


def test_heuristic_matches_flash_attention_comment() -> None:
    # flash_api.cpp's own example: batch * heads = 48 on 108 SMs, 2 splits (0.89) beat 3 (0.67).
    assert ex.efficiency(48, 2, 108) == pytest.approx(0.889, abs=1e-3)
    assert ex.efficiency(48, 3, 108) == pytest.approx(0.667, abs=1e-3)
    assert ex.num_splits(48, 108, 64) == 2
    # A full grid is never split.
    assert ex.num_splits(128, 132, 256) == 1
    assert ex.num_splits(106, 132, 256) == 1  # 106 >= 0.8 x 132 = 105.6


def test_eligibility_rule() -> None:
    # The notes' example: 64 blocks, 11 splits = 6 x 10 + 4; 12 splits is 11 splits in disguise.
    assert ex.eligible(11, 64) and not ex.eligible(12, 64)
    assert not ex.eligible(33, 256) and ex.eligible(32, 256)


def test_research_table() -> None:
    # facts-q01-q25.md, Q14 worked example: 32K context, 256 blocks, 8 CTAs.
    assert ex.num_splits(8, 132, 256) == 14
    assert ex.efficiency(8, 14, 132) == pytest.approx(0.848, abs=1e-3)
    assert ex.num_splits(8, 132, 256, smallest=False) == 16
    assert ex.efficiency(8, 16, 132) == pytest.approx(0.970, abs=1e-3)
    assert ex.num_splits(8, 264, 256) == 29
    assert ex.efficiency(8, 29, 264) == pytest.approx(0.879, abs=1e-3)
    assert ex.num_splits(8, 108, 256) == 12
    assert ex.efficiency(8, 12, 108) == pytest.approx(0.889, abs=1e-3)
    # Appendix E point 5: without the eligibility rule 132 slots give 15 (33 sets the best).
    assert ex.num_splits(8, 132, 256, check_eligible=False) == 15
    assert ex.num_splits(8, 132, 256, check_eligible=False, smallest=False) == 33


def test_block_size_rule() -> None:
    assert [ex.block_n(d) for d in (64, 128, 256)] == [256, 128, 64]


# ---------------------------------------------------------------------------------------------
# The canonical variant


def test_canonical_setting() -> None:
    assert ex.CANONICAL == {"model": "Llama-3.1-8B", "gpu": "H100 SXM", "batch": 1,
                            "context": 32768, "ctas_per_sm": 1}
    assert ex.is_sensible(ex.CANONICAL)


def test_canonical_numbers() -> None:
    s = ex.solve(ex.CANONICAL)
    # "Eight thread blocks and 132 SMs": 1 x 8 KV heads x 1 M-block (the 4-head group folded).
    assert s["ctas"].value == 8 and s["ctas_unfolded"] == 32 and s["slots"] == 132
    assert s["n_blocks"] == 256 and s["block_n"] == 128
    assert s["splits"].value == 14 and s["ctas_after"] == 112 and s["waves"] == 1
    assert s["best_s"] == 16 and s["loose_best_s"] == 33 and not s["loose_best_eligible"]
    # 19 blocks per split, the 14th gets 9 (13 x 19 = 247).
    assert (s["per_split"], s["used_splits"], s["last_split"]) == (19, 14, 9)
    # 14 x 32 x (128 + 1) x 4 B = 231 KB of partials against 134 MB of K and V per layer.
    assert s["partial_bytes"] == 231_168
    assert s["kv_bytes"] == 134_217_728
    assert s["lse"] == "log(exp(L1) + exp(L2))"


def test_two_ctas_per_sm_gives_29() -> None:
    s = ex.solve(dict(ex.CANONICAL, ctas_per_sm=2))
    assert s["slots"] == 264 and s["splits"].value == 29
    slips = {m.name: m.answer for m in ex.mistakes(dict(ex.CANONICAL, ctas_per_sm=2))
             if m.part == "splits"}
    assert slips["other_slots"] == 14


def test_catalog_figures() -> None:
    m = model("Llama-3.1-8B")
    assert (m.q_heads, m.kv_heads, m.head_dim) == (32, 8, 128)
    assert gpu("H100 SXM").sms == 132


# ---------------------------------------------------------------------------------------------
# Variants and mistakes


def test_variants_are_sensible_and_varied() -> None:
    models, gpus, splits, cps = set(), set(), set(), set()
    for p in VARIANTS:
        s = ex.solve(p)
        assert s["splits"].value > 1
        assert s["ctas"].value < ex.FILL_FRACTION * s["slots"]
        m = model(p["model"])
        assert m.max_context is None or p["context"] <= m.max_context
        models.add(p["model"])
        gpus.add(p["gpu"])
        splits.add(s["splits"].value)
        cps.add(p["ctas_per_sm"])
    assert models == set(ex.MODELS) and gpus == set(ex.GPUS) and cps == {1, 2}
    assert len(splits) >= 10


# ---------------------------------------------------------------------------------------------
# The kernel task


def test_task_cases_cover_every_check_and_stay_small() -> None:
    preview = TASK.cases({}, "preview")
    labels = {c["label"] for c in preview}
    assert labels == {"even splits", "ragged last split", "empty split", "large scores",
                      "batch and groups"}
    assert len({c["id"] for c in preview}) == len(preview)
    for c in preview:
        # The interpreter runs programs one by one: keep each launch small.
        assert c["batch"] * c["kv_heads"] * c["num_splits"] <= 32
        assert c["dtype"] == "float16"  # the interpreter's tl.dot is wrong on bfloat16
        assert c["q_heads"] % c["kv_heads"] == 0
    # "empty split": at least one case has more splits than keys, so some split is empty
    # whatever way the keys are divided.
    assert any(c["num_splits"] > c["seq_len"] for c in preview if c["label"] == "empty split")
    # "ragged last split": the cache is not a multiple of any power-of-two block of 16+.
    assert all(c["seq_len"] % 16 for c in preview if c["label"] == "ragged last split")


def test_task_long_cases_use_the_heuristic() -> None:
    for c in TASK.cases({}, "bench") + TASK.cases({}, "gpu"):
        if c["id"].startswith("llama8b-"):
            n_blocks = math.ceil(c["seq_len"] / ex.block_n(c["head_dim"]))
            assert c["num_splits"] == ex.num_splits(c["kv_heads"], 132, n_blocks), c["id"]


def test_task_roofline() -> None:
    case = next(c for c in TASK.cases({}, "gpu") if c["id"] == "llama8b-32k")
    r = TASK.roofline(case)
    kv = 2 * 8 * 32768 * 128 * 2
    assert r["bytes"] == kv + 32 * 128 * 2 + 32 * 128 * 4 + 32 * 4
    assert r["flops"] == 4 * 32 * 32768 * 128
    assert "32,768 keys" in TASK.describe(case)
