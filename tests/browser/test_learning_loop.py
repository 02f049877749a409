"""In Chromium, one student's learning loop in one browser session: a paid hint in interview
mode, a wrong answer that joins recall, the next (simulated) day's review in a new variant from
Today, two "Numbers to know" cards, and the weak spot it all leaves on "My progress".

The next day is simulated by moving the recall item's due time back a day, not by changing the
clock: the live server runs in another thread of this process and reads the real clock."""
from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone
from playwright.sync_api import expect

from exercises import deck, registry
from exercises.hints import share_label
from exercises.mistake_kinds import KINDS
from graders.selftest import answer_text
from practice.actions.hints import statement_hints
from practice.models import Assignment, Exercise, HintReveal, RecallItem, User
from practice.variants import variant_params

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

SLUG = "kv_page_ledger"
PART = "pool_blocks"
HINT_TITLE = "the memory utilisation setting"  # cost: 0.1, parts pool_blocks, exhaust_step, cap_worst
USERNAME = "loop-student"
PASSWORD = "a-long-pass-42"
SWAP = 10_000  # ms to wait for an htmx swap


def _answer(spec: Any, variant: str, part_id: str = PART) -> str:
    """The right answer for `part_id` in `variant`, as a student would type it."""
    return answer_text(spec.part(part_id),
                       registry.solve(spec, variant_params(spec, variant))[part_id])


def _listed_mistake(spec: Any, variant: str) -> tuple[str, str]:
    """The GB-for-GiB slip's answer on pool_blocks in `variant`, and the kind it names."""
    slip = next(m for m in registry.mistakes(spec, variant_params(spec, variant), PART)
                if m.name == "gb_not_gib")
    return f"{slip.answer:.0f}", slip.kind


def _a_day_earlier(item: RecallItem) -> None:
    """The item as if its last review were yesterday: what is due reads only `due`, but FSRS
    reads its stored card's times to schedule the next review, so those move back too (the
    answers stay today: the streak below is one day)."""
    day = timedelta(days=1)
    card = dict(item.fsrs_card)
    for key in ("due", "last_review"):
        if card.get(key):
            card[key] = (datetime.fromisoformat(card[key]) - day).isoformat()
    RecallItem.objects.filter(pk=item.pk).update(
        due=F("due") - day, last_reviewed_at=F("last_reviewed_at") - day, fsrs_card=card)


def _card_box(page: Any, card: deck.Card) -> Any:
    # Card ids have slashes: an attribute selector, not #id.
    return page.locator("article.deck-card").filter(
        has=page.locator(f"input[id='answer-{card.id}']"))


