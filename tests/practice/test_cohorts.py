"""Cohorts through the site and the command line: make one, join it, see its students, export
its scores (CSV: effective scores, bounded queries, safe for spreadsheets), and the admin."""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from practice import reports
from practice.actions.cohorts import create_cohort, join_cohort
from practice.actions.reviews import apply_rubric, override_score, save_rubric_item
from practice.models import (
    Cohort,
    Comment,
    Exercise,
    Membership,
    PartState,
    RegradeJob,
    Review,
    Submission,
    User,
)

pytestmark = pytest.mark.django_db

TEXT = ("kv_page_ledger", "fix")  # a text part: graded "pending" until an instructor reviews it
NUMBER = ("kv_page_ledger", "pool_blocks")


def make_user(name: str, **flags: Any) -> User:
    return User.objects.create_user(name, password=f"pw-{name}-123", **flags)


def make_sub(user: User, slug: str, part_id: str, score: float | None, verdict: str, *,
             mode: str = "submit", status: str = "graded", answer: str = "42") -> Submission:
    ex = Exercise.objects.get(slug=slug)
    part = next(p for p in ex.parts if p["id"] == part_id)
    return Submission.objects.create(user=user, exercise=ex, part_id=part_id,
                                     part_type=part["type"], variant="canonical", mode=mode,
                                     answer=answer, status=status, score=score, verdict=verdict)


@pytest.fixture
def teacher() -> User:
    return make_user("teacher", is_instructor=True)


@pytest.fixture
def cohort(teacher: User) -> Cohort:
    return create_cohort(teacher, "Spring  interviews ")


def logged_in(user: User) -> Client:
    c = Client()
    c.force_login(user)
    return c


# --- making a cohort ---------------------------------------------------------------------------


def test_an_instructor_makes_a_cohort_and_sees_its_code_and_link(teacher: User) -> None:
    c = logged_in(teacher)
    r = c.post("/teach/cohorts/new/", {"name": "  Inference   spring "})
    cohort = Cohort.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/teach/cohorts/{cohort.pk}/"
    assert cohort.name == "Inference spring" and cohort.owner == teacher
    assert len(cohort.join_code) == 8
    detail = c.get(r["Location"]).content.decode()
    assert "made. Students join with the code" in detail  # the message after creating
    page = c.get("/teach/").content.decode()
    assert "Inference spring" in page and cohort.join_code in page
    assert f"http://testserver/join/{cohort.join_code}/" in page  # the full link, to paste
    assert f'href="/teach/cohorts/{cohort.pk}/stats/"' in page
    assert f'href="/teach/review/?cohort={cohort.pk}"' in page


def test_a_cohort_needs_a_name(teacher: User) -> None:
    r = logged_in(teacher).post("/teach/cohorts/new/", {"name": "   "})
    assert r.status_code == 400 and "needs a name" in r.content.decode()
    assert not Cohort.objects.exists()


def test_a_student_cannot_make_a_cohort() -> None:
    r = logged_in(make_user("sam")).post("/teach/cohorts/new/", {"name": "Mine"})
    assert r.status_code == 403 and not Cohort.objects.exists()


def test_the_dashboard_lists_only_my_cohorts(teacher: User, cohort: Cohort) -> None:
    other = make_user("other", is_instructor=True)
    theirs = create_cohort(other, "Their cohort")
    page = logged_in(teacher).get("/teach/").content.decode()
    assert cohort.name in page and "Their cohort" not in page and theirs.join_code not in page
    staff_page = logged_in(make_user("root", is_staff=True)).get("/teach/").content.decode()
    assert cohort.name in staff_page and "Their cohort" in staff_page


# --- joining -----------------------------------------------------------------------------------


def test_the_join_link_shows_the_cohort_and_joins_only_on_post(cohort: Cohort) -> None:
    sam = make_user("sam")
    c = logged_in(sam)
    r = c.get(f"/join/{cohort.join_code}/")
    body = r.content.decode()
    assert r.status_code == 200 and cohort.name in body and 'id="join-button"' in body
    assert not Membership.objects.exists()  # a GET (a link preview, a prefetch) joins nobody
    r = c.post(f"/join/{cohort.join_code}/", follow=True)
    assert r.redirect_chain[-1][0] == "/"
    assert f"You joined “{cohort.name}”" in r.content.decode()
    assert Membership.objects.filter(cohort=cohort, user=sam).count() == 1
    again = c.get(f"/join/{cohort.join_code}/").content.decode()
    assert 'id="already-member"' in again and 'id="join-button"' not in again
    c.post(f"/join/{cohort.join_code}/")  # twice: still one membership
    assert Membership.objects.filter(cohort=cohort, user=sam).count() == 1


