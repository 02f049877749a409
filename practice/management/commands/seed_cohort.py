"""A demo cohort with realistic work in it, for the instructors' pages and their query budget.

    manage.py seed_cohort --students 200 --exercises 10 [--instructor NAME] [--cohort NAME]
                          [--seed N]

Makes (or reuses) the instructor, a new cohort owned by them, `--students` students who joined
it, and for the first `--exercises` exercises (by seed) each student's variant, submissions and
per-part progress. Answers are what students type: the reference, one of the exercise's known
mistakes (the commoner ones more often, as in a real class), or some other wrong value; code
answers are the reference or one of the exercise's mutants; about half the text answers are
reviewed (an override by the instructor), the rest await review. Nothing is graded: the results are written as the grader would write them, in bulk, so 200 x 10 takes
seconds. Students share one password (printed), hashed once.
"""
from __future__ import annotations

import math
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.hashers import make_password
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from exercises import mutants, registry
from exercises.spec import ExerciseSpec, Mistake, PartSpec, Quantity
from graders.base import GradeResult
from graders.selftest import SANDBOXED, answer_text
from graders.text import review_feedback
from practice.actions.cohorts import create_cohort
from practice.models import (
    Assignment,
    Exercise,
    Membership,
    PartState,
    Review,
    Submission,
    User,
)

STUDENT_PASSWORD = "student-demo"
VARIANTS_PER_EXERCISE = 3  # the canonical one and two drawn: mistakes() runs once per variant
DIFFICULTY = {"easy": 1.0, "medium": 0.85, "hard": 0.7}
# Wrong numbers that no hint of the number grader explains (x10, x1024, % ... would be "partial").
OTHER_FACTORS = (0.37, 0.61, 1.43, 1.9, 2.7)
TEXT_ANSWERS = (
    "The bottleneck moves: once the batch is large enough the step reads more KV than weights, "
    "so the fix is to cap what is admitted rather than to add memory.",
    "I would measure first (queue time vs. step time per request) and only then pick the knob.",
    "Because the cost is paid per token, not per request; at long contexts it dominates.",
    "Not sure. I think it is the scheduler, but I could not show it from the numbers.",
)


@dataclass
class Variant:
    name: str
    solution: dict[str, Any]
    mistakes: dict[str, list[Mistake]]


@dataclass
class Plan:
    """One exercise, prepared once: its variants, and per part how hard it is and how often
    each known mistake is made."""

    exercise: Exercise
    spec: ExerciseSpec
    variants: list[Variant]
    ease: dict[str, float] = field(default_factory=dict)
    mistake_rank: dict[str, dict[str, float]] = field(default_factory=dict)  # name -> weight
    wrong_code: dict[str, list[str]] = field(default_factory=dict)


class Command(BaseCommand):
    help = ("Seed a demo cohort: an instructor, students who joined, and their submissions to "
            "the first exercises (written in bulk, not graded).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--students", type=int, default=200)
        parser.add_argument("--exercises", type=int, default=10)
        parser.add_argument("--instructor", default="instructor",
                            help="username of the cohort's owner (made an instructor; created "
                                 "with password NAME-demo if new)")
        parser.add_argument("--cohort", default="", help="the cohort's name")
        parser.add_argument("--seed", type=int, default=2025, help="random seed (same seed, "
                                                                    "same cohort)")

    def handle(self, *args: Any, **opts: Any) -> None:
        n_students, n_exercises = opts["students"], opts["exercises"]
        if not 1 <= n_students <= 5000 or not 1 <= n_exercises <= 100:
            raise CommandError("--students is 1 to 5000 and --exercises 1 to 100")
        rng = random.Random(opts["seed"])
        exercises = list(Exercise.objects.filter(active=True).order_by("seed", "slug")
                         [:n_exercises])
        if not exercises:
            raise CommandError("no exercises: run `manage.py sync_exercises` first")
        plans = [_plan(ex, rng) for ex in exercises]
        now = timezone.now()
        with transaction.atomic():
            instructor, made = _instructor(opts["instructor"])
            cohort = create_cohort(
                instructor, opts["cohort"] or f"Demo cohort ({n_students} students)")
            students = _students(cohort.pk, n_students)
            Membership.objects.bulk_create(Membership(cohort=cohort, user=s) for s in students)
            subs: list[Submission] = []
            reviews: list[tuple[Submission, float]] = []
            states: list[PartState] = []
            assignments: list[Assignment] = []
            for student in students:
                skill = min(0.97, max(0.1, rng.gauss(0.6, 0.18)))
                activity = rng.uniform(0.5, 1.0)
                for plan in plans:
                    if rng.random() > activity:
                        continue
                    variant = rng.choice(plan.variants)
                    assignments.append(Assignment(user=student, exercise=plan.exercise,
                                                  variant=variant.name))
                    start = now - timedelta(days=rng.uniform(0.5, 21))
                    _work(rng, student, plan, variant, skill, start, subs, reviews, states)
            with _keep_queued_at():
                Submission.objects.bulk_create(subs, batch_size=1000)
            Review.objects.bulk_create(
                (Review(submission=sub, cohort=cohort, override_score=score, score=score,
                        override_reason="Demo review (seed_cohort).", reviewer=instructor)
                 for sub, score in reviews), batch_size=1000)
            PartState.objects.bulk_create(states, batch_size=1000)
            Assignment.objects.bulk_create(assignments, batch_size=1000)
        self.stdout.write(
            f"cohort {cohort.pk} {cohort.name!r}, join code {cohort.join_code}, owner "
            f"{instructor.username}" + (f" (password {instructor.username}-demo)" if made else "")
            + f"\n{len(students)} students {students[0].username} .. {students[-1].username} "
            f"(password {STUDENT_PASSWORD}), {len(subs)} submissions to {len(plans)} exercises"
            f"\nstatistics: /teach/cohorts/{cohort.pk}/stats/")


