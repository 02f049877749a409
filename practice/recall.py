"""The one scheduling seam for recall (items a student should see again): FSRS (the `fsrs`
package) decides when; nothing else in Roofline computes an interval.

No function here reads the clock: every caller passes `now`, so a test runs on a fake clock
and the same inputs always give the same due time.
"""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fsrs import Card, Rating, Scheduler

__all__ = ["SCHEDULER", "Rating", "due_of", "rating_for", "review", "start"]

# Fuzzing off: fsrs otherwise adds random jitter to review intervals (to spread a day's load),
# which would make a due time depend on a random draw instead of on the answers.
# One learning step of 10 minutes, not fsrs's default two (1 and 10 minutes): a missed item comes
# back once within the sitting, and a right answer then graduates it to days. Reworking an
# exercise part takes minutes, so a 1-minute step would bring it back before the last answer's
# feedback was read, and a second step would ask for it again minutes after a right answer.
SCHEDULER = Scheduler(enable_fuzzing=False, learning_steps=(timedelta(minutes=10),))


def rating_for(*, full_marks: bool, helped: bool) -> Rating:
    """A graded outcome as an FSRS rating.

    Full marks on one's own -> Good: recalled, the normal interval growth. Full marks after help
    (a hint, or the worked solution shown first) -> Hard: the student got there, but not from
    memory alone, so the interval grows less. Anything short of full marks, a listed mistake
    included -> Again: a lapse, back to the short (re)learning steps. Easy is never inferred from
    a grade: a right answer says nothing about how effortless it was.
    """
    if not full_marks:
        return Rating.Again
    return Rating.Hard if helped else Rating.Good


def _utc(now: datetime) -> datetime:
    # fsrs refuses anything but a UTC-aware datetime; Django's may carry another tzinfo.
    if now.tzinfo is None:
        raise ValueError("recall needs an aware datetime")
    return now.astimezone(UTC)


def start(now: datetime) -> dict[str, Any]:
    """A new FSRS card, due at once; returned as the JSON stored on RecallItem.fsrs_card."""
    now = _utc(now)
    # card_id from the clock passed in, not fsrs's own default (which reads the real clock).
    return Card(card_id=int(now.timestamp() * 1000), due=now).to_dict()


def review(state: dict[str, Any], rating: Rating, now: datetime) -> dict[str, Any]:
    """The stored card after one review rated `rating` at `now`."""
    card, _log = SCHEDULER.review_card(Card.from_dict(state), rating, review_datetime=_utc(now))
    return card.to_dict()


def due_of(state: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(state["due"])
