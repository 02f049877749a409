"""Template context every page gets: the header's count of recall items due (templates/base.html).
"""
from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import SimpleLazyObject

from practice.actions.recall import due_count


def recall_due(request: HttpRequest) -> dict[str, Any]:
    """`recall_due`: how many of the user's items are due now, for the nav's "Today" link.

    Lazy, so it costs one count query only when a template shows it (a full page for a
    logged-in user), never for an htmx fragment or an anonymous visitor."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    def count() -> int:
        return due_count(user, timezone.now())

    return {"recall_due": SimpleLazyObject(count)}
