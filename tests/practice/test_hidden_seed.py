"""Submit's hidden cases are drawn per submission and reproduced by a regrade (issue 19, item 6).

The worker and an instructor's regrade both grade a row through grade_claimed; what it
hands the grader as the seed decides the hidden cases. No sandbox here: the grader is replaced
by one that records its arguments, and the cases come from the exercise's checks.py directly.
(The hard-coding attack itself, through the sandbox, is in tests/runners/test_hostile.py.)
"""
from __future__ import annotations

import json
from typing import Any

import pytest

import graders
from exercises import registry
from graders import code as code_grader
from graders.base import GradeResult
from practice.grading import grade_claimed
from practice.models import Exercise, Submission
from practice.variants import hidden_seed, variant_params

SLUG, PART = "canary_sample_size", "sizing"


def _row(pk: int, mode: str = Submission.Mode.SUBMIT, variant: str = "17") -> Submission:
    return Submission(pk=pk, exercise=Exercise(slug=SLUG), part_id=PART, part_type="code",
                      variant=variant, mode=mode, answer="pass\n")


@pytest.fixture
def seeds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The seed of every grade_answer call made through grade_claimed."""
    seen: list[int] = []

    def record(*args: Any, seed: int = 0, **kwargs: Any) -> GradeResult:
        seen.append(seed)
        return GradeResult(score=0.0, verdict="incorrect", feedback="")

    monkeypatch.setattr(graders, "grade_answer", record)
    return seen


def _inputs(cases: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(c["input"], sort_keys=True) for c in cases]


def test_two_submissions_of_one_variant_get_different_hidden_cases(seeds: list[int]) -> None:
    grade_claimed(_row(41))
    grade_claimed(_row(42))
    first, second = seeds
    assert first != second
    spec = registry.get(SLUG)
    params = variant_params(spec, "17")
    checks = code_grader.load_module(spec.code_dir / "checks.py")
    a, b = _inputs(checks.hidden_cases(params, first)), _inputs(checks.hidden_cases(params, second))
    drawn = set(a) - set(b)
    assert len(drawn) > len(a) // 2, (len(drawn), len(a))


def test_a_regrade_of_one_submission_draws_the_same_cases(seeds: list[int]) -> None:
    grade_claimed(_row(41))
    grade_claimed(_row(41))  # what regrade_one does with the same row
    exercise_id = registry.get(SLUG).uuid  # a renamed folder keeps it, and so its seeds
    assert seeds[0] == seeds[1] == hidden_seed(exercise_id, "17", 41)
    assert hidden_seed(exercise_id, "17", 41) != hidden_seed(exercise_id, "18", 41)


def test_runs_of_one_variant_share_their_cached_cases() -> None:
    """The expected-output cache keys Submit on the seed, and Run (public cases only) not."""
    spec = registry.get(SLUG)
    params = variant_params(spec, "17")
    reference, modules = registry.solve(spec, params)[PART], spec.part(PART).sandbox_modules

    def cases(seed: int, mode: str) -> Any:
        return code_grader._cases_and_expected(spec.code_dir, reference, params, seed, mode,
                                               modules)

    # The same lists back out of the cache: no second draw, no second reference run.
    assert cases(1, "run")[1] is cases(2, "run")[1]
    sub_a, sub_b = cases(1, "submit"), cases(2, "submit")
    assert _inputs(sub_a[0]) != _inputs(sub_b[0])
    assert cases(1, "submit")[1] is sub_a[1]
