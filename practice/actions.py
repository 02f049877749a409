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
from practice import access, provisional, ratelimit
from practice import mock as mocks
from practice.models import (
    Assignment,
    Cohort,
    Comment,
    Exercise,
    Membership,
    MockInterview,
    PartState,
    RegradeEntry,
    RegradeJob,
    Review,
    RubricItem,
    Submission,
    User,
)
from practice.models.cohort import new_join_code, normalize_join_code

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
    renamed: int = 0


def sync_exercises() -> SyncReport:
    """Make the Exercise rows match the folders. A folder's row is the one with its uuid (or,
    for a row made before exercises had ids, the one with its slug, which then takes the uuid);
    the slug and everything else follow the folder, so a renamed folder keeps its students'
    history. Rows whose folder is gone are deactivated, and step aside (slug "<slug>-gone-<pk>")
    if a new exercise takes their slug. Mock interviews list exercises by slug: a rename is
    carried into them."""
    specs = registry.load_all()
    created = updated = 0
    renames: dict[str, str] = {}
    with transaction.atomic():
        rows = list(Exercise.objects.select_for_update().order_by("pk"))
        by_uuid = {str(r.uuid): r for r in rows if r.uuid is not None}
        legacy = {r.slug: r for r in rows if r.uuid is None}
        plan = [(spec, by_uuid.get(spec.uuid) or legacy.pop(spec.slug, None))
                for spec in specs.values()]
        kept = {row.pk for _, row in plan if row is not None}
        # Slugs are unique: every row whose slug changes, and every row of a removed folder
        # that holds a slug now wanted, moves to a free one first.
        for spec, row in plan:
            if row is not None and row.slug != spec.slug:
                renames[row.slug] = spec.slug
                Exercise.objects.filter(pk=row.pk).update(slug=f"renaming-{row.pk}")
        for row in rows:
            if row.pk not in kept and row.slug in specs:
                Exercise.objects.filter(pk=row.pk).update(slug=f"{row.slug[:40]}-gone-{row.pk}",
                                                          active=False)
        for spec, row in plan:
            fields = {
                "uuid": spec.uuid, "slug": spec.slug, "seed": spec.seed, "title": spec.title,
                "topic": spec.topic, "difficulty": spec.difficulty, "minutes": spec.minutes,
                "summary": spec.summary, "active": True,
                "parts": [{"id": p.id, "type": p.type, "points": p.points} for p in spec.parts],
            }
            if row is None:
                kept.add(Exercise.objects.create(**fields).pk)
                created += 1
            else:
                Exercise.objects.filter(pk=row.pk).update(**fields, synced_at=timezone.now())
                updated += 1
        deactivated = Exercise.objects.exclude(pk__in=kept).filter(active=True).update(
            active=False)
        if renames:
            for mock in MockInterview.objects.select_for_update():
                listed = [renames.get(slug, slug) for slug in mock.exercises]
                if listed != mock.exercises:
                    mock.exercises = listed
                    mock.save(update_fields=["exercises"])
    return SyncReport(created, updated, deactivated, len(renames))


def assignment_for(user: User, exercise: Exercise) -> Assignment:
    """The student's variant of an exercise, drawn at first visit and kept."""
    variant = str(random.SystemRandom().randrange(1, 1_000_000))
    assignment, _ = Assignment.objects.get_or_create(
        user=user, exercise=exercise, defaults={"variant": variant})
    return assignment


def variant_params(spec: ExerciseSpec, variant: str) -> dict[str, Any]:
    return registry.params_for(spec, variant)


