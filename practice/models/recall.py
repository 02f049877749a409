from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from .exercise import Exercise


class RecallItem(models.Model):
    """Something a student should see again: an exercise part they got wrong, or a deck card
    (exercises/deck.py). Scheduled by FSRS through practice/recall.py only.

    Keyed by the Exercise row, not its slug: a renamed folder keeps its row (the exercise's
    uuid finds it), so an item survives a rename. A card is keyed by its stable deck id.
    """

    class Reason(models.TextChoices):
        WRONG = "wrong"  # a graded answer short of full marks
        MISTAKE = "mistake"  # the answer matched one of the part's listed mistakes
        AFTER_SOLUTION = "after_solution"  # right only after the worked solution was shown
        CARD_SEEN = "card_seen"  # a deck card the student has met

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    # Exactly one of (exercise, part_id) or card_id says what is due (the check below).
    exercise = models.ForeignKey(Exercise, on_delete=models.CASCADE, null=True, blank=True)
    part_id = models.CharField(max_length=40, blank=True)
    card_id = models.CharField(max_length=120, blank=True)
    reason = models.CharField(max_length=20, choices=Reason.choices)
    fsrs_card = models.JSONField()  # fsrs.Card.to_dict(); read back with Card.from_dict
    # A copy of fsrs_card["due"] that the database can sort and filter on.
    due = models.DateTimeField()
    last_rating = models.PositiveSmallIntegerField(null=True, blank=True)  # fsrs.Rating value
    last_reviewed_at = models.DateTimeField(null=True, blank=True)
    # An exercise part is reviewed in a variant of its own, drawn when a due review is opened
    # (practice/actions/recall.open_review) and kept until answered: "" before the first review.
    variant = models.CharField(max_length=20, blank=True)
    variant_drawn_at = models.DateTimeField(null=True, blank=True)
    # When the first graded answer in `variant` rescheduled the item: later answers in the same
    # variant (after seeing its feedback) are practice, not recall, and change nothing.
    variant_answered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # "What is due now for this student, in order" reads (user, due) and nothing else.
        indexes = [models.Index(fields=["user", "due"], name="recall_user_due")]
        constraints = [
            models.UniqueConstraint(fields=["user", "exercise", "part_id"],
                                    condition=Q(exercise__isnull=False),
                                    name="one_recall_per_part"),
            models.UniqueConstraint(fields=["user", "card_id"], condition=~Q(card_id=""),
                                    name="one_recall_per_card"),
            models.CheckConstraint(
                condition=(Q(exercise__isnull=False) & ~Q(part_id="") & Q(card_id=""))
                | (Q(exercise__isnull=True) & Q(part_id="") & ~Q(card_id="")),
                name="recall_is_a_part_or_a_card"),
        ]

    def __str__(self) -> str:
        what = f"{self.exercise_id}/{self.part_id}" if self.exercise_id else f"card {self.card_id}"
        return f"{self.user_id} {what} due {self.due:%Y-%m-%d %H:%M}"


class RecallLog(models.Model):
    """One review of a RecallItem: the rating it got and when. The item keeps only its latest
    review; the log is the history (the activity chart and streak on "My progress")."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    item = models.ForeignKey(RecallItem, on_delete=models.CASCADE, related_name="log")
    rating = models.PositiveSmallIntegerField()  # fsrs.Rating value
    reviewed_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["user", "reviewed_at"], name="recall_log_user_time")]

    def __str__(self) -> str:
        return f"{self.user_id} item {self.item_id} rated {self.rating} at {self.reviewed_at}"
