"""Picking questions and reading mock interviews. Nothing here writes to the database: starting,
finishing and expiring a mock are in `practice.actions.mock_interviews`.

The pickers are pure functions of a list of standings and a `random.Random`, so tests can seed
them; the queries take `now` so tests can move the clock.
"""
from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from practice.models import Exercise, MockInterview, PartState, Submission, User
from practice.provisional import is_final

QUESTIONS_PER_MOCK = 3
DEFAULT_DURATION_S = 45 * 60


@dataclass(frozen=True)
class Standing:
    """How far a student is on one exercise: parts in it and parts solved."""

    slug: str
    parts: int
    solved: int

    @property
    def unsolved(self) -> bool:
        return self.solved < self.parts


# --- pure choices -------------------------------------------------------------------------

def pick_unsolved(standings: Iterable[Standing], rng: random.Random) -> str | None:
    """One slug, uniformly among exercises with at least one unsolved part; None if none left.

    Sorted first so that the same seed gives the same pick whatever order the rows came in.
    """
    choices = sorted(s.slug for s in standings if s.unsolved)
    return rng.choice(choices) if choices else None


def pick_mock_questions(standings: Iterable[Standing], rng: random.Random,
                        k: int = QUESTIONS_PER_MOCK) -> list[str]:
    """k distinct slugs: not fully solved ones first (uniformly), topped up with solved ones
    only when fewer than k are left, so a student who solved nearly everything still gets a
    full mock. Fewer than k only when there are fewer than k exercises."""
    ordered = sorted(standings, key=lambda s: s.slug)
    fresh = [s.slug for s in ordered if s.unsolved]
    done = [s.slug for s in ordered if not s.unsolved]
    picked = rng.sample(fresh, min(k, len(fresh)))
    picked += rng.sample(done, min(k - len(picked), len(done)))
    return picked


# --- queries ------------------------------------------------------------------------------

def standings_for(user: User) -> list[Standing]:
    """The student's standing on every active exercise."""
    solved: dict[int, int] = defaultdict(int)
    for exercise_id in PartState.objects.filter(user=user, solved_at__isnull=False).values_list(
            "exercise_id", flat=True):
        solved[exercise_id] += 1
    return [Standing(ex.slug, len(ex.parts), solved[ex.pk])
            for ex in Exercise.objects.filter(active=True).only("pk", "slug", "parts")]


def running_mock(user: User, now: datetime | None = None) -> MockInterview | None:
    """The student's mock whose clock is still running, if any (at most one: starting a mock
    while one runs returns the running one)."""
    now = now or timezone.now()
    if not user.is_authenticated:
        return None
    for mock in MockInterview.objects.filter(user=user, finished_at__isnull=True):
        if mock.is_running(now):
            return mock
    return None


def running_mock_for(user: User, exercise: Exercise,
                     now: datetime | None = None) -> MockInterview | None:
    """The running mock that contains this exercise, if any."""
    mock = running_mock(user, now)
    return mock if mock is not None and exercise.slug in mock.exercises else None


def solutions_hidden_for(user: User, exercise: Exercise, now: datetime | None = None) -> bool:
    """The one gate for worked solutions during a mock: the exercise page, every htmx redraw
    of a part and the reveal view all ask this. It reads the clock rather than `finished_at`
    alone, so a mock whose time ran out stops hiding even before anyone records its end."""
    return running_mock_for(user, exercise, now) is not None


# --- the summary --------------------------------------------------------------------------

@dataclass(frozen=True)
class QuestionSummary:
    exercise: Exercise
    parts: int
    solved: int  # parts with a fully correct answer submitted during the mock
    solved_before: int  # parts already solved when the mock started
    attempts: int  # graded submissions during the mock (Run and invalid answers do not count)
    time_used_s: int

    @property
    def time_used(self) -> str:
        return human_duration(self.time_used_s)


def format_duration(seconds: float) -> str:
    """m:ss, the clock's form (minutes go past 59, as on an interview timer)."""
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def human_duration(seconds: float) -> str:
    """'45 s', '7 min', '7 min 05 s': for the summary, where '0:45' would read as ambiguous."""
    seconds = max(0, round(seconds))
    minutes, rest = divmod(seconds, 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min" + (f" {rest:02d} s" if rest else "")


def _credit_time(mock: MockInterview, subs: Sequence[Submission]) -> dict[int, float]:
    """Seconds per exercise id. We do not record when a question was opened, so each gap
    between answers is credited to the question answered at its end (the first gap starts at
    the start of the mock): the totals add up to the time until the last answer."""
    credit: dict[int, float] = defaultdict(float)
    last = mock.started_at
    for sub in sorted(subs, key=lambda s: (s.queued_at, s.pk)):
        credit[sub.exercise_id] += (sub.queued_at - last).total_seconds()
        last = sub.queued_at
    return credit


def summarize(mock: MockInterview, now: datetime | None = None) -> list[QuestionSummary]:
    """Per question, in the mock's order: parts solved, attempts and time used during it."""
    end = mock.finished_at or min(now or timezone.now(), mock.deadline)
    exercises = {ex.slug: ex for ex in Exercise.objects.filter(slug__in=mock.exercises)}
    subs = list(Submission.objects.filter(
        user=mock.user, exercise__in=exercises.values(), mode=Submission.Mode.SUBMIT,
        queued_at__gte=mock.started_at, queued_at__lte=end).exclude(
        verdict__in=("invalid", "error")))
    credit = _credit_time(mock, subs)
    before: dict[int, int] = defaultdict(int)
    for exercise_id in PartState.objects.filter(
            user=mock.user, exercise__in=exercises.values(),
            solved_at__lt=mock.started_at).values_list("exercise_id", flat=True):
        before[exercise_id] += 1
    out = []
    for slug in mock.exercises:
        ex = exercises.get(slug)
        if ex is None:  # the folder was removed since; nothing to show
            continue
        mine = [s for s in subs if s.exercise_id == ex.pk]
        out.append(QuestionSummary(
            exercise=ex, parts=len(ex.parts),
            solved=len({s.part_id for s in mine if s.score is not None and s.score >= 1.0
                        and is_final(s.verdict)}),  # a preview pass solves nothing
            solved_before=before[ex.pk], attempts=len(mine),
            time_used_s=round(credit[ex.pk])))
    return out


def clock(mock: MockInterview, now: datetime | None = None) -> dict[str, object]:
    """What a template needs to show a mock's clock: seconds left (for static/mock.js to count
    down from) and the same as m:ss (for pages without JavaScript)."""
    left = mock.remaining_s(now or timezone.now())
    return {"mock": mock, "remaining_s": left, "remaining": format_duration(left)}
