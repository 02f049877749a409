"""Which key points of an exercise's text parts a cohort misses most, from the automatic reading
of each student's latest answer (graders/key_points.py): what the statistics page lists under a
text part. One query; students whose latest answer has no automatic reading are not counted."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from graders.text import automatic_reading
from practice.models import Submission


@dataclass
class KeyPointShare:
    index: int
    text: str
    answers: int  # students whose latest answer was read automatically
    missing: int
    contradicted: int

    @property
    def not_made(self) -> int:
        return self.missing + self.contradicted

    @property
    def percent(self) -> int:
        return round(100 * self.not_made / self.answers) if self.answers else 0


def key_point_shares(subs: QuerySet[Submission]) -> dict[str, list[KeyPointShare]]:
    """Per text part: its key points, the most often not made first."""
    latest: dict[tuple[int, str], dict[str, Any]] = {}
    rows = (subs.filter(part_type="text").order_by("queued_at", "pk")
            .values_list("user_id", "part_id", "result"))
    for user_id, part_id, result in rows:
        if automatic_reading(result).get("points"):
            latest[(user_id, part_id)] = result["extra"]
    by_part: dict[str, dict[int, KeyPointShare]] = {}
    for (_, part_id), extra in latest.items():
        texts = extra.get("key_points") or []
        shares = by_part.setdefault(part_id, {})
        for i, point in enumerate(extra["automatic"]["points"]):
            share = shares.setdefault(i, KeyPointShare(
                i, texts[i] if i < len(texts) else f"key point {i + 1}", 0, 0, 0))
            share.answers += 1
            share.missing += point.get("status") == "missing"
            share.contradicted += point.get("status") == "contradicted"
    return {part: sorted(shares.values(), key=lambda s: (-s.not_made, s.index))
            for part, shares in by_part.items()}