def hidden_seed(exercise_id: str, variant: str, submission_id: int | None = None) -> int:
    """The seed a code part's hidden cases are drawn with: a server secret (so they cannot be
    precomputed), the variant and the submission. Submit's failure message shows the smallest
    failing hidden case with its expected output and attempts are unlimited, so each submission
    draws its own cases (a case shown once is worth nothing to the next submission); derived
    from the row's id rather than stored, so the worker and an instructor's regrade reproduce
    them with nothing more than the row. `exercise_id` is the exercise's uuid, which a renamed
    folder keeps. None: the variant's own seed (tools, benchmarks)."""
    key = f"{settings.SECRET_KEY}:{exercise_id}:{variant}"
    if submission_id is not None:
        key += f":submission:{submission_id}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")


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
            _hold_slot(user, queued=False)
            sub = Submission.objects.create(
                user=user, exercise=exercise, part_id=part_id, part_type=part.type,
                variant=variant, mode=mode, answer=answer, status=Submission.Status.GRADED,
                score=result.score, verdict=result.verdict, result=result.as_json(),
                started_at=timezone.now(), finished_at=timezone.now())
            _count_attempt(sub, result)
        return sub

    _precheck(part.type, answer, part.symbols)
    with transaction.atomic():
        _hold_slot(user, queued=True)
        sub = Submission.objects.create(
            user=user, exercise=exercise, part_id=part_id, part_type=part.type, variant=variant,
            mode=mode, answer=answer)
        transaction.on_commit(lambda: enqueue(sub.pk, queue_for(part.type)))
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


def enqueue(submission_id: int, queue: str = "grade") -> bool:
    """Send the id to the broker. If the broker is down the row stays queued and the sweeper
    sends it again later, so a submission is never lost; the student sees 'queued'."""
    from practice import tasks

    try:
        tasks.grade_submission.apply_async((submission_id,), queue=queue)
    except Exception:  # broker unreachable: the row is the truth, the sweeper retries
        log.warning("could not enqueue submission %s; the sweeper will retry", submission_id,
                    exc_info=True)
        return False
    Submission.objects.filter(pk=submission_id).update(sent_at=timezone.now())
    return True


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
    """Invalid answers and Run (examples only) use no attempt. A provisional result (a preview
    pass, practice/provisional.py) uses one but neither raises the best score nor solves."""
    if sub.mode != Submission.Mode.SUBMIT or result.verdict in ("invalid", "error"):
        return
    state, _ = PartState.objects.select_for_update().get_or_create(
        user=sub.user, exercise=sub.exercise, part_id=sub.part_id)
    state.attempts += 1
    if provisional.is_final(result.verdict):
        state.best_score = max(state.best_score, result.score)
    if provisional.is_final(result.verdict) and result.score >= 1.0 and state.solved_at is None:
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
                                    seed=hidden_seed(spec.uuid, sub.variant, sub.pk))
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
    stuck = Submission.objects.filter(
        Q(status=Submission.Status.QUEUED)
        & (Q(queued_at__lt=queued_cutoff) | Q(started_at__lt=running_cutoff))
    ).values_list("pk", "part_type", "queued_at", "sent_at", "started_at")
    resent = 0
    for pk, part_type, queued_at, sent_at, started_at in stuck:
        if _due_again(now, queued_at, sent_at, started_at, running_cutoff):
            enqueue(pk, queue_for(part_type))
            resent += 1
    return resent


def _due_again(now: Any, queued_at: Any, sent_at: Any, started_at: Any,
               running_cutoff: Any) -> bool:
    """Whether a stuck row gets another message now.

    Never sent (the broker was down), or its worker died after taking the last message: at once.
    Otherwise the message may be lost, or merely still waiting in a long queue, and a copy costs
    a worker a claim that finds nothing to do: copies are spaced further apart as the row ages
    (again when the last send is at least the grace and half the row's age old), so a row
    waiting W seconds gets about log2(W / grace) copies instead of one per sweep.
    """
    if sent_at is None:
        return True
    if started_at is not None and sent_at < started_at:
        return started_at < running_cutoff
    wait = max(timedelta(seconds=settings.ROOFLINE_QUEUED_GRACE_S), (now - queued_at) / 2)
    return now - sent_at >= wait


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


# --- instructors: cohorts, reviews, re-grades ------------------------------------------------
# Permission checks live in practice/access.py; each action asks there first.

MAX_COMMENT_CHARS = 4000
MAX_REASON_CHARS = 1000
MAX_COHORT_NAME = 100


def _refuse_nul(*texts: str) -> None:
    # PostgreSQL cannot store a NUL in a text column; refuse it here rather than fail the save.
    if any("\x00" in t for t in texts):
        raise NotAllowed("the text contains a NUL character")


