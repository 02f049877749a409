"""Celery glue, kept thin: an id in, a pure grader does the work, one action saves the result."""
from __future__ import annotations

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

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
def run_regrade(job_id: int) -> str:
    """Re-grade a job's entries one by one (each saved as it finishes, so progress shows and a
    redelivered job resumes where it stopped)."""
    from practice.models import RegradeEntry, RegradeJob

    actions.set_regrade_status(job_id, RegradeJob.Status.RUNNING)
    pending = RegradeEntry.objects.filter(job_id=job_id, finished_at__isnull=True)
    for entry_id in pending.order_by("pk").values_list("pk", flat=True):
        try:
            actions.regrade_one(entry_id)
        except Exception as exc:  # one broken submission must not stop the rest
            log.exception("re-grading entry %s failed", entry_id)
            actions.fail_regrade_entry(entry_id, f"{type(exc).__name__}: {exc}")
    actions.set_regrade_status(job_id, RegradeJob.Status.DONE)
    return "done"
