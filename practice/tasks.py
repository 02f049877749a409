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
