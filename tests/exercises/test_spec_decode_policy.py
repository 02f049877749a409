"""Q38 (exercises/spec_decode_policy): the notes' table, sensible variants, and the code part's
machinery run in-process on trusted code only (the reference, our mutants, the driver).

The reference's choose() is also checked against a brute-force search over every assignment of
draft lengths on small batches, so the greedy the starter specifies really finds the best plan.
"""
from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest

from tests.exercises.support import (
    ExerciseUnderTest,
    check_score,
    code_part,
    load_by_path,
    load_file,
)

ex = load_by_path("spec_decode_policy")
EX = ExerciseUnderTest.load(ex)
CODE = EX.folder / "code"
SEED = 4242
VARIANTS = EX.variants(200)


CODE_PART = code_part("spec_decode_policy")
checks, driver, reference = CODE_PART.checks, CODE_PART.driver, CODE_PART.reference


all_cases, expected = CODE_PART.fixtures(SEED)


# --- the numbers ------------------------------------------------------------------------------

def test_parts_agree_with_the_module() -> None:
    s = ex.solve(ex.CANONICAL)
    assert s["policy"] == "code/reference.py"


def test_canonical_is_the_notes_table() -> None:
    # facts-q26-q49 §Q38, T_mem 20 ms, knee 256, c = 0.05, k = 4.
    r = reference
    table = {  # batch -> (cost, S at 0.3, 0.5, 0.8, break-even, best k at 0.8)
        1: (1.20, 1.19, 1.61, 2.80, 0.167, 8),
        64: (1.45, 0.98, 1.34, 2.32, 0.312, 3),
        128: (2.70, 0.53, 0.72, 1.25, 0.686, 1),
    }
    for b, (cost, s3, s5, s8, be, k8) in table.items():
        assert r.step_cost(4, b, 0.05, 20.0, 256) == pytest.approx(cost)
        for a, want in ((0.3, s3), (0.5, s5), (0.8, s8)):
            assert r.speedup(a, 4, b, 0.05, 20.0, 256) == pytest.approx(want, abs=0.006)
        assert ex._break_even(4, cost) == pytest.approx(be, abs=5e-4)
        assert r.best_k(0.8, b, 0.05, 20.0, 256) == k8
    # E(0.8, 4) = 3.362, E(0.5, 4) = 1.938, E(0.3, 4) = 1.425.
    assert r.expected_tokens(0.8, 4) == pytest.approx(3.3616)
    assert r.expected_tokens(0.5, 4) == pytest.approx(1.9375)
    assert r.expected_tokens(0.3, 4) == pytest.approx(1.4251)
    s = ex.solve(ex.CANONICAL)
    assert s["speedup_low"].value == pytest.approx(1.4251 / 1.45)  # 0.98: a slowdown
    assert s["break_even"].value == pytest.approx(31.24, abs=0.01)
    # The 29 ms step (4 ms drafting + 25 ms verify): 8.6 ms/token at 0.8, 20.3 at 0.3, 29 at 0.
    assert (s["draft_total_ms"], s["verify_ms"], s["step_ms"]) == pytest.approx((4.0, 25.0, 29.0))
    assert s["high_ms"] == pytest.approx(8.63, abs=0.01)
    assert s["low_ms"] == pytest.approx(20.35, abs=0.01)
    assert s["tail_ms"].value == pytest.approx(29.0)
    assert s["tail_slowdown_pct"] == pytest.approx(45.0)
    # Counters: the naive accepted / draft tokens is 0.59 at alpha 0.8 (the notes' example).
    assert s["alpha_measured"].value == pytest.approx(0.8)
    assert s["naive_ratio"] == pytest.approx(0.5904)
    assert (s["cnt_accepted"], s["cnt_draft_tokens"]) == (23_616, 40_000)


def test_variants_are_sensible_and_distinct() -> None:
    assert len({json.dumps(p, sort_keys=True) for p in VARIANTS}) >= 150
    for p in VARIANTS:
        s = ex.solve(p)
        assert s["speedup_low"].value < 1 < s["speedup_high"]
        assert p["batch"] <= p["n_knee"] < s["verify_tokens"]
        assert s["tail_ms"].value > s["plain_ms"]


@pytest.mark.parametrize("which", ["statement.md", "solution.md"])
def test_templates_render(which: str) -> None:
    for text in EX.rendered(which, VARIANTS[:40]):
        assert "{{" not in text


# --- the code part ----------------------------------------------------------------------------


def test_starter_scores_zero(all_cases: list[dict[str, Any]],
                             expected: list[dict[str, Any]]) -> None:
    starter = load_file(CODE / "starter.py", "q38_test_starter")
    got = [{"output": driver.run_case(starter, c["input"])} for c in all_cases]
    assert check_score(checks.check(all_cases, got, expected, ex.CANONICAL)) == 0


def test_the_guard_message_names_the_request_and_its_speedup(
        all_cases: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    module = CODE_PART.module("no_guard")
    got = [{"output": driver.run_case(module, c["input"])} for c in all_cases]
    failed = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)
              if not c.passed}
    msg = failed["choose() never drafts at a predicted slowdown"].message
    # The smallest case is the hand-written two-request one.
    assert "gave 'lo' k = 1" in msg and "predicted speedup is" in msg


def test_smallest_failing_case_is_reported(all_cases: list[dict[str, Any]],
                                           expected: list[dict[str, Any]]) -> None:
    got = [json.loads(json.dumps(e)) for e in expected]
    fn = [i for i, c in enumerate(all_cases) if c["input"]["kind"] == "fn"
          and c["input"]["fn"] == "speedup" and "value" in expected[i]["output"]]
    small, big = fn[0], fn[-1]
    for i in (small, big):
        got[i]["output"]["value"] += 1.0
    results = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)}
    msg = results["step_cost and speedup values"].message
    assert msg.startswith("2 of ")
    smallest = min((all_cases[small], all_cases[big]), key=checks.size_key)
    assert checks.describe(smallest) in msg


