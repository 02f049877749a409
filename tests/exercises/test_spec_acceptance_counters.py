"""Q20 (exercises/spec_acceptance_counters): the canonical numbers from the facts note, sensible
variants, and the code part's machinery run in-process on trusted code only (the reference, our
mutants, the driver)."""
from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tests.exercises.support import (
    ExerciseUnderTest,
    assert_mistakes_distinct,
    code_part,
    load_by_path,
)

ex = load_by_path("spec_acceptance_counters")
EX = ExerciseUnderTest.load(ex)
FOLDER = EX.folder
CODE = FOLDER / "code"
SEED = 4242
VARIANTS = EX.variants(200)


CODE_PART = code_part("spec_acceptance_counters")
checks, driver, reference = CODE_PART.checks, CODE_PART.driver, CODE_PART.reference


all_cases, expected = CODE_PART.fixtures(SEED)


# --- the canonical variant: the facts note's worked example ---------------------------------

def test_canonical_reproduces_the_facts_note() -> None:
    s = ex.solve(ex.CANONICAL)
    # k = 3; W1: dD 10,000, dT 30,000, dA 18,000 -> alpha = 18,000 / 30,000 = 0.60 and
    # tau = 1 + 18,000 / 10,000 = 2.80.
    assert (s["dd"], s["dt"], s["da"]) == (10_000, 30_000, 18_000)
    assert s["acceptance_rate"].value == pytest.approx(0.60)
    assert s["accept_length"].value == pytest.approx(2.80)
    # W2: dT = 29,400 where k * dD = 30,000 -> 600 draft tokens missing (a flag, not a discard).
    assert (s["short_window"], s["missing"]) == ("W2", 600)
    # W4: D falls from 1.2 M to 40 k across a restart; W3 has no drafts: both discarded.
    snaps = ex.CANONICAL["snapshots"]
    assert (snaps[3]["drafts"], snaps[4]["drafts"]) == (1_200_000, 40_000)
    assert snaps[3]["start_time"] != snaps[4]["start_time"]
    assert s["discard"] == ["w3", "w4"] and not s["reset_hidden"]
    # 2,000 requests, every step drafting -> 10,000 / 2,000 = 5 steps each. The clients got
    # 27,600 tokens: 2,000 + 10,000 + 18,000 - 27,600 = 2,400 accepted drafts were discarded
    # after a stop; tokens / tau = 27,600 / (2,000 * 2.8) = 4.93 is the biased estimate.
    assert s["steps_per_request"].value == 5.0
    assert s["discarded"] == 2_400
    assert s["naive_steps"] == pytest.approx(4.9286, abs=1e-4)
    assert s["no_prefill_steps"] == pytest.approx(4.5714, abs=1e-4)
    assert ex.is_sensible(ex.CANONICAL)


def test_canonical_series_is_consistent() -> None:
    snaps = ex.CANONICAL["snapshots"]
    for snap in snaps:
        assert sum(snap["accepted_per_pos"]) == snap["accepted"]
        per = snap["accepted_per_pos"]
        assert per[0] <= snap["drafts"] and all(b <= a for a, b in zip(per, per[1:], strict=False))
    windows = reference.acceptance_windows(snaps, 3)
    assert [w is None for w in windows] == [False, False, True, True, False]
    assert windows[0]["flags"] == [] and windows[1]["flags"] == ["short_drafts"]
    assert windows[1]["missing_draft_tokens"] == 600
    assert windows[0]["per_position"] == pytest.approx([0.75, 0.8, 0.75])


@pytest.mark.parametrize("index", range(0, 200, 10))
def test_mistakes_are_distinct(index: int) -> None:
    p = VARIANTS[index]
    s = ex.solve(p)
    ms = ex.mistakes(p)
    assert_mistakes_distinct(EX, p, s, ms)
    answers = [m.answer for m in ms if m.part == "discard"]
    assert len(answers) >= 2 and s["discard"] not in answers
    assert len({tuple(a) for a in answers}) == len(answers)


# --- variants ---------------------------------------------------------------------------------

def test_variants_are_sensible_and_varied() -> None:
    distinct = {json.dumps(p, sort_keys=True) for p in VARIANTS}
    assert len(distinct) >= 150
    hidden = 0
    for p in VARIANTS:
        windows = reference.acceptance_windows(p["snapshots"], p["k"])
        s = ex.solve(p)
        # The rules the code part checks agree with the answer of part 3.
        dropped = sorted(f"w{i + 1}" for i, w in enumerate(windows) if w is None)
        assert dropped == s["discard"], p["order"]
        bench = windows[p["order"].index("bench")]
        assert bench["acceptance_rate"] == pytest.approx(s["acceptance_rate"].value)
        assert bench["flags"] == []
        short = windows[p["order"].index("short")]
        assert short["flags"] == ["short_drafts"] and short["missing_draft_tokens"] == s["missing"]
        hidden += s["reset_hidden"]
    assert 20 <= hidden <= 120  # both kinds of restart occur