def _instructor(name: str) -> tuple[User, bool]:
    user, made = User.objects.get_or_create(username=name)
    if made:
        user.set_password(f"{name}-demo")
    if made or not user.is_instructor:
        user.is_instructor = True
        user.save()
    return user, made


def _students(cohort_id: int, n: int) -> list[User]:
    password = make_password(STUDENT_PASSWORD)  # hashed once: hashing 200 times takes minutes
    return User.objects.bulk_create(
        User(username=f"c{cohort_id}-{i:03d}", password=password) for i in range(1, n + 1))


def _plan(ex: Exercise, rng: random.Random) -> Plan:
    spec = registry.get(ex.slug)
    names = [registry.CANONICAL_VARIANT] + [str(rng.randrange(1, 1_000_000))
                                            for _ in range(VARIANTS_PER_EXERCISE - 1)]
    variants = []
    for name in names:
        params = registry.params_for(spec, name)
        by_part: dict[str, list[Mistake]] = {}
        for m in registry.mistakes(spec, params):
            by_part.setdefault(m.part, []).append(m)
        variants.append(Variant(name, registry.solve(spec, params), by_part))
    plan = Plan(ex, spec, variants)
    for part in spec.parts:
        plan.ease[part.id] = rng.uniform(0.35, 0.95) * DIFFICULTY.get(ex.difficulty, 0.85)
        # A few mistakes account for most wrong answers (Zipf-like), in an order of its own.
        seen = list(dict.fromkeys(m.name or "mistake" for m in variants[0].mistakes.get(
            part.id, [])))
        rng.shuffle(seen)
        plan.mistake_rank[part.id] = {n: 1 / (i + 1) ** 1.3 for i, n in enumerate(seen)}
        if part.type in SANDBOXED:
            folder = spec.path / SANDBOXED[part.type]
            plan.wrong_code[part.id] = [m.source for m in mutants.load(folder)[:4]]
    return plan


