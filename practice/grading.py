"""The one grading seam: claim → grade → record, and what happens when grading fails.

Inline parts (numbers, choices, ...) are graded in the request by `grade_inline`; the rest are
queued by practice/actions/submissions.py and graded here by `grade_submission`, which
practice/tasks.py calls in a worker. A re-grade job runs through `run_regrade` the same way,
and the sweeper (`requeue_stuck`) re-sends what a lost message or a dead worker left behind.
"""
from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

import graders
from exercises import registry
from exercises.spec import ExerciseSpec
from graders.base import GradeResult, InvalidAnswer
from practice import routing
from practice.actions import progress, publish
from practice.models import RegradeEntry, RegradeJob, Submission
from practice.variants import hidden_seed, variant_params

log = logging.getLogger(__name__)


# --- grade ---------------------------------------------------------------------------------

def grade_inline(spec: ExerciseSpec, part_id: str, answer: str, params: dict[str, Any],
                 mode: str) -> GradeResult:
    """Grade an inline part inside the request. Raises InvalidAnswer (nothing is saved, no
    attempt used) when the answer cannot be read."""
    return graders.grade_answer(spec, part_id, answer, params, mode=mode)


def grade_claimed(sub: Submission) -> GradeResult:
    """The pure part of a worker's job: grade a claimed row's answer (no database writes)."""
    spec = registry.get(sub.exercise.slug)
    params = variant_params(spec, sub.variant)
    try:
        return graders.grade_answer(spec, sub.part_id, sub.answer, params, mode=sub.mode,
                                    seed=hidden_seed(spec.uuid, sub.variant, sub.pk))
    except InvalidAnswer as exc:
        return graders.invalid_result(str(exc))


# --- a worker's job: claim, grade, record ---------------------------------------------------

def grade_submission(submission_id: int) -> str:
    """Grade a queued submission end to end. Returns the verdict, "skipped" (already claimed,
    finished, or stopped as poison) or "error" (the time limit, or a failure on our side: the
    row says so and no attempt is used; never a silent loss)."""
    sub = claim_submission(submission_id)
    if sub is None:
        return "skipped"
    try:
        result = grade_claimed(sub)
    except SoftTimeLimitExceeded:
        record_error(submission_id, "Grading took too long and was stopped.")
        return "error"
    except Exception as exc:  # the sandbox is missing or a grader broke
        log.exception("grading submission %s failed", submission_id)
        record_error(submission_id, f"Grading failed on our side ({type(exc).__name__}: "
                                    f"{exc}). Your attempt was not counted; try again.")
        return "error"
    record_result(submission_id, result)
    return result.verdict


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
        progress.count_attempt(sub, result)
    return True


def record_error(submission_id: int, message: str) -> None:
    """Something other than the answer failed (sandbox missing, worker lost too often)."""
    Submission.objects.filter(pk=submission_id).exclude(status=Submission.Status.GRADED).update(
        status=Submission.Status.ERROR, verdict="error", finished_at=timezone.now(),
        result={"score": 0.0, "verdict": "error", "feedback": message, "checks": []})


# --- the sweeper ----------------------------------------------------------------------------

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
            publish.enqueue(pk, routing.queue_for(part_type))
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


# --- re-grades (started by practice/actions/regrade.py) -------------------------------------

def run_regrade(job_id: int, queue: str = "grade") -> str:
    """Re-grade the job's entries that are graded on `queue`, one by one (each saved as it
    finishes, so progress shows and a redelivered job resumes where it stopped). One task works
    for a slice of time, then hands the rest to a fresh task at the back of the queue: a job of
    thousands of submissions never outlives the broker's visibility timeout (which would hand
    it to a second worker while the first is still on it), and students' own submissions are
    graded between the slices. The job is done when no entry is left on any queue."""
    set_regrade_status(job_id, RegradeJob.Status.RUNNING)
    deadline = time.monotonic() + settings.ROOFLINE_REGRADE_SLICE_S
    ids = routing.pending_regrade_entries(job_id, queue)
    for n, entry_id in enumerate(ids, start=1):
        try:
            regrade_one(entry_id)
        except Exception as exc:  # one broken submission must not stop the rest
            log.exception("re-grading entry %s failed", entry_id)
            fail_regrade_entry(entry_id, f"{type(exc).__name__}: {exc}")
        if n < len(ids) and time.monotonic() >= deadline:  # at least one entry per slice
            publish.continue_regrade(job_id, queue)
            return "continued"
    return "done" if finish_regrade_if_complete(job_id) else "done on this queue"


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
            progress.refresh_part_state(sub.user, sub.exercise, sub.part_id)
    return entry


def fail_regrade_entry(entry_id: int, message: str) -> None:
    with transaction.atomic():
        updated = RegradeEntry.objects.filter(pk=entry_id, finished_at__isnull=True).update(
            error=message[:2000], finished_at=timezone.now())
        if updated:
            entry = RegradeEntry.objects.get(pk=entry_id)
            RegradeJob.objects.filter(pk=entry.job_id).update(done=F("done") + 1,
                                                              failed=F("failed") + 1)


def finish_regrade_if_complete(job_id: int) -> bool:
    """Mark the job done once no entry is left on any queue (its tasks finish independently)."""
    if RegradeEntry.objects.filter(job_id=job_id, finished_at__isnull=True).exists():
        return False
    set_regrade_status(job_id, RegradeJob.Status.DONE)
    return True


def set_regrade_status(job_id: int, status: str) -> None:
    fields: dict[str, Any] = {"status": status}
    if status in (RegradeJob.Status.DONE, RegradeJob.Status.FAILED):
        fields["finished_at"] = timezone.now()
    RegradeJob.objects.filter(pk=job_id).update(**fields)
