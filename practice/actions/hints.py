"""Revealing a hint of an exercise's statement in interview mode (exercises/hints.py).

Practice mode shows every hint's text and records nothing, so it costs nothing; only a reveal
recorded here costs anything, and only on answers submitted after it (the credit is reduced in
practice/actions/progress.py). A running mock interview always opens in interview mode.
"""
from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction

from exercises import hints, registry
from practice.actions import NotAllowed
from practice.models import Exercise, HintReveal, User


def statement_hints(exercise: Exercise) -> tuple[hints.Hint, ...]:
    """The exercise's hints from its raw statement (ids, titles, parts, costs; bodies unrendered)."""
    spec = registry.get(exercise.slug)
    return hints.parse(spec.statement_template, tuple(p.id for p in spec.parts)).hints


def reveal_hint(user: User, exercise: Exercise, hint_id: str, now: datetime) -> HintReveal:
    """Record the reveal once: a second click (or a retried post) keeps the first time, so the
    cost never depends on how often the button was pressed."""
    if hint_id not in {h.id for h in statement_hints(exercise)}:
        raise NotAllowed(f"{exercise.slug} has no hint {hint_id!r}")
    existing = HintReveal.objects.filter(user=user, exercise=exercise, hint_id=hint_id).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return HintReveal.objects.create(user=user, exercise=exercise, hint_id=hint_id,
                                             revealed_at=now)
    except IntegrityError:  # a concurrent click won the race: its row is the reveal
        return HintReveal.objects.get(user=user, exercise=exercise, hint_id=hint_id)


def hint_share(user: User, exercise: Exercise, part_id: str, before: datetime) -> float:
    """The share of `part_id`'s credit the hints revealed before `before` cost (free ones
    nothing; at most 1)."""
    revealed = set(HintReveal.objects.filter(user=user, exercise=exercise, revealed_at__lte=before)
                   .values_list("hint_id", flat=True))
    if not revealed:
        return 0.0
    return hints.penalty(statement_hints(exercise), revealed, part_id)
