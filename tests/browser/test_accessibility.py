"""axe-core over the student pages, in light and in dark: no violations.

axe (static/vendor/axe/, vendored by scripts/vendor_static.sh) is injected by the test only;
no page loads it. Every rule axe runs by default (WCAG 2.x A/AA and best practices) must pass,
on pages in the state a student sees mid-exercise: an answer graded, a solution shown.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from exercises import registry
from practice.actions.submissions import reveal_solution, submit_answer
from practice.models import Exercise, User

from .conftest import THEMES, PageWatch, axe_violations, describe_violations, set_look, settle
from .test_screenshots import CODE_SLUG, SOLVED_SLUG, loop_pages, solve_and_miss

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

CHOICE_SLUG = "trtllm_admission"  # three single-choice parts, numbers, a text part
# A rule switched off for the elements under one selector, each with the reason.
EXCEPTIONS: dict[str, str] = {
    # CodeMirror's scroller is tabindex=-1 on purpose: focus goes to its contenteditable
    # .cm-content, and moving the caret scrolls it. axe does not count contenteditable as
    # focusable content, so it reports a scrollable region keyboard users cannot reach.
    "scrollable-region-focusable": ".cm-scroller",
}
# Colours are all that changes in dark mode.
DARK_RULES = ["color-contrast"]


def answer_choices_and_reveal(user: User, slug: str) -> None:
    """Answer every choice part with its first option, right or wrong (graded in the request),
    and reveal the first part's solution: the page shows verdicts and a worked solution."""
    spec = registry.get(slug)
    exercise = Exercise.objects.get(slug=slug)
    for part in spec.parts:
        if part.type == "choice":
            submit_answer(user, exercise, part.id, part.options[0].id)
    reveal_solution(user, exercise, spec.parts[0].id)


def send_bad_signup(page: Any) -> None:
    """A taken name and passwords that differ: each message is tied to its field."""
    page.fill("#id_username", "ada")
    page.fill("#id_password1", "a-long-pass-42")
    page.fill("#id_password2", "another-pass-42")
    page.click("button[type=submit]")
    page.locator("small.error").first.wait_for()


def send_bad_login(page: Any) -> None:
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "not-her-password")
    page.click("button[type=submit]")
    page.locator("#login-error").wait_for()


def check(page: Any, url: str, failures: dict[str, str],
          then: Callable[[Any], None] | None = None, label: str = "") -> None:
    """axe in both themes; `then` acts on the page first (sends a form with errors)."""
    for theme in THEMES:
        set_look(page, theme, "desktop")
        page.goto(url)
        if then:
            then(page)
        settle(page)
        found = axe_violations(page, EXCEPTIONS, DARK_RULES if theme == "dark" else None)
        if found:
            failures[f"{url} {label}({theme})"] = describe_violations(found)


def test_student_pages_have_no_axe_violations(page: Any, live_server: Any, student: User,
                                              watch: PageWatch) -> None:
    solve_and_miss(student, SOLVED_SLUG)
    answer_choices_and_reveal(student, CODE_SLUG)
    answer_choices_and_reveal(student, CHOICE_SLUG)
    failures: dict[str, str] = {}
    for path in ("/", f"/ex/{CODE_SLUG}/", f"/ex/{CHOICE_SLUG}/", f"/ex/{SOLVED_SLUG}/",
                 "/history/", *loop_pages(student).values()):
        check(page, live_server.url + path, failures)
    page.context.clear_cookies()
    for path in ("/signup/", "/login/"):
        check(page, live_server.url + path, failures)
    check(page, live_server.url + "/signup/", failures, send_bad_signup, "with errors ")
    check(page, live_server.url + "/login/", failures, send_bad_login, "with errors ")
    assert not failures, "\n".join(f"{k}\n{v}" for k, v in failures.items())
    # And axe is awake, exceptions included: an image without alt text is caught.
    page.evaluate("document.querySelector('main').append(document.createElement('img'))")
    assert [v["id"] for v in axe_violations(page, EXCEPTIONS)] == ["image-alt"]
    watch.assert_clean()
