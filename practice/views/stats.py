"""Statistics per cohort, exercise and part; re-grades with progress. Parse, call, render.

Who sees what is decided in practice/access.py: a cohort, exercise or job the viewer may not see
is a 404 (an instructor of another cohort learns nothing, not even that it exists).
"""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from practice import access, stats
from practice.actions import NotAllowed
from practice.actions.regrade import start_regrade
from practice.models import Cohort, Exercise, RegradeJob

RECENT_REGRADES = 5


def _cohort(request: HttpRequest, pk: int) -> Cohort:
    try:
        return access.cohort_for(request.user, pk)  # type: ignore[arg-type]
    except access.Forbidden:
        raise Http404("no such cohort") from None


@login_required
def cohort_stats(request: HttpRequest, pk: int) -> HttpResponse:
    cohort = _cohort(request, pk)
    return render(request, "practice/teach/stats.html", {
        "cohort": cohort, "overview": stats.cohort_overview(cohort)})


@login_required
def exercise_stats(request: HttpRequest, pk: int, slug: str) -> HttpResponse:
    cohort = _cohort(request, pk)
    exercise = get_object_or_404(Exercise, slug=slug, active=True)
    ex_stats = stats.exercise_stats(cohort, exercise)
    jobs = list(access.regrade_jobs_of(request.user)  # type: ignore[arg-type]
                .filter(exercise=exercise)[:RECENT_REGRADES])
    return render(request, "practice/teach/exercise_stats.html", {
        "cohort": cohort, "exercise": exercise, "stats": ex_stats, "jobs": jobs})


@login_required
@require_POST
def regrade_start(request: HttpRequest, slug: str) -> HttpResponse:
    exercise = get_object_or_404(Exercise, slug=slug, active=True)
    try:
        job = start_regrade(request.user, exercise)  # type: ignore[arg-type]
    except NotAllowed:
        raise Http404("no such exercise") from None
    return redirect("regrade_progress", pk=job.pk)


@login_required
def regrade_progress(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        job = access.regrade_job_for(request.user, pk)  # type: ignore[arg-type]
    except access.Forbidden:
        raise Http404("no such re-grade") from None
    ctx = {"job": job, "entries": stats.regrade_entries(job),
           "active": job.status in (RegradeJob.Status.QUEUED, RegradeJob.Status.RUNNING),
           "row_limit": stats.REGRADE_ROWS}
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "practice/teach/partials/regrade_progress.html", ctx)
    return render(request, "practice/teach/regrade.html", ctx)
