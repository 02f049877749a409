"""Every state change in Roofline goes through a function here. Views parse, call one of these,
and render; Celery tasks claim a row here, call a pure grader, and save the result here.
"""
from __future__ import annotations

import hashlib
import logging
import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

import graders
from exercises import registry
from exercises.spec import ExerciseSpec
from graders.base import GradeResult, InvalidAnswer
from practice import mock as mocks
from practice.models import Assignment, Exercise, MockInterview, PartState, Submission, User

log = logging.getLogger(__name__)

# Part types that are graded in a worker; everything else is graded inside the request.
QUEUED_TYPES = {"expression": "grade", "code": "grade", "kernel": "grade"}


def queue_for(part_type: str) -> str:
    """Kernel parts go to the `gpu` queue once GPU workers exist (ROOFLINE_KERNEL_QUEUE=gpu);
    until then any worker grades them as a preview in Triton's interpreter."""
    if part_type == "kernel":
        return settings.ROOFLINE_KERNEL_QUEUE
    return QUEUED_TYPES.get(part_type, "grade")


# --- exercises ----------------------------------------------------------------------------

@dataclass(frozen=True)
class SyncReport:
    created: int
    updated: int
    deactivated: int


def sync_exercises() -> SyncReport:
    """Make the Exercise rows match the folders: one row per slug, missing folders deactivated."""
    specs = registry.load_all()
    created = updated = 0
    with transaction.atomic():
        for spec in specs.values():
            _, was_created = Exercise.objects.update_or_create(
                slug=spec.slug,
                defaults={
                    "seed": spec.seed, "title": spec.title, "topic": spec.topic,
                    "difficulty": spec.difficulty, "minutes": spec.minutes, "summary": spec.summary,
                    "parts": [{"id": p.id, "type": p.type, "points": p.points} for p in spec.parts],
                    "active": True,
                },
            )
            created += was_created
            updated += not was_created
        deactivated = Exercise.objects.exclude(slug__in=specs).filter(active=True).update(
            active=False)
    return SyncReport(created, updated, deactivated)


def assignment_for(user: User, exercise: Exercise) -> Assignment:
    """The student's variant of an exercise, drawn at first visit and kept."""
    variant = str(random.SystemRandom().randrange(1, 1_000_000))
    assignment, _ = Assignment.objects.get_or_create(
        user=user, exercise=exercise, defaults={"variant": variant})
    return assignment


def variant_params(spec: ExerciseSpec, variant: str) -> dict[str, Any]:
    return registry.params_for(spec, variant)


def hidden_seed(slug: str, variant: str) -> int:
    """Hidden cases depend on the variant and a server secret, so they can't be precomputed."""
    key = f"{settings.SECRET_KEY}:{slug}:{variant}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big")


# --- answering ----------------------------------------------------------------------------

class NotAllowed(Exception):
    """The action is not permitted now (e.g. a part that does not exist)."""


