from __future__ import annotations

from functools import cached_property
from typing import Any

from django.conf import settings
from django.db import connection, models
from django.utils import timezone

from .exercise import Exercise

# How soon a queued row's status fragment asks again. A row with others ahead of it waits about
# this long a row (a code grade takes about 0.3 s of a worker, and a deployment runs two or
# more), so it asks once they should be done rather than every second: under a queue of 15 a
# poll every second was five polls a verdict, each a request the web serves on a core the
# graders need. Never longer than POLL_MAX_MS, so a faster queue costs little.
POLL_MS = 400
POLL_QUEUED_MS = 1000
POLL_PER_ROW_AHEAD_MS = 150
POLL_MAX_MS = 4000


class SubmissionManager(models.Manager["Submission"]):
    def latest_per_part(self, user_id: int, exercise_id: int, variant: str
                        ) -> dict[str, Submission]:
        """The newest exercise-page answer (no review) to each part in `variant`, by part id,
        in one query, each with `has_review_notes`: whether an instructor's review or comment
        is on it (the review_notes tag then asks nothing more for an answer without).

        Written as SQL because it is on every exercise page: the ORM's form (a correlated
        Subquery, then two queries for the notes) cost ~2 ms a page to compile, ten times what
        the database takes to answer it. ROW_NUMBER() is in SQLite since 3.25 and in every
        supported PostgreSQL; the order is the model's (newest queued_at first, then the
        higher id)."""
        # The two note tables, by the relations they point at this model with (no import of
        # practice/models/cohort.py, which imports this module).
        sub = self.model
        review = sub._meta.get_field("review").related_model
        comment = sub._meta.get_field("comments").related_model
        q = connection.ops.quote_name

        def col(model: type[models.Model], name: str) -> str:
            return q(model._meta.get_field(name).column)

        def noted(model: type[models.Model]) -> str:
            return (f"EXISTS (SELECT 1 FROM {q(model._meta.db_table)} "
                    f"WHERE {col(model, 'submission')} = mine.{col(sub, 'id')})")

        sql = (f"SELECT mine.*, ({noted(review)} OR {noted(comment)}) AS has_review_notes "
               f"FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY {col(sub, 'part_id')} "
               f"ORDER BY {col(sub, 'queued_at')} DESC, {col(sub, 'id')} DESC) AS newest_first "
               f"FROM {q(sub._meta.db_table)} WHERE {col(sub, 'user')} = %s "
               f"AND {col(sub, 'exercise')} = %s AND {col(sub, 'variant')} = %s "
               f"AND {col(sub, 'recall_item')} IS NULL) AS mine WHERE mine.newest_first = 1")
        params: list[Any] = [user_id, exercise_id, variant]
        latest = {}
        for found in self.raw(sql, params):
            found.has_review_notes = bool(found.has_review_notes)  # SQLite answers 0 or 1
            latest[found.part_id] = found
        return latest


class Submission(models.Model):
    """One answer to one part. The row is the result: Celery carries only its id.

    States move queued → running → graded | error through `practice.actions.submissions` and
    `practice.grading` only; `deliveries` counts how often a worker claimed it, so a submission
    that kills its worker is stopped.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        GRADED = "graded"
        ERROR = "error"

    class Verdict(models.TextChoices):
        """graders/base.Verdict; blank until graded. PROVISIONAL: every check passed in a
        preview that is not the authoritative grade (practice/provisional.py)."""

        CORRECT = "correct"
        PARTIAL = "partial"
        INCORRECT = "incorrect"
        PENDING = "pending"  # awaiting an instructor's review
        PROVISIONAL = "provisional"  # a CPU preview pass awaiting its GPU grade
        INVALID = "invalid"
        ERROR = "error"

    class Mode(models.TextChoices):
        SUBMIT = "submit"  # graded on hidden cases, counts as an attempt
        RUN = "run"  # public examples only, no attempt used

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    exercise = models.ForeignKey(Exercise, on_delete=models.CASCADE)
    part_id = models.CharField(max_length=40)
    part_type = models.CharField(max_length=20)
    variant = models.CharField(max_length=20)
    # Set when the answer is a review of a part due for recall, in the item's own variant
    # (submit_answer's `review`, drawn by actions/recall.open_review); None on the exercise page.
    recall_item = models.ForeignKey("RecallItem", on_delete=models.SET_NULL, null=True,
                                    blank=True, related_name="submissions")
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.SUBMIT)
    answer = models.TextField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    score = models.FloatField(null=True, blank=True)
    verdict = models.CharField(max_length=20, blank=True, choices=Verdict.choices)
    result = models.JSONField(default=dict, blank=True)
    deliveries = models.PositiveIntegerField(default=0)
    queued_at = models.DateTimeField(auto_now_add=True)
    # When the broker last accepted a message for it (None: never). The sweeper backs off on it
    # so that a long queue is not filled with copies of the rows waiting in it.
    sent_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = SubmissionManager()

    class Meta:
        ordering = ["-queued_at", "-id"]
        indexes = [
            models.Index(fields=["status", "queued_at"]),
            models.Index(fields=["user", "exercise", "part_id"]),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.exercise_id}/{self.part_id} {self.status}"

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.GRADED, self.Status.ERROR)

    @cached_property
    def ahead_in_queue(self) -> int:
        """How many rows wait or run ahead of this queued one (0 once it runs): one count on
        the (status, queued_at) index."""
        if self.status != self.Status.QUEUED or self.queued_at is None:
            return 0
        return type(self).objects.filter(
            status__in=(self.Status.QUEUED, self.Status.RUNNING)).filter(
            models.Q(queued_at__lt=self.queued_at)
            | models.Q(queued_at=self.queued_at, id__lt=self.pk)).count()

    @property
    def poll_after_ms(self) -> int:
        """How long its status fragment waits before asking again: 400 ms for a running row or
        a queued one with nothing ahead, else about the time the rows ahead take (see
        POLL_PER_ROW_AHEAD_MS), and at least a second for a row still queued a second after it
        was sent."""
        if self.status != self.Status.QUEUED:
            return POLL_MS
        waited = (timezone.now() - self.queued_at).total_seconds() if self.queued_at else 0.0
        floor = POLL_QUEUED_MS if waited >= 1.0 else POLL_MS
        return min(POLL_MAX_MS, max(floor, self.ahead_in_queue * POLL_PER_ROW_AHEAD_MS))

    @property
    def queue_s(self) -> float | None:
        if self.started_at is None:
            return None
        return (self.started_at - self.queued_at).total_seconds()

    @property
    def run_s(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class KeyPointContest(models.Model):
    """A student's "the automatic reading got this key point wrong" on their text answer
    (graders/key_points.py): it puts the answer at the head of the instructor's review queue
    with the key point and the sentence the matcher decided on."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE,
                                   related_name="contests")
    point = models.PositiveSmallIntegerField()  # index into the part's key_points
    status = models.CharField(max_length=16)  # the matcher's verdict, as contested
    sentence = models.TextField(blank=True)  # the sentence that decided it, if any
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["submission", "point"],
                                               name="one_contest_per_key_point")]
        ordering = ["point"]

    def __str__(self) -> str:
        return f"#{self.submission_id} key point {self.point + 1} ({self.status})"
