"""Celery glue, kept thin: an id in, a pure grader does the work, one action saves the result."""
from __future__ import annotations

import logging
import time

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from practice import actions

log = logging.getLogger(__name__)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def grade_submission(submission_id: int) -> str:
    sub = actions.claim_submission(submission_id)
    if sub is None:
        return "skipped"  # already claimed, finished, or stopped as poison
    try:
        result = actions.grade_claimed(sub)
    except SoftTimeLimitExceeded:
        actions.record_error(submission_id, "Grading took too long and was stopped.")
        return "error"
    except Exception as exc:  # the sandbox is missing or a grader broke: never a silent loss
        log.exception("grading submission %s failed", submission_id)
        actions.record_error(submission_id, f"Grading failed on our side ({type(exc).__name__}: "
                                            f"{exc}). Your attempt was not counted; try again.")
        return "error"
    actions.record_result(submission_id, result)
    return result.verdict


@shared_task
def sweep() -> int:
    return actions.requeue_stuck()


@shared_task(acks_late=True, reject_on_worker_lost=True, soft_time_limit=None, time_limit=None)
def run_regrade(job_id: int, queue: str = "grade") -> str:
    """Re-grade the job's entries that are graded on `queue`, one by one (each saved as it
    finishes, so progress shows and a redelivered job resumes where it stopped). One task works
    for a slice of time, then hands the rest to a fresh task at the back of the queue: a job of
    thousands of submissions never outlives the broker's visibility timeout (which would hand
    it to a second worker while the first is still on it), and students' own submissions are
    graded between the slices. The job is done when no entry is left on any queue."""
    from practice.models import RegradeJob

    actions.set_regrade_status(job_id, RegradeJob.Status.RUNNING)
    deadline = time.monotonic() + settings.ROOFLINE_REGRADE_SLICE_S
    ids = actions.pending_regrade_entries(job_id, queue)
    for n, entry_id in enumerate(ids, start=1):
        try:
            actions.regrade_one(entry_id)
        except Exception as exc:  # one broken submission must not stop the rest
            log.exception("re-grading entry %s failed", entry_id)
            actions.fail_regrade_entry(entry_id, f"{type(exc).__name__}: {exc}")
        if n < len(ids) and time.monotonic() >= deadline:  # at least one entry per slice
            run_regrade.apply_async((job_id, queue), queue=queue)
            return "continued"
    return "done" if actions.finish_regrade_if_complete(job_id) else "done on this queue"
