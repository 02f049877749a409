"""Which score counts: a review's (override, else rubric) when it sets one, else the grader's.
Reads only; saving a review is `practice.actions.reviews`."""
from __future__ import annotations

from exercises import registry
from practice import provisional
from practice.models import Review, Submission


def part_points(sub: Submission) -> float:
    spec = registry.get(sub.exercise.slug)
    return float(spec.part(sub.part_id).points)


def review_score(review: Review) -> float | None:
    """Override first; else the applied rubric items' points over the part's points, in [0, 1];
    None when the review sets neither (the grader's score stands)."""
    if review.override_score is not None:
        return review.override_score
    items = list(review.items.all())
    if not items:
        return None
    total = sum(item.points for item in items)
    return min(1.0, max(0.0, total / part_points(review.submission)))


def effective_score(sub: Submission) -> float | None:
    """The score that counts: a review's when it sets one, else the grader's; None while the
    grader's is only provisional (a preview pass awaiting its GPU grade)."""
    review = getattr(sub, "review", None)
    if review is not None and review.score is not None:
        return review.score
    return sub.score if provisional.is_final(sub.verdict) else None
