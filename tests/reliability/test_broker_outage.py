"""The broker goes away while students submit: the site still accepts every answer (the row is
saved `queued`, the page says so, enqueue logs and returns False), and once the broker is back
the sweeper re-sends the rows and a worker grades every one.

Redis: our own redis-server is terminated for ROOFLINE_TEST_OUTAGE_S seconds (60, as the issue
asks) and started again on the same port, empty (no persistence): whatever was in it is gone
too, and the worker has to reconnect through its back-off.

Embedded broker, two failure modes:
* blocked: a file stands where the queue folder was, for ROOFLINE_TEST_FOLDER_OUTAGE_S seconds
  (20), then the folder is back. There is no connection and no back-off here (a worker polls the
  folder ten times a second, a publish fails at once), so a longer outage only repeats the same
  failures; 20 s is longer than the queued grace plus a sweep period, the lengths that decide
  the recovery.
* removed: the whole broker folder (queue, bindings) is deleted while it holds messages. The
  transport (practice/broker.py) makes it again at the next poll or publish; the messages that
  were in it are lost, and the sweeper re-sends their rows.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from practice.actions import publish
from practice.models import Exercise, PartState, Submission, User
from tests.reliability.conftest import (
    CODE_SLUG,
    WORKER_START_BUDGET_S,
    Recovery,
    Site,
    SiteFactory,
    all_finished,
    code_reference,
    status_counts,
    wait_until,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services,
              pytest.mark.reliability, pytest.mark.timed]

OUTAGE_S = float(os.environ.get("ROOFLINE_TEST_OUTAGE_S", "60"))
FOLDER_OUTAGE_S = float(os.environ.get("ROOFLINE_TEST_FOLDER_OUTAGE_S", "20"))
STUDENTS = 4
# kombu's reconnect back-off (Connection.ensure_connection: 2 s, +2 s a try, at most 30 s): a
# worker may notice a returned Redis up to this long after it is back.
RECONNECT_MAX_S = 30.0
PER_GRADE_BUDGET_S = 2.0  # as in test_worker_crash: ~4x a code grade here, for a busy CI box

RECOVERY = Recovery(
    sweep_period_s=3.0,  # the sweeper every 3 s, so the recovery shows up in seconds
    # A row queued this long has lost its message (here: it never had one): 10 s, because
    # during an outage no message exists and waiting the production 60 s would prove nothing
    # more; still far above the ~0.6 s a healthy row waits for a worker here.
    queued_grace_s=10,
    running_grace_s=20,  # no worker dies here; as in the crash test
)


def submit_through_the_page(client: Client, user: User, part_id: str, answer: str,
                            broker_down: bool = True) -> Submission:
    """What a student's browser does: an htmx POST of the part's form. With the broker down the
    returned part must show the row as queued (with it up, a worker may already have it)."""
    url = reverse("submit_part", args=[CODE_SLUG, part_id])
    response = client.post(url, {"answer": answer}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200, response.content[:2000]
    body = response.content.decode()
    assert 'class="error"' not in body, body[:3000]
    if broker_down:
        assert 'class="badge queued"' in body, body[:3000]
    sub = Submission.objects.filter(user=user, part_id=part_id).order_by("-pk").first()
    assert sub is not None
    return sub


def students(label: str) -> list[tuple[User, Client]]:
    """Logged-in browsers (Django's test client), one per student."""
    out = []
    for i in range(STUDENTS):
        user = User.objects.create_user(f"{label}{i}", password="pw-outage-12345")
        client = Client()
        client.force_login(user)
        out.append((user, client))
    return out


def healthy_first(site: Site, clients: list[tuple[User, Client]], part_id: str,
                  source: str) -> Submission:
    """The same path grades in about a second while the broker is there."""
    user, client = clients[0]
    before = submit_through_the_page(client, user, part_id, source, broker_down=False)
    wait_until(lambda: Submission.objects.get(pk=before.pk).finished, 60, "grading before",
               site.logs)
    return before


def assert_graded_once(exercise: Exercise, part_id: str, pks: list[int],
                       clients: list[tuple[User, Client]]) -> None:
    """Every row graded (the reference: full marks), and saved once: each student's attempts
    equal their submissions (a second save would add one)."""
    subs = list(Submission.objects.filter(pk__in=pks))
    assert all(s.status == Submission.Status.GRADED and s.score == 1.0 for s in subs), \
        status_counts(pks)
    per_student = Counter(Submission.objects.filter(
        exercise=exercise, part_id=part_id, user__in=[u for u, _ in clients])
        .values_list("user_id", flat=True))
    attempts = dict(PartState.objects.filter(exercise=exercise, part_id=part_id)
                    .values_list("user_id", "attempts"))
    assert attempts == dict(per_student)


def run_outage(site: Site, break_broker: Callable[[], None], restore: Callable[[], None],
               outage_s: float, reconnect_s: float, caplog: pytest.LogCaptureFixture,
               label: str) -> None:
    """Break the broker, have every student submit at the outage's start, middle and near its
    end, restore it, and wait for every row to be graded. `reconnect_s`: how long after the
    broker's return a worker may take to notice it."""
    site.start_beat()
    worker = site.start_worker()
    exercise = Exercise.objects.get(slug=CODE_SLUG)
    part_id, source = code_reference()
    clients = students(label)
    healthy_first(site, clients, part_id, source)

    break_broker()
    t_down = time.monotonic()
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="practice.actions")
    during: list[int] = []
    for moment in (0.0, 0.5, 0.9):
        wait_until(lambda m=moment: time.monotonic() - t_down >= m * outage_s, outage_s + 5,
                   "the outage's clock")
        for user, client in clients:
            sub = submit_through_the_page(client, user, part_id, source)
            assert sub.status == Submission.Status.QUEUED
            during.append(sub.pk)
    failed_enqueues = [r for r in caplog.records if "could not enqueue" in r.getMessage()]
    page = clients[0][1].get(reverse("exercise", args=[CODE_SLUG]))
    assert page.status_code == 200 and 'class="badge queued"' in page.content.decode()
    wait_until(lambda: time.monotonic() - t_down >= outage_s, outage_s + 5, "the outage's end")
    assert worker.alive(), f"the worker gave up during the outage:\n{site.logs()}"
    assert status_counts(during) == {"queued": len(during)}

    restore()
    t_up = time.monotonic()
    # From the broker's return: the worker notices it, a sweep (up to a period later) re-sends
    # the rows queued longer than the grace (the last ones were queued 0.1 x outage before the
    # return), then the grades themselves.
    bound_s = (reconnect_s + max(0.0, RECOVERY.queued_grace_s - 0.1 * outage_s)
               + RECOVERY.sweep_period_s + len(during) * PER_GRADE_BUDGET_S)
    wait_until(lambda: all_finished(during), bound_s + WORKER_START_BUDGET_S,
               "everything graded after the outage",
               lambda: f"{status_counts(during)}\n{site.logs()}", step=0.5)
    recovery_s = time.monotonic() - t_up
    subs = list(Submission.objects.filter(pk__in=during))
    print(f"\n{label} outage: down {outage_s:.0f} s, {len(during)} submissions accepted while "
          f"down ({len(failed_enqueues)} enqueue failures logged), all graded {recovery_s:.1f} s "
          f"after the broker came back (bound {bound_s:.0f} s = reconnect {reconnect_s:.0f} + "
          f"queued grace left + sweep period {RECOVERY.sweep_period_s:.0f} + "
          f"{len(during)} x {PER_GRADE_BUDGET_S} s)")

    assert len(failed_enqueues) == len(during)
    assert_graded_once(exercise, part_id, during, clients)
    # Never delivered before the outage ended, so exactly one delivery each.
    assert all(s.deliveries == 1 for s in subs), [s.deliveries for s in subs]
    assert recovery_s <= bound_s


