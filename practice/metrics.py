"""Prometheus metrics, computed from the database at scrape time.

gunicorn runs several processes and Celery several more, so counters kept in one process's
memory would each tell a fraction of the story (and vanish on restart). The Submission rows
already hold every fact, so a scrape asks the database instead: three aggregate queries, however
many submissions there are, plus the broker probe from practice/health.py.

The window is all time: every series is a count or a sum over the rows that exist, so the
histograms and `_total` series only grow and PromQL's rate()/increase() give any recent window
(a deleted user's rows make them drop, which Prometheus reads as a counter reset). Each query
scans the submissions table; at practice-site sizes that is milliseconds.

Exported (queue latency = queued_at → started_at, grading time = started_at → finished_at,
both only for parts graded by a worker; inline parts are graded inside the request):

    roofline_submissions{status,verdict,part_type}          rows now, by state (gauge)
    roofline_submissions_redelivered{part_type}             rows claimed by a worker more than once
    roofline_oldest_queued_seconds                          age of the oldest queued row (0: none)
    roofline_queue_latency_seconds{exercise,part_type}      histogram
    roofline_grading_seconds{exercise,part_type}            histogram
    roofline_sandbox_runs_total{part_type,verdict}          how sandboxed runs ended (OK/RE/TLE/...)
    roofline_broker_up, roofline_queue_depth{queue}         from the broker itself
"""
from __future__ import annotations

import hmac
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Min, Q, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from practice import health
from practice.models import Submission
from practice.routing import QUEUED_TYPES

QUEUE_BUCKETS_S = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
GRADING_BUCKETS_S = (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 90, 120)


def may_scrape(request: HttpRequest) -> bool:
    """Staff, or a scraper presenting ROOFLINE_METRICS_TOKEN as a bearer token."""
    token = settings.ROOFLINE_METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        # Constant time, so the token cannot be guessed a character at a time.
        return bool(token) and hmac.compare_digest(header[len("Bearer "):].encode(),
                                                   token.encode())
    user = request.user
    return bool(user.is_authenticated and user.is_staff)


def exposition() -> bytes:
    """The text format, from a registry made for this scrape (nothing is kept between them)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SubmissionCollector())
    return generate_latest(registry)


class SubmissionCollector:
    def collect(self) -> Iterator[Metric]:
        yield from _state_counts()
        yield from _timing_histograms()
        yield _sandbox_runs()
        yield from _broker_gauges()


def _state_counts() -> Iterator[Metric]:
    rows = Submission.objects.values("status", "verdict", "part_type").annotate(
        n=Count("pk"), redelivered=Count("pk", filter=Q(deliveries__gt=1)),
        oldest=Min("queued_at", filter=Q(status=Submission.Status.QUEUED))).order_by()
    counts = GaugeMetricFamily("roofline_submissions", "Submissions by state, verdict and part "
                               "type", labels=["status", "verdict", "part_type"])
    redelivered: dict[str, int] = defaultdict(int)
    oldest = None
    for row in rows:
        counts.add_metric([row["status"], row["verdict"], row["part_type"]], row["n"])
        redelivered[row["part_type"]] += row["redelivered"]
        if row["oldest"] is not None and (oldest is None or row["oldest"] < oldest):
            oldest = row["oldest"]
    yield counts
    again = GaugeMetricFamily("roofline_submissions_redelivered", "Submissions claimed by a "
                              "worker more than once (a lost worker or message)",
                              labels=["part_type"])
    for part_type, n in sorted(redelivered.items()):
        again.add_metric([part_type], n)
    yield again
    age = (timezone.now() - oldest).total_seconds() if oldest is not None else 0.0
    yield GaugeMetricFamily("roofline_oldest_queued_seconds", "Age of the oldest submission "
                            "still queued (0 when none is)", value=max(0.0, age))


def _bucket_counts(prefix: str, duration: str, buckets: tuple[float, ...],
                   done: Q) -> dict[str, Any]:
    """Count(filter=duration <= le) per bucket, the count and the sum: one histogram, in SQL."""
    out: dict[str, Any] = {f"{prefix}_n": Count("pk", filter=done),
                           f"{prefix}_sum": Sum(duration, filter=done)}
    for i, le in enumerate(buckets):
        out[f"{prefix}_{i}"] = Count("pk", filter=done & Q(**{
            f"{duration}__lte": timedelta(seconds=le)}))
    return out


def _histogram(name: str, doc: str, rows: list[dict[str, Any]], prefix: str,
               buckets: tuple[float, ...]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=["exercise", "part_type"])
    for row in rows:
        if not row[f"{prefix}_n"]:
            continue
        cumulative = [(str(float(le)), row[f"{prefix}_{i}"]) for i, le in enumerate(buckets)]
        total = row[f"{prefix}_sum"] or timedelta(0)
        family.add_metric([row["exercise__slug"], row["part_type"]],
                          [*cumulative, ("+Inf", row[f"{prefix}_n"])],
                          sum_value=total.total_seconds())
    return family


def _timing_histograms() -> Iterator[Metric]:
    # One query for both: queue latency needs a start, grading time a start and a finish
    # (a row re-queued by the sweeper keeps its last start; its latency counts to that claim).
    started = Q(started_at__isnull=False) & ~Q(status=Submission.Status.QUEUED)
    finished = Q(started_at__isnull=False, finished_at__isnull=False,
                 status__in=[Submission.Status.GRADED, Submission.Status.ERROR])
    rows = list(
        Submission.objects.filter(part_type__in=list(QUEUED_TYPES))
        .alias(waited=ExpressionWrapper(F("started_at") - F("queued_at"),
                                        output_field=DurationField()),
               ran=ExpressionWrapper(F("finished_at") - F("started_at"),
                                     output_field=DurationField()))
        .values("exercise__slug", "part_type")
        .annotate(**_bucket_counts("q", "waited", QUEUE_BUCKETS_S, started),
                  **_bucket_counts("g", "ran", GRADING_BUCKETS_S, finished))
        .order_by())
    yield _histogram("roofline_queue_latency_seconds", "From enqueue to a worker's claim",
                     rows, "q", QUEUE_BUCKETS_S)
    yield _histogram("roofline_grading_seconds", "From a worker's claim to the saved result",
                     rows, "g", GRADING_BUCKETS_S)


def _sandbox_runs() -> Metric:
    # What the run ended with: the relay's stop verdict when it stopped a case at a limit
    # (it enforces per-case limits inside the sandbox, so the sandbox itself exits OK), else
    # the sandbox's own verdict (graders/code.py, graders/kernel.py put both in result.extra).
    rows = (Submission.objects.filter(result__extra__has_key="sandbox")
            .annotate(ended=Coalesce(KT("result__extra__relay__stop__verdict"),
                                     KT("result__extra__sandbox__verdict")))
            .values("part_type", "ended").annotate(n=Count("pk")).order_by())
    family = CounterMetricFamily("roofline_sandbox_runs", "Sandboxed runs by how they ended "
                                 "(OK, RE, TLE, MLE, OLE)", labels=["part_type", "verdict"])
    for row in rows:
        family.add_metric([row["part_type"], row["ended"] or "unknown"], row["n"])
    return family


def _broker_gauges() -> Iterator[Metric]:
    state = health.probe_broker()
    yield GaugeMetricFamily("roofline_broker_up", "1 when the broker answered this scrape",
                            value=1.0 if state.probe.ok else 0.0)
    depth = GaugeMetricFamily("roofline_queue_depth", "Messages waiting in the broker",
                              labels=["queue"])
    for queue, n in state.depths.items():
        if n is not None:
            depth.add_metric([queue], n)
    yield depth
