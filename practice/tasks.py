"""Celery glue, kept thin: an id in, one call into practice/grading.py (the row is the result).
Senders name these tasks (practice/routing.py) rather than import this module."""
from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready

from practice import grading, provisional


@shared_task(acks_late=True, reject_on_worker_lost=True)
def grade_submission(submission_id: int) -> str:
    return grading.grade_submission(submission_id)


@shared_task
def sweep() -> int:
    return grading.requeue_stuck()


@shared_task(acks_late=True, reject_on_worker_lost=True, soft_time_limit=None, time_limit=None)
def run_regrade(job_id: int, queue: str = "grade") -> str:
    return grading.run_regrade(job_id, queue)


@worker_ready.connect
def _regrade_provisional(sender: object = None, **kwargs: object) -> None:
    """A worker has started: one that serves `gpu` re-grades what a CPU preview graded. The
    sender (the consumer) knows the queues it serves."""
    app = getattr(sender, "app", None)
    consume_from = getattr(getattr(getattr(app, "amqp", None), "queues", None),
                           "consume_from", None) or {}
    provisional.regrade_on_gpu_worker_start(list(consume_from))
