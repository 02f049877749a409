"""Operations: /healthz/ against real brokers, /metrics (access and numbers, bounded queries),
the staff queue page, JSON logs and the prod settings' wiring of them."""
from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client, RequestFactory, override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from practice.actions.publish import enqueue
from practice.celery import app
from practice.logging_json import JsonFormatter
from practice.models import Exercise, Submission, User
from tests.conftest import reset_producers

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "metrics-" + "x" * 24
SECRET_ANSWER = "def solve(): return 'DO-NOT-SHOW-ME'"


@pytest.fixture
def staff() -> User:
    return User.objects.create_user("ops", password="pw-ops-12345", is_staff=True)


@pytest.fixture
def student() -> User:
    return User.objects.create_user("stu", password="pw-stu-12345")


def client_as(user: User | None) -> Client:
    c = Client()
    if user is not None:
        c.force_login(user)
    return c


def make_sub(user: User, slug: str, part_type: str = "code", status: str = "queued",
             verdict: str = "", waited_s: float | None = None, ran_s: float | None = None,
             age_s: float = 600, deliveries: int = 0, result: dict[str, Any] | None = None,
             answer: str = "x") -> Submission:
    """A row with chosen timings (queued_at is auto_now_add, so it is set by an update)."""
    sub = Submission.objects.create(
        user=user, exercise=Exercise.objects.get(slug=slug), part_id="p", part_type=part_type,
        variant="1", answer=answer, status=status, verdict=verdict, deliveries=deliveries,
        result=result or {})
    queued = timezone.now() - timedelta(seconds=age_s)
    started = queued + timedelta(seconds=waited_s) if waited_s is not None else None
    finished = started + timedelta(seconds=ran_s) if started and ran_s is not None else None
    Submission.objects.filter(pk=sub.pk).update(queued_at=queued, started_at=started,
                                                finished_at=finished)
    return sub


