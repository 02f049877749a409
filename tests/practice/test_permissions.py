"""Who may open what: every instructor URL × every role, from one table.

The rules (practice/access.py decides; the views turn its answers into status codes):
  anonymous                              -> redirect to the login page, for every URL
  /teach/, /teach/review/ for a student  -> 403 with a plain page
  an object the viewer may not see       -> 404 (an instructor of another cohort learns nothing)
  a GET to a POST-only action            -> 405
  and a refused request changes nothing.

A new URL is one line in CASES. The command line follows the same rules (export_scores), and a
student's own pages never show another student's answers or the comments on them.
"""
from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from practice.actions.cohorts import create_cohort, join_cohort
from practice.actions.exercises import assignment_for
from practice.actions.regrade import start_regrade
from practice.actions.reviews import add_comment, override_score, save_rubric_item
from practice.models import (
    Cohort,
    Comment,
    Exercise,
    Membership,
    RegradeJob,
    Review,
    RubricItem,
    Submission,
    User,
)

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "member", "other_student", "other_instructor", "instructor", "staff")
SLUG, TEXT_PART, CODE_PART = "kv_page_ledger", "fix", "ledger"

# What a cell expects: a status code, or one of these.
LOGIN = "login"  # 302 to the login page
OK = "ok"  # GET: 200; POST: 200 (htmx partial) or 302 (back to a page), and it took effect


def rule(*, student: Any, other_instructor: Any, instructor: Any = OK,
         staff: Any = OK) -> dict[str, Any]:
    return {"anonymous": LOGIN, "member": student, "other_student": student,
            "other_instructor": other_instructor, "instructor": instructor, "staff": staff}


# Instructors' landing pages: a student is told it is for instructors.
TEACH = rule(student=403, other_instructor=OK)
# An object of the instructor's cohort (A): hidden from everyone but its instructor and staff.
OWN = rule(student=404, other_instructor=404)
# The same kind of object in the other instructor's cohort (B).
THEIRS = rule(student=404, other_instructor=OK, instructor=404)
# The review queue filtered to cohort A: students are refused before the filter is read.
TEACH_OWN = rule(student=403, other_instructor=404)
# Re-grading an exercise: any instructor may, over their own students only.
REGRADE = rule(student=404, other_instructor=OK)
# Joining is for everyone logged in.
ANYONE = rule(student=OK, other_instructor=OK)
# A GET to an action that only takes POST.
POST_ONLY = rule(student=405, other_instructor=405, instructor=405, staff=405)


@dataclass
class World:
    instructor: User
    other_instructor: User
    member: User
    other_student: User
    staff: User
    cohort: Cohort
    other_cohort: Cohort
    text_sub: Submission
    code_sub: Submission
    other_sub: Submission
    item: RubricItem
    job: RegradeJob

    def user(self, role: str) -> User | None:
        return None if role == "anonymous" else getattr(self, role)


def submit(user: User, part_id: str, answer: str, score: float, verdict: str) -> Submission:
    ex = Exercise.objects.get(slug=SLUG)
    part = next(p for p in ex.parts if p["id"] == part_id)
    return Submission.objects.create(user=user, exercise=ex, part_id=part_id,
                                     part_type=part["type"],
                                     variant=assignment_for(user, ex).variant,
                                     answer=answer, status="graded", score=score,
                                     verdict=verdict)


@pytest.fixture
def world() -> World:
    make = User.objects.create_user
    instructor = make("inst", password="pw-inst-123", is_instructor=True)
    other_instructor = make("other-inst", password="pw-other-123", is_instructor=True)
    member, other_student = make("member", password="pw-m-123"), make("outsider", password="x")
    staff = make("staffer", password="pw-staff-123", is_staff=True)
    cohort = create_cohort(instructor, "Cohort A")
    other_cohort = create_cohort(other_instructor, "Cohort B")
    join_cohort(member, cohort.join_code)
    join_cohort(other_student, other_cohort.join_code)
    text_sub = submit(member, TEXT_PART, "The ledger leaks a block.", 0.0, "pending")
    code_sub = submit(member, CODE_PART, "def ledger():  # MEMBER-CODE\n    return 1\n", 0.5, "partial")
    other_sub = submit(other_student, TEXT_PART, "Someone else's essay.", 0.0, "pending")
    ex = Exercise.objects.get(slug=SLUG)
    item = save_rubric_item(instructor, cohort, ex, TEXT_PART, label="names the leak",
                                    points=1)
    job = start_regrade(instructor, ex)
    return World(instructor, other_instructor, member, other_student, staff, cohort,
                 other_cohort, text_sub, code_sub, other_sub, item, job)


