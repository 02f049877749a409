"""Sending work to the workers: the one module that talks to the broker. Work is sent by task
name and queue (both from practice/routing.py), never by importing the workers; a worker runs
practice/tasks.py, whose every task is one call into practice/grading.py."""
from __future__ import annotations

import logging
from collections.abc import Sequence

from django.utils import timezone

from practice import routing
from practice.celery import app
from practice.models import Submission

log = logging.getLogger(__name__)


def send(task: str, args: Sequence[object], queue: str) -> None:
    """Put one message on the broker. Raises when the broker cannot be reached."""
    app.send_task(task, args=tuple(args), queue=queue)


def enqueue(submission_id: int, queue: str = "grade") -> bool:
    """Send the id to the broker (the worker runs practice.grading.grade_submission). If the
    broker is down the row stays queued and the sweeper sends it again later, so a submission
    is never lost; the student sees 'queued'."""
    try:
        send(routing.GRADE_TASK, (submission_id,), queue)
    except Exception:  # broker unreachable: the row is the truth, the sweeper retries
        log.warning("could not enqueue submission %s; the sweeper will retry", submission_id,
                    exc_info=True)
        return False
    Submission.objects.filter(pk=submission_id).update(sent_at=timezone.now())
    return True


def enqueue_regrade(job_id: int) -> None:
    """One task per queue the job's submissions are graded on: kernel parts go where kernels
    are graded (the GPU workers once there are some), never as a CPU preview over a GPU grade."""
    for queue in routing.regrade_queues(job_id):
        try:
            send(routing.REGRADE_TASK, (job_id, queue), queue)
        except Exception:  # the broker is down: the job stays queued and can be started again
            log.warning("could not enqueue re-grade %s on %s", job_id, queue, exc_info=True)


def continue_regrade(job_id: int, queue: str) -> None:
    """Hand the rest of a re-grade job's entries on `queue` to a fresh task at the back of it."""
    send(routing.REGRADE_TASK, (job_id, queue), queue)