def test_a_student_walks_the_learning_loop(page: Any, live_server: Any) -> None:
    base = live_server.url
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("request", lambda r: outside.append(r.url)
            if not r.url.startswith((base, "data:", "blob:")) else None)

    user = User.objects.create_user(USERNAME, password=PASSWORD)
    exercise = Exercise.objects.get(slug=SLUG)
    spec = registry.get(SLUG)
    page.goto(base + "/login/")
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/")

    # 1. Interview mode: each hint's button says its cost; a paid one is revealed in place.
    page.goto(f"{base}/ex/{SLUG}/?mode=interview")
    hint = next(h for h in statement_hints(exercise) if h.title == HINT_TITLE)
    assert not hint.free and hint.cost == pytest.approx(0.1)
    numbers = {p.id: i + 1 for i, p in enumerate(spec.parts)}
    label = share_label(hint, numbers)
    assert label == "costs 10% of parts 1, 2 and 3"
    hints_box = page.locator("section.hints")
    button = hints_box.locator(f"#hint-{hint.id} button")
    expect(button).to_have_text(f"Reveal: {HINT_TITLE} ({label})")
    free = next(h for h in statement_hints(exercise) if h.free)
    expect(hints_box.locator(f"#hint-{free.id} button")).to_have_text(
        f"Reveal: {free.title} (free)")
    button.click()
    revealed = hints_box.locator(f"#hint-{hint.id}")
    expect(revealed.locator("small")).to_have_text(f"(revealed; {label})", timeout=SWAP)
    expect(revealed.locator(".hint-body")).not_to_be_empty()
    assert revealed.locator("button").count() == 0
    assert HintReveal.objects.filter(user=user, exercise=exercise, hint_id=hint.id).exists()
    assert HintReveal.objects.filter(user=user).count() == 1

    # 2. A wrong answer: the part redraws in place with the verdict; the part joins recall.
    box = page.locator(f"#part-{PART}")
    box.locator(f"#answer-{PART}").fill("1")
    box.locator("button[value='submit']").click()
    expect(page.locator(f"#part-{PART} .submission-status .badge.incorrect")).to_have_text(
        "incorrect", timeout=SWAP)
    expect(page.locator("section.hints")).to_be_visible()  # a swap, not a new page
    item = RecallItem.objects.get(user=user, exercise=exercise, part_id=PART)
    assert item.due <= timezone.now() + timedelta(minutes=10)

    # 3. The next day: the item is due; Today offers a review in a new variant.
    _a_day_earlier(item)
    page.goto(base + "/")
    expect(page.locator("header .due-count")).to_have_text("1")
    page.locator("header nav").get_by_role("link", name=re.compile(r"^Today")).click()
    page.wait_for_url(base + "/today/")
    # An <a role="button">: a link styled as a button, so found as an <a> by its text.
    review_link = page.locator("main a", has_text="Review it in a new variant")
    expect(review_link).to_have_count(1)
    expect(review_link).to_have_attribute("href", f"/today/{item.pk}/review/#part-{PART}")
    review_link.click()
    # The review opens in place of the row (htmx): Today stays, the row becomes the review.
    row = page.locator(f"#recall-{item.pk}.recall-opened")
    expect(row.locator("header h3")).to_have_text(re.compile(r"^Review: "), timeout=SWAP)
    assert page.url == base + "/today/"
    subtitle = row.locator("> header small").inner_text()
    found = re.search(r"review variant #(\S+)", subtitle)
    assert found, subtitle
    own = Assignment.objects.get(user=user, exercise=exercise).variant
    item.refresh_from_db()
    assert item.variant and found.group(1) == str(item.variant)
    assert str(item.variant) != str(own)
    box = page.locator(f"#part-{PART}")
    expect(box.locator(".review-due")).to_contain_text("Your first graded answer here is the review")
    box.locator(f"#answer-{PART}").fill(_answer(spec, item.variant))
    box.locator("button[value='submit']").click()
    box = page.locator(f"#part-{PART}")
    expect(box.locator(".submission-status .badge.correct")).to_have_text("correct", timeout=SWAP)
    expect(box.locator(".review-due")).to_contain_text("Review counted")
    # Nothing is due any more: the header's count followed the answer, with no reload.
    expect(page.locator("header .due-count")).to_have_count(0)
    assert page.url == base + "/today/"
    expect(box.locator("details.solution")).to_be_visible()
    item.refresh_from_db()
    assert item.variant_answered_at is not None
    assert item.due > timezone.now() + timedelta(days=1)

    # 4. Numbers to know: one card right, one wrong, each redrawn in place with its source.
    right_card, wrong_card = deck.cards()[0], deck.cards()[1]
    page.locator("header nav").get_by_role("link", name="Numbers to know").click()
    page.wait_for_url(base + "/deck/")
    for card, text, verdict in ((right_card, right_card.answer_text, "correct"),
                                (wrong_card, f"1 {wrong_card.answer.unit}", "incorrect")):
        card_box = _card_box(page, card)
        expect(card_box).to_have_count(1)
        card_box.locator("input[name=answer]").fill(text)
        card_box.get_by_role("button", name="Check").click()
        expect(card_box.locator(f"header .badge.{verdict}")).to_have_text(verdict, timeout=SWAP)
        expect(card_box.locator(".feedback")).to_contain_text(card.sources[0].text)
        expect(card_box.locator(".card-answer")).to_have_text(f"Answer: {card.answer_text}")
    assert set(RecallItem.objects.filter(user=user).exclude(card_id="")
               .values_list("card_id", flat=True)) == {right_card.id, wrong_card.id}

    # 5. A listed mistake in practice mode (own variant), then the weak spot on My progress.
    mistake, kind_id = _listed_mistake(spec, own)
    page.goto(f"{base}/ex/{SLUG}/")
    assert page.locator("section.hints").count() == 0  # practice mode: no hint buttons
    box = page.locator(f"#part-{PART}")
    # The page shows step 2's wrong answer already: wait for this answer's own status.
    earlier = box.locator(".submission-status").get_attribute("id")
    box.locator(f"#answer-{PART}").fill(mistake)
    box.locator("button[value='submit']").click()
    status = page.locator(f"#part-{PART} .submission-status")
    expect(status).not_to_have_id(earlier or "", timeout=SWAP)
    expect(status.locator(".badge.incorrect")).to_have_text("incorrect", timeout=SWAP)

    page.locator("header nav").get_by_role("link", name="My progress").click()
    page.wait_for_url(base + "/progress/")
    expect(page.locator("h1")).to_have_text("My progress")
    expect(page.locator("#streak-heading + p strong")).to_have_text("Current streak: 1 day.")
    # The part was solved by the review, after a paid hint on it was revealed: "with hints".
    topic_parts = sum(len(ex.parts) for ex in Exercise.objects.filter(active=True,
                                                                      topic=exercise.topic))
    row = page.locator("section[aria-labelledby='topics-heading'] tbody tr").filter(
        has=page.locator("th", has_text=re.compile(f"^{re.escape(exercise.topic)}$")))
    expect(row).to_have_count(1)
    # First try, with hints, after the solution, solved later, tried not solved, parts.
    expect(row.locator("td")).to_have_text(["0", "1", "0", "0", "0", str(topic_parts)])
    kind = KINDS[kind_id]
    kinds = page.locator("section[aria-labelledby='kinds-heading'] tbody tr")
    kind_row = kinds.filter(has=page.locator("th", has_text=kind.label))
    expect(kind_row).to_have_count(1)
    expect(kind_row.locator("td").nth(0)).to_have_text("1")  # answers
    drill = kind_row.get_by_role("link", name=f"Drill: {kind.label}")
    expect(drill).to_have_attribute("href",
                                    f"/ex/{kind.drill_exercise}/#part-{kind.drill_part}")
    chart = page.locator("canvas#activity-chart")
    expect(chart).to_have_attribute("data-drawn", "ok", timeout=SWAP)
    expect(page.locator(".chart-box")).not_to_have_attribute("hidden", re.compile(".*"))
    expect(page.locator(".chart-box")).to_be_visible()

    assert errors == [], errors
    assert outside == [], outside