@dataclass
class Case:
    name: str  # the URL's name in practice/urls.py
    method: str
    expect: dict[str, Any]
    args: Callable[[World], list[Any]] = lambda w: []
    data: Callable[[World], dict[str, Any]] = lambda w: {}
    query: Callable[[World], str] = lambda w: ""
    # For an allowed POST: the table that gains a row (or None: the view answers with a page).
    creates: type | None = None
    label: str = field(default="")

    @property
    def id(self) -> str:
        return f"{self.name}{self.label}-{self.method}"


def cohort_a(w: World) -> list[Any]:
    return [w.cohort.pk]


def rubric_args(w: World) -> list[Any]:
    return [w.cohort.pk, SLUG, TEXT_PART]


CASES = [
    Case("teach", "GET", TEACH),
    Case("cohort_create", "POST", TEACH, data=lambda w: {"name": "New one"}, creates=Cohort),
    Case("cohort_create", "GET", POST_ONLY),
    Case("cohort", "GET", OWN, cohort_a),
    Case("cohort", "GET", THEIRS, lambda w: [w.other_cohort.pk], label="(B)"),
    Case("cohort_export", "GET", OWN, cohort_a),
    Case("cohort_export", "GET", THEIRS, lambda w: [w.other_cohort.pk], label="(B)"),
    Case("cohort_stats", "GET", OWN, cohort_a),
    Case("exercise_stats", "GET", OWN, lambda w: [w.cohort.pk, SLUG]),
    Case("rubric", "GET", OWN, rubric_args),
    Case("rubric", "POST", OWN, rubric_args, creates=RubricItem,
         data=lambda w: {"label": "cites the code", "points": "0.5", "explanation": "why"}),
    Case("review_queue", "GET", TEACH),
    Case("review_queue", "GET", TEACH_OWN, query=lambda w: f"?cohort={w.cohort.pk}",
         label="(?cohort=A)"),
    Case("attempt", "GET", OWN, lambda w: [w.text_sub.pk]),
    Case("attempt", "GET", OWN, lambda w: [w.code_sub.pk], label="(code)"),
    Case("attempt", "GET", THEIRS, lambda w: [w.other_sub.pk], label="(B)"),
    Case("attempt_comment", "POST", OWN, lambda w: [w.code_sub.pk], creates=Comment,
         data=lambda w: {"body": "Off by one here.", "line": "2"}),
    Case("attempt_comment", "GET", POST_ONLY, lambda w: [w.code_sub.pk]),
    Case("attempt_rubric", "POST", OWN, lambda w: [w.text_sub.pk], creates=Review,
         data=lambda w: {"item": [str(w.item.pk)]}),
    Case("attempt_rubric", "GET", POST_ONLY, lambda w: [w.text_sub.pk]),
    Case("attempt_override", "POST", OWN, lambda w: [w.code_sub.pk], creates=Review,
         data=lambda w: {"score": "0.75", "reason": "Right idea, one slip."}),
    Case("attempt_override", "GET", POST_ONLY, lambda w: [w.code_sub.pk]),
    Case("regrade_start", "POST", REGRADE, lambda w: [SLUG], creates=RegradeJob),
    Case("regrade_start", "GET", POST_ONLY, lambda w: [SLUG]),
    Case("regrade_progress", "GET", OWN, lambda w: [w.job.pk]),
    Case("join", "GET", ANYONE),
    Case("join_code", "GET", ANYONE, lambda w: [w.cohort.join_code]),
]

CELLS = [pytest.param(case, role, id=f"{case.id}-{role}") for case in CASES for role in ROLES]


def snapshot() -> dict[str, Any]:
    """Everything an instructor action could change."""
    return {
        "cohorts": list(Cohort.objects.values_list("pk", "name", "join_code").order_by("pk")),
        "memberships": list(Membership.objects.values_list("cohort_id", "user_id")
                            .order_by("pk")),
        "rubric": list(RubricItem.objects.values_list("pk", "label", "points").order_by("pk")),
        "reviews": list(Review.objects.values_list("pk", "score", "override_score")
                        .order_by("pk")),
        "comments": Comment.objects.count(),
        "jobs": RegradeJob.objects.count(),
        "scores": list(Submission.objects.values_list("pk", "score").order_by("pk")),
    }


