"""Recall: a student's items due again (RecallItem), an exercise part they missed or a deck
card they have met, brought back on the schedule practice/recall.py computes (FSRS). Not to be
confused with reviews.py, which is an instructor's review of an attempt.

Every read and write here is for one user: nothing returns another student's items.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from exercises.deck import Card
from graders.base import GradeResult
from graders.card import grade_card
from practice import ratelimit, recall
from practice.actions import NotAllowed
from practice.actions.exercises import draw_variant
from practice.models import Assignment, RecallItem, RecallLog, Submission, User

# Only a final, own grade says anything about what the student remembers: pending (awaiting an
# instructor), provisional (a preview), invalid and error verdicts are not recall outcomes.
_OUTCOMES = (Submission.Verdict.CORRECT, Submission.Verdict.PARTIAL,
             Submission.Verdict.INCORRECT)


def _full_marks(score: float | None, verdict: str) -> bool:
    return verdict == Submission.Verdict.CORRECT and (score or 0.0) >= 1.0


def _reason(sub: Submission, revealed_at: datetime | None) -> RecallItem.Reason | None:
    """Why this graded answer should come back, or None when it should not. `revealed_at`:
    when the part's worked solution was shown (PartState.revealed_at), if it was."""
    if sub.result.get("mistake"):
        return RecallItem.Reason.MISTAKE
    if not _full_marks(sub.score, sub.verdict):
        return RecallItem.Reason.WRONG
    if revealed_at is not None and revealed_at <= (sub.finished_at or timezone.now()):
        return RecallItem.Reason.AFTER_SOLUTION
    return None  # right on one's own: nothing to bring back


def note_graded_part(sub: Submission, revealed_at: datetime | None = None) -> RecallItem | None:
    """Add or reschedule the user's item for this part after a graded answer.

    On the exercise page, an answer that was wrong, matched a listed mistake, or was right only
    after the solution was shown (`revealed_at`, from the part's PartState) adds the item or
    reschedules it; a right answer of one's own leaves an existing item alone (an answer given
    right after a wrong one's feedback says little about memory). A review answer (sub.recall_item,
    in the item's own variant) reschedules the item whatever its outcome, but only the first
    graded answer in that variant counts.

    Called once per counted answer, where the grade is recorded (progress.count_attempt); a
    re-grade (grading.regrade_one) does not call it, so re-grading never resets a schedule.
    The answer's own finishing time is the clock.
    """
    if sub.mode != Submission.Mode.SUBMIT or sub.verdict not in _OUTCOMES:
        return None
    now = sub.finished_at or timezone.now()
    full_marks = _full_marks(sub.score, sub.verdict)
    if sub.recall_item_id is not None:
        return _note_review_answer(sub, recall.rating_for(full_marks=full_marks, helped=False),
                                   now)
    reason = _reason(sub, revealed_at)
    if reason is None:
        return None
    rating = recall.rating_for(full_marks=full_marks,
                               helped=reason == RecallItem.Reason.AFTER_SOLUTION)
    with transaction.atomic():
        item = (RecallItem.objects.select_for_update()
                .filter(user=sub.user, exercise=sub.exercise, part_id=sub.part_id).first())
        if item is None:
            # The reason stays the one it was added for; later answers only reschedule it.
            state = recall.start(now)
            item = RecallItem(user=sub.user, exercise=sub.exercise, part_id=sub.part_id,
                              reason=reason, fsrs_card=state, due=recall.due_of(state))
        return _review(item, rating, now)


def _note_review_answer(sub: Submission, rating: recall.Rating, now: datetime
                        ) -> RecallItem | None:
    with transaction.atomic():
        item = (RecallItem.objects.select_for_update()
                .filter(pk=sub.recall_item_id, user=sub.user).first())
        if item is None or item.variant != sub.variant or item.variant_answered_at is not None:
            return None  # a second answer in an answered variant, or an older review's
        item.variant_answered_at = now
        return _review(item, rating, now)


