"""Q37 (latency_period_owner): the canonical numbers from the facts note, sensible variants, the
evidence file agreeing with the graded numbers, and the code part's machinery run in-process on
trusted code only (the reference, our mutants and equivalents, the driver)."""
from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from exercises import registry
from tests.exercises.support import (
    ExerciseUnderTest,
    check_score,
    code_part,
    load_by_path,
    load_file,
)

ex = load_by_path("latency_period_owner")
EX = ExerciseUnderTest.load(ex)
FOLDER = EX.folder
CODE = FOLDER / "code"
SEED = 12345
VARIANTS = EX.variants()
spec = EX.spec_fixture()


CODE_PART = code_part("latency_period_owner")
checks, driver, reference = CODE_PART.checks, CODE_PART.driver, CODE_PART.reference
simulate = load_file(CODE / "simulate.py", "q37_test_simulate")


# --- shape -----------------------------------------------------------------------------------

def test_parts_and_tolerances_agree_with_the_module() -> None:
    s = ex.solve(ex.CANONICAL)
    options = {o["id"] for o in EX.parts["owner"]["options"]}
    for p in VARIANTS[:50]:
        assert ex.solve(p)["owner"] in options
    assert s["analysis"] == "code/reference.py"


# --- the canonical variant: the facts note's worked example ----------------------------------

def test_canonical_reproduces_the_facts_note() -> None:
    p = ex.CANONICAL
    assert (p["step_ms"], p["stall_ms"], p["period_s"], p["reply_tokens"]) == (25, 150, 2.0, 300)
    s = ex.solve(p)
    assert s["period"].value == 2.0
    # t/T = 25 ms / 2 s = 1.25 % > 1 %: the p99 is a stalled step, 25 + 150 ms.
    assert s["slow_pct"] == pytest.approx(1.25)
    assert s["owned"] and s["p99_itl"].value == 175
    # 300 tokens x 25 ms = 7.5 s; 7.5 / 2 = 3.75 stalls; 3.75 x 150 ms / 300 = 1.875 ms (the
    # note's "TPOT rises only 1.9 ms").
    assert s["reply_s"] == pytest.approx(7.5)
    assert s["stalls_per_reply"].value == pytest.approx(3.75)
    assert s["tpot_rise_ms"] == pytest.approx(1.875)
    assert s["exposure_pct"] == 100
    # Exact count of stalled steps: 300 x 25 / (2000 - 150) = 4.05, inside the 10 % tolerance.
    assert s["stalls_exact"] == pytest.approx(4.054, abs=1e-3)
    assert abs(s["stalls_exact"] / 3.75 - 1) < EX.tol("stalls_per_reply")
    # Little's law: 6 req/s x 7.5 s = 45 requests in the batch. GC: the period halves at 12 req/s.
    assert s["batch"] == 45 and s["period_hi_s"] == 1.0 and s["slope"] == pytest.approx(-1)
    assert s["owner"] == "gc"


def test_facts_note_tail_examples_with_the_reference() -> None:
    # t = 25 ms: T = 1 s -> 2.5 %, T = 2 s -> 1.25 % (p99 = stall), T = 5 s -> 0.5 % (p99 clean,
    # p99.9 = stall). One stall per T/t steps.
    for period, owned_p99, owned_p999 in ((1.0, True, True), (2.0, True, True),
                                          (5.0, False, True)):
        every = round(period / 0.025)
        ms = [175.0 if i % every == 0 else 25.0 for i in range(every * 20)]
        assert reference.slow_fraction(ms, 100) == pytest.approx(0.025 / period)
        assert reference.quantile_owned_by_stalls(ms, 100, 0.99) is owned_p99
        assert reference.quantile_owned_by_stalls(ms, 100, 0.999) is owned_p999
    # Example 2: 30 ms steps, a 400 ms stall every 10 s -> 0.3 % (p99 clean), yet a 12 s request
    # always sees at least one stall.
    every = round(10 / 0.030)
    ms = [430.0 if i % every == 0 else 30.0 for i in range(every * 10)]
    assert reference.slow_fraction(ms, 200) == pytest.approx(0.003, rel=0.01)
    assert not reference.quantile_owned_by_stalls(ms, 200, 0.99)
    assert reference.request_stall_exposure(12, 10) == 1.0
    assert reference.request_stall_exposure(7.5, 10) == 0.75


# --- variants ----------------------------------------------------------------------------------

def test_variants_are_sensible_and_distinct() -> None:
    assert len({json.dumps(p, sort_keys=True) for p in VARIANTS}) >= 150
    assert {p["owner"] for p in VARIANTS} == {"gc", "timer"}
    owned = [ex.solve(p)["owned"] for p in VARIANTS]
    assert 0.2 < sum(owned) / len(owned) < 0.8  # both sides of the p99 question come up
    for p in VARIANTS:
        s = ex.solve(p)
        assert p["stall_ms"] / (p["period_s"] * 1000) <= 0.08
        # The two readings of stalls_per_reply (t/T or t/(T - s)) are both inside the tolerance.
        assert abs(s["stalls_exact"] / s["stalls_per_reply"].value - 1) < EX.tol("stalls_per_reply")


