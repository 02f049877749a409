"""Reviewing a part due for recall: it is asked again in a variant drawn for the review
(practice/actions/recall.open_review), its first graded answer reschedules it, and the
exercise page keeps showing the student's own variant."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.core.cache import cache
from django.test import Client

from exercises import registry
from graders.selftest import answer_text
from practice import recall
from practice.actions.exercises import draw_variant
from practice.models import Assignment, Exercise, RecallItem, RecallLog, Submission, User
from practice.variants import variant_params

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
SLUG, PART = "kv_page_ledger", "pool_blocks"  # a number part, graded inline
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
OWN, DRAWN, NEXT = "canonical", "2", "100"  # the student's variant and the ones the review draws


@pytest.fixture
def clock() -> Iterator[mock.MagicMock]:
    cache.clear()
    with mock.patch("django.utils.timezone.now", return_value=T0) as now:
        yield now


@pytest.fixture
def ann(client: Client, clock: mock.MagicMock) -> User:
    user = User.objects.create_user("ann", password="pw-ann-12345")
    Assignment.objects.create(user=user, exercise=_ex(), variant=OWN)
    client.force_login(user)
    return user


def _ex() -> Exercise:
    return Exercise.objects.get(slug=SLUG)


def _reference(variant: str) -> str:
    spec = registry.get(SLUG)
    return answer_text(spec.part(PART), registry.solve(spec, variant_params(spec, variant))[PART])


def _miss(client: Client) -> RecallItem:
    """A wrong answer on the exercise page at T0: the part becomes an item."""
    client.post(f"/ex/{SLUG}/{PART}/submit/", {"answer": "1"}, **HX)
    return RecallItem.objects.get(exercise=_ex(), part_id=PART)


def _open(client: Client, item: RecallItem, drawn: str = DRAWN) -> str:
    with mock.patch("practice.actions.recall.draw_variant", return_value=drawn) as draw:
        r = client.get(f"/today/{item.pk}/review/")
    assert r.status_code == 200
    _open.avoided = draw.call_args.args[1] if draw.called else None  # type: ignore[attr-defined]
    return r.content.decode()


def _review(client: Client, item: RecallItem, answer: str, variant: str = DRAWN) -> str:
    r = client.post(f"/today/{item.pk}/review/submit/", {"answer": answer, "variant": variant},
                    **HX)
    assert r.status_code == 200
    return r.content.decode()


def test_the_references_of_the_variants_used_here_differ() -> None:
    # What the tests below rely on: an answer right in one of them is wrong in the others.
    assert len({_reference(v) for v in (OWN, DRAWN, NEXT)}) == 3


def test_today_links_a_due_part_to_its_review(client: Client, ann: User,
                                             clock: mock.MagicMock) -> None:
    item = _miss(client)
    clock.return_value = T0 + timedelta(days=1)
    html = client.get("/today/").content.decode()
    assert f"/today/{item.pk}/review/" in html and "Review it in a new variant" in html


def test_opening_a_review_draws_a_variant_other_than_the_students_and_keeps_it(
        client: Client, ann: User, clock: mock.MagicMock) -> None:
    item = _miss(client)
    clock.return_value = T0 + timedelta(days=1)
    html = _open(client, item)
    assert _open.avoided == {OWN}  # type: ignore[attr-defined]
    item.refresh_from_db()
    assert (item.variant, item.variant_drawn_at, item.variant_answered_at) == (
        DRAWN, T0 + timedelta(days=1), None)
    assert f"review variant #{DRAWN}" in html
    assert "Worked solution" not in html  # not before the review is answered
    # Opened again before answering: the same variant, nothing drawn.
    html = _open(client, item, drawn=NEXT)
    assert _open.avoided is None and f"review variant #{DRAWN}" in html  # type: ignore[attr-defined]


def test_today_opens_the_review_in_place_of_the_row(client: Client, ann: User,
                                                   clock: mock.MagicMock) -> None:
    item = _miss(client)
    clock.return_value = T0 + timedelta(days=1)
    today = client.get("/today/").content.decode()
    assert f'hx-get="/today/{item.pk}/review/" hx-target="#recall-{item.pk}"' in today
    with mock.patch("practice.actions.recall.draw_variant", return_value=DRAWN):
        html = client.get(f"/today/{item.pk}/review/", **HX).content.decode()
    assert html.lstrip().startswith("<article")
    assert "<html" not in html and f'id="recall-{item.pk}"' in html
    assert f"review variant #{DRAWN}" in html and f"/today/{item.pk}/review/submit/" in html


def test_draw_variant_avoids_the_variants_it_is_told_to() -> None:
    with mock.patch("random.SystemRandom.randrange", side_effect=[5, 3, 9]):
        assert draw_variant(SLUG, {"5", "3"}) == "9"


def test_the_first_review_answer_reschedules_and_later_ones_do_not(
        client: Client, ann: User, clock: mock.MagicMock) -> None:
    item = _miss(client)
    day1 = T0 + timedelta(days=1)
    clock.return_value = day1
    _open(client, item)
    html = _review(client, item, _reference(DRAWN))
    sub = Submission.objects.get(recall_item=item)
    assert (sub.variant, sub.verdict, sub.score) == (DRAWN, "correct", 1.0)
    item.refresh_from_db()
    assert item.variant_answered_at == day1 and item.last_rating == recall.Rating.Good
    assert item.due > day1 + timedelta(hours=12)
    assert "Review counted" in html and "Worked solution" in html
    assert RecallLog.objects.filter(item=item).count() == 2  # the miss, then the review
    # A second answer in the same variant is practice: graded, the schedule untouched.
    due, log = item.due, RecallLog.objects.count()
    clock.return_value = day1 + timedelta(minutes=5)
    _review(client, item, "1")
    item.refresh_from_db()
    assert item.due == due and RecallLog.objects.count() == log
    assert Submission.objects.filter(recall_item=item).count() == 2


def test_the_students_own_numbers_are_wrong_in_the_review(
        client: Client, ann: User, clock: mock.MagicMock) -> None:
    item = _miss(client)
    clock.return_value = T0 + timedelta(days=1)
    _open(client, item)
    _review(client, item, _reference(OWN))
    item.refresh_from_db()
    assert Submission.objects.get(recall_item=item).verdict != "correct"
    assert item.last_rating == recall.Rating.Again
    assert item.due <= T0 + timedelta(days=1, minutes=10)


def test_a_missed_review_comes_back_soon_in_yet_another_variant(
        client: Client, ann: User, clock: mock.MagicMock) -> None:
    item = _miss(client)
    clock.return_value = T0 + timedelta(days=1)
    _open(client, item)
    _review(client, item, "1")
    item.refresh_from_db()
    # Not due yet: the answered review shows as it was.
    assert f"review variant #{DRAWN}" in _open(client, item, drawn=NEXT)
    clock.return_value = item.due + timedelta(seconds=1)
    html = _open(client, item, drawn=NEXT)
    assert _open.avoided == {OWN, DRAWN}  # type: ignore[attr-defined]
    item.refresh_from_db()
    assert (item.variant, item.variant_answered_at) == (NEXT, None)
    assert f"review variant #{NEXT}" in html and "Worked solution" not in html


def test_the_exercise_page_keeps_the_students_own_answers(
        client: Client, ann: User, clock: mock.MagicMock) -> None:
    item = _miss(client)
    clock.return_value = T0 + timedelta(days=1)
    _open(client, item)
    right = _reference(DRAWN)
    _review(client, item, right)
    html = client.get(f"/ex/{SLUG}/").content.decode()
    assert f"your variant #{OWN}" in html
    assert f'value="{right}"' not in html  # the review's answer is not this page's latest


def test_a_form_from_before_a_new_draw_is_refused(client: Client, ann: User,
                                                 clock: mock.MagicMock) -> None:
    item = _miss(client)
    clock.return_value = T0 + timedelta(days=1)
    _open(client, item)
    html = _review(client, item, _reference(NEXT), variant=NEXT)
    assert "moved on to a new variant" in html
    assert not Submission.objects.filter(recall_item=item).exists()


def test_without_javascript_a_review_answer_comes_back_to_the_review(
        client: Client, ann: User, clock: mock.MagicMock) -> None:
    item = _miss(client)
    clock.return_value = T0 + timedelta(days=1)
    _open(client, item)
    r = client.post(f"/today/{item.pk}/review/submit/",
                    {"answer": _reference(DRAWN), "variant": DRAWN})
    assert r.status_code == 302 and r["Location"] == f"/today/{item.pk}/review/#part-{PART}"


def test_a_review_answers_status_redraws_the_review(client: Client, ann: User,
                                                    clock: mock.MagicMock) -> None:
    item = _miss(client)
    clock.return_value = T0 + timedelta(days=1)
    _open(client, item)
    _review(client, item, _reference(DRAWN))
    sub = Submission.objects.get(recall_item=item)
    html = client.get(f"/submissions/{sub.pk}/status/", **HX).content.decode()
    assert f"/today/{item.pk}/review/submit/" in html and "Review counted" in html


def test_someone_elses_review_is_not_found(client: Client, ann: User) -> None:
    item = _miss(client)
    bob = User.objects.create_user("bob", password="pw-bob-12345")
    client.force_login(bob)
    assert client.get(f"/today/{item.pk}/review/").status_code == 404
    assert client.post(f"/today/{item.pk}/review/submit/",
                       {"answer": "1", "variant": ""}).status_code == 404
    item.refresh_from_db()
    assert item.variant == ""


def test_a_retired_exercise_has_no_review(client: Client, ann: User) -> None:
    item = _miss(client)
    Exercise.objects.filter(pk=item.exercise_id).update(active=False)
    assert client.get(f"/today/{item.pk}/review/").status_code == 404


def test_an_unopened_review_takes_no_answer(client: Client, ann: User) -> None:
    item = _miss(client)
    assert client.post(f"/today/{item.pk}/review/submit/",
                       {"answer": "1", "variant": ""}, **HX).status_code == 404


def test_review_answers_share_the_submission_rate_limit(client: Client, ann: User,
                                                        clock: mock.MagicMock) -> None:
    item = _miss(client)
    clock.return_value = T0 + timedelta(days=1)
    _open(client, item)
    with mock.patch("practice.ratelimit.submission_refusal", return_value="slow down"):
        html = _review(client, item, _reference(DRAWN))
    assert "slow down" in html and not Submission.objects.filter(recall_item=item).exists()


def test_without_javascript_an_interview_mode_answer_stays_in_interview_mode(
        client: Client, ann: User) -> None:
    page = client.get(f"/ex/{SLUG}/?mode=interview").content.decode()
    assert 'name="page_mode" value="interview"' in page
    r = client.post(f"/ex/{SLUG}/{PART}/submit/", {"answer": "1", "page_mode": "interview"})
    assert r["Location"] == f"/ex/{SLUG}/?mode=interview#part-{PART}"
    r = client.post(f"/ex/{SLUG}/{PART}/submit/", {"answer": "1"})
    assert r["Location"] == f"/ex/{SLUG}/#part-{PART}"
