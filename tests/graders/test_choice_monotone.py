"""Multi-select scoring never goes backwards, for every multi-select part of every exercise.

Adding a right option never lowers the score and adding a wrong option never raises it, with the
exercise's own listed mistakes in force (canonical and generated variants). A listed mistake may
only add feedback: the same set scores the same with and without the list.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exercises import registry
from exercises.spec import ExerciseSpec, PartSpec
from graders import choice
from graders.base import GradeContext

VARIANTS = ("canonical", 1, 2, 3, 7, 11)


def _multi_parts() -> list[tuple[str, str]]:
    return sorted((slug, part.id) for slug, spec in registry.load_all().items()
                  for part in spec.parts if part.type == "choice" and part.multi)


def _context(spec: ExerciseSpec, part: PartSpec, variant: str | int,
             with_mistakes: bool = True) -> GradeContext:
    params = registry.params_for(spec, variant)
    mistakes = registry.mistakes(spec, params, part.id) if with_mistakes else ()
    return GradeContext(reference=registry.solve(spec, params)[part.id], mistakes=mistakes,
                        params=params)


def _score(part: PartSpec, picks: list[str], ctx: GradeContext) -> float:
    return choice.grade(part, ", ".join(picks), ctx).score


def test_there_are_multi_select_parts() -> None:
    assert len(_multi_parts()) >= 10, _multi_parts()


@pytest.mark.parametrize(("slug", "part_id"), _multi_parts())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_adding_a_right_option_never_lowers_and_a_wrong_one_never_raises(
        slug: str, part_id: str, data: st.DataObject) -> None:
    spec = registry.get(slug)
    part = spec.part(part_id)
    variant = data.draw(st.sampled_from(VARIANTS), label="variant")
    ctx = _context(spec, part, variant)
    ids = [o.id for o in part.options]
    reference = set(ctx.reference)
    picks = data.draw(st.lists(st.sampled_from(ids), min_size=1, unique=True), label="picks")
    others = [i for i in ids if i not in picks]
    if not others:
        return
    added = data.draw(st.sampled_from(others), label="added")
    before, after = _score(part, picks, ctx), _score(part, [*picks, added], ctx)
    if added in reference:
        assert after >= before, (picks, added, before, after)
    else:
        assert after <= before, (picks, added, before, after)


@pytest.mark.parametrize(("slug", "part_id"), _multi_parts())
def test_a_listed_mistake_changes_the_feedback_never_the_score(slug: str, part_id: str) -> None:
    spec = registry.get(slug)
    part = spec.part(part_id)
    for variant in VARIANTS:
        listed = _context(spec, part, variant)
        unlisted = _context(spec, part, variant, with_mistakes=False)
        for mistake in listed.mistakes:
            picks = list(mistake.answer) if not isinstance(mistake.answer, str) else [mistake.answer]
            got = choice.grade(part, ", ".join(picks), listed)
            assert got.score == choice.grade(part, ", ".join(picks), unlisted).score
            assert mistake.feedback in got.feedback
