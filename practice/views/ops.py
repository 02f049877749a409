"""Operations: the health check, Prometheus metrics, and the staff queue page.

Parse, call, render: the probing is in practice/health.py, the metrics in practice/metrics.py,
the page's data in practice/ops.py. None of them changes anything.
"""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_safe
from prometheus_client import CONTENT_TYPE_LATEST

from practice import health, metrics, ops


@never_cache
@require_safe  # GET or HEAD: some load balancers probe with HEAD
def healthz(request: HttpRequest) -> HttpResponse:
    """No login: load balancers and container healthchecks call it. It names no host, secret or
    student, only whether each piece answered, how fast, and how much work is waiting."""
    body, status = health.report()
    return JsonResponse(body, status=status)


@never_cache
@require_GET
def prometheus(request: HttpRequest) -> HttpResponse:
    if not metrics.may_scrape(request):
        return HttpResponse("Staff or the metrics token only.\n", status=403,
                            content_type="text/plain; charset=utf-8")
    return HttpResponse(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)


@never_cache
@login_required
@require_GET
def queue(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:  # instructors included: site operations are staff's
        raise Http404("no such page")
    return render(request, "practice/ops/queue.html", {"snap": ops.snapshot()})