def _work(rng: random.Random, student: User, plan: Plan, variant: Variant, skill: float,
          start: datetime, subs: list[Submission], reviews: list[tuple[Submission, float]],
          states: list[PartState]) -> None:
    """One student's attempts at one exercise: parts in order, until solved or given up."""
    t = start
    for i, part in enumerate(plan.spec.parts):
        if i and rng.random() < 0.08:
            return  # stopped partway through the exercise
        t += timedelta(seconds=rng.lognormvariate(math.log(400), 0.8))  # reading the part
        attempts, best, solved_at = 0, 0.0, None
        tries = 1 if part.type == "text" else rng.randint(1, 5)
        if part.type == "text" and rng.random() < 0.3:
            continue  # skipped the write-up
        for k in range(tries):
            p_right = min(0.95, 0.75 * skill * plan.ease[part.id] + 0.2 * k)
            answer, result = _answer(rng, plan, variant, part, rng.random() < p_right)
            finished = t + timedelta(seconds=rng.uniform(0.05, 0.4 if part.type not in SANDBOXED
                                                         else 4.0))
            sub = Submission(
                user=student, exercise=plan.exercise, part_id=part.id, part_type=part.type,
                variant=variant.name, mode=Submission.Mode.SUBMIT, answer=answer,
                status=Submission.Status.GRADED, score=result.score, verdict=result.verdict,
                result=result.as_json(), deliveries=int(part.type in SANDBOXED), queued_at=t,
                started_at=t, finished_at=finished)
            subs.append(sub)
            score = result.score
            if part.type == "text" and rng.random() < 0.5:
                score = 1.0 if rng.random() < skill else rng.choice((0.0, 0.5))
                reviews.append((sub, score))
            attempts += 1
            best = max(best, score)
            if score >= 1.0:
                solved_at = finished
                break
            if rng.random() < 0.25:
                break  # gave up on this part
            t = finished + timedelta(seconds=rng.lognormvariate(math.log(150), 0.9))
        states.append(PartState(user=student, exercise=plan.exercise, part_id=part.id,
                                attempts=attempts, best_score=best, solved_at=solved_at))
        t += timedelta(seconds=30)


def _answer(rng: random.Random, plan: Plan, variant: Variant, part: PartSpec,
            right: bool) -> tuple[str, GradeResult]:
    """What the student typed and what the grader would have said."""
    ref = variant.solution[part.id]
    if part.type == "text":
        return rng.choice(TEXT_ANSWERS), GradeResult(
            0.0, "pending", review_feedback(part), echo="a few words",
            extra={"key_points": list(part.key_points)})
    if part.type in SANDBOXED:
        if right or not plan.wrong_code[part.id]:
            return ((plan.spec.path / str(ref)).read_text(encoding="utf-8"),
                    GradeResult(1.0, "correct", "All checks passed."))
        score = rng.choice((0.0, 0.25, 0.5, 0.75))
        return rng.choice(plan.wrong_code[part.id]), GradeResult(
            score, "partial" if score else "incorrect", "Some hidden cases failed.")
    if right:
        text = answer_text(part, ref)
        return text, GradeResult(1.0, "correct", "Correct.", echo=text)
    known = variant.mistakes.get(part.id, [])
    weights = plan.mistake_rank[part.id]
    if known and rng.random() < 0.75:
        m = rng.choices(known, [weights.get(m.name or "mistake", 0.05) for m in known])[0]
        return answer_text(part, m.answer), GradeResult(0.0, "incorrect", m.feedback,
                                                        mistake=m.name or "mistake")
    text = _other_wrong(rng, part, ref, known)
    return text, GradeResult(0.0, "incorrect", "Not the expected value.")


def _other_wrong(rng: random.Random, part: PartSpec, ref: Any, known: list[Mistake]) -> str:
    """A wrong answer that is none of the known mistakes (as far as a quick look can tell)."""
    if part.type == "number":
        value = ref.value if isinstance(ref, Quantity) else float(ref)
        wrong = (value or 1.0) * rng.choice(OTHER_FACTORS)
        if isinstance(ref, Quantity):
            return answer_text(part, Quantity(wrong, ref.unit))
        return answer_text(part, wrong)
    if part.type == "expression":
        return f"2*({ref})"
    ids = [o.id for o in part.options]
    taken = [m.answer for m in known] + [ref]
    for _ in range(20):
        if part.type == "ranking":
            pick: Any = rng.sample(ids, len(ids))
        elif part.multi:
            pick = sorted(rng.sample(ids, rng.randint(1, len(ids))))
        else:
            pick = rng.choice(ids)
        if not any(_same(part, pick, t) for t in taken):
            return answer_text(part, pick)
    return answer_text(part, pick)  # every option is a known answer: a repeat is fine


def _same(part: PartSpec, a: Any, b: Any) -> bool:
    if part.type == "ranking":
        return list(a) == list(b)
    return _as_set(a) == _as_set(b)


def _as_set(x: Any) -> set[str]:
    return {x} if isinstance(x, str) else set(x)


@contextmanager
def _keep_queued_at() -> Iterator[None]:
    """bulk_create stamps auto_now_add fields with now; the demo needs its spread of times.
    Switched off for the insert only, and always back on."""
    f = Submission._meta.get_field("queued_at")
    saved = f.auto_now_add  # type: ignore[union-attr]
    f.auto_now_add = False  # type: ignore[union-attr]
    try:
        yield
    finally:
        f.auto_now_add = saved  # type: ignore[union-attr]