def test_driver_error_and_malformed_results_fail(all_cases: list[dict[str, Any]],
                                                 expected: list[dict[str, Any]]) -> None:
    got = [{"error": "no output"} for _ in all_cases]
    assert not any(c.passed for c in checks.check(all_cases, got, expected, ex.CANONICAL))
    bad = [{"output": {"value": True}}, {"output": {"results": "x"}}, "text", {"error": 3}]
    results = CODE_PART.assert_lines_fail_every_check(bad, all_cases, expected)
    assert "malformed" in results[0].message


def test_batch_cost_rejects_out_of_range_calls() -> None:
    class Peeks:
        class SpecPolicy:
            def __init__(self, **kwargs: Any) -> None:
                pass

            def choose(self, req_ids: list[str], batch_cost: Any) -> dict[str, int]:
                batch_cost(len(req_ids) - 1)  # below a plain step: not a valid plan
                return {}

    case = checks.policy_case("x", {"k_max": 2}, [["choose", ["a", "b"],
                                                    checks.cost_spec(20.0, 8, 1.0)]])
    out = driver.run_case(Peeks, case["input"])
    assert out["error"].startswith("ValueError: batch_cost(1)") and out["error_op"] == 0


# --- hand-written edges and the greedy's optimality -------------------------------------------

def test_expected_tokens_edges() -> None:
    assert reference.expected_tokens(1.0, 5) == 6.0
    assert reference.expected_tokens(0.0, 6) == 1.0
    assert reference.expected_tokens(0.7, 0) == 1.0
    with pytest.raises(ValueError):
        reference.expected_tokens(1.5, 2)


def test_ewma_counts_only_judged_positions_and_converges() -> None:
    pol = reference.SpecPolicy(k_max=4, ewma=0.5, prior_alpha=0.6)
    pol.observe("x", 4, 1)  # accepted, then the first rejection; positions 3-4 never judged
    assert pol.estimate("x") == pytest.approx(0.5 * (0.5 * 0.6 + 0.5))
    pol.observe("x", 0, 0)
    assert pol.estimate("x") == pytest.approx(0.4)
    rng = random.Random(3)
    pol = reference.SpecPolicy(k_max=4, ewma=0.02, prior_alpha=0.2)
    for op in checks._stream(rng, "s", 0.7, 4, 500):
        pol.observe(*op[1:])
    assert abs(pol.estimate("s") - 0.7) < 0.05


def _brute_force(alphas: list[float], k_max: int, cost: Any) -> float:
    """The best goodput over every assignment of draft lengths (no guard)."""
    b = len(alphas)
    best = 0.0
    for ks in itertools.product(range(k_max + 1), repeat=b):
        tokens = sum(reference.expected_tokens(a, k) for a, k in zip(alphas, ks, strict=True))
        best = max(best, tokens / cost(b + sum(ks)))
    return best


@pytest.mark.parametrize("seed", range(25))
def test_choose_finds_the_best_plan_when_the_guard_is_idle(seed: int) -> None:
    rng = random.Random(seed)
    b, k_max = rng.randint(1, 4), rng.randint(1, 3)
    alphas = [rng.choice((0.1, 0.3, 0.5, 0.7, 0.9)) for _ in range(b)]
    knee, t, d = rng.choice((2, 4, 6, 8)), 20.0, rng.choice((0.0, 0.5, 2.0))

    def cost(n: int) -> float:
        return t * max(1.0, n / knee) + d * (n - b) / b

    pol = reference.SpecPolicy(k_max=k_max, prior_alpha=0.5, margin=-10.0)  # guard off
    pol._alpha = {f"r{i}": a for i, a in enumerate(alphas)}
    ks = pol.choose([f"r{i}" for i in range(b)], cost)
    tokens = sum(reference.expected_tokens(a, ks[f"r{i}"]) for i, a in enumerate(alphas))
    got = tokens / cost(b + sum(ks.values()))
    assert got == pytest.approx(_brute_force(alphas, k_max, cost), rel=1e-9)


# --- the hidden cases -------------------------------------------------------------------------

def test_hidden_cases_are_deterministic_and_cover_the_edges() -> None:
    a = CODE_PART.assert_hidden_cases_seeded()
    ids = [c["id"] for c in a]
    assert len(ids) == len(set(ids))
    for name in ("table-speedup-b64-a0.3", "e-alpha1", "best-k-all-tie", "invalid-alpha-negative",
                 "policy-cold-start", "policy-guard-drops-low-alpha", "policy-converges",
                 "policy-mixed-batch-64", "policy-invalid-accepted"):
        assert f"edge-{name}" in ids, name
    assert sum(1 for i in ids if i.startswith("random-")) >= 100
    keys = [checks.size_key(c) for c in a]
    assert keys == sorted(keys)


def test_public_cases_use_the_variant() -> None:
    p = VARIANTS[3]
    cases = checks.public_cases(p)
    speed = next(c for c in cases if c["id"] == "example-speedup-low-alpha")
    assert speed["input"]["args"] == [p["alpha_low"], p["k"], p["batch"], p["c"], p["t_mem_ms"],
                                      p["n_knee"]]


def test_every_mutant_failure_names_its_smallest_case() -> None:
    # Each check a mutant (code/mutants.toml) fails names the smallest case and what it should have done.
    for name, c in CODE_PART.failures():
        assert "Smallest:" in c.message, (name, c.message)
        assert any(w in c.message for w in ("expected", "should", "slowed down", "raised")), \
            (name, c.message)