def test_the_join_form_takes_a_code_typed_loosely(cohort: Cohort) -> None:
    sam = make_user("sam")
    c = logged_in(sam)
    assert 'name="code"' in c.get("/join/").content.decode()
    typed = " ".join(cohort.join_code.lower())  # lower case, spaces between the characters
    r = c.post("/join/", {"code": typed})
    assert r.status_code == 302 and r["Location"] == "/"
    assert Membership.objects.filter(cohort=cohort, user=sam).exists()


@pytest.mark.parametrize("code", ["", "NOPE2345", "x" * 500, "<script>", "é", "AB\x00CD"])
def test_a_wrong_code_is_a_form_error(cohort: Cohort, code: str) -> None:
    r = logged_in(make_user("sam")).post("/join/", {"code": code})
    body = r.content.decode()
    assert r.status_code == 400 and 'id="join-error"' in body and "<script>" not in body
    assert not Membership.objects.exists()


@pytest.mark.parametrize("code", ["NOPE2345", "AB%00CD", "%C3%A9"])
def test_a_wrong_link_is_a_form_error_not_a_crash(cohort: Cohort, code: str) -> None:
    r = logged_in(make_user("sam")).get(f"/join/{code}/")
    assert r.status_code == 404 and 'id="join-error"' in r.content.decode()


def test_text_with_a_nul_is_refused_not_a_server_error(teacher: User) -> None:
    r = logged_in(teacher).post("/teach/cohorts/new/", {"name": "Spring\x00"})
    assert r.status_code == 400 and not Cohort.objects.exists()


def test_an_owner_does_not_join_their_own_cohort(teacher: User, cohort: Cohort) -> None:
    c = logged_in(teacher)
    assert 'id="join-button"' not in c.get(f"/join/{cohort.join_code}/").content.decode()
    r = c.post(f"/join/{cohort.join_code}/")
    assert r.status_code == 400 and "you own this cohort" in r.content.decode()
    assert not Membership.objects.exists()


def test_a_join_link_opened_logged_out_comes_back_after_login(cohort: Cohort) -> None:
    r = Client().get(f"/join/{cohort.join_code}/")
    assert r.status_code == 302
    assert r["Location"] == f"/login/?next=/join/{cohort.join_code}/"


# --- the cohort page ---------------------------------------------------------------------------


def test_the_cohort_page_shows_each_students_progress(teacher: User, cohort: Cohort) -> None:
    ann, bob, outsider = make_user("ann"), make_user("bob"), make_user("zed-outsider")
    for u in (ann, bob):
        join_cohort(u, cohort.join_code)
    ex = Exercise.objects.get(slug=NUMBER[0])
    PartState.objects.create(user=ann, exercise=ex, part_id="pool_blocks", attempts=2,
                             best_score=1, solved_at=ex.synced_at)
    PartState.objects.create(user=ann, exercise=ex, part_id="exhaust_step", attempts=1)
    make_sub(ann, *NUMBER, 1.0, "correct")
    make_sub(ann, *TEXT, 0.0, "pending")
    make_sub(outsider, *NUMBER, 1.0, "correct")
    r = logged_in(teacher).get(f"/teach/cohorts/{cohort.pk}/")
    body = r.content.decode()
    assert r.status_code == 200
    assert "Students (2)" in body and "ann" in body and "bob" in body
    assert "zed-outsider" not in body
    row = body.split("<th scope=\"row\">ann</th>")[1].split("</tr>")[0]
    assert 'value="1"' in row and "<td>2</td>" in row and "ago" in row  # 1 solved, 2 attempted
    bob_row = body.split("<th scope=\"row\">bob</th>")[1].split("</tr>")[0]
    assert "never" in bob_row
    assert "(1 awaiting a grade)" in body  # ann's text answer
    assert f'href="/teach/cohorts/{cohort.pk}/export.csv"' in body
    assert f"http://testserver/join/{cohort.join_code}/" in body


def test_the_cohort_page_reads_a_fixed_number_of_queries(teacher: User, cohort: Cohort) -> None:
    c = logged_in(teacher)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert c.get(f"/teach/cohorts/{cohort.pk}/").status_code == 200
        return len(ctx.captured_queries)

    def add(n: int, start: int) -> None:
        for i in range(start, start + n):
            u = make_user(f"s{i:03d}")
            join_cohort(u, cohort.join_code)
            make_sub(u, *NUMBER, 0.5, "partial")

    add(2, 0)
    few = count()
    add(20, 2)
    assert count() == few


# --- the score sheet ---------------------------------------------------------------------------


