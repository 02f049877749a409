"""The "provisional" verdict: a grade that is not final yet, and the re-grade that settles it.

A kernel part graded only in Triton's interpreter (no GPU worker yet: ROOFLINE_KERNEL_QUEUE is
"grade") that passes every check is saved with the verdict "provisional" (graders/kernel.py).
Its score, 1.0, is the preview's and is shown labelled as such; it is not a grade:

- it uses an attempt but sets no `solved_at` and no `best_score` (actions.progress.count_attempt,
  refresh_part_state), so the part is not solved on the page, in the catalog, the
  history chart or a mock interview, and the worked solution stays behind "give up";
- `scores.effective_score` is None for it, so the cohort's statistics count it apart
  (PartStats.provisional: tried, neither solved nor wrong) and the score sheet shows
  "provisional" in its cell with no points (practice/stats.py, practice/reports.py);
- `manage.py grade --json` prints "verdict": "provisional" and "final": false.

An instructor's review score (an override, a rubric) is final: a person decided it.

Once GPU workers exist (ROOFLINE_KERNEL_QUEUE=gpu), `regrade_provisional` re-grades every
provisional submission there, through the instructors' re-grade machinery (one RegradeJob per
exercise, created by nobody, the preview's result kept in its entries, a re-grade is not an
attempt). It runs from `manage.py regrade_provisional` and whenever a worker that consumes the
`gpu` queue with ROOFLINE_KERNEL_DEVICE=gpu starts (practice/celery.py); it is idempotent, so
GPU workers starting together queue each submission once.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

from django.db import transaction

from practice import routing
from practice.actions import publish
from practice.models import RegradeEntry, RegradeJob, Submission

log = logging.getLogger(__name__)

PROVISIONAL = "provisional"


def is_final(verdict: str) -> bool:
    """Whether a graded submission's own score counts (a review's always does)."""
    return verdict != PROVISIONAL


def gpu_workers_configured() -> bool:
    """Kernel parts are routed to the `gpu` queue (practice/routing.py)."""
    return routing.kernels_on_gpu()


def regrade_provisional() -> list[RegradeJob]:
    """Queue every provisional submission not already being re-graded for a GPU re-grade.

    Returns the jobs made (one per exercise). Does nothing without GPU workers: a re-grade on a
    CPU worker would only run the same preview again."""
    if not gpu_workers_configured():
        log.info("provisional re-grade skipped: kernel parts are not routed to GPU workers")
        return []
    jobs = []
    with transaction.atomic():
        # Rows another worker's call holds are skipped (PostgreSQL), and rows already in an
        # unfinished job are left to it: GPU workers starting together queue each row once.
        in_flight = RegradeEntry.objects.filter(finished_at__isnull=True).values("submission_id")
        subs = (Submission.objects.select_for_update(skip_locked=True)
                .filter(status=Submission.Status.GRADED, verdict=PROVISIONAL)
                .exclude(pk__in=in_flight).only("pk", "exercise_id", "score", "verdict", "result"))
        by_exercise: dict[int, list[Submission]] = defaultdict(list)
        for sub in subs:
            by_exercise[sub.exercise_id].append(sub)
        for exercise_id, group in sorted(by_exercise.items()):
            job = RegradeJob.objects.create(exercise_id=exercise_id, created_by=None,
                                            total=len(group))
            RegradeEntry.objects.bulk_create(
                RegradeEntry(job=job, submission=sub, old_score=sub.score,
                             old_verdict=sub.verdict, old_result=sub.result) for sub in group)
            transaction.on_commit(lambda pk=job.pk: publish.enqueue_regrade(pk))
            jobs.append(job)
    if jobs:
        log.info("queued %d provisional submissions for a GPU re-grade in %d jobs",
                 sum(j.total for j in jobs), len(jobs))
    return jobs


def regrade_on_gpu_worker_start(queues: Iterable[str]) -> None:
    """A GPU worker has started: re-grade on the GPU what only a CPU preview graded.

    Only a worker that consumes `gpu` and grades kernels on the device (ROOFLINE_KERNEL_DEVICE=
    gpu) asks (practice/tasks.py hooks it to Celery's worker_ready); `regrade_provisional` does
    nothing unless kernel parts are routed to `gpu`. Never fatal: a worker that cannot reach the
    database now still serves its queue, and `manage.py regrade_provisional` does the same
    later."""
    from graders.kernel import kernel_device

    if "gpu" not in set(queues) or kernel_device() != "gpu":
        return
    from django.db import connections

    try:
        regrade_provisional()
    except Exception:
        log.exception("could not queue the provisional re-grade at worker start")
    finally:
        connections.close_all()  # the main process forks children: share no connection
