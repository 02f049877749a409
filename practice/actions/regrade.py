"""Starting a re-grade: every graded submission of an exercise the instructor may review is
graded again in the background (practice/grading.py runs the job; the old scores stay in its
entries)."""
from __future__ import annotations

from django.db import transaction

from practice import access
from practice.actions import NotAllowed, publish
from practice.models import Exercise, RegradeEntry, RegradeJob, Submission, User


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
        transaction.on_commit(lambda: publish.enqueue_regrade(job.pk))
    return job
