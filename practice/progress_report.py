""""My progress": where a student is weak, computed from what the database already records.

Three readings of one student's own rows, all as of a `now` the caller passes (the view gives
`timezone.now()`, tests a fixed time), so nothing here reads a clock:

* per topic, how each part was solved: on the first counted answer, with paid hints, after the
  worked solution was shown, or later on its own; and the parts tried but not solved;
* the mistake kinds (exercises/mistake_kinds.py) the student's graded answers showed most often,
  each with the drill that practises avoiding it;
* the active days (a counted answer or a recall review): the current streak, the longest one in
  the last year, and the last 30 days' counts for the activity chart.

A fixed handful of queries whatever the number of exercises or parts (the tests bound it): the
rows are fetched once per table and classified in Python. Pure reads: nothing is written.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from django.db.models import Count, QuerySet
from django.db.models.functions import TruncDate
from django.urls import reverse
from django.utils import timezone

from exercises import hints
from exercises.mistake_kinds import KINDS, MistakeKind
from practice.actions.hints import statement_hints
from practice.models import Exercise, HintReveal, PartState, RecallLog, Submission, User

TOP_KINDS = 6
CHART_DAYS = 30
LONGEST_WINDOW_DAYS = 365


@dataclass
class TopicRow:
    """One topic's parts, by how they were solved. The four solved columns are exclusive."""

    topic: str
    parts: int = 0
    first_try: int = 0
    with_hints: int = 0
    after_solution: int = 0
    solved_later: int = 0
    tried: int = 0  # tried (an answer counted or the solution shown), not solved

    @property
    def solved(self) -> int:
        return self.first_try + self.with_hints + self.after_solution + self.solved_later

    @property
    def not_started(self) -> int:
        return max(self.parts - self.solved - self.tried, 0)


@dataclass(frozen=True)
class KindRow:
    """A mistake kind the student's answers showed: in how many answers and exercises."""

    kind: MistakeKind
    answers: int
    exercises: int
    drill_url: str  # "" when the drill's exercise is not an active exercise


@dataclass(frozen=True)
class Day:
    day: date
    answers: int
    reviews: int

    @property
    def total(self) -> int:
        return self.answers + self.reviews


@dataclass(frozen=True)
class Activity:
    today: date
    streak: int  # consecutive active days ending today, or yesterday while today is still open
    longest: int  # the longest run of active days within the last LONGEST_WINDOW_DAYS
    active_today: bool
    days: list[Day]  # the last CHART_DAYS days, oldest first, today last

    @property
    def answers(self) -> int:
        return sum(d.answers for d in self.days)

    @property
    def reviews(self) -> int:
        return sum(d.reviews for d in self.days)


@dataclass
class Report:
    topics: list[TopicRow]
    total: TopicRow
    kinds: list[KindRow]
    activity: Activity
    chart: list[dict[str, Any]] = field(default_factory=list)  # for json_script

    @property
    def empty(self) -> bool:
        """Nothing solved, tried or answered, and no recall review ever: the page says so."""
        return (not self.total.solved and not self.total.tried and not self.kinds
                and self.activity.longest == 0 and self.activity.streak == 0)


def _hints_of(exercise: Exercise, memo: dict[int, tuple[hints.Hint, ...]]
              ) -> tuple[hints.Hint, ...]:
    """The exercise's hints, parsed once per report (only for exercises with a reveal). A row
    whose folder has gone (not yet synced inactive) has none rather than failing the page."""
    if exercise.pk not in memo:
        try:
            memo[exercise.pk] = statement_hints(exercise)
        except (KeyError, hints.HintError):
            memo[exercise.pk] = ()
    return memo[exercise.pk]


def _graded(user: User, now: datetime) -> list[tuple[int, str, float | None, str, Any]]:
    """The student's graded counted answers, oldest first: (exercise id, part id, score,
    verdict, kinds). One query serves both "first try" and the mistake kinds; only the result's
    "kinds" key travels from the database, not each result's whole JSON. "run" previews and
    unfinished rows say nothing about a slip or a solve."""
    return list(Submission.objects.filter(user=user, mode=Submission.Mode.SUBMIT,
                                          status=Submission.Status.GRADED, queued_at__lte=now)
                .order_by("queued_at", "id")
                .values_list("exercise_id", "part_id", "score", "verdict", "result__kinds"))


