"""Cohorts: create and list (instructors), join by code or link (students), CSV export.

Parse, call an action, render. Who may see a cohort is decided in practice/access.py: a cohort
the viewer may not see is a 404, so an instructor of another cohort learns nothing about it.
"""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.text import slugify
from django.views.decorators.http import require_POST

from practice import access, reports
from practice.actions import NotAllowed
from practice.actions.cohorts import MAX_COHORT_NAME, create_cohort, join_cohort
from practice.models import Cohort, Exercise, Membership, Submission, User
from practice.models.cohort import normalize_join_code


def forbidden(request: HttpRequest) -> HttpResponse:
    """The plain 403 page for a logged-in student on an instructors' page."""
    return render(request, "practice/teach/forbidden.html", status=403)


def _cohort_or_404(viewer: User, pk: int) -> Cohort:
    try:
        return access.cohort_for(viewer, pk)
    except access.Forbidden as exc:
        raise Http404("no such cohort") from exc


def _join_link(request: HttpRequest, cohort: Cohort) -> str:
    return request.build_absolute_uri(reverse("join_code", args=[cohort.join_code]))


def _dashboard(request: HttpRequest, name: str = "", error: str = "",
               status: int = 200) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    cohorts = list(access.cohorts_of(user).select_related("owner")
                   .annotate(students=Count("memberships")))
    rows = [{"cohort": c, "join_link": _join_link(request, c)} for c in cohorts]
    return render(request, "practice/teach/dashboard.html", {
        "rows": rows, "name": name, "error": error, "show_owner": user.is_staff,
        "max_name": MAX_COHORT_NAME}, status=status)


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    if not access.is_instructor(request.user):  # type: ignore[arg-type]
        return forbidden(request)
    return _dashboard(request)


@login_required
@require_POST
def create(request: HttpRequest) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    if not access.is_instructor(user):
        return forbidden(request)
    name = request.POST.get("name", "")
    try:
        cohort = create_cohort(user, name)
    except NotAllowed as exc:
        return _dashboard(request, name=name, error=f"No cohort made: {exc}.", status=400)
    messages.success(request, f"Cohort “{cohort.name}” made. Students join with the code "
                              f"{cohort.join_code} or the link below.")
    return redirect("cohort", pk=cohort.pk)


@login_required
def detail(request: HttpRequest, pk: int) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    cohort = _cohort_or_404(user, pk)
    students = reports.student_progress(user, cohort)
    total_parts = sum(len(parts) for parts in
                      Exercise.objects.filter(active=True).values_list("parts", flat=True))
    # The same test as the review queue's "awaiting": counted, pending, no review score yet.
    awaiting = (Submission.objects
                .filter(user__memberships__cohort=cohort, mode=Submission.Mode.SUBMIT,
                        status=Submission.Status.GRADED, verdict="pending")
                .exclude(review__score__isnull=False).count())
    return render(request, "practice/teach/cohort.html", {
        "cohort": cohort, "students": students, "total_parts": total_parts,
        "awaiting": awaiting, "join_link": _join_link(request, cohort),
        "show_owner": user.is_staff})


@login_required
def export_csv(request: HttpRequest, pk: int) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    cohort = _cohort_or_404(user, pk)
    body = reports.cohort_scores_csv(user, cohort)
    response = HttpResponse(body, content_type="text/csv; charset=utf-8")
    filename = f"roofline-{slugify(cohort.name) or 'cohort'}-{cohort.pk}-scores.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
def join(request: HttpRequest, code: str = "") -> HttpResponse:
    """/join/: a form for a code. /join/<code>/: the cohort's name and a Join button.

    Only a POST joins: a link opened by a preview bot or a prefetch must not enrol anyone."""
    user: User = request.user  # type: ignore[assignment]
    if request.method == "POST":
        typed = request.POST.get("code", code)
        try:
            cohort = join_cohort(user, typed)
        except NotAllowed as exc:
            return _join_page(request, typed, error=f"Not joined: {exc}.", status=400)
        messages.success(request, f"You joined “{cohort.name}”. Its instructor now sees your "
                                  "attempts; other students never do.")
        return redirect("catalog")
    if not code:
        return _join_page(request, "")
    return _join_page(request, code, cohort=_cohort_by_code(code))


def _cohort_by_code(code: str) -> Cohort | None:
    normalized = normalize_join_code(code)
    if normalized is None:
        return None
    return Cohort.objects.select_related("owner").filter(join_code=normalized).first()


def _join_page(request: HttpRequest, code: str, *, cohort: Cohort | None = None,
               error: str = "", status: int = 200) -> HttpResponse:
    ctx: dict[str, Any] = {"code": code[:32], "cohort": cohort, "error": error}
    if code and cohort is None and not error:
        ctx["error"] = "No cohort has that join code. Check it with your instructor."
        status = 404
    if cohort is not None:
        ctx["member"] = Membership.objects.filter(cohort=cohort, user=request.user).exists()
        ctx["owner"] = cohort.owner_id == request.user.pk
    return render(request, "practice/teach/join.html", ctx, status=status)