# --- the evidence --------------------------------------------------------------------------------

def _series(p: dict[str, Any]) -> list[tuple[list[float], list[float]]]:
    ev = ex.evidence(p)["latency"]
    return [([x for x, _ in s["points"]], [y for _, y in s["points"]]) for s in ev.data["series"]]


def test_evidence_shape_size_and_determinism(spec: Any) -> None:
    for p in [ex.CANONICAL, *VARIANTS[:20]]:
        found = registry.evidence(spec, p)
        ev = found["latency"]
        assert ev.kind == "series" and ev.filename == "q37_latency.json"
        body = registry.evidence_bytes(ev)
        assert body == registry.evidence_bytes(registry.evidence(spec, p)["latency"])
        points = [len(s["points"]) for s in ev.data["series"]]
        assert len(points) == 2 and sum(points) <= 5000, points
        assert len(body) < 200_000
    assert _series(VARIANTS[0]) != _series(VARIANTS[1])


@pytest.mark.parametrize("p", [ex.CANONICAL, *VARIANTS], ids=lambda p: f"{p['owner']}-{p['period_s']}")
def test_evidence_carries_the_graded_numbers(p: dict[str, Any]) -> None:
    """The period, the stall height and the p99 the parts grade on can be read off the file."""
    s = ex.solve(p)
    (ts, ms), (ts_hi, ms_hi) = _series(p)
    thr = p["step_ms"] + p["stall_ms"] / 2
    # Our own detector recovers both captures' periods.
    assert reference.stall_period(ts, ms, thr) == pytest.approx(p["period_s"], rel=0.03)
    thr_hi = p["step_ms_hi"] + p["stall_ms"] / 2
    assert reference.stall_period(ts_hi, ms_hi, thr_hi) == pytest.approx(s["period_hi_s"],
                                                                         rel=0.03)
    # A timer keeps its period at the higher rate; a collector's shrinks with the rate.
    if p["owner"] == "timer":
        assert s["period_hi_s"] == p["period_s"]
    else:
        assert s["period_hi_s"] == pytest.approx(p["period_s"] / s["rate_ratio"])
    # The stall height: a stalled step is the ordinary step plus the stall.
    stalled = sorted(m for m in ms if m > thr)
    assert stalled[len(stalled) // 2] == pytest.approx(p["step_ms"] + p["stall_ms"], rel=0.04)
    ordinary = sorted(m for m in ms if m <= thr)
    assert ordinary[len(ordinary) // 2] == pytest.approx(p["step_ms"], rel=0.02)
    # The p99 the part grades on (nearest rank) is within 4 % of the reference answer.
    q = sorted(ms)[math.ceil(0.99 * len(ms)) - 1]
    assert q == pytest.approx(s["p99_itl"].value, rel=0.04)
    assert reference.quantile_owned_by_stalls(ms, thr, 0.99) is s["owned"]


# --- the code part ---------------------------------------------------------------------------------

all_cases, expected = CODE_PART.fixtures(SEED)



def test_starter_scores_zero(all_cases: list[dict[str, Any]],
                             expected: list[dict[str, Any]]) -> None:
    starter = load_file(CODE / "starter.py", "q37_test_starter")
    results = CODE_PART.check(starter, all_cases, expected)
    assert check_score(results) == 0



def test_forged_or_malformed_lines_count_as_failures(all_cases: list[dict[str, Any]],
                                                     expected: list[dict[str, Any]]) -> None:
    bad = [{"output": {"detect_period": {"value": "2"}}}, {"output": []}, {"error": 3}, "text",
           {"output": {"slow_steps": {"value": [float("nan")]}}}]
    results = CODE_PART.assert_lines_fail_every_check(bad, all_cases, expected)
    assert any("malformed" in c.message for c in results)


def test_smallest_failing_case_is_reported(all_cases: list[dict[str, Any]],
                                           expected: list[dict[str, Any]]) -> None:
    got = [json.loads(json.dumps(e)) for e in expected]
    periodic = [i for i, c in enumerate(all_cases) if c["input"]["kind"] == "period"
                and expected[i]["output"]["detect_period"]["value"] is not None]
    small, big = periodic[0], periodic[-1]
    for i in (small, big):
        got[i]["output"]["detect_period"]["value"] *= 2
    results = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)}
    msg = results["detect_period"].message
    assert msg.startswith("2 of ") and checks.describe(all_cases[small]) in msg
    assert "harmonic" in msg


