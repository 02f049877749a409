"""Rate limits that hold however many web processes serve the site.

Submissions: a student may have ROOFLINE_MAX_IN_FLIGHT submissions queued or running (each one
holds a worker for up to its time limit) and may send ROOFLINE_SUBMIT_RATE answers per
ROOFLINE_SUBMIT_WINDOW_S. Both are counted from the Submission rows themselves: the database is
what every web process shares already, the rows are the truth the counts are about, and nothing
else needs to be kept in step. `submission_refusal` is called inside the transaction that creates
the row, after locking the student's user row, so two simultaneous requests from one student are
counted one after the other (on PostgreSQL; SQLite serialises writers anyway, one machine only).

Log-ins: ROOFLINE_LOGIN_FAILURES failed log-ins for one username from one address lock that pair
for ROOFLINE_LOGIN_WINDOW_S from the first failure. The counter is in Django's cache (settings:
Redis when configured, else files under VAR_DIR; never per-process memory) because a failed
log-in creates no row to count. If the cache cannot be reached, log-ins are let through
(fail open, logged): an outage of Redis must not lock every student out of the site.
"""
from __future__ import annotations

import hashlib
import logging
import math
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

if TYPE_CHECKING:
    from practice.models import User

log = logging.getLogger(__name__)


# --- submissions ----------------------------------------------------------------------------

def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def submission_refusal(user: User, *, queued: bool, now: datetime | None = None) -> str | None:
    """Why `user` may not send another answer now, or None when they may.

    `queued`: the answer would go to a worker (expression, code, kernel); only those count
    against the in-flight cap, since numbers and choices are graded inside the request. Call it
    inside the transaction that creates the Submission, after `lock_student(user)`.
    """
    from practice.models import Submission

    now = now or timezone.now()
    if queued:
        cap = settings.ROOFLINE_MAX_IN_FLIGHT
        in_flight = Submission.objects.filter(
            user=user, status__in=(Submission.Status.QUEUED, Submission.Status.RUNNING)).count()
        if in_flight >= cap:
            return (f"You have {_plural(in_flight, 'submission')} being graded; "
                    "wait for one to finish.")
    rate, window = settings.ROOFLINE_SUBMIT_RATE, settings.ROOFLINE_SUBMIT_WINDOW_S
    recent = list(Submission.objects.filter(
        user=user, queued_at__gt=now - timedelta(seconds=window))
        .order_by("-queued_at").values_list("queued_at", flat=True)[:rate])
    if len(recent) >= rate:
        # The oldest answer counted leaves the window first; then one more may be sent.
        wait = max(1, math.ceil((recent[-1] + timedelta(seconds=window) - now).total_seconds()))
        return (f"You have sent {_plural(len(recent), 'answer')} in the last "
                f"{_window_words(window)}; wait {_plural(wait, 'second')} and try again.")
    return None


def lock_student(user: User) -> None:
    """Hold the student's user row until the transaction ends, so their submissions are counted
    and created one at a time (SELECT ... FOR UPDATE; a no-op on SQLite)."""
    from practice.models import User as UserModel

    UserModel.objects.select_for_update().filter(pk=user.pk).values_list("pk").first()