def test_split_per_position_keeps_the_invariants() -> None:
    rng = random.Random(7)
    for _ in range(500):
        k = rng.randint(1, 5)
        d = rng.randint(1, 50_000)
        a = rng.randint(0, k * d)
        per = ex.split_per_position(a, d, k)
        assert sum(per) == a and per[0] <= d
        assert all(y <= x for x, y in zip(per, per[1:], strict=False))


# --- the code part ----------------------------------------------------------------------------


def test_hidden_restart_is_named_in_the_message(all_cases: list[dict[str, Any]],
                                                expected: list[dict[str, Any]]) -> None:
    module = CODE_PART.module("negative_only_reset")
    results = {c.name: c for c in CODE_PART.check(module, all_cases, expected)}
    msg = results["discards exactly the windows the rules drop"].message
    assert "start_time changed" in msg and "expected None" in msg


def test_hidden_cases_are_deterministic_and_cover_the_edges() -> None:
    a = CODE_PART.assert_hidden_cases_seeded()
    ids = [c["id"] for c in a]
    assert len(ids) == len(set(ids))
    for name in ("restart-counters-rise", "restart-counters-drop", "no-drafts",
                 "drafts-but-no-draft-tokens", "only-one-position-counter-drops",
                 "short-drafts", "infer-rejects-zero-emitted"):
        assert f"edge-{name}" in ids, name
    assert 100 <= len(a) <= 250
    keys = [checks.size_key(c) for c in a]
    assert keys == sorted(keys)
    # The random series exercise every rule.
    verdicts = set()
    for c in a:
        if c["input"]["fn"] != "windows":
            continue
        snaps = c["input"]["snapshots"]
        for x, y in zip(snaps, snaps[1:], strict=False):
            reason = checks.discard_reason(x, y)
            verdicts.add(reason.split(" ")[0] if reason else "kept")
    assert {"kept", "start_time", "no", "drafts", "accepted"} <= verdicts


def test_hand_written_edges() -> None:
    s = checks.snapshot
    # A restart whose counters rose: only start_time shows it.
    rise = [s(0, 1.0, 200, 600, 300, [150, 100, 50]), s(600, 2.0, 900, 2700, 1500, [700, 500, 300])]
    assert reference.acceptance_windows(rise, 3) == [None]
    # k = 1 with a zero first position: later rates are None, not a division error.
    w = reference.acceptance_windows([s(0, 1.0, 0, 0, 0, [0, 0]), s(1, 1.0, 10, 20, 0, [0, 0])], 2)
    assert w[0]["per_position"] == [0.0, None] and w[0]["acceptance_rate"] == 0.0
    assert reference.infer_steps(12, 2.6, 2) == pytest.approx(5.0)
    with pytest.raises(ValueError):
        reference.infer_steps(0, 2.0)


def test_driver_error_results_fail_every_check(all_cases: list[dict[str, Any]],
                                               expected: list[dict[str, Any]]) -> None:
    got = [{"error": "no output"} for _ in all_cases]
    results = checks.check(all_cases, got, expected, ex.CANONICAL)
    assert not any(c.passed for c in results)


def test_driver_reports_bad_return_types() -> None:
    class Bad:
        @staticmethod
        def acceptance_windows(snapshots: list[dict], k: int) -> list[Any]:
            return [{"drafts": 1}]

        @staticmethod
        def infer_steps(emitted: int, accept_length: float, eos_discard: int = 0) -> str:
            return "5"

    out = driver.run_case(Bad, checks.public_cases(ex.CANONICAL)[0]["input"])
    assert out["error"].startswith("TypeError: window 0 has no key")
    out = driver.run_case(Bad, checks.public_cases(ex.CANONICAL)[2]["input"])
    assert out["error"].startswith("TypeError")


def test_forged_or_malformed_lines_count_as_failures(all_cases: list[dict[str, Any]],
                                                     expected: list[dict[str, Any]]) -> None:
    bad = [{"output": {"windows": 5}}, {"output": []}, {"error": 3}, "text",
           {"output": {"windows": [{"drafts": "x"}]}}, {"output": {"value": True}}]
    CODE_PART.assert_lines_fail_every_check(bad, all_cases, expected)


def test_every_mutant_failure_names_its_smallest_case() -> None:
    # Each check a mutant (code/mutants.toml) fails names the smallest call.
    for name, c in CODE_PART.failures():
        assert "Smallest:" in c.message and ("acceptance_windows(" in c.message
                                             or "infer_steps(" in c.message), (name, c.message)