def rows_by_student(text: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    return header, {r[0]: dict(zip(header, r, strict=True)) for r in rows[1:]}


@pytest.fixture
def graded_cohort(teacher: User, cohort: Cohort) -> Cohort:
    """ann: number part wrong then right, text part overridden to 0.5 by a review;
    bob: a text answer awaiting review, a correct answer in run mode (not counted);
    cy: a number answer the grader gave 1 that a review overrode down to 0.25."""
    ann, bob, cy = make_user("ann"), make_user("bob"), make_user("cy")
    for u in (ann, bob, cy):
        join_cohort(u, cohort.join_code)
    make_sub(ann, *NUMBER, 0.0, "incorrect")
    make_sub(ann, *NUMBER, 1.0, "correct")
    text = make_sub(ann, *TEXT, 0.0, "pending", answer="because the ledger leaks")
    override_score(teacher, text, 0.5, "half the argument")
    make_sub(bob, *TEXT, 0.0, "pending")
    make_sub(bob, *NUMBER, 1.0, "correct", mode="run")
    high = make_sub(cy, *NUMBER, 1.0, "correct")
    override_score(teacher, high, 0.25, "copied the example")
    make_sub(cy, *NUMBER, None, "", status="queued")  # not graded yet: not counted
    return cohort


def test_the_csv_holds_effective_best_scores(teacher: User, graded_cohort: Cohort) -> None:
    r = logged_in(teacher).get(f"/teach/cohorts/{graded_cohort.pk}/export.csv")
    assert r.status_code == 200 and r["Content-Type"] == "text/csv; charset=utf-8"
    assert r["Content-Disposition"] == (
        f'attachment; filename="roofline-spring-interviews-{graded_cohort.pk}-scores.csv"')
    header, rows = rows_by_student(r.content.decode())
    num, text = "Q36 kv_page_ledger / pool_blocks", "Q36 kv_page_ledger / fix"
    assert header[0] == "student" and num in header and text in header
    assert header[-1].startswith("total points (of ")
    # one column per part of every active exercise
    parts = sum(len(e.parts) for e in Exercise.objects.filter(active=True))
    assert len(header) == parts + 2
    assert list(rows) == ["ann", "bob", "cy"]
    points = {p["id"]: p["points"] for p in Exercise.objects.get(slug="kv_page_ledger").parts}
    assert rows["ann"][num] == "1" and rows["ann"][text] == "0.5"
    assert float(rows["ann"][header[-1]]) == pytest.approx(points["pool_blocks"]
                                                            + 0.5 * points["fix"])
    assert rows["bob"][num] == "" and rows["bob"][text] == "pending"
    assert rows["bob"][header[-1]] == "0"
    assert rows["cy"][num] == "0.25"  # the override beats the grader's 1


def test_editing_a_rubric_item_changes_the_export(teacher: User, cohort: Cohort) -> None:
    ann = make_user("ann")
    join_cohort(ann, cohort.join_code)
    sub = make_sub(ann, *TEXT, 0.0, "pending")
    ex = Exercise.objects.get(slug=TEXT[0])
    part_points = next(p["points"] for p in ex.parts if p["id"] == "fix")
    item = save_rubric_item(teacher, cohort, ex, "fix", label="names the leak",
                                    points=part_points / 2)
    apply_rubric(teacher, sub, [item.pk])
    col = "Q36 kv_page_ledger / fix"
    assert rows_by_student(reports.cohort_scores_csv(teacher, cohort))[1]["ann"][col] == "0.5"
    save_rubric_item(teacher, cohort, ex, "fix", label="names the leak",
                             points=part_points, item=item)
    assert rows_by_student(reports.cohort_scores_csv(teacher, cohort))[1]["ann"][col] == "1"


@pytest.mark.parametrize("name", ["=HYPERLINK(1)", "+1", "-2", "@SUM(A1)"])
def test_the_csv_never_starts_a_cell_with_a_formula(teacher: User, cohort: Cohort,
                                                    name: str) -> None:
    join_cohort(make_user(name), cohort.join_code)
    text = reports.cohort_scores_csv(teacher, cohort)
    cells = [cell for row in csv.reader(io.StringIO(text)) for cell in row]
    assert "'" + name in cells
    assert not any(cell[:1] in ("=", "+", "-", "@") for cell in cells)


def test_the_export_reads_a_fixed_number_of_queries(teacher: User, cohort: Cohort) -> None:
    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            reports.cohort_scores_csv(teacher, cohort)
        return len(ctx.captured_queries)

    def add(n: int, start: int) -> None:
        for i in range(start, start + n):
            u = make_user(f"s{i:03d}")
            join_cohort(u, cohort.join_code)
            make_sub(u, *NUMBER, 0.5, "partial")
            sub = make_sub(u, *TEXT, 0.0, "pending")
            override_score(teacher, sub, 0.75, "fine")

    add(2, 0)
    few = count()
    add(30, 2)
    assert count() == few <= 6


def test_the_export_is_refused_to_anyone_else(teacher: User, graded_cohort: Cohort) -> None:
    other = make_user("other", is_instructor=True)
    url = f"/teach/cohorts/{graded_cohort.pk}/export.csv"
    assert logged_in(other).get(url).status_code == 404
    assert logged_in(User.objects.get(username="ann")).get(url).status_code == 404
    assert logged_in(make_user("root", is_staff=True)).get(url).status_code == 200


# --- the command line --------------------------------------------------------------------------


def test_export_scores_writes_the_same_csv(teacher: User, graded_cohort: Cohort,
                                           tmp_path: Path) -> None:
    out = io.StringIO()
    call_command("export_scores", str(graded_cohort.pk), "--as", "teacher", stdout=out)
    assert out.getvalue() == reports.cohort_scores_csv(teacher, graded_cohort)
    target = tmp_path / "scores.csv"
    call_command("export_scores", str(graded_cohort.pk), "--as", "teacher", "-o", str(target),
                 stderr=io.StringIO())
    assert target.read_bytes().decode() == out.getvalue()  # CRLF rows, as written


@pytest.mark.parametrize("who", ["other", "ann", "nobody", "gone"])
def test_export_scores_refuses_who_may_not_see_the_cohort(graded_cohort: Cohort,
                                                          who: str) -> None:
    make_user("other", is_instructor=True)
    make_user("gone", is_instructor=True, is_active=False)
    with pytest.raises(CommandError):
        call_command("export_scores", str(graded_cohort.pk), "--as", who, stdout=io.StringIO())


def test_export_scores_answers_alike_for_a_missing_and_a_hidden_cohort(
        graded_cohort: Cohort) -> None:
    make_user("other", is_instructor=True)
    messages = []
    for pk in (graded_cohort.pk, graded_cohort.pk + 1000):
        with pytest.raises(CommandError) as exc:
            call_command("export_scores", str(pk), "--as", "other", stdout=io.StringIO())
        messages.append(str(exc.value).replace(str(pk), "N"))
    assert messages[0] == messages[1]


def test_staff_export_any_cohort(graded_cohort: Cohort) -> None:
    make_user("root", is_staff=True)
    out = io.StringIO()
    call_command("export_scores", str(graded_cohort.pk), "--as", "root", stdout=out)
    assert out.getvalue().count("\r\n") == 4  # the header and three students


# --- the admin ---------------------------------------------------------------------------------


@pytest.fixture
def admin_client_(graded_cohort: Cohort) -> Client:
    return logged_in(User.objects.create_superuser("boss", password="pw-boss-123"))


def test_admin_lists_the_instructor_models(admin_client_: Client) -> None:
    for model in ("cohort", "membership", "rubricitem", "review", "comment", "regradejob",
                  "regradeentry", "user", "submission", "exercise"):
        r = admin_client_.get(f"/admin/practice/{model}/")
        assert r.status_code == 200, model


def test_admin_keeps_history_read_only(admin_client_: Client, teacher: User) -> None:
    review = Review.objects.first()
    assert review is not None
    sub = Submission.objects.first()
    assert sub is not None
    Comment.objects.create(submission=sub, author=teacher, body="look again")
    job = RegradeJob.objects.create(exercise=sub.exercise, created_by=teacher)
    for model in ("review", "comment", "regradejob", "regradeentry", "submission"):
        assert admin_client_.get(f"/admin/practice/{model}/add/").status_code == 403, model
    page = admin_client_.get(f"/admin/practice/review/{review.pk}/change/")
    assert page.status_code == 200 and 'name="override_score"' not in page.content.decode()
    before = review.score
    admin_client_.post(f"/admin/practice/review/{review.pk}/change/",
                       {"override_score": "1", "override_reason": "x", "score": "1"})
    review.refresh_from_db()
    assert review.score == before
    assert admin_client_.post(f"/admin/practice/regradejob/{job.pk}/delete/",
                              {"post": "yes"}).status_code == 403
    assert RegradeJob.objects.filter(pk=job.pk).exists()
    sub_page = admin_client_.get(f"/admin/practice/submission/{sub.pk}/change/").content.decode()
    assert 'name="score"' not in sub_page


def test_admin_edits_cohorts_and_marks_instructors(admin_client_: Client,
                                                   graded_cohort: Cohort) -> None:
    assert admin_client_.get("/admin/practice/cohort/add/").status_code == 200
    page = admin_client_.get(f"/admin/practice/cohort/{graded_cohort.pk}/change/")
    assert page.status_code == 200 and 'name="name"' in page.content.decode()
    user = User.objects.get(username="ann")
    form = admin_client_.get(f"/admin/practice/user/{user.pk}/change/").content.decode()
    assert 'name="is_instructor"' in form
