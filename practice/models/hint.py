from __future__ import annotations

from django.conf import settings
from django.db import models

from .exercise import Exercise


class HintReveal(models.Model):
    """A student revealed one hint of an exercise's statement in interview mode
    (exercises/hints.py). Answers submitted after it are credited less on the parts it unlocks
    (practice/actions/progress.py)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    exercise = models.ForeignKey(Exercise, on_delete=models.CASCADE)
    hint_id = models.CharField(max_length=40)
    revealed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "exercise", "hint_id"],
                                    name="one_reveal_per_hint")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {self.exercise_id} hint {self.hint_id}"