def count_enqueues(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What publish.enqueue returned, call by call, in this (the web) process."""
    calls: list[bool] = []
    real = publish.enqueue

    def counting(pk: int, queue: str = "grade") -> bool:
        calls.append(ok := real(pk, queue))
        return ok

    monkeypatch.setattr(publish, "enqueue", counting)
    return calls


def test_redis_outage_loses_no_submission(redis_site: SiteFactory,
                                          caplog: pytest.LogCaptureFixture,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    site = redis_site(RECOVERY)
    assert site.redis is not None
    calls = count_enqueues(monkeypatch)
    run_outage(site, site.redis.stop, site.redis.start, OUTAGE_S, RECONNECT_MAX_S, caplog,
               "redis")
    # One healthy enqueue before the outage, then False for every submission during it.
    assert calls == [True] + [False] * 3 * STUDENTS


def remove_while_in_use(folder: Path) -> None:
    """Take the folder away at once, with everything in it. A plain rmtree races the worker
    and the web process, which make missing folders again within 0.1 s (practice/broker.py),
    and then fails on a folder that is no longer empty; a rename is one step."""
    gone = folder.with_name(f"{folder.name}.gone-{time.monotonic_ns()}")
    os.rename(folder, gone)
    shutil.rmtree(gone)


def test_embedded_broker_blocked_folder_loses_no_submission(
        embedded_site: SiteFactory, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    site = embedded_site(RECOVERY)
    queue = site.var_dir / "broker" / "queue"

    def block() -> None:
        # Root ignores permission bits, so "unwritable" is a file in the folder's place.
        blocker = queue.with_name("queue.blocker")
        blocker.write_text("not a folder")
        for _ in range(100):
            remove_while_in_use(queue)
            try:  # the worker may have made the folder again in between: then once more
                os.rename(blocker, queue)
                return
            except IsADirectoryError:
                continue
        raise AssertionError("the worker kept making the queue folder again")

    def unblock() -> None:
        queue.unlink()
        queue.mkdir(exist_ok=True)  # the worker may have been quicker

    calls = count_enqueues(monkeypatch)
    # A worker that hit the blocked folder restarts its consumer (a lost connection) about
    # once a second; it finds the folder again within a couple of seconds.
    run_outage(site, block, unblock, FOLDER_OUTAGE_S, 5.0, caplog, "embedded (blocked)")
    assert calls == [True] + [False] * 3 * STUDENTS


def test_embedded_broker_removed_folder_loses_no_submission(
        embedded_site: SiteFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    site = embedded_site(RECOVERY)
    broker = site.var_dir / "broker"
    site.start_beat()
    worker = site.start_worker()
    exercise = Exercise.objects.get(slug=CODE_SLUG)
    part_id, source = code_reference()
    clients = students("removed")
    calls = count_enqueues(monkeypatch)
    healthy_first(site, clients, part_id, source)

    # Two answers each reach the queue folder (one worker takes them ~0.5 s apart), then the
    # whole broker folder goes, with the messages still in it.
    burst = [submit_through_the_page(c, u, part_id, source, broker_down=False).pk
             for _ in range(2) for u, c in clients]
    remove_while_in_use(broker)
    t_removed = time.monotonic()
    # Answers right after: the publish makes the folders (and the queue's binding) again.
    after = [submit_through_the_page(c, u, part_id, source, broker_down=False).pk
             for u, c in clients]
    pks = burst + after
    bound_s = (RECOVERY.queued_grace_s + RECOVERY.sweep_period_s
               + len(pks) * PER_GRADE_BUDGET_S)
    wait_until(lambda: all_finished(pks), bound_s + WORKER_START_BUDGET_S,
               "everything graded after the folder was lost",
               lambda: f"{status_counts(pks)}\n{site.logs()}", step=0.5)
    recovery_s = time.monotonic() - t_removed
    subs = list(Submission.objects.filter(pk__in=pks))
    # A lost message's row waited for the sweeper: queued longer than the grace.
    resent = [s for s in subs if s.queue_s is not None
              and s.queue_s >= RECOVERY.queued_grace_s]
    print(f"\nembedded (removed): broker folder deleted with {len(burst)} answers sent, "
          f"{len(after)} more right after; {len(resent)} lost messages re-sent by the sweeper; "
          f"all graded {recovery_s:.1f} s after the deletion (bound {bound_s:.0f} s = queued "
          f"grace {RECOVERY.queued_grace_s} + sweep period {RECOVERY.sweep_period_s:.0f} + "
          f"{len(pks)} x {PER_GRADE_BUDGET_S} s)")

    assert worker.alive(), site.logs()
    assert all(calls), calls  # nothing failed to publish: the folder came back at once
    assert resent, "no message was lost: the test did not exercise the sweeper"
    assert_graded_once(exercise, part_id, pks, clients)
    assert recovery_s <= bound_s
