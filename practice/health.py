"""Is the site able to grade? Probes of the database, the broker and its queues, for /healthz/,
/metrics and the staff queue page.

Cheap and bounded, because a load balancer calls it every few seconds: one `SELECT 1`, one
aggregate on the (status, queued_at) index, and one round trip to the broker with short socket
timeouts and no retries, so a broker that is down answers "down" in about a second or two
instead of hanging the check. Nothing returned names a host, a password or a student: a failure
is reported by its exception class only (a broker URL may carry a password).

Queue depth is read the way kombu stores messages, without going through kombu's connection
(which retries on its own schedule): on Redis a queue is a list per priority step
(`grade`, `grade\\x06\\x163`, ...) summed with LLEN; on the embedded broker a message is a file
`<time>_<uuid>.<queue>.msg` in the data folder (practice/broker.py), counted by name.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import datetime
from time import perf_counter
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Min
from django.utils import timezone

from practice.models import Submission

QUEUES = ("grade", "gpu")
# Per socket operation; a probe makes at most two (connect, then one pipelined round trip).
BROKER_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Probe:
    ok: bool
    ms: float
    error: str = ""  # the exception's class name, never its message (it may quote a URL)


@dataclass(frozen=True)
class BrokerState:
    probe: Probe
    depths: dict[str, int | None] = field(default_factory=dict)  # None: unknown (down)


def _elapsed_ms(start: float) -> float:
    return round((perf_counter() - start) * 1000, 1)


def probe_database() -> Probe:
    start = perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure to answer is "down", whatever the driver raises
        return Probe(False, _elapsed_ms(start), type(exc).__name__)
    return Probe(True, _elapsed_ms(start))


def oldest_queued_s(now: datetime | None = None) -> float | None:
    """Age of the oldest submission still waiting for a worker (None: nothing waits)."""
    oldest = Submission.objects.filter(status=Submission.Status.QUEUED).aggregate(
        oldest=Min("queued_at"))["oldest"]
    if oldest is None:
        return None
    return round(max(0.0, ((now or timezone.now()) - oldest).total_seconds()), 1)


def probe_broker(url: str | None = None, options: dict[str, Any] | None = None,
                 queues: tuple[str, ...] = QUEUES) -> BrokerState:
    """Reach the broker and read each queue's depth. Defaults to the Celery app's broker, so
    it follows whatever the workers use (tests repoint the app at a temporary broker)."""
    if url is None:
        from practice.celery import app

        url = str(app.conf.broker_url)
        options = dict(app.conf.broker_transport_options or {})
    options = options or {}
    start = perf_counter()
    try:
        if url.startswith(("redis://", "rediss://")):
            depths: dict[str, int | None] = dict(_redis_depths(url, options, queues))
        elif url.startswith("filesystem://"):
            depths = dict(_filesystem_depths(options, queues))
        else:  # another transport: no cheap depth reading, so say unknown rather than guess
            return BrokerState(Probe(False, _elapsed_ms(start), "UnsupportedBroker"),
                               dict.fromkeys(queues))
    except Exception as exc:  # refused, timed out, bad folder: the broker is down for us
        return BrokerState(Probe(False, _elapsed_ms(start), type(exc).__name__),
                           dict.fromkeys(queues))
    return BrokerState(Probe(True, _elapsed_ms(start)), depths)


def _redis_depths(url: str, options: dict[str, Any],
                  queues: tuple[str, ...]) -> dict[str, int]:
    import redis
    from kombu.transport.redis import PRIORITY_STEPS, Channel
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # redis-py retries a failed connection by default: three tries would triple the bound.
    client = redis.Redis.from_url(url, socket_connect_timeout=BROKER_TIMEOUT_S,
                                  socket_timeout=BROKER_TIMEOUT_S, retry=Retry(NoBackoff(), 0))
    prefix = options.get("global_keyprefix", "")
    steps = options.get("priority_steps", PRIORITY_STEPS)
    try:
        with client.pipeline(transaction=False) as pipe:
            for queue in queues:
                for step in steps:
                    name = f"{queue}{Channel.sep}{step}" if step else queue
                    pipe.llen(prefix + name)
            sizes = pipe.execute()
    finally:
        client.close()
    per_queue = len(steps)
    return {queue: int(sum(sizes[i * per_queue:(i + 1) * per_queue]))
            for i, queue in enumerate(queues)}


def _filesystem_depths(options: dict[str, Any], queues: tuple[str, ...]) -> dict[str, int]:
    folder = options.get("data_folder_in") or str(settings.BROKER_DIR / "queue")
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        # Not made yet, or lost: practice/broker.py makes it again at the next publish or poll,
        # and no message can be waiting in a folder that is not there.
        names = []
    depths = dict.fromkeys(queues, 0)
    for name in names:
        # kombu's own test (`_size`): what follows the first dot is `<queue>.msg`; a `.part`
        # file (practice/broker.py, still being written) does not count.
        queue = name.partition(".")[2].removesuffix(".msg")
        if queue in depths and name.endswith(".msg"):
            depths[queue] += 1
    return depths


def report() -> tuple[dict[str, Any], int]:
    """The /healthz/ document and its HTTP status: 200 when the database and the broker both
    answer ("degraded" when a submission has waited longer than the sweeper's grace, i.e. no
    worker is taking the queue), 503 ("down") when either does not."""
    database = probe_database()
    broker = probe_broker()
    oldest = None
    if database.ok:
        try:
            oldest = oldest_queued_s()
        except Exception as exc:  # answers SELECT 1 but not our table (mid-migration, say)
            database = Probe(False, database.ms, type(exc).__name__)
    if not (database.ok and broker.probe.ok):
        status = "down"
    elif oldest is not None and oldest > settings.ROOFLINE_QUEUED_GRACE_S:
        status = "degraded"
    else:
        status = "ok"
    body = {"status": status, "database": asdict(database), "broker": asdict(broker.probe),
            "queues": broker.depths, "oldest_queued_s": oldest}
    return body, 503 if status == "down" else 200
