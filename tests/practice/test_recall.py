"""Recall (practice/recall.py, practice/actions/recall.py): what comes back, and when, on a fake
clock. FSRS does the scheduling; these tests pin how Roofline feeds it."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from exercises import registry
from graders.base import GradeResult
from graders.selftest import answer_text
from practice import recall
from practice.actions.cohorts import create_cohort, join_cohort
from practice.actions.exercises import assignment_for
from practice.actions.recall import answer_item, due_items, note_card_seen, note_graded_part
from practice.actions.regrade import start_regrade
from practice.actions.submissions import reveal_solution, submit_answer
from practice.grading import regrade_one
from practice.models import Exercise, RecallItem, RegradeEntry, Submission, User
from practice.variants import variant_params

SLUG, PART = "kv_page_ledger", "pool_blocks"  # a number part, graded inline
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # the fake clock's start
RIGHT = GradeResult(score=1.0, verdict="correct", feedback="")
WRONG = GradeResult(score=0.0, verdict="incorrect", feedback="")


def due_after(*ratings: recall.Rating, step: timedelta = timedelta(0)) -> datetime:
    """The due time after reviewing a new card with `ratings`, each `step` after the last."""
    state, now = recall.start(T0), T0
    for rating in ratings:
        state = recall.review(state, rating, now)
        now += step
    return recall.due_of(state)


# --- the scheduling seam ------------------------------------------------------------------------

def test_a_new_item_is_due_at_once() -> None:
    assert recall.due_of(recall.start(T0)) == T0


def test_again_comes_back_within_the_learning_step() -> None:
    due = due_after(recall.Rating.Again)
    assert T0 < due <= T0 + timedelta(minutes=10)


def test_good_is_later_than_hard_and_easy_later_still() -> None:
    hard, good, easy = (due_after(r) for r in (recall.Rating.Hard, recall.Rating.Good,
                                               recall.Rating.Easy))
    assert due_after(recall.Rating.Again) < hard < good < easy


def test_the_scheduler_is_deterministic() -> None:
    ratings = (recall.Rating.Good, recall.Rating.Good, recall.Rating.Hard, recall.Rating.Good)
    assert due_after(*ratings, step=timedelta(days=3)) == due_after(*ratings,
                                                                     step=timedelta(days=3))
    assert not recall.SCHEDULER.enable_fuzzing


def test_a_grade_maps_to_a_rating() -> None:
    assert recall.rating_for(full_marks=True, helped=False) == recall.Rating.Good
    assert recall.rating_for(full_marks=True, helped=True) == recall.Rating.Hard
    assert recall.rating_for(full_marks=False, helped=False) == recall.Rating.Again


# --- actions --------------------------------------------------------------------------------------


@pytest.fixture
def ann() -> User:
    return User.objects.create_user("ann", password="pw-ann-123")


def _ex() -> Exercise:
    return Exercise.objects.get(slug=SLUG)


def _reference(user: User) -> str:
    spec = registry.get(SLUG)
    params = variant_params(spec, assignment_for(user, _ex()).variant)
    return answer_text(spec.part(PART), registry.solve(spec, params)[PART])


def _listed_mistake(user: User) -> str:
    spec = registry.get(SLUG)
    params = variant_params(spec, assignment_for(user, _ex()).variant)
    slip = next(m for m in registry.mistakes(spec, params, PART) if m.name == "gb_not_gib")
    return f"{slip.answer:.0f}"


@pytest.mark.django_db
def test_a_wrong_answer_adds_the_part_due_within_minutes(ann: User) -> None:
    sub = submit_answer(ann, _ex(), PART, "1")
    assert sub.verdict == "incorrect"
    item = RecallItem.objects.get(user=ann)
    assert (item.exercise_id, item.part_id, item.card_id) == (_ex().pk, PART, "")
    assert item.reason == RecallItem.Reason.WRONG
    assert item.last_rating == recall.Rating.Again
    assert sub.finished_at < item.due <= sub.finished_at + timedelta(minutes=10)


@pytest.mark.django_db
def test_a_listed_mistake_is_the_reason(ann: User) -> None:
    sub = submit_answer(ann, _ex(), PART, _listed_mistake(ann))
    assert sub.result["mistake"] == "gb_not_gib"
    assert RecallItem.objects.get(user=ann).reason == RecallItem.Reason.MISTAKE


@pytest.mark.django_db
def test_right_the_first_time_adds_nothing(ann: User) -> None:
    assert submit_answer(ann, _ex(), PART, _reference(ann)).score == 1.0
    assert not RecallItem.objects.exists()


@pytest.mark.django_db
def test_right_after_the_solution_was_shown_comes_back(ann: User) -> None:
    reveal_solution(ann, _ex(), PART)
    assert submit_answer(ann, _ex(), PART, _reference(ann)).score == 1.0
    item = RecallItem.objects.get(user=ann)
    assert item.reason == RecallItem.Reason.AFTER_SOLUTION
    assert item.last_rating == recall.Rating.Hard


@pytest.mark.django_db
def test_a_later_wrong_answer_reschedules_the_same_item(ann: User) -> None:
    submit_answer(ann, _ex(), PART, _listed_mistake(ann))
    submit_answer(ann, _ex(), PART, "1")
    item = RecallItem.objects.get(user=ann)
    assert item.reason == RecallItem.Reason.MISTAKE  # why it was added first
    assert item.fsrs_card["last_review"] is not None


@pytest.mark.django_db
def test_a_card_seen_is_due_at_once_and_seeing_it_again_keeps_it(ann: User) -> None:
    item = note_card_seen(ann, "gpu-h100-hbm", T0)
    assert item.due == T0 and item.reason == RecallItem.Reason.CARD_SEEN
    answered = answer_item(item, RIGHT, T0)
    again = note_card_seen(ann, "gpu-h100-hbm", T0 + timedelta(minutes=1))
    assert again.pk == item.pk
    assert (again.due, again.fsrs_card) == (answered.due, answered.fsrs_card) and again.due > T0


@pytest.mark.django_db
def test_reviewing_twice_moves_due_forward(ann: User) -> None:
    item = note_card_seen(ann, "gpu-h100-hbm", T0)
    first = answer_item(item, RIGHT, T0).due
    second = answer_item(item, RIGHT, first).due
    assert T0 < first < second
    assert item.last_rating == recall.Rating.Good and item.last_reviewed_at == first
    wrong = answer_item(item, WRONG, second).due
    assert wrong <= second + timedelta(minutes=10)  # a lapse: back to a short step


@pytest.mark.django_db
def test_due_items_are_the_users_own_most_overdue_first(ann: User) -> None:
    bob = User.objects.create_user("bob", password="pw-bob-123")
    late = note_card_seen(ann, "b-card", T0 - timedelta(days=2))
    later = note_card_seen(ann, "a-card", T0 - timedelta(days=1))
    answer_item(note_card_seen(ann, "c-card", T0), RIGHT, T0)  # not due yet
    note_card_seen(bob, "a-card", T0 - timedelta(days=5))
    assert [i.pk for i in due_items(ann, T0, limit=10)] == [late.pk, later.pk]
    assert [i.pk for i in due_items(ann, T0, limit=1)] == [late.pk]
    assert all(i.user_id == bob.pk for i in due_items(bob, T0, limit=10))


@pytest.mark.django_db
def test_a_regrade_keeps_the_schedule(ann: User) -> None:
    prof = User.objects.create_user("prof", password="pw-prof-123", is_instructor=True)
    join_cohort(ann, create_cohort(prof, "Spring").join_code)
    # Yesterday's grader scored a right answer 0: recall took it as a miss.
    sub = Submission.objects.create(
        user=ann, exercise=_ex(), part_id=PART, part_type="number",
        variant=assignment_for(ann, _ex()).variant, answer=_reference(ann), status="graded",
        score=0.0, verdict="incorrect", finished_at=T0,
        result={"score": 0.0, "verdict": "incorrect", "feedback": "old grader", "checks": []})
    before = note_graded_part(sub)
    assert before is not None
    job = start_regrade(prof, _ex())
    entry = regrade_one(RegradeEntry.objects.get(job=job, submission=sub).pk)
    assert entry.new_score == 1.0  # the grade changed...
    after = RecallItem.objects.get(pk=before.pk)  # ...the schedule did not
    assert (after.fsrs_card, after.due, after.last_rating) == (before.fsrs_card, before.due,
                                                               before.last_rating)


@pytest.mark.django_db
def test_an_aware_clock_in_another_zone_is_accepted(ann: User) -> None:
    local = T0.astimezone(timezone.get_fixed_timezone(120))
    assert note_card_seen(ann, "x", local).due == T0