def submit_answer(user: User, exercise: Exercise, part_id: str, answer: str,
                  mode: str = Submission.Mode.SUBMIT) -> Submission:
    """Record an answer. Inline parts are graded now; the rest are queued for a worker.

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

    if part.type not in QUEUED_TYPES:
        result = graders.grade_answer(spec, part_id, answer, params, mode=mode)
        with transaction.atomic():
            sub = Submission.objects.create(
                user=user, exercise=exercise, part_id=part_id, part_type=part.type,
                variant=variant, mode=mode, answer=answer, status=Submission.Status.GRADED,
                score=result.score, verdict=result.verdict, result=result.as_json(),
                started_at=timezone.now(), finished_at=timezone.now())
            _count_attempt(sub, result)
        return sub

    _precheck(part.type, answer, part.symbols)
    with transaction.atomic():
        sub = Submission.objects.create(
            user=user, exercise=exercise, part_id=part_id, part_type=part.type, variant=variant,
            mode=mode, answer=answer)
        transaction.on_commit(lambda: enqueue(sub.pk, queue_for(part.type)))
    return sub


def _precheck(part_type: str, answer: str, symbols: tuple[str, ...]) -> None:
    """Cheap checks in the request, so an unreadable answer never reaches a queue."""
    if not answer.strip():
        raise InvalidAnswer("the answer is empty")
    if part_type == "expression":
        from graders import expression

        expression.preview(answer, symbols)


def enqueue(submission_id: int, queue: str = "grade") -> bool:
    """Send the id to the broker. If the broker is down the row stays queued and the sweeper
    sends it again later, so a submission is never lost; the student sees 'queued'."""
    from practice import tasks

    try:
        tasks.grade_submission.apply_async((submission_id,), queue=queue)
        return True
    except Exception:  # broker unreachable: the row is the truth, the sweeper retries
        log.warning("could not enqueue submission %s; the sweeper will retry", submission_id,
                    exc_info=True)
        return False


def reveal_solution(user: User, exercise: Exercise, part_id: str) -> PartState:
    """Give up on a part: its worked solution becomes visible (the score stays). Refused while
    a running mock interview holds the exercise: solutions stay hidden until it ends."""
    registry.get(exercise.slug).part(part_id)
    if mocks.solutions_hidden_for(user, exercise):
        raise NotAllowed("worked solutions stay hidden until your mock interview ends")
    state, _ = PartState.objects.get_or_create(user=user, exercise=exercise, part_id=part_id)
    if state.revealed_at is None:
        state.revealed_at = timezone.now()
        state.save(update_fields=["revealed_at"])
    return state


def _count_attempt(sub: Submission, result: GradeResult) -> None:
    """Invalid answers and Run (examples only) use no attempt."""
    if sub.mode != Submission.Mode.SUBMIT or result.verdict in ("invalid", "error"):
        return
    state, _ = PartState.objects.select_for_update().get_or_create(
        user=sub.user, exercise=sub.exercise, part_id=sub.part_id)
    state.attempts += 1
    state.best_score = max(state.best_score, result.score)
    if result.score >= 1.0 and state.solved_at is None:
        state.solved_at = timezone.now()
    state.save(update_fields=["attempts", "best_score", "solved_at"])


# --- the worker's side --------------------------------------------------------------------

def claim_submission(submission_id: int) -> Submission | None:
    """queued → running, once. A redelivered message finds nothing to claim and does nothing.

    A row claimed more than ROOFLINE_MAX_DELIVERIES times (it keeps killing its worker) is
    stopped with an error instead of being retried forever.
    """
    now = timezone.now()
    claimed = Submission.objects.filter(pk=submission_id, status=Submission.Status.QUEUED).update(
        status=Submission.Status.RUNNING, started_at=now, deliveries=F("deliveries") + 1)
    if not claimed:
        return None
    sub = Submission.objects.select_related("exercise").get(pk=submission_id)
    if sub.deliveries > settings.ROOFLINE_MAX_DELIVERIES:
        record_error(sub.pk, f"Grading was stopped after {sub.deliveries - 1} tries: the "
                             "submission kept crashing its worker. Simplify it and submit again.")
        return None
    return sub


def grade_claimed(sub: Submission) -> GradeResult:
    """The pure part of a worker's job: grade a claimed row's answer (no database writes)."""
    spec = registry.get(sub.exercise.slug)
    params = variant_params(spec, sub.variant)
    try:
        return graders.grade_answer(spec, sub.part_id, sub.answer, params, mode=sub.mode,
                                    seed=hidden_seed(spec.slug, sub.variant))
    except InvalidAnswer as exc:
        return graders.invalid_result(str(exc))


def record_result(submission_id: int, result: GradeResult) -> bool:
    """running → graded, and the student's progress. False when the row was not running
    (the sweeper handed it to another worker that finished first): nothing is saved twice."""
    with transaction.atomic():
        sub = Submission.objects.select_for_update().get(pk=submission_id)
        if sub.status != Submission.Status.RUNNING:
            return False
        sub.status = Submission.Status.GRADED
        sub.score, sub.verdict, sub.result = result.score, result.verdict, result.as_json()
        sub.finished_at = timezone.now()
        sub.save(update_fields=["status", "score", "verdict", "result", "finished_at"])
        _count_attempt(sub, result)
    return True


def record_error(submission_id: int, message: str) -> None:
    """Something other than the answer failed (sandbox missing, worker lost too often)."""
    Submission.objects.filter(pk=submission_id).exclude(status=Submission.Status.GRADED).update(
        status=Submission.Status.ERROR, verdict="error", finished_at=timezone.now(),
        result={"score": 0.0, "verdict": "error", "feedback": message, "checks": []})


def requeue_stuck(now: Any = None) -> int:
    """The sweeper: re-send rows whose message was lost (queued too long) or whose worker died
    (running past its deadline). Returns how many rows were re-sent."""
    now = now or timezone.now()
    queued_cutoff = now - timedelta(seconds=settings.ROOFLINE_QUEUED_GRACE_S)
    running_cutoff = now - timedelta(seconds=settings.ROOFLINE_RUNNING_GRACE_S)
    stale_running = Submission.objects.filter(
        status=Submission.Status.RUNNING, started_at__lt=running_cutoff)
    stale_running.update(status=Submission.Status.QUEUED)
    stuck = list(Submission.objects.filter(
        Q(status=Submission.Status.QUEUED)
        & (Q(queued_at__lt=queued_cutoff) | Q(started_at__lt=running_cutoff))
    ).values_list("pk", "part_type"))
    for pk, part_type in stuck:
        enqueue(pk, queue_for(part_type))
    return len(stuck)


# --- mock interviews ----------------------------------------------------------------------

def start_mock_interview(user: User, rng: random.Random | None = None, now: Any = None,
                         duration_s: int | None = None) -> MockInterview:
    """Start a timed mock of three questions the student has not fully solved (where possible).

    One mock at a time: if one is still running it is returned unchanged, so a double click or
    a second tab does not start another. A mock past its deadline is ended first.
    """
    now = now or timezone.now()
    with transaction.atomic():
        # Lock the user's row so two concurrent starts cannot both find no running mock.
        User.objects.select_for_update().filter(pk=user.pk).first()
        expire_mock_interviews(user, now)
        running = mocks.running_mock(user, now)
        if running is not None:
            return running
        slugs = mocks.pick_mock_questions(mocks.standings_for(user),
                                          rng or random.SystemRandom())
        if not slugs:
            raise NotAllowed("there are no exercises to put in a mock interview")
        return MockInterview.objects.create(
            user=user, started_at=now, exercises=slugs,
            duration_s=duration_s or mocks.DEFAULT_DURATION_S)


def finish_mock_interview(mock: MockInterview, now: Any = None) -> MockInterview:
    """The student ends the mock early. Ending it again (or after time ran out) changes nothing;
    a mock read after its deadline ends by time, at the deadline, not now."""
    now = now or timezone.now()
    if mock.finished_at is not None:
        return mock
    if now >= mock.deadline:
        return expire_mock_interview(mock, now)
    # A conditional update, so a finish racing an expiry (two tabs) records one end, not two.
    MockInterview.objects.filter(pk=mock.pk, finished_at__isnull=True).update(
        finished_at=now, ended_by=MockInterview.EndedBy.FINISH)
    mock.refresh_from_db()
    return mock


def expire_mock_interview(mock: MockInterview, now: Any = None) -> MockInterview:
    """Expire on read: there is no timer process, so whoever reads a mock past its deadline
    records its end (at the deadline). Does nothing to a mock still running or already over."""
    now = now or timezone.now()
    if mock.finished_at is None and now >= mock.deadline:
        MockInterview.objects.filter(pk=mock.pk, finished_at__isnull=True).update(
            finished_at=mock.deadline, ended_by=MockInterview.EndedBy.TIME)
        mock.refresh_from_db()
    return mock


def expire_mock_interviews(user: User, now: Any = None) -> int:
    """End every mock of the student whose clock has run out. Returns how many were ended."""
    now = now or timezone.now()
    ended = 0
    for mock in MockInterview.objects.filter(user=user, finished_at__isnull=True):
        if now >= mock.deadline:
            expire_mock_interview(mock, now)
            ended += 1
    return ended


# --- people -------------------------------------------------------------------------------

def sign_up(username: str, password: str, email: str = "") -> User:
    return User.objects.create_user(username=username, password=password, email=email)


def create_demo_users() -> list[str]:
    """A demo student and instructor for `make run` (local only; printed passwords)."""
    made = []
    for name, instructor in (("student", False), ("instructor", True)):
        user, created = User.objects.get_or_create(username=name, defaults={
            "is_instructor": instructor, "is_staff": instructor})
        if created:
            user.set_password(f"{name}-demo")
            user.save()
            made.append(name)
    return made
