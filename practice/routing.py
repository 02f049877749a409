"""Where grading work goes: the one place that knows queues and task names.

Which part types are graded in a worker (the rest are graded inside the request), which queue
each goes to (kernel parts follow ROOFLINE_KERNEL_QUEUE), the task each kind of work runs, named
rather than imported (nothing here or in practice/actions/ imports the workers), and which
queues a re-grade job's entries are graded on. practice/actions/publish.py sends; the workers'
code is practice/grading.py, reached through practice/tasks.py.
"""
from __future__ import annotations

from django.conf import settings

from practice.models import RegradeEntry

# The Celery tasks (practice/tasks.py), by name.
GRADE_TASK = "practice.tasks.grade_submission"
REGRADE_TASK = "practice.tasks.run_regrade"

# Part types that are graded in a worker; everything else is graded inside the request. Text
# parts load a sentence-embedding model (graders/text_model.py, ~300 MB with torch, seconds to
# load): once per worker process, never in a web process.
QUEUED_TYPES = {"expression": "grade", "code": "grade", "kernel": "grade", "text": "grade"}


def is_queued(part_type: str) -> bool:
    """Whether a part type is graded in a worker rather than inside the request."""
    return part_type in QUEUED_TYPES


def queue_for(part_type: str) -> str:
    """Kernel parts go to the `gpu` queue once GPU workers exist (ROOFLINE_KERNEL_QUEUE=gpu);
    until then any worker grades them as a preview in Triton's interpreter."""
    if part_type == "kernel":
        return settings.ROOFLINE_KERNEL_QUEUE
    return QUEUED_TYPES.get(part_type, "grade")


def kernels_on_gpu() -> bool:
    """Whether kernel parts are routed to GPU workers (their grade is then final)."""
    return queue_for("kernel") == "gpu"


def _unfinished_entries(job_id: int) -> list[tuple[int, str]]:
    """(entry id, the queue its submission is graded on), in order."""
    rows = (RegradeEntry.objects.filter(job_id=job_id, finished_at__isnull=True).order_by("pk")
            .values_list("pk", "submission__part_type"))
    return [(pk, queue_for(part_type)) for pk, part_type in rows]


def regrade_queues(job_id: int) -> list[str]:
    """The queues a re-grade job still has entries on: one task runs on each."""
    return sorted({queue for _, queue in _unfinished_entries(job_id)})


def pending_regrade_entries(job_id: int, queue: str) -> list[int]:
    """The job's unfinished entries graded on `queue`, in order."""
    return [pk for pk, q in _unfinished_entries(job_id) if q == queue]
