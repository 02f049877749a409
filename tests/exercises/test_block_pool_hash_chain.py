"""Q40 (block_pool_hash_chain): the canonical trace and the crafted regression, the known
mistakes, sensible variants, and the code part's machinery run in-process on trusted code only
(the reference, the mutants, the driver)."""
from __future__ import annotations

import json
import random
from typing import Any

import pytest

from exercises.block_pool_hash_chain import exercise as ex
from tests.exercises.support import (
    ExerciseUnderTest,
    assert_speed_case_is_seeded_and_distinct,
    check_score,
    code_part,
)

EUT = ExerciseUnderTest.load(ex)
spec = EUT.spec_fixture()
SEED = 12345


CODE_PART = code_part("block_pool_hash_chain")
checks, driver, reference = CODE_PART.checks, CODE_PART.driver, CODE_PART.reference
all_cases, expected = CODE_PART.fixtures(SEED)


# --- the canonical numbers ---------------------------------------------------------------------

def test_canonical_trace() -> None:
    # B = 16, 8 blocks; A = P Q R S + 4 tokens, B = P Q X S + 4 tokens (same tokens in block 3).
    t = ex.run_trace(ex.CANONICAL)
    assert t["A"] == ([0, 1, 2, 3, 4], 0)
    assert t["queue_after_A"] == [5, 6, 7, 4, 3, 2, 1, 0]  # freed last block first
    assert t["B"] == ([0, 1, 5, 6, 7], 32)  # P Q hit; X differs, so S (block 3) cannot
    assert t["queue_after_B"] == [4, 3, 2]
    assert t["W"] == ([4, 3], 0)  # W takes A's uncached tail, then A's block 3 (the chain tail)
    assert t["a_after_hits"] == [0, 1, 2] and t["a_after_w"] == 48  # cap floor(67/16) = 4
    s = ex.solve(ex.CANONICAL)
    assert [s[k].value for k in ("shared_tokens", "a_after_w", "regression_hit")] == [32, 48, 2]
    assert s["token_match"] == 48  # sharing block 3 by its tokens alone
    assert s["fwd_after_w"] == 32  # head-first free: W evicts R and S, A keeps P Q


def test_canonical_regression_is_the_facts_notes() -> None:
    # Pool 3, B = 2, constant hash; A = [1,1,2,2,9] freed forward, X = [8,8] reuses block 0,
    # R = [8,8,2,2,7] must hit block 0 only.
    r = ex.regression(ex.CANONICAL)
    assert (r["a"], r["x"], r["r"]) == ([1, 1, 2, 2, 9], [8, 8], [8, 8, 2, 2, 7])
    assert r["hits"] == [0] and r["cached"] == 2
    assert ex.regression(ex.CANONICAL, "id_only")["hits"] == [0, 1]
    out = driver.run_case(reference, checks.make_case("x", 2, 3, checks.REGRESSION_OPS,
                                                      "const")["input"])["steps"]
    assert [s["out"] for s in out] == [[[0, 1, 2], 0], None, [[0], 0], [0], [[0, 1, 2], 2]]


def test_canonical_mistakes() -> None:
    wrong = {(m.part, m.name): m.answer for m in ex.mistakes(ex.CANONICAL)}
    assert wrong[("shared_tokens", "token_match")] == 48
    assert wrong[("a_after_w", "forward_free")] == 32
    assert wrong[("a_after_w", "ignored_w")] == 64
    assert wrong[("regression_hit", "id_only")] == 4
    assert wrong[("regression_hit", "collision_is_miss")] == 0


@pytest.mark.parametrize("seed", range(60))
def test_variants_are_sensible(seed: int) -> None:
    p = ex.generate(random.Random(seed))
    s = ex.solve(p)
    assert s["shared_tokens"].value == p["shared"] * p["block_size"]
    assert s["regression_hit"].value == p["reg_block"]


# --- the code part -----------------------------------------------------------------------------