def _topics(user: User, now: datetime, exercises: dict[int, Exercise],
            graded: list[tuple[int, str, float | None, str, Any]]
            ) -> tuple[list[TopicRow], TopicRow]:
    rows: dict[str, TopicRow] = {}
    part_ids: dict[int, set[str]] = {}
    for ex in exercises.values():
        part_ids[ex.pk] = {p["id"] for p in ex.parts}
        rows.setdefault(ex.topic, TopicRow(ex.topic)).parts += len(ex.parts)

    states = [st for st in PartState.objects.filter(user=user, exercise_id__in=exercises)
              if st.part_id in part_ids[st.exercise_id]]  # a part since removed does not count
    # The first graded counted answer of each part decides "first try": PartState.attempts
    # keeps growing with later answers, so it cannot tell.
    first: dict[tuple[int, str], tuple[float | None, str]] = {}
    for ex_id, part_id, score, verdict, _kinds in graded:
        first.setdefault((ex_id, part_id), (score, verdict))
    # Every reveal of the student's at once: (hint id, when) per exercise.
    reveals: dict[int, list[tuple[str, datetime]]] = defaultdict(list)
    for ex_id, hint_id, at in HintReveal.objects.filter(
            user=user, exercise_id__in=exercises).values_list("exercise_id", "hint_id",
                                                              "revealed_at"):
        reveals[ex_id].append((hint_id, at))

    memo: dict[int, tuple[hints.Hint, ...]] = {}
    for st in states:
        ex = exercises[st.exercise_id]
        row = rows[ex.topic]
        solved_at = st.solved_at
        if solved_at is None or solved_at > now:
            if st.attempts or st.revealed_at:
                row.tried += 1
            continue
        if st.revealed_at is not None and st.revealed_at <= solved_at:
            row.after_solution += 1
            continue
        before = {h for h, at in reveals.get(ex.pk, ()) if at <= solved_at}
        if before and hints.penalty(_hints_of(ex, memo), before, st.part_id) > 0:
            row.with_hints += 1
            continue
        score, verdict = first.get((ex.pk, st.part_id), (None, ""))
        if score is not None and score >= 1.0 and verdict == Submission.Verdict.CORRECT:
            row.first_try += 1
        else:
            row.solved_later += 1
    topics = [rows[t] for t in sorted(rows)]
    total = TopicRow("All topics")
    for r in topics:
        total.parts += r.parts
        total.first_try += r.first_try
        total.with_hints += r.with_hints
        total.after_solution += r.after_solution
        total.solved_later += r.solved_later
        total.tried += r.tried
    return topics, total


def _kinds(graded: list[tuple[int, str, float | None, str, Any]], active_slugs: set[str]
           ) -> list[KindRow]:
    answers: Counter[str] = Counter()
    where: dict[str, set[int]] = defaultdict(set)
    for ex_id, _part, _score, _verdict, kinds in graded:
        if not isinstance(kinds, list):
            continue  # a row stored before kinds existed
        # Once per answer; an id no longer in the vocabulary (a removed kind) is skipped.
        for kind in {k for k in kinds if isinstance(k, str) and k in KINDS}:
            answers[kind] += 1
            where[kind].add(ex_id)
    order = list(KINDS)  # ties keep the vocabulary's order, so the list is stable
    ranked = sorted(answers, key=lambda k: (-answers[k], -len(where[k]), order.index(k)))
    rows = []
    for kind_id in ranked[:TOP_KINDS]:
        kind = KINDS[kind_id]
        url = (reverse("exercise", args=[kind.drill_exercise]) + "#part-" + kind.drill_part
               if kind.drill_exercise in active_slugs else "")
        rows.append(KindRow(kind, answers[kind_id], len(where[kind_id]), url))
    return rows


def _per_day(qs: QuerySet[Any], field_name: str) -> dict[date, int]:
    """Rows per calendar day of `field_name` in the current time zone, counted by the database
    (one row per active day comes back, not one per answer). order_by() drops the model's
    ordering, which would otherwise split the GROUP BY."""
    tz = timezone.get_current_timezone()
    return {row["day"]: row["n"] for row in
            qs.order_by().annotate(day=TruncDate(field_name, tzinfo=tz))
            .values("day").annotate(n=Count("id")).values("day", "n")}


def _run_ending(active: set[date], last: date) -> int:
    n = 0
    while last - timedelta(days=n) in active:
        n += 1
    return n


def _activity(user: User, now: datetime) -> Activity:
    today = timezone.localtime(now).date()
    # Any counted answer, graded or not: the student did the work that day.
    answers = _per_day(Submission.objects.filter(user=user, mode=Submission.Mode.SUBMIT,
                                                 queued_at__lte=now), "queued_at")
    reviews = _per_day(RecallLog.objects.filter(user=user, reviewed_at__lte=now), "reviewed_at")
    active = {d for d, n in answers.items() if n} | {d for d, n in reviews.items() if n}
    active_today = today in active
    # Today still open: a streak that reached yesterday is not lost before the day ends.
    streak = _run_ending(active, today if active_today else today - timedelta(days=1))
    start = today - timedelta(days=LONGEST_WINDOW_DAYS - 1)
    longest = run = 0
    for offset in range(LONGEST_WINDOW_DAYS):
        run = run + 1 if start + timedelta(days=offset) in active else 0
        longest = max(longest, run)
    days = [Day(d, answers.get(d, 0), reviews.get(d, 0))
            for d in (today - timedelta(days=CHART_DAYS - 1 - i) for i in range(CHART_DAYS))]
    return Activity(today, streak, longest, active_today, days)


def report(user: User, now: datetime) -> Report:
    """Everything "My progress" shows for `user` as of `now`, from the user's own rows only."""
    exercises = {ex.pk: ex for ex in Exercise.objects.filter(active=True)
                 .only("pk", "slug", "topic", "parts")}
    graded = _graded(user, now)
    topics, total = _topics(user, now, exercises, graded)
    kinds = _kinds(graded, {ex.slug for ex in exercises.values()})
    activity = _activity(user, now)
    chart = [{"day": d.day.isoformat(), "answers": d.answers, "reviews": d.reviews}
             for d in activity.days]
    return Report(topics, total, kinds, activity, chart)
