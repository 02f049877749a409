"""Q34 (exercises/prefix_boundary_diagnosis): the facts note's worked numbers, sensible variants,
and the code part's machinery run in-process on trusted code only (the reference, our mutants and
equivalents, the driver)."""
from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tests.exercises.support import ExerciseUnderTest, code_part, load_by_path

ex = load_by_path("prefix_boundary_diagnosis")
EX = ExerciseUnderTest.load(ex)
FOLDER = EX.folder
CODE = FOLDER / "code"
SEED = 3434
VARIANTS = EX.variants(200)


CODE_PART = code_part("prefix_boundary_diagnosis")
checks, driver, reference = CODE_PART.checks, CODE_PART.driver, CODE_PART.reference


all_cases, expected = CODE_PART.fixtures(SEED)


# --- the canonical variant: the facts note's worked example ---------------------------------

def test_canonical_reproduces_the_facts_note() -> None:
    p = ex.CANONICAL
    s = ex.solve(p)
    assert (p["model"], p["block"], p["system"], p["user"], p["insert_at"]) == (
        "Llama-3.1-8B", 16, 1200, 300, 40)
    # Healthy: the 1,200-token system prompt is 75 whole blocks -> 1,200 / 1,500 = 80 %.
    assert s["healthy"] == 1200 and s["healthy_rate_pct"] == pytest.approx(80.0)
    # The break at token 40: 16 * floor(40 / 16) = 32 tokens -> 32 / 1,500 = 2.13 %.
    assert s["reusable"].value == 32
    assert s["predicted_rate"].value == pytest.approx(2.1333, abs=1e-4)
    # 1,000 requests: 32,000 hit tokens of 1,500,000 before the restart loses 100 of r2's.
    assert s["n_requests"] == 1000
    # Prefill 1,468 vs 300 tokens: 2 * 8.03e9 * 1,468 / (989.4e12 * 0.5) = 47.7 ms vs 9.7 ms.
    assert (s["prefill_new"], s["prefill_old"]) == (1468, 300)
    assert s["ms_new"] == pytest.approx(47.7, abs=0.1)
    assert s["ms_old"] == pytest.approx(9.74, abs=0.01)
    # Counters: (12,800 + 11,200 + 4,768 + 9,600) / (600,000 + 525,000 + 225,000 + 12,800).
    assert (s["sum_dh"], s["sum_dq"]) == (38_368, 1_362_800)
    assert s["observed_rate"].value == pytest.approx(2.8154, abs=1e-4)
    assert s["mean_of_rates_pct"] == pytest.approx(20.35, abs=0.01)
    assert s["negative_kept_pct"] == pytest.approx(81.2, abs=0.1)
    # Multi-turn: sticky 5,984 / 6,000 = 99.7 %; random over 4: 1,200 + 4,784 / 4 = 2,396
    # tokens = 39.9 % (the note's rounding, 1,200 + 4,800 / 4 = 2,400 -> 40 %, is inside 2 %).
    assert s["sticky"] == 5984 and s["sticky_pct"] == pytest.approx(99.73, abs=0.01)
    assert s["random_reuse"] == pytest.approx(2396)
    assert s["routing_rate"].value == pytest.approx(39.93, abs=0.01)
    assert abs(40 / s["routing_rate"].value - 1) < 0.02


def test_canonical_prompts_diverge_at_the_insert() -> None:
    p = ex.CANONICAL
    a, b = p["prompt_a"], p["prompt_b"]
    assert reference.common_prefix_len(a, b) == 40
    assert reference.reusable_tokens(a, b, 16) == 32
    assert list(a[:5]) == list(ex.HEADER)


# --- variants ---------------------------------------------------------------------------------

def test_variants_are_sensible_and_consistent() -> None:
    assert len({json.dumps(p, sort_keys=True) for p in VARIANTS}) >= 150
    for p in VARIANTS:
        s = ex.solve(p)
        # The statement's prompts, run through the reference, give part 1's answer.
        assert reference.reusable_tokens(p["prompt_a"], p["prompt_b"], p["block"]) == \
            s["reusable"].value
        # The counters, through the reference, give part 3's answer.
        assert reference.observed_hit_rate(p["before"], p["after"]) * 100 == \
            pytest.approx(s["observed_rate"].value)
        # The restarted replica's counters really went down.
        r = len(p["requests"]) - 1
        assert p["after"][r][ex.QUERIES] < p["before"][r][ex.QUERIES]


# --- the model behind the routing answer --------------------------------------------------------

