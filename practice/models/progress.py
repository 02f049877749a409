from __future__ import annotations

from django.conf import settings
from django.db import models

from .exercise import Exercise


class PartState(models.Model):
    """A student's standing on one part: best score, attempts used, solved / revealed."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    exercise = models.ForeignKey(Exercise, on_delete=models.CASCADE)
    part_id = models.CharField(max_length=40)
    best_score = models.FloatField(default=0.0)
    attempts = models.PositiveIntegerField(default=0)
    solved_at = models.DateTimeField(null=True, blank=True)
    revealed_at = models.DateTimeField(null=True, blank=True)  # gave up: solution shown

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "exercise", "part_id"], name="one_state_per_part")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {self.exercise_id}/{self.part_id} best {self.best_score}"

    @property
    def solution_visible(self) -> bool:
        return self.solved_at is not None or self.revealed_at is not None
