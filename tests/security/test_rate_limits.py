"""Per-student caps on submissions (in flight, per minute) and log-in throttling.

The test settings lift the submission caps (suites submit hundreds of answers as one student);
every test here sets the real ones back with override_settings.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone

from exercises import registry
from practice import ratelimit
from practice.actions import NotAllowed, publish
from practice.actions.exercises import assignment_for
from practice.actions.submissions import submit_answer
from practice.models import Exercise, PartState, Submission, User
from practice.settings import base

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
REAL_CAPS = override_settings(ROOFLINE_MAX_IN_FLIGHT=5, ROOFLINE_SUBMIT_RATE=30,
                              ROOFLINE_SUBMIT_WINDOW_S=60)
CODE_SLUG, CODE_PART = "kv_page_ledger", "ledger"
NUMBER_SLUG = "kv_transfer_disagg"


@pytest.fixture
def student(db: Any) -> User:
    return User.objects.create_user("ada", password="pw-ada-12345")


def _queued(user: User, n: int, status: str = "queued") -> list[Submission]:
    ex = Exercise.objects.get(slug=CODE_SLUG)
    variant = assignment_for(user, ex).variant
    return [Submission.objects.create(user=user, exercise=ex, part_id=CODE_PART, part_type="code",
                                      variant=variant, answer="def ledger(p):\n    return 0\n",
                                      status=status) for _ in range(n)]


def _number_part() -> Any:
    return next(p for p in registry.get(NUMBER_SLUG).parts if p.type == "number")


def test_the_default_caps_are_the_documented_ones() -> None:
    # base.py (what dev and prod run) is read from the environment; CI sets none of these.
    assert (base.ROOFLINE_MAX_IN_FLIGHT, base.ROOFLINE_SUBMIT_RATE,
            base.ROOFLINE_SUBMIT_WINDOW_S) == (5, 30, 60)
    assert (base.ROOFLINE_LOGIN_FAILURES, base.ROOFLINE_LOGIN_WINDOW_S) == (5, 900)


# --- in flight ------------------------------------------------------------------------------

@REAL_CAPS
def test_a_sixth_queued_submission_is_refused_with_a_message_and_no_attempt(
        client: Client, student: User) -> None:
    client.force_login(student)
    subs = _queued(student, 3) + _queued(student, 2, status="running")
    url = f"/ex/{CODE_SLUG}/{CODE_PART}/submit/"
    r = client.post(url, {"answer": "def ledger(pool):\n    return 1\n"}, **HX)
    body = r.content.decode()
    assert r.status_code == 200
    assert "You have 5 submissions being graded; wait for one to finish." in body
    assert "no attempt used" in body
    assert Submission.objects.filter(user=student).count() == 5
    assert not PartState.objects.filter(user=student, attempts__gt=0).exists()

    # One finishes: the next is accepted.
    Submission.objects.filter(pk=subs[0].pk).update(status="graded")
    r = client.post(url, {"answer": "def ledger(pool):\n    return 1\n"}, **HX)
    assert "being graded" not in r.content.decode()
    assert Submission.objects.filter(user=student).count() == 6


@REAL_CAPS
def test_the_in_flight_cap_is_per_student_and_only_for_queued_parts(student: User) -> None:
    _queued(student, 5)
    other = User.objects.create_user("bob", password="pw-bob-12345")
    ex = Exercise.objects.get(slug=CODE_SLUG)
    assert submit_answer(other, ex, CODE_PART, "def ledger(p):\n    return 0\n").pk
    # A number is graded in the request and holds no worker: the in-flight cap does not apply.
    part = _number_part()
    num = Exercise.objects.get(slug=NUMBER_SLUG)
    sub = submit_answer(student, num, part.id, "1 GB")
    assert sub.status == "graded"
    with pytest.raises(NotAllowed, match="5 submissions being graded"):
        submit_answer(student, ex, CODE_PART, "def ledger(p):\n    return 0\n")


@override_settings(ROOFLINE_MAX_IN_FLIGHT=1)
def test_the_message_counts_in_the_singular(student: User) -> None:
    _queued(student, 1)
    assert ratelimit.submission_refusal(student, queued=True) == (
        "You have 1 submission being graded; wait for one to finish.")


# --- per minute -----------------------------------------------------------------------------

@REAL_CAPS
def test_the_31st_answer_in_a_minute_is_refused_until_the_window_moves(
        client: Client, student: User) -> None:
    client.force_login(student)
    part = _number_part()
    # A readable answer (so each one is a saved attempt), far from any variant's KV size.
    wrong = f"123456789 {part.unit}"
    url = f"/ex/{NUMBER_SLUG}/{part.id}/submit/"
    for _ in range(30):
        assert client.post(url, {"answer": wrong}).status_code == 302  # no-JS path: redirect
    assert PartState.objects.get(user=student, part_id=part.id).attempts == 30

    r = client.post(url, {"answer": wrong}, **HX)
    body = r.content.decode()
    assert r.status_code == 200
    assert "You have sent 30 answers in the last minute; wait" in body
    assert "no attempt used" in body
    assert Submission.objects.filter(user=student).count() == 30
    assert PartState.objects.get(user=student, part_id=part.id).attempts == 30

    # Unreadable answers are refused before the cap and cost nothing either way.
    r = client.post(url, {"answer": "lots"}, **HX)
    assert "no attempt used" in r.content.decode()

    # A minute after the first of them, one more fits.
    later = timezone.now() + timedelta(seconds=61)
    assert ratelimit.submission_refusal(student, queued=False, now=later) is None
    assert ratelimit.submission_refusal(student, queued=False) is not None
    # Another student is not affected.
    other = User.objects.create_user("bob", password="pw-bob-12345")
    assert ratelimit.submission_refusal(other, queued=False) is None


@REAL_CAPS
def test_the_wait_is_until_the_oldest_answer_leaves_the_window(student: User) -> None:
    now = timezone.now()
    subs = _queued(student, 30, status="graded")
    # Spread them over the last 50 s: the oldest leaves the window 10 s from now.
    for i, sub in enumerate(subs):
        Submission.objects.filter(pk=sub.pk).update(queued_at=now - timedelta(seconds=50 - i))
    message = ratelimit.submission_refusal(student, queued=False, now=now)
    assert message == ("You have sent 30 answers in the last minute; "
                       "wait 10 seconds and try again.")


@pytest.mark.django_db(transaction=True)
@REAL_CAPS
def test_simultaneous_submissions_never_overshoot_the_cap(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """Twelve requests from one student at the same instant, each on its own connection (as
    from several web processes): exactly five are queued. On PostgreSQL the student's row lock
    serialises the count-then-create (without it each request counts 0 in flight and all
    twelve pass); on SQLite every transaction takes the write lock when it begins (IMMEDIATE,
    base.py), which serialises them too."""
    monkeypatch.setattr(publish, "enqueue", lambda *args, **kwargs: True)  # no broker here
    user = User.objects.create_user("ada", password="pw-ada-12345")
    ex = Exercise.objects.get(slug=CODE_SLUG)
    assignment_for(user, ex)
    start = threading.Barrier(12)

    def one(_: int) -> str:
        try:
            start.wait()
            submit_answer(user, ex, CODE_PART, "def ledger(p):\n    return 0\n")
            return "queued"
        except NotAllowed:
            return "refused"
        finally:
            connection.close()

    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(one, range(12)))
    assert results.count("queued") == 5 and results.count("refused") == 7
    assert Submission.objects.filter(user=user).count() == 5


def test_the_counters_are_shared_by_every_web_process() -> None:
    """Submissions are counted in the database. Failed log-ins are counted in the cache, which
    in dev and prod (base.py) is Redis or a folder of files, never one process's memory."""
    backend = base.CACHES["default"]["BACKEND"]
    assert backend in ("django.core.cache.backends.redis.RedisCache",
                       "django.core.cache.backends.filebased.FileBasedCache")
    assert "locmem" not in backend.lower()


