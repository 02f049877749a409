""""My progress": the signed-in student's weak spots (practice/progress_report.py computes them).

Only the student's own rows are read: the page takes no user id, so nobody can ask for another
student's report. The numbers are also drawn as a chart (static/charts.js, drawActivity) and
given as tables, so the page works without JavaScript.
"""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from practice.progress_report import CHART_DAYS, report


@login_required
def my_progress(request: HttpRequest) -> HttpResponse:
    # The clock is read here, once: the report itself takes `now` (tests fix it).
    data = report(request.user, timezone.now())  # type: ignore[arg-type]
    return render(request, "practice/progress.html", {"report": data, "chart_days": CHART_DAYS})
