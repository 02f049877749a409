"""Statistics of a cohort's work per exercise and part, for its instructor. Read-only.

What counts: submit-mode, graded submissions of the cohort's current members (Run and answers the
grader could not read use no attempt, so they are left out here too), scored by their effective
score (a review's when it sets one, else the grader's: `scores.effective_score`).

    attempts          submissions
    tried             students with at least one
    solve rate        students whose best effective score is 1, over those who tried (not
                      counting students whose only answers await an instructor's review, a
                      text part's or a kernel held on its timing, or are provisional, a
                      kernel that passed only the CPU preview: no final score is known yet)
    provisional       answers whose grade is a preview awaiting a GPU worker
                      (practice/provisional.py): attempts, neither solved nor wrong
    distribution      each such student's best effective score, in 10 bins of 0.1 (1.0 in the
                      last bin)
    time to solve     per student, from their first submission of the part to the first scoring
                      1; the median over students who solved it
    wrong answers     effective score below 1 (answers awaiting review are not wrong yet),
                      grouped by the known mistake the grader matched
                      (result["mistake"], a name from the exercise's mistakes()); the rest "other"

The work is done in the database, in a fixed number of queries whatever the cohort's size:
one grouped row per (student, exercise, part) and one per (exercise, part, mistake) reach
Python, never the submissions themselves (200 students x 10 exercises is ~11,000 of them).
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import (
    Case,
    Count,
    F,
    FloatField,
    IntegerField,
    Max,
    Min,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce

from exercises import registry
from practice.key_point_stats import KeyPointShare, key_point_shares
from practice.models import Cohort, Exercise, Membership, RegradeEntry, RegradeJob, Submission
from practice.provisional import PROVISIONAL

BINS = 10
# Scores are floats written by graders and reviews; 1 means "within a hair of 1".
SOLVED = 1.0 - 1e-9
# Verdicts that used no attempt (actions.progress.count_attempt): not an answer to count.
UNCOUNTED_VERDICTS = ("invalid", "error")
OTHER = ""  # the mistake name of a wrong answer that matched no known mistake
HEADLINE_CHARS = 140
REGRADE_ROWS = 200  # entries listed on a re-grade's page (changed and failed ones first)


# --- results ---------------------------------------------------------------------------------

@dataclass
class MistakeShare:
    name: str  # OTHER for answers that matched no known mistake
    label: str  # the mistake's feedback, first sentence ("You read the 80 GiB as 80 GB.")
    detail: str  # the rest of the feedback after that sentence ("" when there is none)
    count: int
    share: float  # of the part's wrong answers

    @property
    def percent(self) -> int:
        return round(100 * self.share)


@dataclass
class PartStats:
    part_id: str
    part_type: str
    points: float
    prompt: str = ""
    attempts: int = 0
    tried: int = 0
    scored: int = 0  # students who tried, less those whose every answer awaits review
    solved: int = 0
    pending: int = 0  # answers awaiting review (counted as attempts, not as wrong)
    provisional: int = 0  # preview passes awaiting a GPU grade (attempts, not solved or wrong)
    histogram: list[int] = field(default_factory=lambda: [0] * BINS)
    solve_seconds: list[float] = field(default_factory=list, repr=False)
    wrong: int = 0
    mistakes: list[MistakeShare] = field(default_factory=list)
    # text parts: each key point's share of latest answers that do not make it (automatic)
    key_points: list[KeyPointShare] = field(default_factory=list)

    @property
    def solve_rate(self) -> float | None:
        return self.solved / self.scored if self.scored else None

    @property
    def solve_percent(self) -> int | None:
        rate = self.solve_rate
        return None if rate is None else round(100 * rate)

    @property
    def median_solve_s(self) -> float | None:
        return statistics.median(self.solve_seconds) if self.solve_seconds else None

    @property
    def median_solve_text(self) -> str:
        median = self.median_solve_s
        # Most solvers got it at their first submission: say so rather than "0 s".
        return "0 (first try)" if median == 0 else duration_text(median)

    @property
    def top_mistake(self) -> MistakeShare | None:
        return next((m for m in self.mistakes if m.name != OTHER), None)

    def chart(self) -> dict[str, Any]:
        """What static/charts.js drawHistogram reads (json_script)."""
        return {"labels": bin_labels(), "counts": self.histogram, "tried": self.scored,
                "title": f"{self.part_id}: best score per student"}


@dataclass
class ExerciseStats:
    exercise: Exercise
    parts: list[PartStats]
    students: int  # in the cohort
    tried: int = 0  # students with an attempt at any part
    completed: int = 0  # students who solved every part

    @property
    def attempts(self) -> int:
        return sum(p.attempts for p in self.parts)

    @property
    def pending(self) -> int:
        return sum(p.pending for p in self.parts)

    @property
    def provisional(self) -> int:
        return sum(p.provisional for p in self.parts)

    @property
    def solve_percent(self) -> int | None:
        """Solved over tried (with a known score), counted in (student, part) pairs."""
        scored = sum(p.scored for p in self.parts)
        return round(100 * sum(p.solved for p in self.parts) / scored) if scored else None

    @property
    def hardest(self) -> PartStats | None:
        """The part with the lowest solve rate (ties: the earlier part)."""
        scored = [p for p in self.parts if p.scored]
        return min(scored, key=lambda p: p.solve_rate or 0.0) if scored else None

    @property
    def top_mistake(self) -> tuple[PartStats, MistakeShare] | None:
        """The known mistake made most often in the exercise, with its part."""
        found = [(p, m) for p in self.parts for m in p.mistakes if m.name != OTHER]
        return max(found, key=lambda pm: pm[1].count) if found else None


@dataclass
class CohortStats:
    cohort: Cohort
    students: int
    exercises: list[ExerciseStats]

    @property
    def tried(self) -> list[ExerciseStats]:
        return [e for e in self.exercises if e.tried]

    @property
    def untried(self) -> list[ExerciseStats]:
        return [e for e in self.exercises if not e.tried]


# --- queries ---------------------------------------------------------------------------------

def counted_submissions(cohort: Cohort) -> QuerySet[Submission]:
    """The submissions statistics are made of, with `eff` (effective score) as an alias: NULL
    for a provisional answer nobody reviewed (no final score yet: `scores.effective_score`)."""
    members = Membership.objects.filter(cohort=cohort).values("user_id")
    return (Submission.objects
            .filter(user_id__in=members, mode=Submission.Mode.SUBMIT,
                    status=Submission.Status.GRADED)
            .exclude(verdict__in=UNCOUNTED_VERDICTS)
            .alias(eff=Case(When(_provisional(), then=Value(None)),
                            default=Coalesce("review__score", "score", Value(0.0)),
                            output_field=FloatField())))


def _awaiting_review() -> Q:
    return Q(verdict="pending", review__score__isnull=True)


def _provisional() -> Q:
    return Q(verdict=PROVISIONAL, review__score__isnull=True)


def cohort_overview(cohort: Cohort) -> CohortStats:
    """Every active exercise with its figures for this cohort (4 queries)."""
    exercises = list(Exercise.objects.filter(active=True).order_by("seed", "slug"))
    students = Membership.objects.filter(cohort=cohort).count()
    return CohortStats(cohort, students, _collect(cohort, exercises, students))


def exercise_stats(cohort: Cohort, exercise: Exercise) -> ExerciseStats:
    """One exercise's figures per part, with the parts' prompts and, for text parts, the key
    points the cohort misses most (4 queries)."""
    students = Membership.objects.filter(cohort=cohort).count()
    result = _collect(cohort, [exercise], students)[0]
    shares = key_point_shares(counted_submissions(cohort).filter(exercise=exercise))
    for part in result.parts:
        part.key_points = shares.get(part.part_id, [])
    try:
        spec = registry.get(exercise.slug)
    except Exception:  # a folder since removed: the figures stand without the prompts
        return result
    for part in result.parts:
        try:
            part.prompt = spec.part(part.part_id).prompt
        except KeyError:
            pass
    return result


def _collect(cohort: Cohort, exercises: list[Exercise], students: int) -> list[ExerciseStats]:
    by_id = {ex.pk: ex for ex in exercises}
    parts: dict[tuple[int, str], PartStats] = {}
    out: list[ExerciseStats] = []
    for ex in exercises:
        ex_parts = [PartStats(p["id"], p.get("type", ""), float(p.get("points", 1)))
                    for p in ex.parts]
        parts.update({(ex.pk, p.part_id): p for p in ex_parts})
        out.append(ExerciseStats(ex, ex_parts, students))
    if not exercises:
        return out
    base = counted_submissions(cohort).filter(exercise_id__in=list(by_id))

    # One row per (student, exercise, part): attempts, best score, first try, first solve.
    per_student = (base.values("user_id", "exercise_id", "part_id").order_by()
                   .annotate(n=Count("pk"), best=Max("eff"), first=Min("queued_at"),
                             solved_at=Min("queued_at", filter=Q(eff__gte=SOLVED)),
                             pending=Count("pk", filter=_awaiting_review()),
                             provisional=Count("pk", filter=_provisional())))
    tried_by: dict[int, set[int]] = defaultdict(set)
    solved_parts: dict[tuple[int, int], int] = defaultdict(int)
    for row in per_student:
        part = parts.get((row["exercise_id"], row["part_id"]))
        if part is None:
            continue  # a part since removed from the exercise folder
        part.attempts += row["n"]
        part.pending += row["pending"]
        part.provisional += row["provisional"]
        part.tried += 1
        tried_by[row["exercise_id"]].add(row["user_id"])
        if row["pending"] + row["provisional"] == row["n"]:
            continue  # only answers awaiting review or a GPU grade: no final score yet
        part.scored += 1
        part.histogram[score_bin(min(max(float(row["best"] or 0.0), 0.0), 1.0))] += 1
        if row["solved_at"] is not None:
            part.solved += 1
            part.solve_seconds.append(max(0.0, (row["solved_at"] - row["first"]).total_seconds()))
            solved_parts[(row["exercise_id"], row["user_id"])] += 1

    # One row per (exercise, part, mistake) among the wrong answers.
    wrong = (base.filter(eff__lt=SOLVED).filter(~Q(verdict="pending")
                                                | Q(review__score__isnull=False))
             .annotate(mistake=KT("result__mistake"))
             .values("exercise_id", "part_id", "mistake").order_by()
             .annotate(n=Count("pk")))
    counts: dict[tuple[int, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in wrong:
        if (row["exercise_id"], row["part_id"]) in parts:
            counts[(row["exercise_id"], row["part_id"])][row["mistake"] or OTHER] += row["n"]
    labels = {ex_id: mistake_labels(by_id[ex_id].slug) for ex_id in {k[0] for k in counts}}
    for key, by_name in counts.items():
        part = parts[key]
        part.wrong = sum(by_name.values())
        part.mistakes = _shares(by_name, part.wrong, labels[key[0]].get(part.part_id, {}))

    for ex_stats in out:
        ex_id = ex_stats.exercise.pk
        ex_stats.tried = len(tried_by[ex_id])
        n_parts = len(ex_stats.parts)
        ex_stats.completed = sum(1 for (e, _), n in solved_parts.items()
                                 if e == ex_id and n_parts and n >= n_parts)
    return out


def _shares(by_name: dict[str, int], wrong: int, labels: dict[str, str]) -> list[MistakeShare]:
    """Known mistakes most frequent first, then "other" last."""
    rows = []
    for name, n in by_name.items():
        if name == OTHER:
            continue
        feedback = labels.get(name, "").strip()
        label = headline(feedback) if feedback else name.replace("_", " ")
        rest = feedback[len(label):].strip() if feedback.startswith(label) else feedback
        rows.append(MistakeShare(name, label, rest if label != feedback else "", n, n / wrong))
    rows.sort(key=lambda m: (-m.count, m.name))
    if by_name.get(OTHER):
        rows.append(MistakeShare(OTHER, "other wrong answers (no known mistake matched)", "",
                                 by_name[OTHER], by_name[OTHER] / wrong))
    return rows


def mistake_labels(slug: str) -> dict[str, dict[str, str]]:
    """part id -> mistake name -> its feedback, from the canonical variant's mistakes().

    Names are the same in every variant; the feedback's numbers are the canonical variant's,
    which is what an instructor reads in the statement too. {} when the folder is gone."""
    try:
        spec = registry.get(slug)
        found = registry.mistakes(spec, registry.params_for(spec, registry.CANONICAL_VARIANT))
    except Exception:  # a removed or broken folder: names stay, labels fall back to them
        return {}
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for m in found:
        out[m.part].setdefault(m.name or "mistake", m.feedback)
    return dict(out)


# --- re-grades -------------------------------------------------------------------------------

def regrade_entries(job: RegradeJob, limit: int = REGRADE_ROWS) -> list[RegradeEntry]:
    """A job's entries for its page: failed first, then changed score or verdict, then the rest,
    at most `limit` (one query)."""
    finished = Q(finished_at__isnull=False)
    changed = finished & Q(error="") & (~Q(new_score=F("old_score"))
                                        | ~Q(new_verdict=F("old_verdict")))
    return list(RegradeEntry.objects.filter(job=job)
                .alias(rank=_rank(Q(error__gt=""), changed))
                .select_related("submission__user")
                .order_by("rank", "pk")[:limit])


def _rank(*conditions: Q) -> Case:
    return Case(*(When(c, then=Value(i)) for i, c in enumerate(conditions)),
                default=Value(len(conditions)), output_field=IntegerField())


# --- formatting ------------------------------------------------------------------------------

def score_bin(score: float) -> int:
    """0.0-0.1 -> 0, ..., 0.9-1.0 -> 9 (1.0 included in the last bin)."""
    return min(BINS - 1, max(0, int(score * BINS + 1e-9)))


def bin_labels() -> list[str]:
    return [f"{i / BINS:.1f}–{(i + 1) / BINS:.1f}" for i in range(BINS)]


def headline(text: str, limit: int = HEADLINE_CHARS) -> str:
    """The first sentence (or line) of a feedback text, cut at `limit` characters."""
    first = text.strip().split("\n", 1)[0]
    for stop in (". ", "? ", "! "):
        if stop in first:
            first = first.split(stop, 1)[0] + stop.strip()
            break
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"

