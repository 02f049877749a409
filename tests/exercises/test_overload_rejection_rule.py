"""Q13 (overload_rejection_rule): the fluid numbers of the blurb, the simulator agreeing with
them, the evidence timeline agreeing with the graded answers, and the code part's checks run
in-process on trusted code (the reference, the mutants, the driver)."""
from __future__ import annotations

import json
import math
import random
import re
import tempfile
import types
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from exercises import engine_sim, templating
from tests.exercises.support import (
    ExerciseUnderTest,
    check_score,
    close,
    code_part,
    load_by_path,
    load_file,
)

ex = load_by_path("overload_rejection_rule")
EX = ExerciseUnderTest.load(ex)
FOLDER = EX.folder
CODE = FOLDER / "code"
VARIANTS = EX.variants(200)
SEED = 4242


def _from_source(source: str, name: str) -> ModuleType:
    """A hand-written rule, loaded like a submission file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        return load_file(path, name)


CODE_PART = code_part("overload_rejection_rule")
checks, driver, reference = CODE_PART.checks, CODE_PART.driver, CODE_PART.reference


# ---------------------------------------------------------------------------------------------
# The blurb's numbers


def test_canonical_reproduces_the_blurb() -> None:
    s = ex.solve(ex.CANONICAL)
    assert s["backlog"].value == 1_200  # (40 - 20) req/s x 60 s
    assert s["wait_end"].value == 60  # 1,200 / 20 req/s
    assert s["drain"].value == 120  # 1,200 / (20 - 10) req/s: "two minutes after it ends"
    assert s["dead"].value == 1_800  # 40 x (60 - 30) during the spike + 10 x 60 after it
    assert (s["dead_spike"], s["dead_after"]) == (1_200, 600)
    assert s["rejected"].value == 600  # 1,200 - 20 x 30 with the predicted-wait rule
    # The server works only for departed clients from t = 60 s to 150 s: 90 s of the 120 s drain
    # (the notes' window formula (W - T) mu / (mu - lambda0) + T), = 1,800 x 50 ms.
    assert (s["dead_start"], s["dead_end"], s["dead_after_spike_s"]) == (60, 150, 90)
    assert s["dead_busy_s"] == 90 and s["cap"] == 600 and s["drain_with_rule"] == 60
    # The window formula's limits from the notes: 110 s at T = 10 s, -> the drain as T -> 0.
    assert ex.solve(dict(ex.CANONICAL, timeout_s=10))["dead_after_spike_s"] == 110
    assert ex.solve(dict(ex.CANONICAL, timeout_s=1e-9))["dead_after_spike_s"] == \
        pytest.approx(120)


def test_parts_agree_with_the_module() -> None:
    s = ex.solve(ex.CANONICAL)
    assert s["admit"] == "code/reference.py"
    assert EX.parts["admit"]["sandbox_modules"] == ["engine_sim"]
    assert list(EX.parts)[-1] == "response"


def test_the_simulator_agrees_with_the_fluid_numbers() -> None:
    for p in [ex.CANONICAL, *VARIANTS[:25]]:
        s = ex.solve(p)
        sim = ex.simulate(p)
        everyone, ruled = sim["everyone"], sim["ruled"]
        assert close(len(ex.really_dead(everyone, p["timeout_s"])), s["dead"].value, 0.01), p
        assert close(len(ruled.rejected), s["rejected"].value, 0.01), p
        # With the rule nobody starts late (ties on the timeout are float noise: see GRACE_S).
        assert not ex.really_dead(ruled, p["timeout_s"])
        assert all(start - a <= p["timeout_s"] + 1e-6 for a, start in ruled.dead)
        spike_end = p["spike_s"]
        waiting = sum(1 for a in sim["arrivals"] if a < spike_end) - sum(
            1 for a, start, _ in everyone.served if start < spike_end) - sum(
            1 for a, start in everyone.dead if start < spike_end)
        assert close(waiting, s["backlog"].value, 0.01), p


# ---------------------------------------------------------------------------------------------
# Evidence


def _series(ev: Any, prefix: str) -> list[list[float]]:
    found = [sr["points"] for sr in ev.data["series"] if sr["label"].startswith(prefix)]
    assert len(found) == 1, prefix
    return found[0]


@pytest.mark.parametrize("variant", ["canonical", 0, 1, 2, 3, 4])
def test_evidence_timeline_matches_the_graded_numbers(variant: Any) -> None:
    """The flows integrate to the graded numbers (a student can check their arithmetic), while
    no point states one (tests/exercises/test_evidence_leaks.py)."""
    p = ex.CANONICAL if variant == "canonical" else VARIANTS[variant]
    s = ex.solve(p)
    ev = ex.evidence(p)["timeline"]
    json.dumps(ev.data, allow_nan=False)
    arrivals = _series(ev, "arrivals")
    in_time = _series(ev, "services started in time, accept")
    dead = _series(ev, "services started after the client gave up")
    ruled = _series(ev, "services started, admit")
    rejected = _series(ev, "rejections")
    step = arrivals[1][0] - arrivals[0][0]
    d = float(p["spike_s"])

    def area(points: list[list[float]], until: float = math.inf) -> float:
        return sum(y * step for x, y in points if x < until)

    # The backlog at the spike's end: arrivals minus starts (one in service), a step's slack.
    started = area(in_time, d) + area(dead, d)
    assert abs(area(arrivals, d) - started - s["backlog"].value) <= p["spike_rate"] * step + 2
    # Dead work and rejections: part 4 and part 5, as areas.
    assert close(area(dead), s["dead"].value, 0.01)
    assert close(area(rejected), s["rejected"].value, 0.01)
    # With the rule nothing starts late, and every admitted request starts.
    assert area(ruled) + area(rejected) == pytest.approx(area(arrivals), abs=2)
    # The server runs flat out until the queue drains, about `drain` after the spike ends.
    total = {x: y for x, y in in_time}
    for x, y in dead:
        total[x] += y
    full = [x for x in sorted(total) if total[x] >= p["service_rate"] - 1]
    assert abs(max(full) + step - (d + s["drain"].value)) <= 2 * step, p


def test_evidence_is_small_and_differs_between_variants() -> None:
    bodies = {json.dumps(ex.evidence(p)["timeline"].data) for p in VARIANTS[:10]}
    assert len(bodies) >= 8
    for p in VARIANTS[:10]:
        assert sum(len(sr["points"]) for sr in ex.evidence(p)["timeline"].data["series"]) < 3_000


# ---------------------------------------------------------------------------------------------
# Variants, mistakes, templates


def test_variants_are_sensible() -> None:
    for p in VARIANTS:
        assert all(isinstance(v, int) for v in p.values()), p
        s = ex.solve(p)
        assert s["backlog"].value == int(s["backlog"].value) > 0
        assert 0 < s["rejected"].value < s["backlog"].value
        assert 0 < s["dead_after"] and 0 < s["tau_star"] < p["spike_s"]
        # The FIFO identity: the dead requests are served back to back.
        assert s["dead_end"] - s["dead_start"] == pytest.approx(s["dead"].value / p["service_rate"])
    assert len({json.dumps(p, sort_keys=True) for p in VARIANTS}) >= 150


PLACEHOLDER = re.compile(r"\{\{\s*s\.([A-Za-z_]\w*)")


def test_templates_render_and_the_statement_shows_no_answer() -> None:
    statement = (FOLDER / "statement.md").read_text(encoding="utf-8")
    assert set(PLACEHOLDER.findall(statement)) <= {"service_ms"}
    solution = (FOLDER / "solution.md").read_text(encoding="utf-8")
    text = templating.render(solution, ex.CANONICAL, ex.solve(ex.CANONICAL))
    for figure in ["1,200 requests", "60 s", "120 s", "1,800 dead requests", "150 s", "90", "600"]:
        assert figure in text, figure


# ---------------------------------------------------------------------------------------------
# The code part


all_cases, expected = CODE_PART.fixtures(SEED)


def _figures(module: Any, case: dict[str, Any]) -> dict[str, Any]:
    """What the checks grade for `module` on `case`: its verdicts, replayed in the worker."""
    return checks.replay(case["input"], driver.run_case(module, case["input"]))


def test_reference_passes_and_never_serves_dead_work(all_cases: list[dict[str, Any]],
                                                     expected: list[dict[str, Any]]) -> None:
    for case, e in zip(all_cases, expected, strict=True):
        out = checks.replay(case["input"], e["output"])
        assert out["dead"] == 0 and out["rejected_in_time"] == 0 and out["first_late_admit"] is None
        assert out["served"] + out["rejected"] == out["arrivals"]
    # The blurb's workload gives the blurb's numbers through the driver too.
    blurb = next(checks.replay(c["input"], e["output"])
                 for c, e in zip(all_cases, expected, strict=True) if c["id"] == "edge-the-blurb")
    assert abs(blurb["rejected"] - 600) <= 2


def test_mutants_are_caught_on_other_seeds_too() -> None:
    for seed in (1, 99):
        cases = checks.public_cases(VARIANTS[0]) + checks.hidden_cases(VARIANTS[0], seed)
        exp = CODE_PART.run(reference, cases, catch=True)
        code = CODE_PART
        for name in code.built():
            module = code.module(name)
            got = CODE_PART.run(module, cases, catch=True)
            assert check_score(checks.check(cases, got, exp, VARIANTS[0])) < 1, (name, seed)


@pytest.mark.parametrize("source", [
    'def admit(s):\n    return s["predicted_wait_s"] < s["timeout_s"]\n',
    'def admit(s):\n    return s["predicted_wait_s"] <= 0.995 * s["timeout_s"]\n',
    'def admit(state):\n    wait = state["predicted_wait_s"]\n    return bool(wait <= state["timeout_s"])\n',
], ids=["strict", "small-margin", "bool-wrapped"])
def test_reasonable_rules_pass(source: str, all_cases: list[dict[str, Any]],
                               expected: list[dict[str, Any]]) -> None:
    # Deciding a wait of exactly the timeout either way, or a hair of margin, is not a bug.
    module = _from_source(source, "q13_ok_rule")
    results = CODE_PART.check(module, all_cases, expected, catch=True)
    assert all(c.passed for c in results), [c.message for c in results if not c.passed]


def test_a_request_count_cap_misses_the_request_in_service(all_cases: list[dict[str, Any]],
                                                           expected: list[dict[str, Any]]) -> None:
    # The notes' "queue <= mu T" cap is exact in the fluid model but ignores what is left of
    # the request in service: with a 2 s service time and a 1 s timeout it admits late requests.
    module = _from_source('def admit(s):\n    return s["queue_len"] < s["service_rate"] * '
                          's["timeout_s"]\n', "q13_cap_rule")
    results = {c.name: c for c in CODE_PART.check(module, all_cases, expected, catch=True)}
    assert not results["no dead work"].passed
    assert "service_rate 0.5 req/s" in results["no dead work"].message


def test_edge_workloads_by_hand() -> None:
    # A burst of 120 at t = 0 into an idle server at 10 req/s with a 5 s timeout: the first
    # starts at once, the k-th waits (k - 1) x 0.1 s, so k = 1..51 start in time.
    case = next(c for c in checks.EDGE_CASES if c["id"] == "edge-burst-only")
    out = _figures(reference, case)
    assert (out["arrivals"], out["served"], out["rejected"], out["dead"]) == (120, 51, 69, 0)
    # Nothing to reject when the load is below capacity.
    quiet = next(c for c in checks.EDGE_CASES if c["id"] == "edge-never-overloaded")
    out = _figures(reference, quiet)
    assert out["rejected"] == 0 and out["served"] == out["arrivals"] == 600
    empty = next(c for c in checks.EDGE_CASES if c["id"] == "edge-no-arrivals")
    assert _figures(reference, empty)["arrivals"] == 0


def test_driver_rejects_non_bool_answers() -> None:
    bad = _from_source("def admit(s):\n    return 1\n", "q13_int_rule")
    with pytest.raises(TypeError, match="return True or False"):
        driver.run_case(bad, checks.public_cases(ex.CANONICAL)[0]["input"])


def test_the_rule_cannot_edit_the_simulators_view() -> None:
    sneaky = _from_source('def admit(s):\n    s["predicted_wait_s"] = 0.0\n    return True\n',
                          "q13_sneaky_rule")
    out = _figures(sneaky, checks.public_cases(ex.CANONICAL)[0])
    assert out["dead"] > 1_000 and out["first_late_admit"] is not None


def test_hidden_cases_are_deterministic_sorted_and_moderate() -> None:
    a = CODE_PART.assert_hidden_cases_seeded()
    sizes = [checks.size_key(c) for c in a]
    assert sizes == sorted(sizes)
    assert len({c["id"] for c in a}) == len(a)
    assert sum(checks.expected_arrivals(c["input"]) for c in a) < 120_000


def test_smallest_failing_workload_is_reported(all_cases: list[dict[str, Any]],
                                               expected: list[dict[str, Any]]) -> None:
    # Two workloads where the reference turns many away get every request admitted instead.
    got = [json.loads(json.dumps(e)) for e in expected]
    busy = [i for i, e in enumerate(expected) if e["output"]["admit"].count("0") > 10]
    small, big = busy[0], busy[-1]
    for i in (small, big):
        got[i]["output"]["admit"] = "1" * len(got[i]["output"]["admit"])
    results = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)}
    msg = results["no dead work"].message
    assert msg.startswith("2 of ") and checks.describe(all_cases[small]) in msg


def test_malformed_results_fail_every_check(all_cases: list[dict[str, Any]],
                                            expected: list[dict[str, Any]]) -> None:
    bad = [{"output": {"served": "x"}}, {"output": []}, {"error": 3}, "text"]
    CODE_PART.assert_lines_fail_every_check(bad, all_cases, expected)


def test_the_variant_spike_is_a_public_and_a_hidden_case() -> None:
    p = VARIANTS[3]
    public = checks.public_cases(p)[0]["input"]
    hidden = [c for c in checks.hidden_cases(p, 1) if c["id"] == "variant-spike"]
    assert hidden and hidden[0]["input"] == public
    assert public["segments"][0] == [float(p["spike_s"]), float(p["spike_rate"])]
    assert random.Random(0)  # keep the import honest for type checkers
    assert engine_sim.simulate_queue  # the driver's simulator is the package's


# ---------------------------------------------------------------------------------------------
# Hostile outputs: every graded count is the worker's replay of the verdicts


def test_hostile_forged_counts_earn_nothing(all_cases: list[dict[str, Any]],
                                            expected: list[dict[str, Any]]) -> None:
    # What a submission that replaces driver.run_case could send: perfect counts, no verdicts.
    forged = [{"output": {"arrivals": 10**6, "served": 10**6, "dead": 0, "rejected": 0,
                          "rejected_in_time": 0, "dead_work_s": 0.0, "first_dead": None,
                          "first_late_admit": None, "first_needless_reject": None}}
              for _ in all_cases]
    results = checks.check(all_cases, forged, expected, ex.CANONICAL)
    assert not any(c.passed for c in results)
    assert "could not be replayed" in results[0].message


def test_hostile_verdicts_that_do_not_fit_the_workload_fail(
        all_cases: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    busy = next(i for i, e in enumerate(expected) if len(e["output"]["admit"]) > 10)
    verdicts = expected[busy]["output"]["admit"]
    for bad in (verdicts[:-1], verdicts + "1", verdicts[:-1] + "x", 7, ["1"] * len(verdicts),
                10**4000):
        got = [{"output": {"admit": bad}}]
        results = checks.check([all_cases[busy]], got, [expected[busy]], ex.CANONICAL)
        assert not any(c.passed for c in results), bad
        assert "could not be replayed" in results[0].message


def test_hostile_patched_simulator_earns_what_its_verdicts_earn(
        all_cases: list[dict[str, Any]], expected: list[dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Accept everything, with clients that never give up in the driver's simulator: the driver
    # sees no dead work at all, the worker's replay sees accept-everything's.
    everything = CODE_PART.module("accept_everything")
    honest = check_score(CODE_PART.check(everything, all_cases, expected, catch=True))
    patched = types.SimpleNamespace(
        segment_arrivals=engine_sim.segment_arrivals,
        simulate_queue=lambda arrivals, rate, timeout, **kw: engine_sim.simulate_queue(
            arrivals, rate, math.inf, **kw))
    monkeypatch.setattr(driver, "engine_sim", patched)
    got = CODE_PART.run(everything, all_cases, catch=True)
    assert check_score(checks.check(all_cases, got, expected, ex.CANONICAL)) == honest < 1


def test_every_mutant_failure_names_its_smallest_case() -> None:
    # Each check a mutant (code/mutants.toml) fails names the workload (its id in brackets) and what went wrong there.
    for name, c in CODE_PART.failures():
        assert "Smallest:" in c.message and "req/s, timeout" in c.message and "[" in c.message, \
            (name, c.message)
