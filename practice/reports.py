"""Read-only reports for instructors: a cohort's score sheet, as rows and as CSV.

One row per student and one column per exercise × part, holding the effective score (a review's
override or rubric score beats the grader's; see `scores.effective_score`), the best over the
student's counted submissions (submit mode, graded). A fixed number of queries whatever the
cohort's size: exercises, students, then their submissions with reviews joined. A cell with no
final score yet says why instead: "pending" (awaiting an instructor) or "provisional" (a kernel
that passed only the CPU preview, awaiting its GPU grade: practice/provisional.py); it adds no
points to the total.

Cells are written for spreadsheets, which run a cell starting with = + - @ as a formula: such
cells get a leading quote (OWASP's advice on CSV injection). Usernames are chosen by students.
"""
from __future__ import annotations

import csv
import io

from django.db.models import Count, Max, Q

from practice import access
from practice.models import Cohort, Exercise, Membership, PartState, Submission, User
from practice.provisional import PROVISIONAL
from practice.scores import effective_score

# A cell awaiting an instructor (a text answer, a held kernel timing) with nothing scored yet.
PENDING = "pending"
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _exercises_for(students: list[User]) -> list[Exercise]:
    """Active exercises, plus retired ones these students still have counted answers to."""
    used = (Submission.objects.filter(user__in=students, mode=Submission.Mode.SUBMIT)
            .values("exercise_id"))
    return list(Exercise.objects.filter(active=True)
                | Exercise.objects.filter(pk__in=used))


def _unscored(sub: Submission) -> str:
    """PENDING or PROVISIONAL when the submission has no final score yet, else ""."""
    review = getattr(sub, "review", None)
    if review is not None and review.score is not None:
        return ""
    return sub.verdict if sub.verdict in (PENDING, PROVISIONAL) else ""


def _fmt(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") if value else "0"


def cohort_scores_rows(viewer: User, cohort: Cohort) -> list[list[str]]:
    """The score sheet: a header row, then one row per student (by username).

    Raises `access.Forbidden` when the viewer may not see the cohort."""
    students = list(access.visible_students(viewer, cohort).order_by("username"))
    exercises = sorted(_exercises_for(students), key=lambda e: (e.seed, e.slug))
    columns = [(ex, str(p["id"]), float(p.get("points", 1) or 0))
               for ex in exercises for p in ex.parts]

    # (user, exercise, part) -> best counted score; and, for cells without one, why not.
    best: dict[tuple[int, int, str], float] = {}
    waiting: dict[tuple[int, int, str], set[str]] = {}
    subs = (Submission.objects
            .filter(user__in=students, exercise__in=exercises, mode=Submission.Mode.SUBMIT,
                    status=Submission.Status.GRADED)
            .select_related("review")
            .only("pk", "user_id", "exercise_id", "part_id", "score", "verdict",
                  "review__score"))
    for sub in subs:
        key = (sub.user_id, sub.exercise_id, sub.part_id)
        why = _unscored(sub)
        if why:
            waiting.setdefault(key, set()).add(why)
            continue
        score = effective_score(sub)
        if score is not None:
            best[key] = max(best.get(key, 0.0), score)

    possible = sum(points for _, _, points in columns)
    header = ["student", *(f"{ex.seed} {ex.slug} / {pid}" for ex, pid, _ in columns),
              f"total points (of {_fmt(possible)})"]
    rows = [header]
    for student in students:
        row = [student.username]
        total = 0.0
        for ex, pid, points in columns:
            key = (student.pk, ex.pk, pid)
            if key in best:
                row.append(_fmt(best[key]))
                total += best[key] * points
            else:
                # Provisional first: that grade comes by itself from a GPU worker, while a
                # pending one waits on the instructor (who sees it in the review queue).
                why = waiting.get(key, set())
                row.append(PROVISIONAL if PROVISIONAL in why else PENDING if why else "")
        row.append(_fmt(round(total, 3)))
        rows.append(row)
    return rows


def safe_cell(value: str) -> str:
    """A cell a spreadsheet will show as text, never run as a formula."""
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


def cohort_scores_csv(viewer: User, cohort: Cohort) -> str:
    """The score sheet as CSV text (raises `access.Forbidden` like `cohort_scores_rows`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for row in cohort_scores_rows(viewer, cohort):
        writer.writerow([safe_cell(cell) for cell in row])
    return out.getvalue()


def student_progress(viewer: User, cohort: Cohort) -> list[dict[str, object]]:
    """Per student of the cohort: parts solved, parts attempted, last activity (newest
    submission), joined. Three queries whatever the cohort's size."""
    access.cohort_for(viewer, cohort.pk)
    members = list(Membership.objects.filter(cohort=cohort).select_related("user")
                   .order_by("user__username"))
    ids = [m.user_id for m in members]
    states = dict.fromkeys(ids, (0, 0))
    for row in (PartState.objects.filter(user_id__in=ids).values("user_id")
                .annotate(solved=Count("pk", filter=Q(solved_at__isnull=False)),
                          attempted=Count("pk", filter=Q(attempts__gt=0)))):
        states[row["user_id"]] = (row["solved"], row["attempted"])
    last = dict(Submission.objects.filter(user_id__in=ids).values("user_id")
                .annotate(last=Max("queued_at")).values_list("user_id", "last"))
    return [{"user": m.user, "joined_at": m.joined_at, "solved": states[m.user_id][0],
             "attempted": states[m.user_id][1], "last_activity": last.get(m.user_id)}
            for m in members]
