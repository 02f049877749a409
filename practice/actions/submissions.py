"""Answering a part: submit (inline parts graded now, the rest queued for a worker) and give up
to see the worked solution. Grading itself is practice/grading.py."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

import graders
from exercises import registry
from graders.base import InvalidAnswer
from practice import grading, interview, ratelimit, routing
from practice.actions import NotAllowed, publish
from practice.actions.exercises import assignment_for
from practice.actions.progress import count_attempt
from practice.models import Exercise, KeyPointContest, PartState, RecallItem, Submission, User
from practice.variants import variant_params


def submit_answer(user: User, exercise: Exercise, part_id: str, answer: str,
                  mode: str = Submission.Mode.SUBMIT,
                  review: RecallItem | None = None) -> Submission:
    """Record an answer. Inline parts are graded now (grading.grade_inline); the rest are queued
    for a worker, which runs grading.grade_submission on the row.

    `review`: the answer is a review of this part due for recall, asked in the item's own
    variant (practice/actions/recall.open_review drew it) rather than the student's; its grade
    reschedules the item (recall.note_graded_part).

    Raises InvalidAnswer (nothing saved, no attempt used) when the answer cannot be read.
    """
    spec = registry.get(exercise.slug)
    try:
        part = spec.part(part_id)
    except KeyError as exc:
        raise NotAllowed(str(exc)) from exc
    if mode == Submission.Mode.RUN and part.type != "code":
        raise NotAllowed("only code parts can be run against the examples")
    if review is not None:
        if (review.user_id != user.pk or review.exercise_id != exercise.pk
                or review.part_id != part_id or not review.variant):
            raise NotAllowed("this review is not open for that part")
        variant = review.variant
    else:
        variant = assignment_for(user, exercise).variant
    answer = answer.replace("\r\n", "\n")
    params = variant_params(spec, variant)

    if not routing.is_queued(part.type):
        result = grading.grade_inline(spec, part_id, answer, params, mode=mode)
        with transaction.atomic():
            _hold_slot(user, queued=False)
            sub = Submission.objects.create(
                user=user, exercise=exercise, part_id=part_id, part_type=part.type,
                variant=variant, recall_item=review, mode=mode, answer=answer,
                status=Submission.Status.GRADED,
                score=result.score, verdict=result.verdict, result=result.as_json(),
                started_at=timezone.now(), finished_at=timezone.now())
            count_attempt(sub, result)
        return sub

    _precheck(part.type, answer, part.symbols)
    with transaction.atomic():
        _hold_slot(user, queued=True)
        sub = Submission.objects.create(
            user=user, exercise=exercise, part_id=part_id, part_type=part.type, variant=variant,
            recall_item=review, mode=mode, answer=answer)
        transaction.on_commit(lambda: publish.enqueue(sub.pk, routing.queue_for(part.type)))
    return sub


def _hold_slot(user: User, *, queued: bool) -> None:
    """Per-student caps on answers in flight and per minute (practice/ratelimit.py), checked in
    the transaction that creates the row: refused means nothing saved and no attempt used."""
    ratelimit.lock_student(user)
    refusal = ratelimit.submission_refusal(user, queued=queued)
    if refusal:
        raise NotAllowed(refusal)


def _precheck(part_type: str, answer: str, symbols: tuple[str, ...]) -> None:
    """Cheap checks in the request, so an unreadable answer never reaches a queue."""
    if not answer.strip():
        raise InvalidAnswer("the answer is empty")
    # The same limits grade_answer applies to inline parts, before the row is saved: a NUL
    # cannot be stored in a PostgreSQL text column, and a megabyte of code should not be queued.
    if len(answer) > graders.MAX_ANSWER_CHARS:
        raise InvalidAnswer(f"the answer is longer than {graders.MAX_ANSWER_CHARS:,} characters")
    if "\x00" in answer:
        raise InvalidAnswer("the answer contains a NUL character")
    if part_type == "expression":
        from graders import expression

        expression.preview(answer, symbols)
    elif part_type == "text":
        from graders import text

        text.read_answer(answer)


def reveal_solution(user: User, exercise: Exercise, part_id: str) -> PartState:
    """Give up on a part: its worked solution becomes visible (the score stays). Refused while
    a running mock interview holds the exercise: solutions stay hidden until it ends."""
    registry.get(exercise.slug).part(part_id)
    if interview.solutions_hidden_for(user, exercise):
        raise NotAllowed("worked solutions stay hidden until your mock interview ends")
    state, _ = PartState.objects.get_or_create(user=user, exercise=exercise, part_id=part_id)
    if state.revealed_at is None:
        state.revealed_at = timezone.now()
        state.save(update_fields=["revealed_at"])
    return state


def contest_key_point(user: User, submission_id: int, point: int) -> KeyPointContest:
    """The student says the automatic reading of one key point of their text answer is wrong:
    the answer goes to the head of the review queue with the key point and its sentence.
    Only the answer's owner, only a key point the matcher did not mark covered, only while the
    answer still awaits its instructor's grade; contesting twice is one contest."""
    sub = Submission.objects.filter(pk=submission_id, user=user).select_related("review").first()
    if sub is None:
        raise NotAllowed("no such answer")
    from graders.text import automatic_reading

    verdicts = automatic_reading(sub.result).get("points") or []
    if sub.part_type != "text" or not 0 <= point < len(verdicts):
        raise NotAllowed("only a key point of an automatically read text answer can be contested")
    if sub.verdict != Submission.Verdict.PENDING or getattr(
            getattr(sub, "review", None), "score", None) is not None:
        raise NotAllowed("this answer has been graded by an instructor already")
    verdict = verdicts[point]
    if verdict.get("status") == "covered":
        raise NotAllowed("this key point already counts for you")
    contest, _ = KeyPointContest.objects.get_or_create(
        submission=sub, point=point,
        defaults={"status": str(verdict.get("status", "")),
                  "sentence": str(verdict.get("sentence", ""))[:2000]})
    return contest
