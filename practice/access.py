"""Who may see whose work. Every instructor view, action and command asks here.

    a student        sees their own submissions, never another student's
    an instructor    sees the students of the cohorts they own, and only those
    staff            sees everyone (Django's is_staff)

`visible_students(viewer)` is the one queryset every instructor page filters by; the per-object
checks raise `Forbidden`, which views turn into a 404 (an instructor of another cohort learns
nothing, not even that the submission exists).
"""
from __future__ import annotations

from django.db.models import QuerySet

from practice.models import Cohort, RegradeJob, Submission, User


class Forbidden(Exception):
    """The viewer may not see (or change) this."""


def is_instructor(user: User) -> bool:
    return bool(user.is_authenticated and (user.is_instructor or user.is_staff))


def cohorts_of(viewer: User) -> QuerySet[Cohort]:
    """The cohorts whose students the viewer reviews."""
    if not viewer.is_authenticated:
        return Cohort.objects.none()
    if viewer.is_staff:
        return Cohort.objects.all()
    if viewer.is_instructor:
        return Cohort.objects.filter(owner=viewer)
    return Cohort.objects.none()


def visible_students(viewer: User, cohort: Cohort | None = None) -> QuerySet[User]:
    """Students whose work the viewer may review (in one cohort when given)."""
    if cohort is not None:
        cohort_for(viewer, cohort.pk)
        return User.objects.filter(memberships__cohort=cohort).distinct()
    if viewer.is_authenticated and viewer.is_staff:
        return User.objects.all()
    return User.objects.filter(memberships__cohort__in=cohorts_of(viewer)).distinct()


def cohort_for(viewer: User, cohort_id: int) -> Cohort:
    """The cohort, if the viewer owns it (or is staff)."""
    cohort = cohorts_of(viewer).filter(pk=cohort_id).first()
    if cohort is None:
        raise Forbidden("no such cohort")
    return cohort


def can_review(viewer: User, student: User) -> bool:
    """An instructor (or staff) who may review this student's work; never the student."""
    if not is_instructor(viewer):
        return False
    if viewer.is_staff:
        return True
    return student.memberships.filter(cohort__owner=viewer).exists()


def submission_for_review(viewer: User, submission_id: int) -> Submission:
    """A submission the viewer may review (attempt view, comments, rubric, override)."""
    sub = Submission.objects.select_related("user", "exercise").filter(pk=submission_id).first()
    if sub is None or not can_review(viewer, sub.user):
        raise Forbidden("no such submission")
    return sub


def can_see_submission(viewer: User, sub: Submission) -> bool:
    """Its author, or someone who may review it."""
    return viewer.is_authenticated and (sub.user_id == viewer.pk or can_review(viewer, sub.user))


def review_cohort(viewer: User, student: User) -> Cohort | None:
    """The cohort through which the viewer reviews this student (None for staff outside one)."""
    return cohorts_of(viewer).filter(memberships__user=student).order_by("pk").first()


def regrade_jobs_of(viewer: User) -> QuerySet[RegradeJob]:
    """Re-grade jobs the viewer may watch: the ones they started (staff: all). A job lists the
    students visible to whoever started it, so another instructor must not see it."""
    if not is_instructor(viewer):
        return RegradeJob.objects.none()
    if viewer.is_staff:
        return RegradeJob.objects.all()
    return RegradeJob.objects.filter(created_by=viewer)


def regrade_job_for(viewer: User, job_id: int) -> RegradeJob:
    job = regrade_jobs_of(viewer).select_related("exercise").filter(pk=job_id).first()
    if job is None:
        raise Forbidden("no such re-grade")
    return job
