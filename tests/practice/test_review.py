"""Review: the line diff, the queue (filters, who is in it, bounded queries), the attempt view
(variant, every answer, diff, grader output), inline comments, the rubric (applying it, editing an
item's points re-scores through the view), overrides, and what the student then reads."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from exercises import registry
from practice import grading
from practice.actions.cohorts import create_cohort, join_cohort
from practice.actions.exercises import assignment_for
from practice.actions.reviews import add_comment, apply_rubric, override_score, save_rubric_item
from practice.actions.submissions import submit_answer
from practice.diffing import line_diff
from practice.models import (
    Cohort,
    Comment,
    Exercise,
    PartState,
    Review,
    RubricItem,
    Submission,
    User,
)

SLUG, TEXT_PART, CODE_PART = "kv_page_ledger", "fix", "ledger"
HX = {"HTTP_HX_REQUEST": "true"}

CODE_V1 = "def ledger(pool):\n    used = 0\n    for r in pool:\n        used += r\n    return used\n"
CODE_V2 = ("def ledger(pool):\n    used = 0\n    for r in pool:\n        used += r.blocks\n"
           "    assert used >= 0\n    return used\n")


# --- the diff -------------------------------------------------------------------------------

def test_line_diff_numbers_both_sides() -> None:
    d = line_diff("a\nb\nc\n", "a\nB\nc\nd\n")
    rows = [(r.kind, r.old_no, r.new_no, r.text) for r in d.rows]
    assert rows == [("same", 1, 1, "a"), ("del", 2, None, "b"), ("add", None, 2, "B"),
                    ("same", 3, 3, "c"), ("add", None, 4, "d"), ("same", 4, 5, "")]
    assert (d.added, d.removed, d.changed) == (2, 1, True)
    assert [r.sign for r in d.rows[:3]] == [" ", "-", "+"]


def test_line_diff_folds_long_unchanged_runs() -> None:
    old = "\n".join(f"line {i}" for i in range(1, 101))
    new = old.replace("line 50", "line fifty")
    d = line_diff(old, new, context=2)
    kinds = [r.kind for r in d.rows]
    assert kinds == ["skip", "same", "same", "del", "add", "same", "same", "skip"]
    first, last = d.rows[0], d.rows[-1]
    assert (first.skipped, first.old_no) == (47, 1)
    assert (last.skipped, last.old_no, last.new_no) == (48, 53, 53)
    assert len(line_diff(old, new, context=None).rows) == 101


def test_line_diff_of_identical_and_empty_answers() -> None:
    same = line_diff("x\ny", "x\ny")
    assert not same.changed and [r.kind for r in same.rows] == ["skip"]
    assert line_diff("x", "x").rows[0].kind == "same"  # a one-line fold is not worth it
    fresh = line_diff("", "p\nq")
    assert [(r.kind, r.new_no) for r in fresh.rows] == [("add", 1), ("add", 2)]


# --- a cohort with answers ------------------------------------------------------------------

@dataclass
class World:
    instructor: User
    other_instructor: User
    student: User
    outsider: User
    staff: User
    cohort: Cohort
    other_cohort: Cohort
    text_sub: Submission
    code_v1: Submission
    code_v2: Submission
    other_text: Submission


def make_sub(user: User, part_id: str, answer: str, *, score: float, verdict: str,
             result: dict[str, Any] | None = None, mode: str = "submit") -> Submission:
    ex = Exercise.objects.get(slug=SLUG)
    part = registry.get(SLUG).part(part_id)
    now = timezone.now()
    return Submission.objects.create(
        user=user, exercise=ex, part_id=part_id, part_type=part.type,
        variant=assignment_for(user, ex).variant, answer=answer, mode=mode,
        status="graded", score=score, verdict=verdict, started_at=now, finished_at=now,
        result=result or {"score": score, "verdict": verdict, "feedback": "", "checks": []})


def code_result(score: float, failing: str) -> dict[str, Any]:
    return {"score": score, "verdict": "partial", "feedback": f"First failure: {failing}",
            "checks": [{"name": "replays the trace", "passed": True, "message": ""},
                       {"name": failing, "passed": False, "message": "expected 7, got 9"}]}


def submit_text(user: User, ex: Exercise, answer: str) -> Submission:
    """A text answer through the real action, then graded as the worker grades it (text parts
    are queued: the model loads in the worker)."""
    sub = submit_answer(user, ex, TEXT_PART, answer)
    grading.grade_submission(sub.pk)
    sub.refresh_from_db()
    return sub


@pytest.fixture
def world(db: Any) -> World:
    make = User.objects.create_user
    instructor = make("inst", password="pw-inst-123", is_instructor=True)
    other_instructor = make("other-inst", password="pw-other-123", is_instructor=True)
    student, outsider = make("ada", password="pw-ada-123"), make("bob", password="pw-bob-123")
    staff = make("staffer", password="pw-staff-123", is_staff=True)
    cohort = create_cohort(instructor, "Spring")
    other_cohort = create_cohort(other_instructor, "Autumn")
    join_cohort(student, cohort.join_code)
    join_cohort(outsider, other_cohort.join_code)
    ex = Exercise.objects.get(slug=SLUG)
    # Through the real action and the worker's grading: a text part is graded "pending".
    text_sub = submit_text(student, ex, "Admission counts only the prompt.\nCap concurrency.")
    code_v1 = make_sub(student, CODE_PART, CODE_V1, score=0.5,
                       verdict="partial", result=code_result(0.5, "frees on finish"))
    code_v2 = make_sub(student, CODE_PART, CODE_V2, score=0.75,
                       verdict="partial", result=code_result(0.75, "keeps the free count"))
    other_text = submit_text(outsider, ex, "Someone else's essay.")
    return World(instructor, other_instructor, student, outsider, staff, cohort, other_cohort,
                 text_sub, code_v1, code_v2, other_text)


def client_for(user: User | None) -> Client:
    c = Client()
    if user is not None:
        c.force_login(user)
    return c


def queue_ids(body: str) -> list[int]:
    return [int(x) for x in re.findall(r'data-queue-link>#(\d+)<', body)]


# --- the queue ------------------------------------------------------------------------------

def test_queue_lists_pending_answers_of_my_students_only(world: World) -> None:
    r = client_for(world.instructor).get(reverse("review_queue"))
    assert r.status_code == 200
    assert queue_ids(r.content.decode()) == [world.text_sub.pk]  # code with a score: not pending
    other = client_for(world.other_instructor).get(reverse("review_queue")).content.decode()
    assert queue_ids(other) == [world.other_text.pk]
    everyone = client_for(world.staff).get(reverse("review_queue")).content.decode()
    assert set(queue_ids(everyone)) == {world.text_sub.pk, world.other_text.pk}


def test_queue_refuses_students_and_anonymous(world: World) -> None:
    assert client_for(world.student).get(reverse("review_queue")).status_code == 403
    r = client_for(None).get(reverse("review_queue"))
    assert r.status_code == 302 and "/login/" in r["Location"]
    # Another instructor's cohort as a filter: a 404, as if it did not exist.
    r = client_for(world.instructor).get(reverse("review_queue"),
                                         {"cohort": world.other_cohort.pk})
    assert r.status_code == 404
    assert client_for(world.instructor).get(reverse("review_queue"),
                                            {"cohort": "x"}).status_code == 404


def test_queue_filters_by_status_cohort_and_exercise(world: World) -> None:
    c = client_for(world.instructor)
    override_score(world.instructor, world.code_v2, 0.9, "Good fix.")
    url = reverse("review_queue")
    assert queue_ids(c.get(url, {"status": "awaiting"}).content.decode()) == [world.text_sub.pk]
    assert queue_ids(c.get(url, {"status": "reviewed"}).content.decode()) == [world.code_v2.pk]
    assert set(queue_ids(c.get(url, {"status": "all"}).content.decode())) == {
        world.text_sub.pk, world.code_v2.pk}
    assert queue_ids(c.get(url, {"status": "nonsense"}).content.decode()) == [world.text_sub.pk]
    assert queue_ids(c.get(url, {"cohort": world.cohort.pk}).content.decode()) == [
        world.text_sub.pk]
    other_ex = Exercise.objects.exclude(slug=SLUG).first()
    assert other_ex is not None
    body = c.get(url, {"exercise": other_ex.slug}).content.decode()
    assert queue_ids(body) == [] and "with these filters" in body
    assert c.get(url, {"exercise": "no-such-exercise"}).status_code == 404
    # Graded on the rubric: out of "awaiting", into "reviewed".
    item = save_rubric_item(world.instructor, world.cohort, world.text_sub.exercise,
                                    TEXT_PART, label="caps", points=2)
    apply_rubric(world.instructor, world.text_sub, [item.pk])
    assert queue_ids(c.get(url).content.decode()) == []
    assert world.text_sub.pk in queue_ids(c.get(url, {"status": "reviewed"}).content.decode())


def test_queue_flags_held_kernel_timing(world: World) -> None:
    spec = next(s for s in registry.load_all().values()
                if any(p.type == "kernel" for p in s.parts))
    part = next(p for p in spec.parts if p.type == "kernel")
    ex = Exercise.objects.get(slug=spec.slug)
    held = Submission.objects.create(
        user=world.student, exercise=ex, part_id=part.id, part_type="kernel", variant="1",
        answer="# kernel", status="graded", score=0.0, verdict="pending",
        result={"score": 0.0, "verdict": "pending", "feedback": "held", "checks": [],
                "extra": {"timing": {"status": "held", "cases": []}}})
    body = client_for(world.instructor).get(reverse("review_queue")).content.decode()
    assert held.pk in queue_ids(body)
    row = body[body.index(f">#{held.pk}<"):]
    assert "timing held" in row[:row.index("</tr>")]
    page = client_for(world.instructor).get(reverse("attempt", args=[held.pk]))
    assert page.status_code == 200 and 'class="badge partial">timing held' in \
        page.content.decode()


def test_queue_queries_do_not_grow_with_the_queue(world: World) -> None:
    c = client_for(world.instructor)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert c.get(reverse("review_queue")).status_code == 200
        return len(ctx.captured_queries)

    few = count()
    ex = Exercise.objects.get(slug=SLUG)
    for i in range(12):
        s = User.objects.create_user(f"s{i}", password="pw-s-12345")
        join_cohort(s, world.cohort.join_code)
        submit_text(s, ex, f"answer {i}")
    assert count() == few


# --- the attempt view -----------------------------------------------------------------------

def test_attempt_shows_variant_every_answer_and_the_diff(world: World) -> None:
    r = client_for(world.instructor).get(reverse("attempt", args=[world.code_v2.pk]))
    body = r.content.decode()
    assert r.status_code == 200
    params = registry.params_for(registry.get(SLUG), world.code_v2.variant)
    for name in params:
        assert f"<code>{name}</code>" in body
    # Newest first: v2 (this one) above v1.
    assert body.index(f"#{world.code_v2.pk} ·") < body.index(f"#{world.code_v1.pk} ·")
    # v2 listed line by line, v1's diff base; the changed line in red and green.
    assert f'id="a{world.code_v2.pk}-L4"' in body
    diff = body[body.index('class="diff"'):]
    diff = diff[:diff.index("</table>")]
    rows = re.findall(r'<tr class="diff-(\w+)">.*?<code>(.*?)</code>', diff, re.S)
    changed = [(kind, text.strip()) for kind, text in rows if kind in ("add", "del")]
    assert changed == [("del", "used += r"), ("add", "used += r.blocks"),
                       ("add", "assert used &gt;= 0")]
    assert "+2" in body and "−1" in body
    # The grader's output for both answers.
    assert "keeps the free count" in body and "frees on finish" in body
    assert "expected 7, got 9" in body


def test_attempt_of_a_text_part_shows_key_points_and_rubric(world: World) -> None:
    body = client_for(world.instructor).get(
        reverse("attempt", args=[world.text_sub.pk])).content.decode()
    part = registry.get(SLUG).part(TEXT_PART)
    from django.utils.html import escape

    assert escape(part.key_points[0]) in body
    assert "Spring's rubric" in body and "write the rubric" in body
    assert reverse("rubric", args=[world.cohort.pk, SLUG, TEXT_PART]) in body
    assert "Admission counts only the prompt." in body
    assert "from the rubric" not in body and "overridden" not in body  # not reviewed yet


def test_attempt_links_the_next_awaiting_answer_and_the_other_parts(world: World) -> None:
    c = client_for(world.instructor)
    grace = User.objects.create_user("grace", password="pw-grace-123")
    join_cohort(grace, world.cohort.join_code)
    later = submit_text(grace, world.text_sub.exercise, "Later essay.")
    body = c.get(reverse("attempt", args=[world.text_sub.pk]),
                 {"cohort": world.cohort.pk}).content.decode()
    assert f'href="{reverse("attempt", args=[later.pk])}?cohort={world.cohort.pk}" ' \
           'id="next-awaiting"' in body
    assert f'href="{reverse("review_queue")}?cohort={world.cohort.pk}" id="back-to-queue"' in body
    # ada answered two parts: the code part's latest answer is one click away.
    assert f'<a href="{reverse("attempt", args=[world.code_v2.pk])}?cohort=' in body
    # The last one awaiting has no "next"; a stale filter does not hide the attempt.
    body = c.get(reverse("attempt", args=[later.pk]), {"cohort": 999999}).content.decode()
    assert 'id="next-awaiting"' in body  # ada's answer, unfiltered
    override_score(world.instructor, world.text_sub, 0.5, "ok")
    assert 'id="next-awaiting"' not in c.get(reverse("attempt", args=[later.pk])).content.decode()


def test_attempt_is_hidden_from_everyone_else(world: World) -> None:
    url = reverse("attempt", args=[world.text_sub.pk])
    for user in (world.student, world.outsider, world.other_instructor):
        assert client_for(user).get(url).status_code == 404
    assert client_for(world.staff).get(url).status_code == 200


# --- comments -------------------------------------------------------------------------------

def test_line_comment_renders_under_its_line(world: World) -> None:
    c = client_for(world.instructor)
    url = reverse("attempt_comment", args=[world.code_v2.pk])
    r = c.post(url, {"body": "Count blocks, not requests.", "line": "4"}, **HX)
    body = r.content.decode()
    assert r.status_code == 200 and body.lstrip().startswith(
        "<div class=\"answer") and f'id="answer-{world.code_v2.pk}"' in body
    line4 = body.index(f'id="a{world.code_v2.pk}-L4"')
    line5 = body.index(f'id="a{world.code_v2.pk}-L5"')
    assert line4 < body.index("Count blocks, not requests.") < line5
    comment = Comment.objects.get()
    assert (comment.line, comment.author, comment.submission) == (4, world.instructor,
                                                                  world.code_v2)


def test_general_comment_and_refusals(world: World) -> None:
    c = client_for(world.instructor)
    url = reverse("attempt_comment", args=[world.text_sub.pk])
    r = c.post(url, {"body": "Say why the cap helps."}, **HX)
    assert "Say why the cap helps." in r.content.decode()
    assert Comment.objects.get().line is None
    bad_line = c.post(reverse("attempt_comment", args=[world.code_v2.pk]),
                      {"body": "x", "line": "99"}, **HX)
    assert "No comment saved: that line is not in the answer" in bad_line.content.decode()
    empty = c.post(url, {"body": "   "}, **HX)
    assert "No comment saved" in empty.content.decode()
    assert Comment.objects.count() == 1
    # Without htmx: back to the attempt, the page says what went wrong.
    r = c.post(url, {"body": "Plain post."})
    assert r.status_code == 302 and r["Location"].endswith(f"#answer-{world.text_sub.pk}")
    assert client_for(world.other_instructor).post(url, {"body": "hi"}).status_code == 404
    assert client_for(world.student).post(url, {"body": "hi"}).status_code == 404
    assert Comment.objects.count() == 2


# --- rubric and override --------------------------------------------------------------------

def rubric_url(w: World, part: str = TEXT_PART) -> str:
    return reverse("rubric", args=[w.cohort.pk, SLUG, part])


def test_rubric_page_adds_edits_and_deletes_items(world: World) -> None:
    c = client_for(world.instructor)
    r = c.post(rubric_url(world), {"label": "Names the admission flaw", "points": "1.5",
                                   "explanation": "Prompt-only admission overcommits."})
    assert r.status_code == 302
    item = RubricItem.objects.get()
    assert (item.label, item.points, item.cohort) == ("Names the admission flaw", 1.5,
                                                      world.cohort)
    page = c.get(rubric_url(world)).content.decode()
    assert "Names the admission flaw" in page and "+1.5 pt" in page
    bad = c.post(rubric_url(world), {"label": "x", "points": "lots"})
    assert bad.status_code == 400 and "points are a number" in bad.content.decode()
    too_many = c.post(rubric_url(world), {"label": "x", "points": "3"})
    assert too_many.status_code == 400 and "points go from -2 to 2" in too_many.content.decode()
    c.post(rubric_url(world), {"op": "delete", "item": item.pk})
    assert not RubricItem.objects.exists()


def test_editing_points_rescores_every_review_through_the_view(world: World) -> None:
    c = client_for(world.instructor)
    c.post(rubric_url(world), {"label": "Admission flaw", "points": "1"})
    c.post(rubric_url(world), {"label": "Queueing test", "points": "0.5"})
    flaw, queueing = RubricItem.objects.order_by("order")
    r = c.post(reverse("attempt_rubric", args=[world.text_sub.pk]),
               {"item": [flaw.pk, queueing.pk]}, **HX)
    body = r.content.decode()
    assert r.status_code == 200 and 'id="review"' in body
    assert re.search(r'id="effective-score">0\.75<', body)  # 1.5 of 2 points
    assert PartState.objects.get(user=world.student, part_id=TEXT_PART).best_score == 0.75
    # Doubling an item's points re-scores the answer that applies it (the action does it).
    r = c.post(rubric_url(world), {"item": flaw.pk, "label": "Admission flaw", "points": "1.5",
                                   "explanation": "Counts only the prompt."})
    assert r.status_code == 302
    assert Review.objects.get(submission=world.text_sub).score == 1.0
    assert PartState.objects.get(user=world.student, part_id=TEXT_PART).solved_at is not None
    # Deleting one re-scores too.
    c.post(rubric_url(world), {"op": "delete", "item": queueing.pk})
    assert Review.objects.get(submission=world.text_sub).score == 0.75


def test_rubric_page_is_for_text_parts_of_my_cohorts(world: World) -> None:
    assert client_for(world.instructor).get(rubric_url(world, CODE_PART)).status_code == 404
    assert client_for(world.other_instructor).get(rubric_url(world)).status_code == 404
    assert client_for(world.student).get(rubric_url(world)).status_code == 404
    page = client_for(world.instructor).get(rubric_url(world) + f"?from={world.text_sub.pk}")
    assert f'href="{reverse("attempt", args=[world.text_sub.pk])}#review"' in \
        page.content.decode()


def test_rubric_refuses_an_item_of_another_rubric(world: World) -> None:
    theirs = save_rubric_item(world.other_instructor, world.other_cohort,
                                      world.text_sub.exercise, TEXT_PART, label="t", points=1)
    r = client_for(world.instructor).post(reverse("attempt_rubric", args=[world.text_sub.pk]),
                                          {"item": [theirs.pk]}, **HX)
    assert "Rubric not applied" in r.content.decode()
    assert not Review.objects.filter(items=theirs).exists()


def test_override_needs_a_reason_and_can_be_cleared(world: World) -> None:
    c = client_for(world.instructor)
    url = reverse("attempt_override", args=[world.code_v2.pk])
    r = c.post(url, {"score": "0.9", "reason": ""}, **HX)
    assert "No override: an override needs a reason" in r.content.decode()
    assert "0.9" in r.content.decode()  # what was typed stays in the form
    assert "give a score from 0 to 1" in c.post(url, {"score": "", "reason": "r"},
                                                 **HX).content.decode()
    assert "from 0 to 1" in c.post(url, {"score": "1.5", "reason": "r"}, **HX).content.decode()
    assert not Review.objects.exists()
    r = c.post(url, {"score": "0.9", "reason": "The slip is cosmetic."}, **HX)
    assert re.search(r'id="effective-score">0\.90<', r.content.decode())
    review = Review.objects.get()
    assert (review.override_score, review.score, review.override_reason) == (
        0.9, 0.9, "The slip is cosmetic.")
    assert PartState.objects.get(user=world.student, part_id=CODE_PART).best_score == 0.9
    r = c.post(url, {"clear": "1", "score": "", "reason": ""}, **HX)
    assert re.search(r'id="effective-score">0\.75<', r.content.decode())
    review.refresh_from_db()
    assert review.override_score is None and review.score is None
    # Without htmx: a redirect to the grading panel.
    r = c.post(url, {"score": "0.5", "reason": "Plain form."})
    assert r.status_code == 302 and r["Location"].endswith("#review")


# --- what the student reads -----------------------------------------------------------------

def test_student_sees_override_rubric_and_comments(world: World) -> None:
    inst = world.instructor
    item = save_rubric_item(inst, world.cohort, world.text_sub.exercise, TEXT_PART,
                                    label="Admission flaw", points=1,
                                    explanation="Prompt-only admission overcommits the pool.")
    apply_rubric(inst, world.text_sub, [item.pk])
    add_comment(inst, world.text_sub, "Now say how you would test the cap.")
    override_score(inst, world.code_v2, 0.9, "The slip is cosmetic.")
    add_comment(inst, world.code_v2, "Count blocks, not requests.", line=4)

    body = client_for(world.student).get(reverse("exercise", args=[SLUG])).content.decode()
    assert "Your instructor's score: 0.50" in body  # 1 of 2 points on the rubric
    assert "Prompt-only admission overcommits the pool." in body
    assert "Now say how you would test the cap." in body
    assert "Your instructor's score: 0.90" in body and "The slip is cosmetic." in body
    # A line comment sits under the line it is about, quoted.
    quote = body.index("<code>used += r.blocks</code>")
    assert quote < body.index("Count blocks, not requests.")
    assert "Line 4:" in body

    other = client_for(world.outsider).get(reverse("exercise", args=[SLUG])).content.decode()
    for secret in ("Count blocks", "cosmetic", "overcommits the pool", "test the cap"):
        assert secret not in other


def test_the_exercise_page_asks_for_reviews_once_whatever_the_parts(world: World) -> None:
    """Review notes are looked up for the whole page at once, not per part."""
    student = client_for(world.student)
    url = reverse("exercise", args=[SLUG])

    def review_queries() -> int:
        with CaptureQueriesContext(connection) as q:
            assert student.get(url).status_code == 200
        return sum('"practice_review"' in x["sql"] or '"practice_comment"' in x["sql"]
                   for x in q.captured_queries)

    # Nothing reviewed yet: one look, inside the query for every part's latest answer.
    assert review_queries() == 1
    add_comment(world.instructor, world.code_v2, "Count blocks, not requests.", line=4)
    # The one reviewed answer adds its own two reads; the others still cost nothing.
    assert review_queries() == 3
