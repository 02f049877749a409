from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models

from .exercise import Exercise
from .submission import Submission

# No 0/O/1/I/L: join codes are read aloud and typed from slides.
JOIN_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
JOIN_CODE_LENGTH = 8


def new_join_code() -> str:
    return "".join(secrets.choice(JOIN_ALPHABET) for _ in range(JOIN_CODE_LENGTH))


def normalize_join_code(code: str) -> str | None:
    """The code as stored (no spaces, upper case), or None when it cannot be anyone's code:
    the lookup never sees control characters (PostgreSQL refuses a NUL in a query)."""
    normalized = "".join(code.split()).upper()
    if not normalized or len(normalized) > 16 or not normalized.isascii() \
            or not normalized.isalnum():
        return None
    return normalized


class Cohort(models.Model):
    """A group of students reviewed by the instructor who owns it; joined with its code."""

    name = models.CharField(max_length=100)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                              related_name="owned_cohorts")
    join_code = models.CharField(max_length=16, unique=True, default=new_join_code)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    cohort = models.ForeignKey(Cohort, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="memberships")
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cohort", "user"], name="one_membership")]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.cohort_id}"


class RubricItem(models.Model):
    """One line of a cohort's rubric for a text part: points (negative for a deduction) and the
    explanation the student reads when it is applied. Points are in the part's points."""

    cohort = models.ForeignKey(Cohort, on_delete=models.CASCADE, related_name="rubric_items")
    exercise = models.ForeignKey(Exercise, on_delete=models.CASCADE)
    part_id = models.CharField(max_length=40)
    label = models.CharField(max_length=200)
    points = models.FloatField()
    explanation = models.TextField(blank=True)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["order", "pk"]

    def __str__(self) -> str:
        return f"{self.label} ({self.points:+g})"


class Review(models.Model):
    """An instructor's grading of one submission: rubric items applied and/or an override.
    `score` is the effective score it gives (override first, else the rubric's), kept in step by
    the actions that change either."""

    submission = models.OneToOneField(Submission, on_delete=models.CASCADE, related_name="review")
    cohort = models.ForeignKey(Cohort, on_delete=models.SET_NULL, null=True, blank=True)
    items = models.ManyToManyField(RubricItem, blank=True, related_name="reviews")
    override_score = models.FloatField(null=True, blank=True)
    override_reason = models.TextField(blank=True)
    score = models.FloatField(null=True, blank=True)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                 blank=True, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"review of submission {self.submission_id}"


class Comment(models.Model):
    """An instructor's comment on a submission, on one line of the answer or on all of it."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                               related_name="+")
    line = models.PositiveIntegerField(null=True, blank=True)  # 1-based; None: the whole answer
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["line", "created_at", "pk"]

    def __str__(self) -> str:
        return f"comment on submission {self.submission_id}, line {self.line}"


class RegradeJob(models.Model):
    """Re-grading every submission of one exercise after its grader changed."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    exercise = models.ForeignKey(Exercise, on_delete=models.CASCADE)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                   related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    changed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"re-grade {self.pk} of {self.exercise_id} ({self.status})"


class RegradeEntry(models.Model):
    """One submission in a re-grade: the score before and after (the old one is kept here)."""

    job = models.ForeignKey(RegradeJob, on_delete=models.CASCADE, related_name="entries")
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="+")
    old_score = models.FloatField(null=True, blank=True)
    old_verdict = models.CharField(max_length=20, blank=True)
    old_result = models.JSONField(default=dict, blank=True)
    new_score = models.FloatField(null=True, blank=True)
    new_verdict = models.CharField(max_length=20, blank=True)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "submission"],
                                               name="one_entry_per_job")]

    def __str__(self) -> str:
        return f"{self.submission_id}: {self.old_score} -> {self.new_score}"
