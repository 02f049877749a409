"""Submit never shows a hidden case that every submission gets (graders/fixed_cases.py).

Submit's hidden cases are drawn per submission, but the hand-written edges and the smallest
draws come up for every seed; a failure message that showed one with its expected output could
be copied into an `if` for the next submission. Over every code part, in the worker's own
terms (the reference's outputs, with one case's output replaced as a wrong solution would
give it): a failure that only a fixed case shows names its check and not the case; a failure a
fresh case shows too is told with the fresh case; scores and pass/fail never change.
"""
from __future__ import annotations

import copy
from typing import Any

import pytest

from exercises import registry
from graders import code as code_grader
from graders import fixed_cases, outputs

SEED = 4242
CODE_PARTS = sorted((slug, p.id) for slug, spec in registry.load_all().items()
                    for p in spec.parts if p.type == "code")
WRONG = {"error": "ValueError: a planted wrong answer"}


def _prepared(slug: str, part_id: str) -> tuple[Any, list[dict[str, Any]],
                                                list[dict[str, Any]], dict[str, Any],
                                                frozenset[str]]:
    spec = registry.get(slug)
    part = spec.part(part_id)
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    reference = registry.solve(spec, params)[part_id]
    cases, expected = code_grader._cases_and_expected(spec.code_dir, reference, params, SEED,
                                                      "submit", part.sandbox_modules)
    checks = code_grader.load_module(spec.code_dir / "checks.py")
    return checks, cases, expected, params, fixed_cases.fixed_inputs(checks, params)


def _shown(checks: Any, case: dict[str, Any]) -> list[str]:
    """What of `case` a message could show: its id and its description."""
    return [case["id"], code_grader._describe_case(checks, case)]


def _grade(checks: Any, cases: list[dict[str, Any]], got: list[dict[str, Any]],
           expected: list[dict[str, Any]], params: dict[str, Any],
           fixed: frozenset[str]) -> tuple[list[Any], list[Any]]:
    results, _ = outputs.run_checks(checks.check, cases, got, expected, params)
    return results, fixed_cases.retell(checks.check, cases, got, expected, params, results,
                                       fixed)


@pytest.mark.parametrize(("slug", "part_id"), CODE_PARTS)
def test_a_failure_only_a_fixed_case_shows_names_no_case(slug: str, part_id: str) -> None:
    checks, cases, expected, params, fixed = _prepared(slug, part_id)
    at = [i for i, c in enumerate(cases) if fixed_cases.input_key(c) in fixed]
    assert at, f"{slug}: no hidden case is drawn for every seed (the test would check nothing)"
    i = at[len(at) // 2]
    got = copy.deepcopy(expected)
    got[i] = dict(WRONG)
    results, told = _grade(checks, cases, got, expected, params, fixed)
    assert [(c.name, c.passed, c.weight) for c in told] \
        == [(c.name, c.passed, c.weight) for c in results]
    failing = [c for c in told if not c.passed]
    assert failing, f"{slug}: a wrong answer on {cases[i]['id']} failed no check"
    for c in failing:
        assert c.message == fixed_cases.WITHHELD, (cases[i]["id"], c.message)
    for c in told:
        for text in _shown(checks, cases[i]):
            assert text not in c.message, (c.name, text)


@pytest.mark.parametrize(("slug", "part_id"), CODE_PARTS)
def test_a_failure_a_fresh_case_shows_too_is_told_with_the_fresh_one(slug: str,
                                                                     part_id: str) -> None:
    checks, cases, expected, params, fixed = _prepared(slug, part_id)
    fixed_at = [i for i, c in enumerate(cases) if fixed_cases.input_key(c) in fixed]
    public = {fixed_cases.input_key(c) for c in checks.public_cases(params)}
    fresh_at = [i for i, c in enumerate(cases) if fixed_cases.input_key(c) not in fixed
                and fixed_cases.input_key(c) not in public and not c.get("timed")]
    assert fixed_at and fresh_at
    i, j = fixed_at[0], fresh_at[-1]
    got = copy.deepcopy(expected)
    got[i] = dict(WRONG)
    got[j] = dict(WRONG)
    results, told = _grade(checks, cases, got, expected, params, fixed)
    assert [c.passed for c in told] == [c.passed for c in results]
    for c in told:
        for text in _shown(checks, cases[i]):
            assert text not in c.message, (c.name, text)
    # The fresh case's failure is still told in full somewhere.
    assert any(not c.passed and c.message != fixed_cases.WITHHELD for c in told), \
        [c.message for c in told if not c.passed]


def test_every_message_is_kept_when_no_fixed_case_fails() -> None:
    checks, cases, expected, params, fixed = _prepared("stop_strings_stream", "streamer")
    j = next(i for i, c in enumerate(cases) if fixed_cases.input_key(c) not in fixed
             and c["id"].startswith("random-"))
    got = copy.deepcopy(expected)
    got[j] = dict(WRONG)
    results, told = _grade(checks, cases, got, expected, params, fixed)
    assert told == results
    assert any(cases[j]["id"] in c.message or code_grader._describe_case(checks, cases[j])
               in c.message for c in told)


# -- through the sandbox: a solution wrong on one fixed edge alone -----------------------------

INIT = "        self.stops = _validate(stops)\n"
# Wrong only on the stop list of the fixed edge "duplicate-stops" (no random draw has it at
# this seed), where it never stops.
WRONG_ON_ONE_EDGE = INIT + "        self._never = list(stops) == ['##', '##']\n"
NEVER = "        if self.stopped:\n            # The request ended"


def test_a_solution_wrong_on_one_fixed_edge_is_not_shown_that_edge() -> None:
    import graders
    from runners import SandboxUnavailable, get_backend

    try:
        get_backend()
    except SandboxUnavailable as exc:
        pytest.skip(f"sandbox unavailable: {exc}")
    spec = registry.get("stop_strings_stream")
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    source = (spec.code_dir / "reference.py").read_text(encoding="utf-8")
    wrong = source.replace(INIT, WRONG_ON_ONE_EDGE, 1).replace(
        NEVER, "        if getattr(self, '_never', False):\n            return token_bytes.decode("
               "'utf-8', 'replace')\n" + NEVER, 1)
    assert wrong.count("_never") == 2
    result = graders.grade_answer(spec, "streamer", wrong, params, seed=SEED)
    assert 0 < result.score < 1.0, result.feedback
    shown = result.feedback + "".join(c.message for c in result.checks)
    assert "duplicate-stops" not in shown and "'##', '##'" not in shown, shown
    assert fixed_cases.WITHHELD in shown
