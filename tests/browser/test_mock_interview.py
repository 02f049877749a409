"""In Chromium: start a mock interview from the catalog, watch its clock tick, solve a number part
without seeing its solution, finish, and find the summary and the solution."""
from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from exercises import registry
from graders.selftest import answer_text
from practice.models import Assignment, Exercise, MockInterview, PartState, User

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

# Everything else is marked solved, so the mock picks exactly these (the first has number parts).
MOCK_SLUGS = {"kv_transfer_disagg", "memory_beyond_kv", "max_concurrency"}
SLUG = "kv_transfer_disagg"


def test_a_mock_interview_from_start_to_summary(page: Any, live_server: Any) -> None:
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("request", lambda r: outside.append(r.url)
            if not r.url.startswith(live_server.url) and not r.url.startswith("data:") else None)

    user = User.objects.create_user("candidate", password="a-long-pass-42")
    PartState.objects.bulk_create([
        PartState(user=user, exercise=ex, part_id=p["id"], attempts=1, best_score=1.0,
                  solved_at=timezone.now())
        for ex in Exercise.objects.filter(active=True).exclude(slug__in=MOCK_SLUGS)
        for p in ex.parts])
    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", "candidate")
    page.fill("input[name=password]", "a-long-pass-42")
    page.click("main button[type=submit]")
    page.wait_for_url(live_server.url + "/")

    page.click("#start-mock")
    page.wait_for_url(re.compile(r".*/mock/\d+/$"))
    mock = MockInterview.objects.get(user=user)
    assert set(mock.exercises) == MOCK_SLUGS
    clock = page.locator("#mock-countdown")
    first = clock.inner_text()
    assert re.fullmatch(r"4[45]:\d\d", first)
    expect(clock).not_to_have_text(first, timeout=3000)  # it ticks
    assert re.fullmatch(r"44:\d\d", clock.inner_text())

    page.click(f"a[href='/ex/{SLUG}/']")
    page.wait_for_url(f"{live_server.url}/ex/{SLUG}/")
    banner = page.locator(".mock-banner")
    expect(banner).to_be_visible()
    expect(banner.locator("[data-countdown]")).to_have_text(re.compile(r"4[45]:\d\d"))

    spec = registry.get(SLUG)
    part = next(p for p in spec.parts if p.type == "number")
    variant = Assignment.objects.get(user=user, exercise__slug=SLUG).variant
    ref = registry.solve(spec, registry.params_for(spec, variant))[part.id]
    box = page.locator(f"#part-{part.id}")
    box.locator(f"#answer-{part.id}").fill(answer_text(part, ref))
    box.locator("button[value='submit']").click()
    page.locator(f"#part-{part.id} .submission-status .badge.correct").wait_for()
    expect(page.locator(f"#part-{part.id} .mock-note")).to_be_visible()
    assert page.locator("details.solution").count() == 0
    assert page.locator(f"#part-{part.id} .give-up").count() == 0

    page.click("#back-to-mock")
    page.click("#finish-mock")
    expect(page.locator("h1")).to_have_text("Mock interview summary")
    row = page.locator(f"tr[data-slug='{SLUG}']")
    expect(row.locator(".solved")).to_have_text(f"1/{len(spec.parts)}")
    expect(row.locator(".attempts")).to_have_text("1")
    expect(page.locator(f"#solutions-{SLUG} [data-part='{part.id}'] details.solution")).to_be_visible()

    page.goto(f"{live_server.url}/ex/{SLUG}/")
    expect(page.locator(f"#part-{part.id} details.solution")).to_be_visible()
    assert page.locator(".mock-banner").count() == 0
    assert errors == []
    assert outside == []