def test_routing_simulation_converges_to_the_closed_form() -> None:
    # Two-turn conversations: turn 1 lands anywhere; turn 2 (turn 1 + 4 new tokens) is routed at
    # random. Only turn 1's replica holds the history, so the closed form is exact in expectation:
    # (S + (sticky - S) / k) / P with S = 16, sticky = 56, P = 60, k = 4 -> 26 / 60.
    system = list(range(1, 17))
    k, block, n = 4, 4, 300
    rates = []
    for seed in range(12):
        rng = random.Random(seed)
        trace, assign, turn2 = [], [], []
        for c in range(n):
            first = system + [1000 + c] * 40
            trace.append(first)
            assign.append(rng.randrange(k))
            trace.append(first + [7, 7, 7, 7])
            assign.append(rng.randrange(k))
            turn2.append(len(trace) - 1)
        _, hits_all = reference.predict_window(trace, block, k, lambda i, p, a=assign: a[i])
        keep = [i for i in range(len(trace)) if i not in set(turn2)]
        sub = [trace[i] for i in keep]
        sub_assign = [assign[i] for i in keep]
        _, hits_first = reference.predict_window(sub, block, k, lambda i, p, a=sub_assign: a[i])
        rates.append((hits_all - hits_first) / (n * 60))
    closed = (16 + (56 - 16) / k) / 60
    assert sum(rates) / len(rates) == pytest.approx(closed, rel=0.03)


def test_hit_rate_falls_when_the_working_set_exceeds_the_pool() -> None:
    prompts = [[p] * 32 + [9] for p in range(20)]  # 20 prompts of 8 blocks of 4
    trace = prompts * 5
    q, roomy = reference.predict_window(trace, 4, capacity_blocks=200)
    _, tight = reference.predict_window(trace, 4, capacity_blocks=100)
    assert roomy / q > 0.7 and tight / q < 0.1  # cyclic access through LRU thrashes


def test_ratio_of_sums_is_not_the_mean_of_rates() -> None:
    before = [{ex.HITS: 0.0, ex.QUERIES: 0.0}, {ex.HITS: 0.0, ex.QUERIES: 0.0}]
    after = [{ex.HITS: 9000.0, ex.QUERIES: 10_000.0}, {ex.HITS: 0.0, ex.QUERIES: 100.0}]
    assert reference.observed_hit_rate(before, after) == pytest.approx(9000 / 10_100)
    assert reference.counter_delta({ex.HITS: 9e6}, {ex.HITS: 4e4}, ex.HITS) == 4e4


def test_junction_and_identical_fixtures() -> None:
    # Same text ("123"), different token boundaries: nothing is shared.
    assert reference.common_prefix_len([1, 23, 4], [12, 3, 4]) == 0
    # Identical prompts: the last token is recomputed, so the last full block is not reused.
    assert reference.reusable_tokens(list(range(8)), list(range(8)), 4) == 4
    assert reference.reusable_tokens([], [], 4) == 0


# --- the code part ----------------------------------------------------------------------------


def test_hints_name_the_broken_rule(all_cases: list[dict[str, Any]],
                                    expected: list[dict[str, Any]]) -> None:
    module = CODE_PART.module("no_last_token_cap")
    by_name = {c.name: c for c in CODE_PART.check(module, all_cases, expected)}
    assert "last prompt token" in by_name["reusable_tokens: whole blocks, last token recomputed"].message
    module = CODE_PART.module("queries_as_requests")
    by_name = {c.name: c for c in CODE_PART.check(module, all_cases, expected)}
    assert "not requests" in by_name["predict_window: queries and hits"].message


def test_hidden_cases_are_deterministic_and_cover_the_edges() -> None:
    a = CODE_PART.assert_hidden_cases_seeded()
    ids = [c["id"] for c in a]
    assert len(ids) == len(set(ids))
    for name in ("lcp-same-text-other-tokens", "reuse-identical-prompts",
                 "window-extends-a-full-block-prompt", "capacity-lru-not-fifo",
                 "capacity-tail-first", "observed-uneven-traffic", "delta-reset",
                 "diagnose-closest-not-first"):
        assert f"edge-{name}" in ids, name
    assert 150 <= len(a) <= 300
    keys = [checks.size_key(c) for c in a]
    assert keys == sorted(keys)
    fns = {c["input"]["fn"] for c in a}
    assert fns == {"common_prefix_len", "reusable_tokens", "predict_window", "counter_delta",
                   "observed_hit_rate", "diagnose"}


def test_public_cases_use_the_variant() -> None:
    p = VARIANTS[3]
    cases = checks.public_cases(p)
    assert cases[0]["input"]["a"] == p["prompt_a"]
    assert cases[1]["input"]["block_size"] == p["block"]
    counters = next(c for c in cases if c["input"]["fn"] == "observed_hit_rate")
    assert counters["input"]["before"] == p["before"]


def test_driver_and_malformed_results() -> None:
    class Bad:
        @staticmethod
        def predict_window(*args: Any, **kwargs: Any) -> int:
            return 3

    inp = checks.public_cases(ex.CANONICAL)[2]["input"]
    assert driver.run_case(Bad, inp)["error"].startswith("TypeError")
    cases = checks.public_cases(ex.CANONICAL)
    exp = [{"output": driver.run_case(reference, c["input"])} for c in cases]
    bad = [{"output": {"value": True}}, {"output": []}, {"error": 3}, "text", {"output": {}}]
    results = checks.check(cases[:len(bad)], bad, exp[:len(bad)], ex.CANONICAL)
    assert not any(c.passed for c in results)


def test_every_mutant_failure_names_its_smallest_case() -> None:
    # Each check a mutant (code/mutants.toml) fails names the smallest case, what was expected and what came back.
    for name, c in CODE_PART.failures():
        assert "Smallest:" in c.message and "expected" in c.message and " — on " in c.message, \
            (name, c.message)
