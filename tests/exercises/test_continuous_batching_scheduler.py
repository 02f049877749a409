"""Q29 (exercises/continuous_batching_scheduler): the canonical trace, sensible variants, and the
code part's machinery run in-process on trusted code only (the reference, our mutants and
equivalents, the driver)."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.exercises.support import ExerciseUnderTest, code_part, load_by_path, load_file

ex = load_by_path("continuous_batching_scheduler")
EX = ExerciseUnderTest.load(ex)
FOLDER = EX.folder
CODE = FOLDER / "code"
SEED = 4242


CODE_PART = code_part("continuous_batching_scheduler")
checks, driver, reference = CODE_PART.checks, CODE_PART.driver, CODE_PART.reference


all_cases, expected = CODE_PART.fixtures(SEED)


# --- the canonical trace ----------------------------------------------------------------------

def test_canonical_trace_is_the_facts_notes_trace() -> None:
    t = ex.trace(ex.CANONICAL)
    steps = t["steps"]
    sched = [dict(rec["scheduled"]) for rec in steps]
    # Step 0: R0's 10-token prompt is chunked to the budget of 8; step 1: its last 2 and R1's 6.
    assert sched[0] == {"R0": 8} and sched[1] == {"R0": 2, "R1": 6}
    # Steps 2-3 decode both; at step 4 R0 takes the last free block (13 tokens need 4) and R1
    # (8 computed, needs a 3rd block for its 9th token) is its own victim.
    assert sched[2] == sched[3] == {"R0": 1, "R1": 1}
    assert sched[4] == {"R0": 1} and steps[4]["preempted"] == ["R1"]
    # Step 5: R1 comes back ahead of R2 with a 7-token recompute chunk (8 - 1 for R0's decode).
    assert sched[5] == {"R0": 1, "R1": 7}
    # Step 6: R1 needs a 3rd block again and is preempted again; R0 finishes.
    assert steps[6]["preempted"] == ["R1"] and steps[6]["finished"] == ["R0"]
    # Step 7: R1 recomputes 8 of its 9 tokens; steps 8-10 R1 and R2 decode.
    assert sched[7] == {"R1": 8} and sched[8] == {"R1": 1, "R2": 5}
    assert [rec["finished"] for rec in steps[8:]] == [[], [], ["R1"], ["R2"]]
    assert t["outputs"]["R0"] == [0, 1, 5, 0, 1, 5]
    assert len(steps) == 12


def test_canonical_answers() -> None:
    s = ex.solve(ex.CANONICAL)
    assert s["first_preempt_step"].value == 4
    assert s["victim"] == "R1" and s["needer"] == "R1"  # R1 is its own victim
    # R1 holds 8 computed tokens at step 4 and 7 at step 6 (the 7-token recompute chunk).
    assert s["wasted_sum_md"] == "8 + 7 = " and s["wasted_tokens"].value == 15
    # 49 tokens computed for 34 useful ones (10+5, 6+5, 5+3): 15 thrown away and redone.
    assert (s["computed_tokens"], s["useful_tokens"]) == (49, 34)
    assert s["free_before"] == 1 and s["running_before"] == "R0, R1"
    wrong = {m.name: m.answer for m in ex.mistakes(ex.CANONICAL) if m.part in EX.number_parts}
    assert wrong == {"numbered_from_one": 5.0, "fresh_blocks": 2.0, "full_length": 18.0,
                     "block_capacity": 16.0, "first_only": 8.0, "prompt_only": 12.0}


def test_checks_canonical_matches_the_exercise() -> None:
    edges = dict(checks._edge_cases())
    assert checks.params_input(ex.CANONICAL) == edges["canonical"]
    assert ex.case_input(ex.CANONICAL)["requests"] == edges["canonical"]["requests"]


def test_pool_that_fits_one_request_by_hand() -> None:
    # 3 blocks of 2, budget 6. Step 0: R0's 4 prompt tokens (2 blocks), then R1 gets the 2 tokens
    # of budget left (1 block); R0 samples. Step 1: R0's 5th token needs a 3rd block, none is
    # free, so R1 (last admitted) is preempted and R0 gets R1's block back.
    inp = dict(checks._edge_cases())["pool-fits-one-request"]
    steps = driver.run_case(reference, inp)["steps"]
    assert steps[0]["scheduled"] == [["R0", 4], ["R1", 2]]
    assert steps[0]["calls"] == [["allocate", [0, 1]], ["allocate", [2]]]
    assert steps[1]["preempted"] == ["R1"] and steps[1]["scheduled"] == [["R0", 1]]
    assert steps[1]["calls"] == [["release", [2]], ["allocate", [2]]]
    assert steps[1]["waiting"] == ["R1"]


def test_two_victims_in_one_step() -> None:
    inp = dict(checks._edge_cases())["two-victims-in-one-step"]
    steps = driver.run_case(reference, inp)["steps"]
    hit = [rec for rec in steps if len(rec["preempted"]) == 2]
    assert hit and hit[0]["preempted"] == ["R2", "R1"]
    assert hit[0]["waiting"][:2] == ["R1", "R2"]  # the earlier-admitted victim comes back first


# --- shape, mistakes, variants ------------------------------------------------------------------

def test_parts_agree_with_the_module() -> None:
    s = ex.solve(ex.CANONICAL)
    options = {o["id"] for o in EX.parts["policy"]["options"]}
    assert set(s["policy"]) < options
    assert s["victim"] in {o["id"] for o in EX.parts["victim"]["options"]}


@pytest.mark.parametrize("seed", range(40))
def test_variants_are_sensible(seed: int) -> None:
    p = ex.generate(random.Random(seed))

    s = ex.solve(p)
    t = ex.trace(p)
    assert t["error"] is None and len(t["steps"]) <= 16
    assert s["first_preempt_step"].value >= 2 and s["wasted_tokens"].value > 0
    victims = [m.answer for m in ex.mistakes(p) if m.part == "victim"]
    assert sorted(victims + [s["victim"]]) == ["R0", "R1", "R2"]


def test_variants_differ() -> None:
    drawn = {json.dumps(ex.generate(random.Random(i)), sort_keys=True) for i in range(200)}
    assert len(drawn) >= 190
    victims = {ex.solve(ex.generate(random.Random(i)))["victim"] for i in range(40)}
    assert victims == {"R1", "R2"}  # R0, the oldest, is never the victim while others run


# --- the code part ------------------------------------------------------------------------------

def test_reference_passes_every_case(all_cases: list[dict[str, Any]],
                                     expected: list[dict[str, Any]]) -> None:
    for case, exp in zip(all_cases, expected, strict=True):
        out = exp["output"]
        assert "error" not in out
        # Batched generation equals unbatched generation, request by request.
        for r in case["input"]["requests"]:
            assert out["outputs"][r["rid"]] == checks.unbatched(r["prompt"], r["max_new_tokens"],
                                                                r["eos_id"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_reference_passes_on_variants(seed: int) -> None:
    variant = ex.generate(random.Random(seed))
    cases = checks.public_cases(variant) + checks.hidden_cases(variant, seed)
    exp = CODE_PART.run(reference, cases)
    assert all(c.passed for c in checks.check(cases, exp, exp, variant))


def test_finished_requests_may_reset_num_computed(all_cases: list[dict[str, Any]],
                                                  expected: list[dict[str, Any]]) -> None:
    # The statement says nothing about num_computed after FINISHED, so no check may care.
    class Tidy(reference.Scheduler):  # type: ignore[misc, name-defined]
        def step(self) -> Any:
            known = {r.rid: r for r in [*self.running, *self.waiting]}
            out = super().step()
            for rid in out.finished:
                known[rid].num_computed = 0
            return out

    module = ModuleType("q29_tidy")
    module.__dict__.update(reference.__dict__)
    module.Scheduler = Tidy
    results = CODE_PART.check(module, all_cases, expected)
    assert all(c.passed for c in results), [c.message for c in results if not c.passed]


def test_a_victim_is_never_scheduled_earlier_in_its_step(tmp_path: Path) -> None:
    # Why the equivalent is equivalent: turn the reference's hand-back into an assertion.
    src = (CODE / "reference.py").read_text()
    line = "budget += out.scheduled.pop(victim.rid, 0)"
    assert src.count(line) == 1
    probe = tmp_path / "q29_probe.py"
    probe.write_text(src.replace(line, "assert victim.rid not in out.scheduled"))
    module = load_file(probe, "q29_test_probe")
    for seed in (SEED, 5, 6):
        for case in checks.hidden_cases(ex.CANONICAL, seed):
            assert "error" not in driver.run_case(module, case["input"]), case["id"]



def test_an_exception_names_the_step(all_cases: list[dict[str, Any]],
                                     expected: list[dict[str, Any]]) -> None:
    class Broken(reference.Scheduler):  # type: ignore[misc, name-defined]
        def step(self) -> Any:
            if any(r.output for r in self.running):
                raise RuntimeError("boom")
            return super().step()

    module = ModuleType("q29_broken")
    module.__dict__.update(reference.__dict__)
    module.Scheduler = Broken
    got = CODE_PART.run(module, all_cases)
    results = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)}
    msg = results["runs without an exception"].message
    assert re.search(r"Smallest: step \d+ raised RuntimeError: boom", msg), msg


def test_forged_or_malformed_outputs_fail(all_cases: list[dict[str, Any]],
                                          expected: list[dict[str, Any]]) -> None:
    bad = [{"output": {"steps": 5, "outputs": {}}}, {"output": []}, {"error": 3}, "text",
           {"output": {"steps": [{"scheduled": [["R0", "x"]]}], "outputs": {}}}]
    results = CODE_PART.assert_lines_fail_every_check(bad, all_cases, expected)
    assert "malformed" in results[0].message


def test_smallest_failing_case_is_reported(all_cases: list[dict[str, Any]],
                                           expected: list[dict[str, Any]]) -> None:
    # Break two traces of different sizes; the message must name the smaller one.
    order = sorted(range(len(all_cases)), key=lambda i: checks.size_key(all_cases[i]))
    small, big = order[3], order[-1]
    got = [dict(e) for e in expected]
    for i in (small, big):
        out = json.loads(json.dumps(expected[i]["output"]))
        rid = next(iter(out["outputs"]))
        out["outputs"][rid] = out["outputs"][rid] + [0]
        got[i] = {"output": out}
    results = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)}
    msg = results["each request's tokens equal its unbatched generation"].message
    assert msg.startswith("2 of ") and checks.describe(all_cases[small]) in msg


# --- the hidden cases ---------------------------------------------------------------------------

def test_hidden_cases_are_deterministic_per_seed() -> None:
    CODE_PART.assert_hidden_cases_seeded()


def test_hidden_cases_cover_the_edges(expected: list[dict[str, Any]]) -> None:
    hidden = checks.hidden_cases(ex.CANONICAL, SEED)
    ids = [c["id"] for c in hidden]
    assert len(ids) == len(set(ids))
    for name, _ in checks._edge_cases():
        assert f"edge-{name}" in ids
    assert 120 <= sum(i.startswith("random-") for i in ids) <= 170
    keys = [checks.size_key(c) for c in hidden]
    assert keys == sorted(keys)  # smallest first, so a failing student sees a small trace
    assert all(checks.fits(c["input"]) for c in hidden)
    runs = CODE_PART.run(reference, hidden)
    preempting = sum(any(rec["preempted"] for rec in r["output"]["steps"]) for r in runs)
    assert preempting >= 0.3 * len(hidden)
    assert any(any(len(rec["preempted"]) >= 2 for rec in r["output"]["steps"]) for r in runs)
    eos = [c for c in hidden if any(r["eos_id"] >= 0 for r in c["input"]["requests"])]
    assert len(eos) >= 30


def test_public_cases_start_with_the_statement_trace() -> None:
    variant = ex.generate(random.Random(3))
    cases = checks.public_cases(variant)
    assert cases[0]["input"]["requests"] == ex.case_input(variant)["requests"]
    assert cases[1]["input"] == dict(checks._edge_cases())["canonical"]
    assert len(checks.public_cases(ex.CANONICAL)) == 4


def test_every_mutant_failure_names_its_smallest_case() -> None:
    # Each check a mutant (code/mutants.toml) fails names the smallest trace as a call the student can replay.
    for name, c in CODE_PART.failures():
        assert "Smallest:" in c.message and "Scheduler(num_blocks=" in c.message, (name, c.message)
