from __future__ import annotations

from django.conf import settings
from django.db import models


class Exercise(models.Model):
    """One row per exercise, keyed by its stable id (exercise.toml `uuid`); rewritten by
    `practice.actions.exercises.sync_exercises`.

    The folder is the source of truth; the row exists so that submissions, progress and statistics
    can point at something, and so a removed folder keeps its history (`active=False`). A renamed
    folder keeps its row: the uuid finds it and the slug follows the folder.
    """

    # Null only for a row made before exercises had ids; the first sync adopts it by slug.
    uuid = models.UUIDField(unique=True, null=True, editable=False)
    slug = models.SlugField(max_length=64, unique=True)
    seed = models.CharField(max_length=3)
    title = models.CharField(max_length=200)
    topic = models.CharField(max_length=100)
    difficulty = models.CharField(max_length=10)
    minutes = models.PositiveIntegerField(default=20)
    summary = models.TextField(blank=True)
    parts = models.JSONField(default=list)  # [{"id", "type", "points"}] for listing and stats
    active = models.BooleanField(default=True)
    synced_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["topic", "seed"]

    def __str__(self) -> str:
        return f"{self.seed} {self.title}"


class Assignment(models.Model):
    """The variant a student works on for an exercise (drawn once, kept)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    exercise = models.ForeignKey(Exercise, on_delete=models.CASCADE)
    variant = models.CharField(max_length=20)  # "canonical" or a seed number
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "exercise"], name="one_variant_per_exercise")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {self.exercise_id} variant {self.variant}"
