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
from practice.models import Exercise, PartState, Submission, User
from practice.variants import variant_params


def submit_answer(user: User, exercise: Exercise, part_id: str, answer: str,
                  mode: str = Submission.Mode.SUBMIT) -> Submission:
    """Record an answer. Inline parts are graded now (grading.grade_inline); the rest are queued
    for a worker, which runs grading.grade_submission on the row.

    Raises InvalidAnswer (nothing saved, no attempt used) when the answer cannot be read.
    """
    spec = registry.get(exercise.slug)
    try:
        part = spec.part(part_id)
    except KeyError as exc:
        raise NotAllowed(str(exc)) from exc
    if mode == Submission.Mode.RUN and part.type != "code":
        raise NotAllowed("only code parts can be run against the examples")
    variant = assignment_for(user, exercise).variant
    answer = answer.replace("\r\n", "\n")
    params = variant_params(spec, variant)

    if not routing.is_queued(part.type):
        result = grading.grade_inline(spec, part_id, answer, params, mode=mode)
        with transaction.atomic():
            _hold_slot(user, queued=False)
            sub = Submission.objects.create(
                user=user, exercise=exercise, part_id=part_id, part_type=part.type,
                variant=variant, mode=mode, answer=answer, status=Submission.Status.GRADED,
                score=result.score, verdict=result.verdict, result=result.as_json(),
                started_at=timezone.now(), finished_at=timezone.now())
            count_attempt(sub, result)
        return sub

    _precheck(part.type, answer, part.symbols)
    with transaction.atomic():
        _hold_slot(user, queued=True)
        sub = Submission.objects.create(
            user=user, exercise=exercise, part_id=part_id, part_type=part.type, variant=variant,
            mode=mode, answer=answer)
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
