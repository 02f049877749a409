from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models


class MockInterview(models.Model):
    """A timed set of questions with every worked solution hidden until it ends.

    `exercises` is an ordered list of slugs (the order the questions are shown in), not an M2M:
    the order matters and the set is fixed when the mock starts. It ends when the student
    finishes it (`ended_by="finish"`) or, read after its deadline, by time (`ended_by="time"`,
    `finished_at` = the deadline). State changes go through
    `practice.actions.mock_interviews` only.
    """

    class EndedBy(models.TextChoices):
        FINISH = "finish"
        TIME = "time"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    started_at = models.DateTimeField()
    duration_s = models.PositiveIntegerField(default=45 * 60)
    exercises = models.JSONField(default=list)  # ["slug", ...] in the order shown
    finished_at = models.DateTimeField(null=True, blank=True)
    ended_by = models.CharField(max_length=10, choices=EndedBy.choices, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["user", "finished_at"])]

    def __str__(self) -> str:
        return f"mock #{self.pk} of {self.user_id} ({', '.join(self.exercises)})"

    @property
    def deadline(self) -> datetime:
        return self.started_at + timedelta(seconds=self.duration_s)

    def is_running(self, now: datetime) -> bool:
        """Not finished and not past its deadline (a mock past it counts as over even before
        the read that records its end)."""
        return self.finished_at is None and now < self.deadline

    def remaining_s(self, now: datetime) -> int:
        if not self.is_running(now):
            return 0
        # Rounded up: a page told "0 left" while the server still says running would reload
        # in a loop; rounded up, the clock reaches zero only once the deadline has passed.
        return max(0, math.ceil((self.deadline - now).total_seconds()))