@pytest.fixture
def broker_at(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Point the Celery app at any broker URL for one test (the health probe follows it)."""
    saved = {k: app.conf[k] for k in ("broker_url", "broker_transport_options")}

    def point(url: str) -> None:
        app.conf.update(broker_url=url, broker_transport_options={})
        reset_producers(app)

    yield point
    app.conf.update(saved)
    reset_producers(app)


# --- /healthz/ -------------------------------------------------------------------------------

@pytest.mark.parametrize("celery_broker", ["redis", "embedded"], indirect=True)
def test_health_is_ok_and_counts_the_messages_waiting(celery_broker: Any, student: User) -> None:
    subs = [make_sub(student, "stop_strings_stream", age_s=1) for _ in range(4)]
    for sub in subs[:3]:
        assert enqueue(sub.pk, "grade")
    assert enqueue(subs[3].pk, "gpu")
    r = Client().get("/healthz/")
    body = r.json()
    assert r.status_code == 200, body
    assert body["status"] == "ok"
    assert body["database"]["ok"] and body["broker"]["ok"]
    assert body["database"]["ms"] >= 0 and body["broker"]["ms"] >= 0
    assert body["queues"] == {"grade": 3, "gpu": 1}
    text = r.content.decode()
    assert "redis://" not in text and str(celery_broker[1]) not in text
    assert "no-store" in r.headers["Cache-Control"] or "max-age=0" in r.headers["Cache-Control"]
    assert Client().head("/healthz/").status_code == 200


def test_health_is_down_when_the_broker_refuses(broker_at: Any) -> None:
    broker_at("redis://:hunter2@127.0.0.1:1/0")  # nothing listens on port 1
    r = Client().get("/healthz/")
    body = r.json()
    assert r.status_code == 503 and body["status"] == "down"
    assert body["database"]["ok"] and not body["broker"]["ok"]
    assert body["queues"] == {"grade": None, "gpu": None}
    assert "hunter2" not in r.content.decode() and "127.0.0.1" not in r.content.decode()


def test_a_broker_that_never_answers_does_not_hang_the_check(broker_at: Any) -> None:
    # A socket that accepts connections (the kernel's backlog) but never replies: without the
    # probe's timeouts the PING would wait for ever; the alarm turns a hang into a failure.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        broker_at(f"redis://127.0.0.1:{silent.getsockname()[1]}/0")

        def hung(*_: object) -> None:
            raise AssertionError("/healthz/ hung on a silent broker")

        old = signal.signal(signal.SIGALRM, hung)
        signal.alarm(30)
        try:
            start = time.monotonic()
            r = Client().get("/healthz/")
            elapsed = time.monotonic() - start
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
    assert r.status_code == 503 and not r.json()["broker"]["ok"]
    assert elapsed < 10, elapsed


@pytest.mark.parametrize("celery_broker", ["embedded"], indirect=True)
def test_oldest_queued_is_the_age_of_the_oldest_queued_row(celery_broker: Any,
                                                           student: User) -> None:
    make_sub(student, "stop_strings_stream", age_s=30)
    make_sub(student, "stop_strings_stream", age_s=125)
    # Older, but finished or being graded: not waiting.
    make_sub(student, "stop_strings_stream", status="graded", age_s=900, waited_s=1, ran_s=1)
    make_sub(student, "stop_strings_stream", status="running", age_s=800, waited_s=1)
    with CaptureQueriesContext(connection) as ctx:
        body = Client().get("/healthz/").json()
    assert len(ctx.captured_queries) == 2  # SELECT 1, and the oldest queued row (indexed)
    assert 125 <= body["oldest_queued_s"] < 140
    # Waiting longer than the sweeper's grace: nobody takes the queue.
    assert body["status"] == "degraded"
    Submission.objects.filter(status="queued").delete()
    body = Client().get("/healthz/").json()
    assert body["oldest_queued_s"] is None and body["status"] == "ok"


def test_embedded_queue_depth_counts_only_finished_message_files(tmp_path: Path) -> None:
    from practice import health

    for name in ("1_a.grade.msg", "2_b.grade.msg", "3_c.gpu.msg",
                 "4_d.grade.msg.part",  # still being written (practice/broker.py)
                 "5_e.other.msg"):
        (tmp_path / name).write_text("{}")
    state = health.probe_broker("filesystem://", {"data_folder_in": str(tmp_path)})
    assert state.probe.ok and state.depths == {"grade": 2, "gpu": 1}
    gone = health.probe_broker("filesystem://", {"data_folder_in": str(tmp_path / "lost")})
    assert gone.probe.ok and gone.depths == {"grade": 0, "gpu": 0}


# --- /metrics --------------------------------------------------------------------------------

@pytest.mark.parametrize("celery_broker", ["embedded"], indirect=True)
def test_metrics_are_for_staff_and_the_token_holder(celery_broker: Any, staff: User,
                                                    student: User) -> None:
    instructor = User.objects.create_user("teacher", password="pw-t-123456", is_instructor=True)
    assert Client().get("/metrics").status_code == 403
    assert client_as(student).get("/metrics").status_code == 403
    assert client_as(instructor).get("/metrics").status_code == 403
    r = client_as(staff).get("/metrics")
    assert r.status_code == 200 and r["Content-Type"].startswith("text/plain")
    # Without a configured token no bearer is accepted, not even an empty one.
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403
    with override_settings(ROOFLINE_METRICS_TOKEN=TOKEN):
        assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
        assert Client().get("/metrics",
                            HTTP_AUTHORIZATION=f"Bearer {TOKEN[:-1]}y").status_code == 403
        assert Client().get("/metrics", HTTP_AUTHORIZATION=TOKEN).status_code == 403


def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with override_settings(ROOFLINE_METRICS_TOKEN=TOKEN):
        r = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert r.status_code == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.content.decode())
            for s in family.samples}


def sample(got: dict[Any, float], name: str, **labels: str) -> float | None:
    return got.get((name, tuple(sorted(labels.items()))))


def sandboxed(verdict: str, stop: str | None = None) -> dict[str, Any]:
    extra: dict[str, Any] = {"sandbox": {"verdict": verdict, "wall_s": 0.1}}
    if stop:
        extra["relay"] = {"stop": {"verdict": stop}}
    return {"score": 0.0, "verdict": "incorrect", "extra": extra}


@pytest.mark.parametrize("celery_broker", ["embedded"], indirect=True)
def test_metrics_match_the_rows(celery_broker: Any, student: User) -> None:
    code, other = "stop_strings_stream", "kv_transfer_disagg"
    make_sub(student, code, status="graded", verdict="correct", waited_s=0.3, ran_s=4,
             result=sandboxed("OK"))
    make_sub(student, code, status="graded", verdict="correct", waited_s=3, ran_s=15,
             result=sandboxed("OK"))
    make_sub(student, code, status="graded", verdict="incorrect", waited_s=40, ran_s=1.5,
             deliveries=2, result=sandboxed("OK", stop="TLE"))
    make_sub(student, code, status="graded", verdict="incorrect", waited_s=1, ran_s=2,
             result=sandboxed("MLE"))
    make_sub(student, code, status="queued", age_s=50, deliveries=3)
    make_sub(student, code, status="running", waited_s=2)
    # Graded inline in the request: counted by state, but no queue latency or grading time.
    make_sub(student, other, part_type="number", status="graded", verdict="correct",
             waited_s=0, ran_s=0)
    assert Submission.objects.count() == 7
    got = scrape()

    assert sample(got, "roofline_submissions", status="graded", verdict="correct",
                  part_type="code") == 2
    assert sample(got, "roofline_submissions", status="graded", verdict="incorrect",
                  part_type="code") == 2
    assert sample(got, "roofline_submissions", status="queued", verdict="",
                  part_type="code") == 1
    assert sample(got, "roofline_submissions", status="graded", verdict="correct",
                  part_type="number") == 1
    assert sample(got, "roofline_submissions_redelivered", part_type="code") == 2
    assert 50 <= sample(got, "roofline_oldest_queued_seconds") < 70  # type: ignore[operator]

    ex = {"exercise": code, "part_type": "code"}
    # Started: the four graded rows and the running one (0.3, 3, 40, 1, 2 s).
    assert sample(got, "roofline_queue_latency_seconds_count", **ex) == 5
    assert sample(got, "roofline_queue_latency_seconds_sum", **ex) == pytest.approx(46.3)
    assert sample(got, "roofline_queue_latency_seconds_bucket", **ex, le="0.5") == 1
    assert sample(got, "roofline_queue_latency_seconds_bucket", **ex, le="2.5") == 3
    assert sample(got, "roofline_queue_latency_seconds_bucket", **ex, le="30.0") == 4
    assert sample(got, "roofline_queue_latency_seconds_bucket", **ex, le="+Inf") == 5
    # Finished: the four graded rows (4, 15, 1.5, 2 s).
    assert sample(got, "roofline_grading_seconds_count", **ex) == 4
    assert sample(got, "roofline_grading_seconds_sum", **ex) == pytest.approx(22.5)
    assert sample(got, "roofline_grading_seconds_bucket", **ex, le="2.0") == 2
    assert sample(got, "roofline_grading_seconds_bucket", **ex, le="5.0") == 3
    assert sample(got, "roofline_grading_seconds_bucket", **ex, le="20.0") == 4
    assert sample(got, "roofline_queue_latency_seconds_count", exercise=other,
                  part_type="number") is None

    assert sample(got, "roofline_sandbox_runs_total", part_type="code", verdict="OK") == 2
    assert sample(got, "roofline_sandbox_runs_total", part_type="code", verdict="TLE") == 1
    assert sample(got, "roofline_sandbox_runs_total", part_type="code", verdict="MLE") == 1

    assert sample(got, "roofline_broker_up") == 1
    assert sample(got, "roofline_queue_depth", queue="grade") == 0


@pytest.mark.parametrize("celery_broker", ["embedded"], indirect=True)
def test_a_scrape_costs_the_same_queries_however_many_submissions(celery_broker: Any,
                                                                  student: User) -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            scrape()
        return len(ctx.captured_queries)

    make_sub(student, "stop_strings_stream", status="graded", verdict="correct", waited_s=1,
             ran_s=1, result=sandboxed("OK"))
    few = queries()
    for slug in ("stop_strings_stream", "kv_transfer_disagg", "utilisation_rule"):
        for i in range(15):
            make_sub(student, slug, status=("graded", "queued", "error")[i % 3],
                     verdict="correct", waited_s=i, ran_s=i, result=sandboxed("RE"))
    many = queries()
    assert few == many <= 3, (few, many)


# --- the staff queue page --------------------------------------------------------------------

@pytest.mark.parametrize("celery_broker", ["embedded"], indirect=True)
def test_queue_page_is_staff_only_and_shows_no_answers(celery_broker: Any, staff: User,
                                                       student: User) -> None:
    sub = make_sub(student, "stop_strings_stream", age_s=42, answer=SECRET_ANSWER)
    done = make_sub(student, "stop_strings_stream", status="graded", waited_s=1, ran_s=1)
    instructor = User.objects.create_user("teacher", password="pw-t-123456", is_instructor=True)
    r = Client().get("/ops/queue/")
    assert r.status_code == 302 and "/login/" in r["Location"]
    assert client_as(student).get("/ops/queue/").status_code == 404
    assert client_as(instructor).get("/ops/queue/").status_code == 404
    assert 'href="/ops/queue/"' not in client_as(instructor).get("/").content.decode()

    r = client_as(staff).get("/ops/queue/")
    body = r.content.decode()
    assert r.status_code == 200
    assert f'id="sub-{sub.pk}"' in body and f'id="sub-{done.pk}"' not in body
    assert "DO-NOT-SHOW-ME" not in body and "def solve" not in body
    assert "No reply to a ping" in body  # no worker runs in this test
    assert 'style="' not in body and "<script>" not in body  # the CSP allows neither
    assert 'href="/ops/queue/"' in body  # the staff nav links it


# --- logs ------------------------------------------------------------------------------------

def test_a_log_record_is_one_json_object_with_the_exception() -> None:
    logger = logging.getLogger("roofline.test")
    try:
        1 / 0  # noqa: B018
    except ZeroDivisionError:
        record = logger.makeRecord("roofline.test", logging.ERROR, __file__, 1,
                                   "grading %s failed", (7,), sys.exc_info())
    record.request = RequestFactory().get("/ex/kv/?answer=secret")
    record.status_code = 500
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "ERROR" and entry["logger"] == "roofline.test"
    assert entry["message"] == "grading 7 failed"
    assert "ZeroDivisionError" in entry["exception"] and "Traceback" in entry["exception"]
    assert entry["path"] == "/ex/kv/" and entry["method"] == "GET" and entry["status"] == 500
    assert "secret" not in line
    assert entry["time"].endswith("+00:00")


def test_prod_logs_json_to_stdout_and_survives_a_dsn_without_sentry(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "ROOFLINE_"))}
    env |= {"DJANGO_SETTINGS_MODULE": "practice.settings.prod",
            "SECRET_KEY": secrets.token_urlsafe(50), "ROOFLINE_VAR_DIR": str(tmp_path),
            "PYTHONPATH": str(ROOT), "LOG_LEVEL": "info",
            "SENTRY_DSN": "https://public@sentry.example.invalid/1"}
    code = ("import django, json, logging; django.setup(); from django.conf import settings; "
            "logging.getLogger('roofline.check').info('hello %s', 'there'); "
            "logging.getLogger('roofline.check').debug('not at info'); "
            "print(json.dumps({'exempt': settings.SECURE_REDIRECT_EXEMPT}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    *logs, last = out.stdout.strip().splitlines()
    entries = [json.loads(line) for line in logs]  # every line is JSON
    assert {"logger": "roofline.check", "message": "hello there", "level": "INFO"}.items() \
        <= entries[-1].items()
    assert not any(e["message"] == "not at info" for e in entries)
    try:
        import sentry_sdk  # noqa: F401
    except ImportError:
        assert any("sentry_sdk is not installed" in e["message"] and e["level"] == "WARNING"
                   for e in entries), entries

    # The probes' paths are exempt from the HTTPS redirect (plain HTTP inside the network).
    exempt = json.loads(last)["exempt"]
    with override_settings(SECURE_SSL_REDIRECT=True, SECURE_REDIRECT_EXEMPT=exempt):
        assert Client().get("/login/").status_code == 301
        assert Client().get("/metrics").status_code == 403
        assert Client().get("/healthz/").status_code in (200, 503)
