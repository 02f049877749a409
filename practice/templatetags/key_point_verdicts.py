"""{% key_point_verdicts sub contest=True %}: a text answer's automatic reading, key point by key
point (graders/key_points.py): covered, missing or contradicted, the sentence of the answer that
decided it, why not, and, for the student, a button to contest a verdict."""
from __future__ import annotations

from typing import Any

from django import template

from graders.text import automatic_reading

register = template.Library()


def rows(sub: Any) -> list[dict[str, Any]]:
    """One row per key point, in the part's order; empty without an automatic reading."""
    result = getattr(sub, "result", None) or {}
    points = automatic_reading(result).get("points") or []
    texts = (result.get("extra") or {}).get("key_points") or []
    contested = {c.point for c in sub.contests.all()} if points else set()
    return [{"index": i, "text": texts[i] if i < len(texts) else f"key point {i + 1}",
             "status": p.get("status", "missing"), "sentence": p.get("sentence", ""),
             "why": p.get("why", ""), "contested": i in contested}
            for i, p in enumerate(points)]


@register.inclusion_tag("practice/partials/key_points.html")
def key_point_verdicts(sub: Any, contest: bool = False) -> dict[str, Any]:
    automatic = automatic_reading(getattr(sub, "result", None))
    can_contest = contest and sub.verdict == "pending" and not _graded_by_instructor(sub)
    return {"sub": sub, "rows": rows(sub), "automatic": automatic, "contest": can_contest}


def _graded_by_instructor(sub: Any) -> bool:
    """Whether an instructor's score stands on the answer. The exercise page marks each shown
    submission with `has_review_notes` in one query for the page (templatetags/review_notes.py);
    a submission it marked False has no review, so no query is made for it here."""
    if getattr(sub, "has_review_notes", None) is False:
        return False
    return getattr(getattr(sub, "review", None), "score", None) is not None