@pytest.mark.parametrize(("case", "role"), CELLS)
def test_permission_matrix(world: World, case: Case, role: str) -> None:
    client = Client()
    user = world.user(role)
    if user is not None:
        client.force_login(user)
    url = reverse(case.name, args=case.args(world)) + case.query(world)
    expected = case.expect[role]
    before = snapshot()
    created_before = case.creates.objects.count() if case.creates else 0
    if case.method == "POST":
        r = client.post(url, case.data(world))
    else:
        r = client.get(url)
    where = f"{case.method} {url} as {role}"

    if expected == LOGIN:
        assert r.status_code == 302, where
        assert r["Location"].startswith(reverse("login") + "?next="), where
    elif expected == OK:
        if case.method == "GET":
            assert r.status_code == 200, where
        else:
            assert r.status_code in (200, 302), where
            if r.status_code == 302:
                assert not r["Location"].startswith(reverse("login")), where
            if case.creates is not None:
                assert case.creates.objects.count() == created_before + 1, where
    else:
        assert r.status_code == expected, where
    if expected != OK or case.method == "GET":
        assert snapshot() == before, f"{where} changed something"
    if expected == 404:
        # Nothing of what is hidden shows through the error page.
        body = r.content.decode()
        for secret in (world.text_sub.answer, world.other_sub.answer, world.cohort.join_code,
                       world.other_cohort.join_code, "Cohort A", "Cohort B"):
            assert secret not in body, where
    if expected == 403:
        assert "For instructors only" in r.content.decode(), where


def test_every_instructor_url_is_in_the_matrix() -> None:
    from practice.urls import urlpatterns

    instructor_urls = {p.name for p in urlpatterns
                       if str(p.pattern).startswith(("teach/", "join/"))}
    assert instructor_urls <= {c.name for c in CASES}


# --- the command line follows the same rules ----------------------------------------------------


@pytest.mark.parametrize(("role", "allowed"), [
    ("member", False), ("other_student", False), ("other_instructor", False),
    ("instructor", True), ("staff", True)])
def test_export_scores_on_the_command_line(world: World, role: str, allowed: bool) -> None:
    user = world.user(role)
    assert user is not None
    args = ["export_scores", str(world.cohort.pk), "--as", user.username]
    if allowed:
        out = io.StringIO()
        call_command(*args, stdout=out)
        assert "member" in out.getvalue() and "outsider" not in out.getvalue()
    else:
        with pytest.raises(CommandError):
            call_command(*args, stdout=io.StringIO())


# --- students see their own work only ---------------------------------------------------------


def test_a_students_pages_never_show_another_students_work(world: World) -> None:
    secret_answer = "MEMBER-ONLY answer: the ledger double-frees block 7."
    sub = submit(world.member, TEXT_PART, secret_answer, 0.0, "pending")
    add_comment(world.instructor, sub, "MEMBER-ONLY comment: name the block.")
    override_score(world.instructor, sub, 0.5, "MEMBER-ONLY reason: half of it.")
    code_comment = add_comment(world.instructor, world.code_sub,
                                       "MEMBER-ONLY line comment", line=1)
    classmate = User.objects.create_user("classmate", password="pw-c-123")
    join_cohort(classmate, world.cohort.join_code)
    secrets = [secret_answer, "MEMBER-ONLY", "MEMBER-CODE"]

    for viewer in (classmate, world.other_student):
        client = Client()
        client.force_login(viewer)
        pages = [client.get(reverse("exercise", args=[SLUG])),
                 client.get(reverse("history")), client.get(reverse("catalog"))]
        for page in pages:
            assert page.status_code == 200
            body = page.content.decode()
            for s in secrets:
                assert s not in body, f"{viewer.username} sees {s!r}"
        for pk in (sub.pk, world.code_sub.pk):
            assert client.get(reverse("submission_status", args=[pk])).status_code == 404
    assert Comment.objects.filter(pk=code_comment.pk).exists()

    # The member does see their own answer on their own page.
    client = Client()
    client.force_login(world.member)
    assert secret_answer in client.get(reverse("exercise", args=[SLUG])).content.decode()