def _window_words(seconds: int) -> str:
    if seconds == 60:
        return "minute"
    if seconds % 60 == 0:
        return _plural(seconds // 60, "minute")
    return _plural(seconds, "second")


# --- log-ins --------------------------------------------------------------------------------

def client_address(request: object) -> str:
    """The address the request came from. REMOTE_ADDR only: X-Forwarded-For is set by whoever
    sends the request, so trusting it would let an attacker pick a fresh address per guess.
    (Behind a proxy every client shares the proxy's address; the lock is then per username.)"""
    meta = getattr(request, "META", {})
    return str(meta.get("REMOTE_ADDR") or "unknown")


def _login_key(username: str, address: str) -> str:
    # Hashed: usernames are user input of any length and alphabet; cache keys must be short
    # and plain.
    digest = hashlib.sha256(f"{username.casefold()}\0{address}".encode()).hexdigest()
    return f"login-failures:{digest}"


def login_locked_for(username: str, address: str, now: float | None = None) -> int:
    """Seconds until this username may try again from this address; 0 when it may now."""
    now = time.time() if now is None else now
    try:
        entry = cache.get(_login_key(username, address))
    except Exception:  # the cache is down: let the log-in through rather than lock everyone out
        log.warning("login throttle: cache unavailable, not checking", exc_info=True)
        return 0
    if not entry:
        return 0
    first, count = entry
    left = first + settings.ROOFLINE_LOGIN_WINDOW_S - now
    if count < settings.ROOFLINE_LOGIN_FAILURES or left <= 0:
        return 0
    return math.ceil(left)


def record_login_failure(username: str, address: str, now: float | None = None) -> int:
    """Count one failed log-in; returns the seconds of lock it caused (0: not locked yet).

    Read-modify-write, not atomic: two failures at the same instant may count as one, so an
    attacker gets at most (parallel requests - 1) extra guesses per window. The window starts at
    the first failure and is not extended by later ones."""
    now = time.time() if now is None else now
    key = _login_key(username, address)
    window = settings.ROOFLINE_LOGIN_WINDOW_S
    try:
        entry = cache.get(key)
        first, count = entry if entry and now < entry[0] + window else (now, 0)
        count += 1
        cache.set(key, (first, count), timeout=max(1, math.ceil(first + window - now)))
    except Exception:
        log.warning("login throttle: cache unavailable, failure not counted", exc_info=True)
        return 0
    return login_locked_for(username, address, now)


def clear_login_failures(username: str, address: str) -> None:
    """A successful log-in forgets the failures before it."""
    try:
        cache.delete(_login_key(username, address))
    except Exception:
        log.warning("login throttle: cache unavailable, failures not cleared", exc_info=True)


def wait_words(seconds: int) -> str:
    """'15 minutes', '1 minute' (rounded up to whole minutes: the lock is minutes long)."""
    return _plural(max(1, math.ceil(seconds / 60)), "minute")


# --- deck cards -----------------------------------------------------------------------------

def _card_key(user_id: int, bucket: int) -> str:
    return f"card-answers:{user_id}:{bucket}"


def card_answer_refusal(user: User, now: datetime) -> str | None:
    """Count one answer to a deck card and say why it is refused, or None when it may be graded.

    The same budget as submissions (ROOFLINE_SUBMIT_RATE per ROOFLINE_SUBMIT_WINDOW_S), but
    counted in the cache: a card answer creates no row to count, only reschedules the student's
    one RecallItem for the card. A fixed window (bucketed on `now`), counted with an atomic
    increment, so every web process sharing the cache (Redis in production) counts together; at
    a window's edge up to twice the rate may pass, which is fine for a grade this cheap. Call it
    only for a readable answer: an unreadable one is not an attempt. If the cache cannot be
    reached the answer is let through (logged), as for log-ins.
    """
    rate, window = settings.ROOFLINE_SUBMIT_RATE, settings.ROOFLINE_SUBMIT_WINDOW_S
    stamp = now.timestamp()
    bucket = int(stamp // window)
    key = _card_key(user.pk, bucket)
    try:
        cache.add(key, 0, timeout=window + 1)
        count = cache.incr(key)
    except ValueError:  # the key expired between add and incr: this answer opens the window
        cache.set(key, 1, timeout=window + 1)
        count = 1
    except Exception:
        log.warning("card answer limit: cache unavailable, not counting", exc_info=True)
        return None
    if count <= rate:
        return None
    wait = max(1, math.ceil((bucket + 1) * window - stamp))
    return (f"You have answered {_plural(rate, 'card')} in the last {_window_words(window)}; "
            f"wait {_plural(wait, 'second')} and try again.")
