"""In Chromium: a new student signs up and solves exercises part by part, with code and formulas
graded by a real Celery worker through the sandbox.

Every run walks the fewest exercises that hold every part type (each type's page, form, grader
and verdict badge once); `make test-full` walks every part of every exercise (marker `full`)."""
from __future__ import annotations

from typing import Any

import pytest

from exercises import registry
from graders.selftest import answer_text
from practice.models import Assignment, User
from tests.part_kinds import part_type_cover

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser,
              pytest.mark.services]

# Text answers await review; kernels pass the CPU preview (this worker has no GPU), which is
# provisional and solves nothing until a GPU worker grades them (practice/provisional.py).
VERDICT_FOR = {"text": "pending", "kernel": "provisional"}
UNSOLVED_ON_SUBMIT = ("text", "kernel")


def _answer_part(page: Any, spec: Any, part: Any, reference: Any) -> None:
    box = page.locator(f"#part-{part.id}")
    if part.type in ("code", "kernel"):
        source = (spec.path / reference).read_text()
        page.evaluate("([id, code]) => CM.setCode(document.getElementById(id), code)",
                      [f"answer-{part.id}", source])
    elif part.type == "choice" and part.multi:
        for oid in reference:
            box.locator(f"input[value='{oid}']").check()
    elif part.type == "choice":
        box.locator(f"input[value='{reference}']").check()
    else:
        box.locator(f"#answer-{part.id}").fill(answer_text(part, reference))
    box.locator("button[value='submit']").click()
    verdict = VERDICT_FOR.get(part.type, "correct")
    page.locator(f"#part-{part.id} .submission-status .badge.{verdict}").wait_for(timeout=90_000)


def _walk(page: Any, live_server: Any, slugs: list[str]) -> None:
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("request", lambda r: outside.append(r.url)
            if not r.url.startswith(live_server.url) and not r.url.startswith("data:") else None)

    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(live_server.url + "/signup/")
    page.fill("#id_username", "newcomer")
    page.fill("#id_password1", "a-long-pass-42")
    page.fill("#id_password2", "a-long-pass-42")
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + "/")
    user = User.objects.get(username="newcomer")

    specs = registry.load_all()
    for slug in slugs:
        spec = specs[slug]
        page.goto(f"{live_server.url}/ex/{slug}/")
        if page.locator(".statement .math").count():
            page.locator(".statement .katex").first.wait_for()  # math rendered by KaTeX
        variant = Assignment.objects.get(user=user, exercise__slug=slug).variant
        solution = registry.solve(spec, registry.params_for(spec, variant))
        for part in spec.parts:
            _answer_part(page, spec, part, solution[part.id])
            if part.type not in UNSOLVED_ON_SUBMIT:
                assert page.locator(f"#part-{part.id} details.solution").is_visible()

    page.goto(live_server.url + "/")
    for slug in slugs:
        parts = specs[slug].parts
        graded = sum(p.type not in UNSOLVED_ON_SUBMIT for p in parts)
        assert page.get_by_text(f"{graded}/{len(parts)} parts solved").count() >= 1
    page.screenshot(path="var/screenshot-catalog.png", full_page=True)
    assert errors == []
    assert outside == []


@pytest.mark.parametrize("celery_broker", ["redis"], indirect=True)
def test_a_new_student_solves_one_exercise_of_each_part_type(
        page: Any, live_server: Any, celery_broker: Any, start_worker: Any) -> None:
    start_worker()
    _walk(page, live_server, part_type_cover(registry.load_all()))


@pytest.mark.full
@pytest.mark.parametrize("celery_broker", ["redis"], indirect=True)
def test_a_new_student_solves_every_exercise(page: Any, live_server: Any, celery_broker: Any,
                                              start_worker: Any) -> None:
    start_worker()
    _walk(page, live_server, sorted(registry.load_all()))