def create_cohort(owner: User, name: str) -> Cohort:
    if not access.is_instructor(owner):
        raise NotAllowed("only instructors create cohorts")
    _refuse_nul(name)
    name = " ".join(name.split())
    if not name or len(name) > MAX_COHORT_NAME:
        raise NotAllowed(f"a cohort needs a name of 1 to {MAX_COHORT_NAME} characters")
    for _ in range(5):  # a clash of 31^8 codes is unlikely; retry rather than fail
        code = new_join_code()
        if not Cohort.objects.filter(join_code=code).exists():
            return Cohort.objects.create(owner=owner, name=name, join_code=code)
    raise NotAllowed("could not make a unique join code; try again")


def join_cohort(user: User, code: str) -> Cohort:
    """Join by code (case and spaces do not matter). Joining twice is harmless."""
    normalized = normalize_join_code(code)
    cohort = Cohort.objects.filter(join_code=normalized).first() if normalized else None
    if cohort is None:
        raise NotAllowed("no cohort has that join code")
    if cohort.owner_id == user.pk:
        raise NotAllowed("you own this cohort")
    Membership.objects.get_or_create(cohort=cohort, user=user)
    return cohort


def leave_cohort(user: User, cohort: Cohort) -> None:
    Membership.objects.filter(cohort=cohort, user=user).delete()


def add_comment(viewer: User, sub: Submission, body: str, line: int | None = None) -> Comment:
    """An instructor's comment, on one line of the answer (1-based) or on the whole of it."""
    if not access.can_review(viewer, sub.user):
        raise NotAllowed("you do not review this student")
    _refuse_nul(body)
    body = body.strip()
    if not body or len(body) > MAX_COMMENT_CHARS:
        raise NotAllowed(f"a comment is 1 to {MAX_COMMENT_CHARS} characters")
    if line is not None and not 1 <= line <= max(1, sub.answer.count("\n") + 1):
        raise NotAllowed("that line is not in the answer")
    return Comment.objects.create(submission=sub, author=viewer, line=line, body=body)


def _part_points(sub: Submission) -> float:
    spec = registry.get(sub.exercise.slug)
    return float(spec.part(sub.part_id).points)


def _review_score(review: Review) -> float | None:
    """Override first; else the applied rubric items' points over the part's points, in [0, 1];
    None when the review sets neither (the grader's score stands)."""
    if review.override_score is not None:
        return review.override_score
    items = list(review.items.all())
    if not items:
        return None
    total = sum(item.points for item in items)
    return min(1.0, max(0.0, total / _part_points(review.submission)))


def effective_score(sub: Submission) -> float | None:
    """The score that counts: a review's when it sets one, else the grader's; None while the
    grader's is only provisional (a preview pass awaiting its GPU grade)."""
    review = getattr(sub, "review", None)
    if review is not None and review.score is not None:
        return review.score
    return sub.score if provisional.is_final(sub.verdict) else None


def _refresh_part_state(user: User, exercise: Exercise, part_id: str) -> None:
    """Best score and solved/not from every counted submission, after a review changed one."""
    subs = (Submission.objects.filter(user=user, exercise=exercise, part_id=part_id,
                                      mode=Submission.Mode.SUBMIT,
                                      status=Submission.Status.GRADED)
            .select_related("review").order_by("queued_at", "pk"))
    best, solved_at = 0.0, None
    for sub in subs:
        score = effective_score(sub) or 0.0
        best = max(best, score)
        if score >= 1.0 and solved_at is None:
            solved_at = sub.finished_at or sub.queued_at
    state, _ = PartState.objects.get_or_create(user=user, exercise=exercise, part_id=part_id)
    state.best_score = best
    state.solved_at = solved_at
    state.save(update_fields=["best_score", "solved_at"])


def _save_review(review: Review) -> None:
    review.score = _review_score(review)
    review.save()
    sub = review.submission
    _refresh_part_state(sub.user, sub.exercise, sub.part_id)


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
    _refuse_nul(reason)
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
    _refuse_nul(label, explanation)
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


