"""{% review_notes sub %}: what the student reads of an instructor's review of their answer: the
override and its reason, the rubric items applied with their explanations, and the comments
(a line comment under the line it is about)."""
from __future__ import annotations

from typing import Any

from django import template

from practice.models import Comment, Review

register = template.Library()


@register.inclusion_tag("practice/partials/review_notes.html")
def review_notes(sub: Any) -> dict[str, Any]:
    # The exercise page's answers come with has_review_notes (Submission.objects.
    # latest_per_part): one without notes costs no query here. Any other is looked up.
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