def test_driver_reports_bad_return_types() -> None:
    class Bad:
        @staticmethod
        def detect_period(stall_ts: list[float]) -> str:
            return "2 s"

        @staticmethod
        def request_stall_exposure(d: float, t: float) -> bool:
            return True

    out = driver.run_case(Bad, {"kind": "period", "stall_ts": [0.0, 1.0, 2.0]})
    assert out["detect_period"]["error"].startswith("TypeError")
    out = driver.run_case(Bad, {"kind": "exposure", "duration_s": 1.0, "period_s": 2.0})
    assert out["request_stall_exposure"]["error"].startswith("TypeError")


# --- hidden cases ------------------------------------------------------------------------------

def test_hidden_cases_are_deterministic_per_seed() -> None:
    CODE_PART.assert_hidden_cases_seeded("_random_knobs")


def test_hidden_cases_cover_the_edges_and_are_sorted() -> None:
    hidden = checks.hidden_cases(ex.CANONICAL, SEED)
    ids = [c["id"] for c in hidden]
    assert len(ids) == len(set(ids))
    for name in ("no-stalls", "two-stalls", "mostly-missed", "jittered", "half-period-gap",
                 "unsorted", "empty-trace", "at-threshold", "period-longer-than-half",
                 "exposure-zero-period", "align-event-after", "slope-same-rate"):
        assert f"edge-{name}" in ids, name
    kinds = [c["input"]["kind"] for c in hidden if c["id"].startswith("random-")]
    for kind, wanted in checks.RANDOM_COUNTS.items():
        assert kinds.count(kind) >= wanted // 2, kind
    assert [checks.size_key(c) for c in hidden] == sorted(checks.size_key(c) for c in hidden)
    assert len(hidden) <= 220  # one grade stays well under two seconds in the sandbox


def test_hidden_cases_stay_clear_of_knife_edges(all_cases: list[dict[str, Any]]) -> None:
    for c in all_cases:
        inp = c["input"]
        if inp["kind"] == "period" and c["id"].startswith("random-"):
            assert checks._clear(inp["stall_ts"]), c
        if inp["kind"] == "trace" and c["id"].startswith("random-"):
            n = len(inp["step_ms"])
            k = sum(1 for m in inp["step_ms"] if m > inp["threshold_ms"])
            # quantile ownership <=> share of slow steps over 1 - p (the notes' property)
            assert reference.quantile_owned_by_stalls(inp["step_ms"], inp["threshold_ms"],
                                                      inp["p"]) == (k / n > 1 - inp["p"])
            assert abs(k - (1 - inp["p"]) * n) >= 0.5


def test_random_period_cases_recover_their_period() -> None:
    # Periodic draws with jitter up to 5 % and dropped stalls: within 5 % of the true period.
    for raw in checks._random_knobs(SEED, "period", checks.RANDOM_COUNTS["period"]):
        knobs = json.loads(raw)
        built = checks._build("period", knobs)
        if built is None or knobs["aperiodic"]:
            continue
        found = reference.detect_period(built[0]["stall_ts"])
        if len(built[0]["stall_ts"]) >= 3:
            assert found == pytest.approx(knobs["period"], rel=0.05), built


def test_alignment_separates_the_true_source_from_the_other() -> None:
    # The notes' test: stalls from a GC, events from that GC and from a 10 s timer.
    rng = random.Random(37)
    gc_events = simulate.stall_times("gc", 1.7, 120, rng, 0.4)
    stalls = [t + rng.uniform(0.0, 0.03) for t in gc_events if rng.random() < 0.95]
    timer_events = simulate.stall_times("timer", 10.0, 120, rng, 3.0)
    assert reference.event_alignment(stalls, gc_events, 0.05) >= 0.9
    assert reference.event_alignment(stalls, timer_events, 0.05) <= 0.2
    slope = reference.period_load_slope([(4, 1.7), (8, 0.86), (12, 0.57)])
    assert slope == pytest.approx(-1, abs=0.05)
    assert reference.period_load_slope([(4, 10.0), (8, 10.02), (12, 9.98)]) == \
        pytest.approx(0, abs=0.02)


def test_public_cases_play_the_students_own_evidence() -> None:
    p = VARIANTS[3]
    cases = checks.public_cases(p)
    (ts, ms), _ = _series(p)
    assert cases[0]["input"]["ts"] == ts and cases[0]["input"]["step_ms"] == ms
    out = driver.run_case(reference, cases[0]["input"])
    assert out["stall_period"]["value"] == pytest.approx(p["period_s"], rel=0.03)
    slope = driver.run_case(reference, cases[-1]["input"])["period_load_slope"]["value"]
    assert slope == pytest.approx(ex.solve(p)["slope"], abs=1e-6)


def test_every_mutant_failure_names_its_smallest_case() -> None:
    # Each check a mutant (code/mutants.toml) fails names how many cases fail, the smallest one, and what came back.
    for name, c in CODE_PART.failures():
        assert "Smallest:" in c.message and " — on " in c.message, (name, c.message)
