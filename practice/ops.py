"""What the staff queue page shows: the broker's queues, submissions by state, the ones in flight,
and which workers answer. Read only; no answer text ever leaves here (only ids and timings).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count
from django.utils import timezone

from practice import health
from practice.models import Submission

IN_FLIGHT_SHOWN = 50
PING_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class QueueSnapshot:
    broker: health.BrokerState
    oldest_queued_s: float | None
    by_status: dict[str, int]
    in_flight: list[dict[str, Any]]  # id, exercise, part, user id, status, deliveries, age_s
    workers: list[str] | None  # None: the broker is down, so nobody was asked


def in_flight(limit: int = IN_FLIGHT_SHOWN) -> list[dict[str, Any]]:
    now = timezone.now()
    rows = (Submission.objects
            .filter(status__in=[Submission.Status.QUEUED, Submission.Status.RUNNING])
            .order_by("-queued_at", "-pk")
            .values("pk", "exercise__slug", "part_id", "part_type", "user_id", "status",
                    "deliveries", "queued_at")[:limit])
    return [{**row, "age_s": round((now - row["queued_at"]).total_seconds(), 1)} for row in rows]


def workers_seen() -> list[str]:
    """Names of the workers that answer a ping within a second (an empty list: none did)."""
    from practice.celery import app

    try:
        replies = app.control.inspect(timeout=PING_TIMEOUT_S).ping() or {}
    except Exception:  # the broker went away between the probe and the ping: nobody answered
        return []
    return sorted(replies)


def snapshot(ping: bool = True) -> QueueSnapshot:
    broker = health.probe_broker()
    by_status = dict.fromkeys(Submission.Status.values, 0)
    for row in Submission.objects.values("status").annotate(n=Count("pk")).order_by():
        by_status[row["status"]] = row["n"]
    # Ping only a broker that just answered: the control channel has no timeout of its own
    # for connecting, and the page must not hang on a broker that is down.
    workers = workers_seen() if ping and broker.probe.ok else None
    return QueueSnapshot(broker, health.oldest_queued_s(), by_status, in_flight(), workers)