def start_regrade(viewer: User, exercise: Exercise) -> RegradeJob:
    """Re-grade, in the background, every graded submission of the exercise the viewer may
    review (staff: all of them). The old scores stay in the job's entries."""
    if not access.is_instructor(viewer):
        raise NotAllowed("only instructors re-grade")
    subs = Submission.objects.filter(exercise=exercise, status=Submission.Status.GRADED,
                                     user__in=access.visible_students(viewer))
    with transaction.atomic():
        job = RegradeJob.objects.create(exercise=exercise, created_by=viewer)
        entries = [RegradeEntry(job=job, submission=sub, old_score=sub.score,
                                old_verdict=sub.verdict, old_result=sub.result)
                   for sub in subs.only("pk", "score", "verdict", "result")]
        RegradeEntry.objects.bulk_create(entries)
        job.total = len(entries)
        job.save(update_fields=["total"])
        transaction.on_commit(lambda: _enqueue_regrade(job.pk))
    return job


def _enqueue_regrade(job_id: int) -> None:
    """One task per queue the job's submissions are graded on: kernel parts go where kernels
    are graded (the GPU workers once there are some), never as a CPU preview over a GPU grade."""
    from practice import tasks

    for queue in regrade_queues(job_id):
        try:
            tasks.run_regrade.apply_async((job_id, queue), queue=queue)
        except Exception:  # the broker is down: the job stays queued and can be started again
            log.warning("could not enqueue re-grade %s on %s", job_id, queue, exc_info=True)


def _unfinished_entries(job_id: int) -> list[tuple[int, str]]:
    """(entry id, the queue its submission is graded on), in order."""
    rows = (RegradeEntry.objects.filter(job_id=job_id, finished_at__isnull=True).order_by("pk")
            .values_list("pk", "submission__part_type"))
    return [(pk, queue_for(part_type)) for pk, part_type in rows]


def regrade_queues(job_id: int) -> list[str]:
    return sorted({queue for _, queue in _unfinished_entries(job_id)})


def pending_regrade_entries(job_id: int, queue: str) -> list[int]:
    return [pk for pk, q in _unfinished_entries(job_id) if q == queue]


def finish_regrade_if_complete(job_id: int) -> bool:
    """Mark the job done once no entry is left on any queue (its tasks finish independently)."""
    if RegradeEntry.objects.filter(job_id=job_id, finished_at__isnull=True).exists():
        return False
    set_regrade_status(job_id, RegradeJob.Status.DONE)
    return True


def regrade_one(entry_id: int) -> RegradeEntry:
    """Grade one entry's submission again with today's grader; save the new score on the
    submission (the old one stays in the entry) and count it in the job."""
    entry = RegradeEntry.objects.select_related("submission__exercise", "job").get(pk=entry_id)
    if entry.finished_at is not None:
        return entry  # a redelivered task: done already
    sub = entry.submission
    result = grade_claimed(sub)
    with transaction.atomic():
        entry = RegradeEntry.objects.select_for_update().get(pk=entry_id)
        if entry.finished_at is not None:
            return entry
        entry.new_score, entry.new_verdict = result.score, result.verdict
        entry.finished_at = timezone.now()
        entry.save(update_fields=["new_score", "new_verdict", "finished_at"])
        changed = result.score != sub.score or result.verdict != sub.verdict
        Submission.objects.filter(pk=sub.pk).update(
            score=result.score, verdict=result.verdict, result=result.as_json())
        RegradeJob.objects.filter(pk=entry.job_id).update(
            done=F("done") + 1, changed=F("changed") + int(changed))
        if sub.mode == Submission.Mode.SUBMIT:
            _refresh_part_state(sub.user, sub.exercise, sub.part_id)
    return entry


def fail_regrade_entry(entry_id: int, message: str) -> None:
    with transaction.atomic():
        updated = RegradeEntry.objects.filter(pk=entry_id, finished_at__isnull=True).update(
            error=message[:2000], finished_at=timezone.now())
        if updated:
            entry = RegradeEntry.objects.get(pk=entry_id)
            RegradeJob.objects.filter(pk=entry.job_id).update(done=F("done") + 1,
                                                              failed=F("failed") + 1)


def set_regrade_status(job_id: int, status: str) -> None:
    fields: dict[str, Any] = {"status": status}
    if status in (RegradeJob.Status.DONE, RegradeJob.Status.FAILED):
        fields["finished_at"] = timezone.now()
    RegradeJob.objects.filter(pk=job_id).update(**fields)
