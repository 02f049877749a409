"""{% review_notes sub %}: what the student reads of an instructor's review of their answer: the
override and its reason, the rubric items applied with their explanations, and the comments
(a line comment under the line it is about)."""
from __future__ import annotations

from typing import Any

from django import template

from practice.models import Comment, Review

register = template.Library()


def mark_reviewed(subs: list[Any]) -> None:
    """Tell each submission whether anything of a review is on it, in two queries for a whole
    page, so that the tag below asks no more for the (many) answers nobody has reviewed."""
    ids = [sub.pk for sub in subs]
    if not ids:
        return
    noted = set(Review.objects.filter(submission_id__in=ids).values_list("submission_id",
                                                                           flat=True))
    noted |= set(Comment.objects.filter(submission_id__in=ids).values_list("submission_id",
                                                                             flat=True))
    for sub in subs:
        sub.has_review_notes = sub.pk in noted


@register.inclusion_tag("practice/partials/review_notes.html")
def review_notes(sub: Any) -> dict[str, Any]:
    if not getattr(sub, "finished", False) or getattr(sub, "has_review_notes", True) is False:
        return {"show": False}
    review = (Review.objects.filter(submission_id=sub.pk).prefetch_related("items")
              .select_related("reviewer").first())
    comments = list(Comment.objects.filter(submission_id=sub.pk).select_related("author"))
    lines = sub.answer.split("\n")
    notes = [{"comment": c,
              "quote": lines[c.line - 1].strip() if c.line and 1 <= c.line <= len(lines) else None}
             for c in comments]
    items = list(review.items.all()) if review is not None else []
    overridden = review is not None and review.override_score is not None
    if not notes and not items and not overridden:
        return {"show": False}
    return {"show": True, "sub": sub, "review": review, "items": items, "notes": notes,
            "overridden": overridden}
