"""An instructor's review of a submission: comments, a cohort's rubric, score overrides.
Saving a review recomputes the student's progress on the part; which score counts is
practice/scores.py. Permission checks live in practice/access.py; each action asks there first."""
from __future__ import annotations

from django.db import transaction

from exercises import registry
from practice import access
from practice.actions import NotAllowed, refuse_nul
from practice.actions.progress import refresh_part_state
from practice.models import Cohort, Comment, Exercise, Review, RubricItem, Submission, User
from practice.scores import review_score

MAX_COMMENT_CHARS = 4000
MAX_REASON_CHARS = 1000


def add_comment(viewer: User, sub: Submission, body: str, line: int | None = None) -> Comment:
    """An instructor's comment, on one line of the answer (1-based) or on the whole of it."""
    if not access.can_review(viewer, sub.user):
        raise NotAllowed("you do not review this student")
    refuse_nul(body)
    body = body.strip()
    if not body or len(body) > MAX_COMMENT_CHARS:
        raise NotAllowed(f"a comment is 1 to {MAX_COMMENT_CHARS} characters")
    if line is not None and not 1 <= line <= max(1, sub.answer.count("\n") + 1):
        raise NotAllowed("that line is not in the answer")
    return Comment.objects.create(submission=sub, author=viewer, line=line, body=body)


def _save_review(review: Review) -> None:
    review.score = review_score(review)
    review.save()
    sub = review.submission
    refresh_part_state(sub.user, sub.exercise, sub.part_id)


def _review_for(viewer: User, sub: Submission) -> Review:
    if not access.can_review(viewer, sub.user):
        raise NotAllowed("you do not review this student")
    review, _ = Review.objects.get_or_create(
        submission=sub, defaults={"cohort": access.review_cohort(viewer, sub.user)})
    review.reviewer = viewer
    return review


def apply_rubric(viewer: User, sub: Submission, item_ids: list[int]) -> Review:
    """Grade a text part with the cohort's rubric: exactly these items apply."""
    with transaction.atomic():
        review = _review_for(viewer, sub)
        if review.cohort is None:
            raise NotAllowed("rubrics belong to a cohort; this student is in none of yours")
        items = list(RubricItem.objects.filter(
            pk__in=item_ids, cohort=review.cohort, exercise=sub.exercise, part_id=sub.part_id))
        if len(items) != len(set(item_ids)):
            raise NotAllowed("a rubric item is not part of this part's rubric")
        review.items.set(items)
        _save_review(review)
    return review


def override_score(viewer: User, sub: Submission, score: float | None, reason: str) -> Review:
    """Set (score in [0, 1], with a reason the student reads) or clear (None) an override."""
    refuse_nul(reason)
    reason = reason.strip()
    if score is not None:
        if not 0.0 <= score <= 1.0:
            raise NotAllowed("an override is a score from 0 to 1")
        if not reason or len(reason) > MAX_REASON_CHARS:
            raise NotAllowed(f"an override needs a reason of 1 to {MAX_REASON_CHARS} characters")
    with transaction.atomic():
        review = _review_for(viewer, sub)
        review.override_score = score
        review.override_reason = reason if score is not None else ""
        _save_review(review)
    return review


def save_rubric_item(viewer: User, cohort: Cohort, exercise: Exercise, part_id: str, *,
                     label: str, points: float, explanation: str = "",
                     item: RubricItem | None = None) -> RubricItem:
    """Add or edit a rubric item. Editing its points recomputes every review that applies it."""
    access.cohort_for(viewer, cohort.pk)
    spec = registry.get(exercise.slug)
    try:
        part = spec.part(part_id)
    except KeyError as exc:
        raise NotAllowed(str(exc)) from exc
    refuse_nul(label, explanation)
    label = " ".join(label.split())
    if not label or len(label) > 200:
        raise NotAllowed("a rubric item needs a label of 1 to 200 characters")
    if not -part.points <= points <= part.points:
        raise NotAllowed(f"points go from {-part.points:g} to {part.points:g} for this part")
    with transaction.atomic():
        if item is None:
            order = RubricItem.objects.filter(cohort=cohort, exercise=exercise,
                                              part_id=part_id).count()
            item = RubricItem.objects.create(cohort=cohort, exercise=exercise, part_id=part_id,
                                             label=label, points=points,
                                             explanation=explanation.strip(), order=order)
            return item
        if (item.cohort_id, item.exercise_id, item.part_id) != (cohort.pk, exercise.pk, part_id):
            raise NotAllowed("that rubric item belongs elsewhere")
        item.label, item.points, item.explanation = label, points, explanation.strip()
        item.save()
        for review in Review.objects.filter(items=item).select_related(
                "submission__user", "submission__exercise"):
            _save_review(review)
    return item


def delete_rubric_item(viewer: User, item: RubricItem) -> None:
    access.cohort_for(viewer, item.cohort_id)
    with transaction.atomic():
        reviews = list(Review.objects.filter(items=item).select_related(
            "submission__user", "submission__exercise"))
        item.delete()
        for review in reviews:
            _save_review(review)
