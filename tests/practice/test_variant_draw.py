"""A student is never handed a variant whose parameters cannot be drawn: kv_page_ledger's
generate() gives up on seed 721086 (its 2,000 candidates all fail is_sensible, about one seed
in thirteen thousand), and a student assigned it met an error on every page of the exercise."""
from __future__ import annotations

from typing import Any

import pytest

from exercises import registry
from practice.actions import exercises as actions
from practice.models import Exercise, User

pytestmark = pytest.mark.django_db
UNDRAWABLE = "721086"


class Scripted:
    """random.SystemRandom's stand-in: the given numbers, in order."""

    def __init__(self, *numbers: int) -> None:
        self.numbers = list(numbers)

    def randrange(self, *args: Any) -> int:
        return self.numbers.pop(0)


def test_the_seed_cannot_be_drawn() -> None:
    with pytest.raises(RuntimeError, match="no sensible variant"):
        registry.params_for(registry.get("kv_page_ledger"), UNDRAWABLE)


def test_an_undrawable_seed_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    actions.sync_exercises()
    monkeypatch.setattr(actions.random, "SystemRandom", lambda: Scripted(int(UNDRAWABLE), 5))
    user = User.objects.create_user("ada", password="pw-ada-123")
    assignment = actions.assignment_for(user, Exercise.objects.get(slug="kv_page_ledger"))
    assert assignment.variant == "5"
    # kept: the next visit reads it back without drawing
    monkeypatch.setattr(actions.random, "SystemRandom", lambda: Scripted())
    again = actions.assignment_for(user, Exercise.objects.get(slug="kv_page_ledger"))
    assert again.pk == assignment.pk and again.variant == "5"
