"""In Chromium: an instructor works through the review queue with the keyboard, writes a rubric
and grades a text answer with it, reads the diff between a student's two code answers, comments
on a line, overrides the code score with a reason and exports the cohort's scores; then the
student finds the comment, the rubric's explanation and the override on their exercise page.
No console error and no request leaving the test server, at any step."""
from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from exercises import registry
from practice import grading
from practice.actions.cohorts import create_cohort, join_cohort
from practice.actions.exercises import assignment_for
from practice.actions.submissions import submit_answer
from practice.models import Comment, Exercise, Review, Submission, User

from .conftest import (
    AXE_JS,
    PageWatch,
    axe_violations,
    describe_violations,
    horizontal_overflow,
    session_cookies,
    set_look,
    shoot,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

SLUG, TEXT_PART, CODE_PART = "kv_page_ledger", "fix", "ledger"
CODE_V1 = ("def ledger(pool, requests):\n    used = 0\n    for r in requests:\n"
           "        used += r\n    return pool - used\n")
CODE_V2 = ("def ledger(pool, requests):\n    used = 0\n    for r in requests:\n"
           "        used += r.blocks\n    assert used <= pool\n    return pool - used\n")


def code_answer(user: User, answer: str, score: float, failing: str) -> Submission:
    ex = Exercise.objects.get(slug=SLUG)
    now = timezone.now()
    result = {"score": score, "verdict": "partial", "feedback": f"First failure: {failing}.",
              "checks": [{"name": "replays the trace", "passed": True, "message": ""},
                         {"name": failing, "passed": False, "message": "expected 7, got 9"}]}
    return Submission.objects.create(
        user=user, exercise=ex, part_id=CODE_PART, part_type="code",
        variant=assignment_for(user, ex).variant, answer=answer, status="graded",
        score=score, verdict="partial", result=result, started_at=now, finished_at=now)


def graded(sub: Submission) -> Submission:
    """A text answer as the worker leaves it (text parts are queued; graded here in-process)."""
    grading.grade_submission(sub.pk)
    sub.refresh_from_db()
    return sub


def axe_clean(page: Any) -> str:
    """axe's findings on the page ("" when none). axe is evaluated through the DevTools
    protocol, which the site's Content-Security-Policy (no inline scripts) does not govern."""
    page.evaluate(AXE_JS.read_text(encoding="utf-8"))
    return describe_violations(axe_violations(page))


def test_instructor_reviews_comments_overrides_and_exports(page: Any, live_server: Any) -> None:
    watch = PageWatch(live_server.url)
    watch.attach(page)
    instructor = User.objects.create_user("prof", password="pw-prof-123", is_instructor=True)
    ada = User.objects.create_user("ada", password="pw-ada-123")
    grace = User.objects.create_user("grace", password="pw-grace-123")
    cohort = create_cohort(instructor, "Inference, spring")
    for student in (ada, grace):
        join_cohort(student, cohort.join_code)
    ex = Exercise.objects.get(slug=SLUG)
    text = graded(submit_answer(ada, ex, TEXT_PART, "Admission counts only the prompt's "
                                "blocks.\nA concurrency cap sizes the batch for the end."))
    code_answer(ada, CODE_V1, 0.5, "frees blocks on finish")
    code = code_answer(ada, CODE_V2, 0.75, "keeps the free count")
    later = graded(submit_answer(grace, ex, TEXT_PART, "More blocks would not help."))
    page.context.add_cookies(session_cookies(instructor, live_server.url))

    # The queue: two text answers, oldest first; j / k move the selection, Enter opens it.
    page.goto(f"{live_server.url}/teach/review/")
    rows = page.locator("[data-queue-row]")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_have_attribute("aria-current", "true")
    assert "j" in page.locator("#queue-keys").inner_text()
    page.locator("h1").click()  # focus on the page, not a form field
    page.keyboard.press("j")
    expect(rows.nth(1)).to_have_attribute("aria-current", "true")
    expect(rows.nth(0)).not_to_have_attribute("aria-current", "true")
    expect(rows.nth(1).locator("a")).to_be_focused()
    assert f"#{later.pk}" in rows.nth(1).inner_text()
    page.keyboard.press("k")
    expect(rows.nth(0)).to_have_attribute("aria-current", "true")
    shoot(page, "teach-review-queue")
    assert axe_clean(page) == ""
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf".*/teach/submissions/{text.pk}/$"))

    # Write the rubric from the attempt, then apply its item to the text answer.
    page.click("#edit-rubric")
    page.wait_for_url(re.compile(r".*/rubric/kv_page_ledger/fix/\?from=\d+$"))
    page.fill("#new-label", "Names the admission flaw")
    page.fill("#new-points", "1.5")
    page.fill("#new-explanation", "Prompt-only admission overcommits the pool; replies grow.")
    page.click("#add-item button[type=submit]")
    expect(page.locator(".rubric-row")).to_have_count(1)
    shoot(page, "teach-rubric")
    page.click("#back-to-attempt")
    page.wait_for_url(re.compile(rf".*/teach/submissions/{text.pk}/"))
    page.get_by_label(re.compile("Names the admission flaw")).check()
    page.click(".rubric-apply button[type=submit]")
    expect(page.locator("#effective-score")).to_have_text("0.75")  # 1.5 of 2 points
    expect(page.locator("#review [role=status]")).to_have_text("Rubric applied.")
    assert Review.objects.get(submission=text).score == 0.75

    # On to the code part: the diff of the two answers, then a comment on line 4.
    page.locator("nav.parts-answered").get_by_role("link", name=CODE_PART).click()
    page.wait_for_url(re.compile(rf".*/teach/submissions/{code.pk}/"))
    diff = page.locator(f"#answer-{code.pk} table.diff")
    expect(diff).to_be_visible()
    expect(diff.locator("tr.diff-del")).to_have_count(1)
    expect(diff.locator("tr.diff-add")).to_have_count(2)
    expect(diff.locator("tr.diff-add").first).to_contain_text("used += r.blocks")
    expect(page.locator(f"#answer-{code.pk} .checks .failed")).to_contain_text(
        "keeps the free count")
    page.locator(f"#answer-{code.pk}").get_by_role("button", name="Comment on line 4",
                                                   exact=True).click()
    form = page.locator(".line-form-row form")
    expect(form.locator("textarea")).to_be_focused()
    form.locator("textarea").fill("Count each request's blocks, not the request.")
    form.get_by_role("button", name="Comment").click()
    comment = page.locator(f"#answer-{code.pk} tr.line-comment")
    expect(comment).to_contain_text("Count each request's blocks")
    # Under line 4: the row right after it.
    assert page.locator(f"#a{code.pk}-L4 + tr.line-comment").count() == 1
    expect(page.locator(".line-form-row")).to_have_count(0)
    assert Comment.objects.get().line == 4

    # Override the code score, with the reason the student will read.
    page.fill("#override-score", "0.9")
    page.fill("#override-reason", "The failing check is cosmetic here; the ledger is right.")
    page.click(".override-form button[type=submit]:not([name=clear])")
    expect(page.locator("#effective-score")).to_have_text("0.90")
    expect(page.get_by_role("button", name="Clear the override")).to_be_visible()
    shoot(page, "teach-attempt")
    assert axe_clean(page) == ""
    # Dark mode keeps the diff and comment colours readable; a phone scrolls code in its box.
    set_look(page, "dark", "desktop")  # reduced motion: no colour transition mid-check
    assert describe_violations(axe_violations(page, only=["color-contrast"])) == ""
    set_look(page, "dark", "phone")
    assert horizontal_overflow(page) == []
    shoot(page, "teach-attempt-phone-dark")
    set_look(page, "light", "desktop")

    # Export the cohort's scores from the cohort page.
    page.goto(f"{live_server.url}/teach/cohorts/{cohort.pk}/")
    with page.expect_download() as info:
        page.click("#cohort-export")
    path = info.value.path()
    with open(path, encoding="utf-8-sig") as f:
        table = list(csv.reader(io.StringIO(f.read())))
    header, body = table[0], table[1:]
    by_student = {row[0]: dict(zip(header, row, strict=True)) for row in body}
    spec = registry.get(SLUG)
    code_col = next(h for h in header if h.endswith(f"{SLUG} / {CODE_PART}"))
    text_col = next(h for h in header if h.endswith(f"{SLUG} / {TEXT_PART}"))
    assert spec.part(CODE_PART).type == "code"
    assert float(by_student["ada"][code_col]) == pytest.approx(0.9)
    assert float(by_student["ada"][text_col]) == pytest.approx(0.75)
    watch.assert_clean()

    # The student: the override and its reason, the rubric's explanation, the line comment.
    page.context.clear_cookies()
    page.context.add_cookies(session_cookies(ada, live_server.url))
    page.goto(f"{live_server.url}/ex/{SLUG}/")
    code_part = page.locator(f"#part-{CODE_PART}")
    notes = code_part.locator(".review-notes")
    expect(notes).to_contain_text("Your instructor's score: 0.90")
    expect(notes).to_contain_text("The failing check is cosmetic here")
    expect(notes.locator(".comment-quote")).to_contain_text("used += r.blocks")
    expect(notes).to_contain_text("Count each request's blocks, not the request.")
    text_notes = page.locator(f"#part-{TEXT_PART} .review-notes")
    expect(text_notes).to_contain_text("Your instructor's score: 0.75")
    expect(text_notes).to_contain_text("Prompt-only admission overcommits the pool")
    shoot(page, "teach-student-sees-review", code_part)
    watch.assert_clean()