# --- log-in throttling ----------------------------------------------------------------------

def _login(client: Client, username: str, password: str, addr: str = "10.0.0.1") -> Any:
    return client.post("/login/", {"username": username, "password": password},
                       REMOTE_ADDR=addr)


def test_five_failed_logins_lock_the_username_from_that_address(student: User) -> None:
    client = Client()
    assert settings.ROOFLINE_LOGIN_FAILURES == 5
    for _ in range(4):
        r = _login(client, "ada", "wrong-password")
        assert r.status_code == 200 and "password didn" in r.content.decode()
    r = _login(client, "ada", "wrong-password")  # the fifth failure locks
    body = r.content.decode()
    assert r.status_code == 429
    assert "Too many failed log-ins for this username from your address. " \
           "Try again in 15 minutes." in body
    # Locked means locked: even the right password is refused (the lock tells a guesser nothing).
    r = _login(client, "ada", "pw-ada-12345")
    assert r.status_code == 429 and "_auth_user_id" not in client.session
    # The same username from elsewhere, and another username from here, still log in.
    assert _login(Client(), "ada", "pw-ada-12345", addr="10.0.0.2").status_code == 302
    User.objects.create_user("bob", password="pw-bob-12345")
    assert _login(Client(), "bob", "pw-bob-12345").status_code == 302
    # Case does not give a fresh counter.
    assert _login(Client(), "ADA", "pw-ada-12345").status_code == 429


def test_the_lock_ends_with_its_window(student: User, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    for _ in range(5):
        _login(Client(), "ada", "nope")
    assert ratelimit.login_locked_for("ada", "10.0.0.1") > 14 * 60
    later = time.time() + settings.ROOFLINE_LOGIN_WINDOW_S + 1
    monkeypatch.setattr(ratelimit.time, "time", lambda: later)
    assert ratelimit.login_locked_for("ada", "10.0.0.1") == 0
    assert _login(Client(), "ada", "pw-ada-12345").status_code == 302


def test_a_successful_login_forgets_earlier_failures(student: User) -> None:
    for _ in range(4):
        _login(Client(), "ada", "nope")
    assert _login(Client(), "ada", "pw-ada-12345").status_code == 302
    for _ in range(4):  # four more after a success: still not locked
        assert _login(Client(), "ada", "nope").status_code == 200
    assert ratelimit.login_locked_for("ada", "10.0.0.1") == 0


def test_the_minutes_left_are_rounded_up() -> None:
    assert ratelimit.wait_words(1) == "1 minute"
    assert ratelimit.wait_words(60) == "1 minute"
    assert ratelimit.wait_words(61) == "2 minutes"
    assert ratelimit.wait_words(900) == "15 minutes"


def test_a_broken_cache_lets_logins_through(student: User, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    """Redis down must not lock every student out: the throttle fails open (and logs)."""
    class Down:
        def __getattr__(self, name: str) -> Any:
            def fail(*args: Any, **kwargs: Any) -> Any:
                raise ConnectionError("cache down")
            return fail

    monkeypatch.setattr(ratelimit, "cache", Down())
    assert _login(Client(), "ada", "nope").status_code == 200
    assert _login(Client(), "ada", "pw-ada-12345").status_code == 302