def test_id_only_parent_is_safe_while_every_free_is_tail_first(
        all_cases: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    # The facts note's finding: recording the parent by id alone survives every script whose
    # frees are all last block first, because a parent then never returns to the queue before
    # its child. That is why the forward-free regression exists.
    keep = [i for i, c in enumerate(all_cases) if "ops" in c["input"] and not any(
        op[0] == "free" and not op[2] for op in c["input"]["ops"])]
    cases = [all_cases[i] for i in keep]
    module = CODE_PART.module("parent_by_id_only")
    results = CODE_PART.check(module, cases, [expected[i] for i in keep])
    assert all(c.passed for c in results), [c.message for c in results if not c.passed]
    assert len(cases) > 150


def test_reference_results_do_not_depend_on_the_hash() -> None:
    # Verification decides, the hash only nominates: the same script gives the same results
    # under SHA-256, a hash where everything collides, and a three-bucket hash.
    for raw in checks._random_inputs(SEED, 120):
        inp = json.loads(raw)
        outs = []
        for name in ("sha256", "const", "mod3"):
            steps = driver.run_case(reference, dict(inp, hash=name))["steps"]
            outs.append([s["out"] if op[0] != "hashes" else None
                         for op, s in zip(inp["ops"], steps, strict=True)])
        assert outs[0] == outs[1] == outs[2], inp


def test_hidden_cases_are_deterministic_and_cover_the_edges() -> None:
    a = CODE_PART.assert_hidden_cases_seeded()
    ids = [c["id"] for c in a]
    assert len(ids) == len(set(ids))
    for name in ("same-block-different-parent", "freed-blocks-stay-hittable",
                 "tail-evicted-first", "forward-free-evicts-heads", "cap-aligned-prompt",
                 "extra-isolates-tenants", "evicted-copy-recached",
                 "parent-reused-child-cached"):
        assert f"edge-{name}" in ids and f"edge-{name}@const" in ids, name
    assert ids[-1] == "speed-large"
    inputs = [c["input"] for c in a if c["id"].startswith("random-")]
    assert {i["hash"] for i in inputs} == {"sha256", "const", "mod3"}
    assert any(op[0] == "free" and not op[2] for i in inputs for op in i["ops"])
    assert sum(1 for i in ids if "@const" in i and i.startswith("random-")) >= 10
    keys = [checks.size_key(c) for c in a[:-1]]
    assert keys == sorted(keys)
    public = [c["id"] for c in checks.public_cases(ex.CANONICAL)]
    assert checks.REGRESSION_ID in public and not set(public) & set(ids)


def test_regression_check_names_the_incarnation(all_cases: list[dict[str, Any]],
                                                expected: list[dict[str, Any]]) -> None:
    module = CODE_PART.module("parent_by_id_only")
    results = {c.name: c for c in CODE_PART.check(module, all_cases, expected)}
    msg = results["forward-free regression"].message
    assert "incarnation" in msg and "wrong KV" in msg and "pool.free('A', tail_first=False)" in msg


def test_speed_check_gives_partial_credit_never_noise(all_cases: list[dict[str, Any]],
                                                      expected: list[dict[str, Any]]) -> None:
    results = CODE_PART.assert_speed_check_gives_partial_credit(all_cases, expected)
    assert check_score(results) == pytest.approx(12 / 13)


def test_speed_case_is_drawn_per_submission_and_never_repeats() -> None:
    assert_speed_case_is_seeded_and_distinct(checks, driver, reference, ex.CANONICAL, len)


def test_a_fast_but_wrong_large_case_does_not_pass_the_speed_check(
        all_cases: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    CODE_PART.assert_fast_but_wrong_speed_case_fails(all_cases, expected)

def test_edge_parent_reused_under_cached_child() -> None:
    # Hand-written: A = [1,1,2,2,3,3] freed first block first; X = [8,8,8] reuses block 0 and
    # block 1. Block 2 ([3,3], parent block 1's old incarnation) is still cached but must not
    # be reachable through X's block 1.
    pool = reference.BlockPool(4, 2, lambda p, t, e: b"\x00")
    assert pool.allocate("a", [1, 1, 2, 2, 3, 3]) == ([0, 1, 2], 0)
    pool.free("a", tail_first=False)
    assert pool.free_order() == [3, 0, 1, 2]
    assert pool.allocate("x", [8, 8, 8]) == ([3, 0], 0)
    assert pool.lookup([8, 8, 2, 2, 3]) == [3]
    assert pool.lookup([1, 1, 2, 2, 3]) == []  # block 0 now holds [8], uncached


def test_driver_reports_bad_return_types() -> None:
    class Bad:
        class BlockPool:
            def __init__(self, *a: Any) -> None:
                pass

            def lookup(self, tokens: Any, extra: Any = None) -> tuple[list[int], int]:
                return [0], 2

            def block_hashes(self, tokens: Any, extra: Any = None) -> list[str]:
                return ["ab"]

    out = driver.run_case(Bad, {"block_size": 2, "num_blocks": 2, "hash": "sha256",
                                "ops": [["lookup", [1, 2], None]]})
    assert out["steps"][0]["error"].startswith("TypeError: lookup returned")
    out = driver.run_case(Bad, {"block_size": 2, "num_blocks": 2, "hash": "const",
                                "ops": [["hashes", [1, 2], None]]})
    assert out["steps"][0]["error"].startswith("TypeError: block_hashes returned")


def test_malformed_results_fail(all_cases: list[dict[str, Any]],
                                expected: list[dict[str, Any]]) -> None:
    bad = [{"output": {"steps": 5}}, {"output": []}, {"error": "x"}, "text",
           {"output": {"speed": None}}]
    CODE_PART.assert_lines_fail_every_check(bad, all_cases, expected)


def test_every_mutant_failure_names_its_smallest_case() -> None:
    # Each check a mutant (code/mutants.toml) fails names a replayable script, or the speed case described in words.
    for name, c in CODE_PART.failures():
        assert "pool = BlockPool(" in c.message or "large" in c.message, (name, c.message)
