"""Mock interviews: start one (three questions, a clock), finish it early, or record that its
time ran out. Picking the questions and reading a mock are practice/interview.py."""
from __future__ import annotations

import random
from typing import Any

from django.db import transaction
from django.utils import timezone

from practice import interview
from practice.actions import NotAllowed
from practice.models import MockInterview, User


def start_mock_interview(user: User, rng: random.Random | None = None, now: Any = None,
                         duration_s: int | None = None) -> MockInterview:
    """Start a timed mock of three questions the student has not fully solved (where possible).

    One mock at a time: if one is still running it is returned unchanged, so a double click or
    a second tab does not start another. A mock past its deadline is ended first.
    """
    now = now or timezone.now()
    with transaction.atomic():
        # Lock the user's row so two concurrent starts cannot both find no running mock.
        User.objects.select_for_update().filter(pk=user.pk).first()
        expire_mock_interviews(user, now)
        running = interview.running_mock(user, now)
        if running is not None:
            return running
        slugs = interview.pick_mock_questions(interview.standings_for(user),
                                              rng or random.SystemRandom())
        if not slugs:
            raise NotAllowed("there are no exercises to put in a mock interview")
        return MockInterview.objects.create(
            user=user, started_at=now, exercises=slugs,
            duration_s=duration_s or interview.DEFAULT_DURATION_S)


def finish_mock_interview(mock: MockInterview, now: Any = None) -> MockInterview:
    """The student ends the mock early. Ending it again (or after time ran out) changes nothing;
    a mock read after its deadline ends by time, at the deadline, not now."""
    now = now or timezone.now()
    if mock.finished_at is not None:
        return mock
    if now >= mock.deadline:
        return expire_mock_interview(mock, now)
    # A conditional update, so a finish racing an expiry (two tabs) records one end, not two.
    MockInterview.objects.filter(pk=mock.pk, finished_at__isnull=True).update(
        finished_at=now, ended_by=MockInterview.EndedBy.FINISH)
    mock.refresh_from_db()
    return mock


def expire_mock_interview(mock: MockInterview, now: Any = None) -> MockInterview:
    """Expire on read: there is no timer process, so whoever reads a mock past its deadline
    records its end (at the deadline). Does nothing to a mock still running or already over."""
    now = now or timezone.now()
    if mock.finished_at is None and now >= mock.deadline:
        MockInterview.objects.filter(pk=mock.pk, finished_at__isnull=True).update(
            finished_at=mock.deadline, ended_by=MockInterview.EndedBy.TIME)
        mock.refresh_from_db()
    return mock


def expire_mock_interviews(user: User, now: Any = None) -> int:
    """End every mock of the student whose clock has run out. Returns how many were ended."""
    now = now or timezone.now()
    ended = 0
    for mock in MockInterview.objects.filter(user=user, finished_at__isnull=True):
        if now >= mock.deadline:
            expire_mock_interview(mock, now)
            ended += 1
    return ended