def open_review(user: User, item_id: int, now: datetime) -> RecallItem:
    """The user's review of a part, in a variant of its own.

    A variant is drawn when a due item is opened and its previous variant was answered (or it
    has none yet), never the student's own variant nor the last review's: the review asks for
    the method again, not the numbers remembered. Until answered, opening it again shows the
    same variant; once answered and not yet due, the answered review.
    """
    with transaction.atomic():
        item = (RecallItem.objects.select_for_update().select_related("exercise")
                .filter(user=user, pk=item_id).exclude(exercise=None).first())
        if item is None:
            raise NotAllowed("no such review")
        if not item.exercise.active:
            raise NotAllowed("this exercise has been retired")
        if item.variant and (item.variant_answered_at is None or item.due > now):
            return item
        own = (Assignment.objects.filter(user=user, exercise=item.exercise)
               .values_list("variant", flat=True).first())
        item.variant = draw_variant(item.exercise.slug, {v for v in (own, item.variant) if v})
        item.variant_drawn_at = now
        item.variant_answered_at = None
        item.save(update_fields=["variant", "variant_drawn_at", "variant_answered_at"])
        return item


def note_card_seen(user: User, card_id: str, now: datetime) -> RecallItem:
    """The user met a deck card: it joins their items, due at once. Seeing it again changes
    nothing (its schedule is kept)."""
    state = recall.start(now)
    item, _ = RecallItem.objects.get_or_create(
        user=user, card_id=card_id,
        defaults={"reason": RecallItem.Reason.CARD_SEEN, "fsrs_card": state,
                  "due": recall.due_of(state)})
    return item


def answer_item(item: RecallItem, result: GradeResult, now: datetime) -> RecallItem:
    """Reschedule an item from a graded answer to it (a card's grade_card, say)."""
    rating = recall.rating_for(full_marks=_full_marks(result.score, result.verdict),
                               helped=False)
    with transaction.atomic():
        # Read it again under a lock: two answers at once must both count, one after the other.
        item.refresh_from_db(from_queryset=RecallItem.objects.select_for_update())
        return _review(item, rating, now)


@dataclass(frozen=True)
class CardAnswer:
    """A graded answer to a deck card and the user's item for the card, rescheduled by it."""

    result: GradeResult
    item: RecallItem


def answer_card(user: User, card: Card, text: str, now: datetime) -> CardAnswer:
    """Grade an answer to a deck card, then note the card as seen and reschedule it.

    Raises InvalidAnswer for unreadable input and NotAllowed over the answer rate limit; in
    both cases nothing is recorded (graded first, so an unreadable answer is not counted)."""
    result = grade_card(card, text)
    refusal = ratelimit.card_answer_refusal(user, now)
    if refusal:
        raise NotAllowed(refusal)
    item = note_card_seen(user, card.id, now)
    return CardAnswer(result=result, item=answer_item(item, result, now))


def get_item(user: User, item_id: int) -> RecallItem:
    """The user's own item; another user's id is refused as if it did not exist."""
    item = RecallItem.objects.filter(user=user, pk=item_id).first()
    if item is None:
        raise NotAllowed("no such item")
    return item


def due_items(user: User, now: datetime, limit: int = 20) -> list[RecallItem]:
    """The user's items due at `now`, most overdue first (earliest due), at most `limit`."""
    return list(RecallItem.objects.filter(user=user, due__lte=now)
                .select_related("exercise").order_by("due", "pk")[:limit])


def due_count(user: User, now: datetime) -> int:
    """How many of the user's items are due at `now` (one count on the (user, due) index)."""
    return RecallItem.objects.filter(user=user, due__lte=now).count()


def card_dues(user: User) -> dict[str, datetime]:
    """When each deck card the user has met is due next, by card id (one query)."""
    return dict(RecallItem.objects.filter(user=user).exclude(card_id="")
                .values_list("card_id", "due"))


def next_due(user: User, now: datetime) -> datetime | None:
    """When the user's next item falls due after `now`, or None when they have none."""
    return (RecallItem.objects.filter(user=user, due__gt=now).order_by("due")
            .values_list("due", flat=True).first())


def _review(item: RecallItem, rating: recall.Rating, now: datetime) -> RecallItem:
    item.fsrs_card = recall.review(item.fsrs_card, rating, now)
    item.due = recall.due_of(item.fsrs_card)
    item.last_rating = int(rating)
    item.last_reviewed_at = now
    item.save()
    RecallLog.objects.create(user_id=item.user_id, item=item, rating=int(rating), reviewed_at=now)
    return item
