"""The recall pages through Django's test client: "Numbers to know" (/deck/) answers deck cards in
place, "Today" (/today/) lists what is due and answers due cards, and the header counts what is
due. The clock is django.utils.timezone.now, patched to a fixed time (no sleeps)."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.core.cache import cache
from django.test import Client, override_settings
from django.utils.html import escape

from exercises import deck
from practice import recall
from practice.actions.recall import note_card_seen
from practice.models import Exercise, RecallItem, User

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CARD = deck.cards()[0]  # the first GPU's HBM capacity: "80 GB"
OTHER = deck.cards()[1]
DECK_ANSWER = "/deck/answer/"


@pytest.fixture(autouse=True)
def clock() -> Iterator[mock.MagicMock]:
    """A fixed clock for views, actions and the header count; the card rate counter is in the
    cache, so each test starts with it empty."""
    cache.clear()
    with mock.patch("django.utils.timezone.now", return_value=T0) as now:
        yield now


@pytest.fixture
def ann(client: Client) -> User:
    user = User.objects.create_user("ann", password="pw-ann-12345")
    client.force_login(user)
    return user


def _answer_card(client: Client, card: deck.Card, text: str, **extra: str) -> str:
    r = client.post(DECK_ANSWER + f"?card={card.id}", {"answer": text}, **HX, **extra)
    assert r.status_code == 200
    return r.content.decode()


def _due_after(rating: recall.Rating) -> datetime:
    """When a card first seen and answered at T0 with `rating` is due again."""
    return recall.due_of(recall.review(recall.start(T0), rating, T0))


def _part_item(user: User, due: datetime) -> RecallItem:
    ex = Exercise.objects.get(slug="kv_page_ledger")
    state = recall.start(due)
    return RecallItem.objects.create(user=user, exercise=ex, part_id="pool_blocks",
                                     reason=RecallItem.Reason.WRONG, fsrs_card=state,
                                     due=recall.due_of(state))


def _card_item(user: User, card: deck.Card, due: datetime) -> RecallItem:
    return note_card_seen(user, card.id, due)


# --- the deck --------------------------------------------------------------------------------

def test_the_deck_lists_every_group_and_card(client: Client, ann: User) -> None:
    html = client.get("/deck/").content.decode()
    for group in deck.groups():
        assert escape(group) in html
    assert html.count('class="part deck-card"') == len(deck.cards())


def test_a_right_answer_shows_the_verdict_and_source_and_schedules_the_card(
        client: Client, ann: User) -> None:
    html = _answer_card(client, CARD, CARD.answer_text)
    assert '<html' not in html  # the fragment, not the page
    assert "badge correct" in html
    assert escape(CARD.sources[0].text) in html
    item = RecallItem.objects.get(user=ann, card_id=CARD.id)
    assert item.last_reviewed_at == T0 and item.last_rating == recall.Rating.Good
    assert item.due == _due_after(recall.Rating.Good)
    assert item.due.strftime("%Y-%m-%d %H:%M") in html


def test_a_wrong_answer_comes_back_sooner(client: Client, ann: User) -> None:
    html = _answer_card(client, CARD, "1 GB")
    assert "badge incorrect" in html
    assert escape(CARD.sources[0].text) in html
    assert f"Answer: <strong>{escape(CARD.answer_text)}</strong>" in html  # the card turned over
    item = RecallItem.objects.get(user=ann, card_id=CARD.id)
    assert item.last_rating == recall.Rating.Again
    assert T0 < item.due == _due_after(recall.Rating.Again) < _due_after(recall.Rating.Good)


def test_an_unreadable_answer_shows_the_message_and_records_nothing(
        client: Client, ann: User) -> None:
    html = _answer_card(client, CARD, "lots")
    assert "Not graded:" in html and "badge" not in html
    assert not RecallItem.objects.exists()


def test_the_deck_says_when_a_card_met_before_comes_back(client: Client, ann: User) -> None:
    _card_item(ann, CARD, T0 - timedelta(hours=1))
    _card_item(ann, OTHER, T0 + timedelta(hours=1))
    html = client.get("/deck/").content.decode()
    assert html.count(">due now<") == 1
    assert (T0 + timedelta(hours=1)).strftime("due %Y-%m-%d %H:%M") in html


def test_an_unknown_card_is_404(client: Client, ann: User) -> None:
    assert client.post(DECK_ANSWER + "?card=gpu/nope", {"answer": "1"}, **HX).status_code == 404


def test_without_javascript_the_page_comes_back_with_the_card_answered(
        client: Client, ann: User) -> None:
    r = client.post(DECK_ANSWER + f"?card={CARD.id}", {"answer": CARD.answer_text})
    assert r.status_code == 200 and "<html" in r.content.decode()
    assert "badge correct" in r.content.decode()
    assert RecallItem.objects.filter(user=ann, card_id=CARD.id).exists()


# --- Today -----------------------------------------------------------------------------------

def test_today_lists_only_the_users_own_due_items_in_order(client: Client, ann: User) -> None:
    bob = User.objects.create_user("bob", password="pw-bob-12345")
    part = _part_item(ann, T0 - timedelta(hours=2))
    card = _card_item(ann, CARD, T0 - timedelta(hours=1))
    _card_item(ann, OTHER, T0 + timedelta(hours=1))  # not due yet
    _card_item(bob, deck.cards()[2], T0 - timedelta(hours=3))  # someone else's
    html = client.get("/today/").content.decode()
    part_at = html.index(f"/today/{part.pk}/review/#part-{part.part_id}")
    card_at = html.index(f"/today/{card.pk}/answer/")
    assert part_at < card_at  # most overdue first
    assert escape(OTHER.question) not in html
    assert escape(deck.cards()[2].question) not in html


def test_answering_a_due_card_on_today_reschedules_it_and_it_leaves_the_list(
        client: Client, ann: User) -> None:
    item = _card_item(ann, CARD, T0 - timedelta(hours=1))
    assert f"/today/{item.pk}/answer/" in client.get("/today/").content.decode()
    r = client.post(f"/today/{item.pk}/answer/", {"answer": CARD.answer_text}, **HX)
    assert r.status_code == 200 and "badge correct" in r.content.decode()
    item.refresh_from_db()
    assert item.due > T0
    html = client.get("/today/").content.decode()
    assert f"/today/{item.pk}/answer/" not in html
    assert "Nothing is due now." in html and item.due.strftime("%Y-%m-%d %H:%M") in html


def test_an_exercise_part_is_not_answered_on_today(client: Client, ann: User) -> None:
    part = _part_item(ann, T0 - timedelta(hours=1))
    assert client.post(f"/today/{part.pk}/answer/", {"answer": "1"}, **HX).status_code == 404


def test_nothing_ever_due_says_where_to_start(client: Client, ann: User) -> None:
    html = client.get("/today/").content.decode()
    assert "Nothing is due now." in html and 'href="/deck/"' in html


def test_another_user_cannot_answer_someone_elses_item(client: Client, ann: User) -> None:
    bob = User.objects.create_user("bob", password="pw-bob-12345")
    theirs = _card_item(bob, CARD, T0 - timedelta(hours=1))
    r = client.post(f"/today/{theirs.pk}/answer/", {"answer": CARD.answer_text}, **HX)
    assert r.status_code == 404
    theirs.refresh_from_db()
    assert theirs.last_reviewed_at is None
    assert not RecallItem.objects.filter(user=ann).exists()


# --- the header ------------------------------------------------------------------------------

def test_the_header_counts_the_users_due_items_and_links_the_pages(
        client: Client, ann: User) -> None:
    _part_item(ann, T0 - timedelta(hours=2))
    _card_item(ann, CARD, T0 - timedelta(hours=1))
    _card_item(ann, OTHER, T0 + timedelta(hours=1))  # not due
    _card_item(User.objects.create_user("bob"), CARD, T0 - timedelta(hours=1))
    html = client.get("/history/").content.decode()
    assert 'title="Items due now">2</span>' in html
    assert 'href="/today/"' in html and 'href="/deck/"' in html


def test_the_header_shows_no_count_when_nothing_is_due(client: Client, ann: User) -> None:
    assert "badge due-count" not in client.get("/history/").content.decode()


def test_an_answer_on_today_sends_the_new_count_to_the_header(client: Client, ann: User) -> None:
    first = _card_item(ann, CARD, T0 - timedelta(hours=2))
    _card_item(ann, OTHER, T0 - timedelta(hours=1))
    r = client.post(f"/today/{first.pk}/answer/", {"answer": CARD.answer_text}, **HX)
    html = r.content.decode()
    # htmx swaps the header's count out of band: one item is left due.
    assert '<span id="due-count" hx-swap-oob="true">' in html
    assert 'title="Items due now">1</span>' in html
    # The full page has the same slot, without the out-of-band flag.
    page = client.get("/today/").content.decode()
    assert '<span id="due-count">' in page and "hx-swap-oob" not in page


# --- who may ---------------------------------------------------------------------------------

def test_anonymous_visitors_are_sent_to_log_in(client: Client) -> None:
    for method, url in (("get", "/deck/"), ("get", "/today/"), ("post", DECK_ANSWER),
                        ("post", "/today/1/answer/")):
        r = getattr(client, method)(url)
        assert r.status_code == 302 and "/login/" in r["Location"], url


@override_settings(ROOFLINE_SUBMIT_RATE=3, ROOFLINE_SUBMIT_WINDOW_S=60)
def test_card_answers_are_rate_limited(client: Client, ann: User,
                                       clock: mock.MagicMock) -> None:
    for _ in range(3):
        assert "badge correct" in _answer_card(client, CARD, CARD.answer_text)
    item = RecallItem.objects.get(user=ann, card_id=CARD.id)
    html = _answer_card(client, CARD, CARD.answer_text)
    assert "Not graded:" in html and "wait" in html and "badge" not in html
    assert RecallItem.objects.get(pk=item.pk).last_reviewed_at == item.last_reviewed_at
    # An unreadable answer is not an attempt: it is refused for what it is, not counted.
    assert "number" in _answer_card(client, CARD, "lots").lower()
    clock.return_value = T0 + timedelta(seconds=61)  # the next window
    assert "badge correct" in _answer_card(client, CARD, CARD.answer_text)
