"""A student's progress on a part (PartState): attempts used, best score, when solved. Written
when an answer is graded (in the request or by a worker), reviewed or re-graded.

The best score is what the student is credited: the grade less the hints revealed before the
answer was submitted (`credited`, the one place the hint penalty is applied). The Submission
keeps the raw grade, and a part is solved by a right answer whatever hints it took."""
from __future__ import annotations

from django.utils import timezone

from exercises import hints
from graders.base import GradeResult
from practice import provisional
from practice.actions.hints import hint_share
from practice.actions.recall import note_graded_part
from practice.models import Exercise, PartState, Submission, User
from practice.scores import effective_score


def count_attempt(sub: Submission, result: GradeResult) -> None:
    """Invalid answers and Run (examples only) use no attempt. A provisional result (a preview
    pass, practice/provisional.py) uses one but neither raises the best score nor solves."""
    if sub.mode != Submission.Mode.SUBMIT or result.verdict in ("invalid", "error"):
        return
    state, _ = PartState.objects.select_for_update().get_or_create(
        user=sub.user, exercise=sub.exercise, part_id=sub.part_id)
    state.attempts += 1
    if provisional.is_final(result.verdict):
        state.best_score = max(state.best_score, credited(sub, result.score))
    if provisional.is_final(result.verdict) and result.score >= 1.0 and state.solved_at is None:
        state.solved_at = timezone.now()
    state.save(update_fields=["attempts", "best_score", "solved_at"])
    # Both ways a grade is recorded (inline in submissions.py, by a worker in grading.py) pass
    # here once per counted answer, and a re-grade does not: the one place recall hears of it.
    note_graded_part(sub, state.revealed_at)


def credited(sub: Submission, score: float) -> float:
    """A graded score less the share of the part's credit the hints revealed before the answer
    was submitted cost (exercises/hints.py); never below 0, a free hint costs nothing."""
    return hints.credited(score, hint_share(sub.user, sub.exercise, sub.part_id, sub.queued_at))


def refresh_part_state(user: User, exercise: Exercise, part_id: str) -> None:
    """Best score and solved/not from every counted submission, after a review or a re-grade
    changed one."""
    subs = (Submission.objects.filter(user=user, exercise=exercise, part_id=part_id,
                                      mode=Submission.Mode.SUBMIT,
                                      status=Submission.Status.GRADED)
            .select_related("review").order_by("queued_at", "pk"))
    best, solved_at = 0.0, None
    for sub in subs:
        score = effective_score(sub) or 0.0
        best = max(best, credited(sub, score))
        if score >= 1.0 and solved_at is None:
            solved_at = sub.finished_at or sub.queued_at
    state, _ = PartState.objects.get_or_create(user=user, exercise=exercise, part_id=part_id)
    state.best_score = best
    state.solved_at = solved_at
    state.save(update_fields=["best_score", "solved_at"])
