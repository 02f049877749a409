"""Recall pages: "Numbers to know" (the deck, by group) and "Today" (what is due for the user).

A card is answered in place on either page: the card's partial (templates/practice/partials/
card.html) posts with htmx and is swapped for itself, graded, with the verdict, the feedback
(which cites the card's sources) and the card's next due date. Without JavaScript the form posts
normally and the whole page comes back with that card answered.
"""
from __future__ import annotations

from datetime import datetime
from itertools import groupby
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from exercises import deck, registry
from exercises.deck import Card
from graders.base import InvalidAnswer
from practice.actions import NotAllowed
from practice.actions.recall import (
    CardAnswer,
    answer_card,
    card_dues,
    due_items,
    get_item,
    next_due,
    open_review,
)
from practice.actions.submissions import submit_answer
from practice.models import RecallItem, User
from practice.views.fragments import with_due_count
from practice.views.pages import evidence_response
from practice.views.parts import review_part_context


def _card(card: Card, post_url: str, answered: CardAnswer | None = None, error: str = "",
          draft: str = "", due: datetime | None = None) -> dict[str, Any]:
    """One card's context for partials/card.html. `due`: when a card the user met before (and
    has not just answered) comes back, for the deck page."""
    return {"card": card, "post_url": post_url, "result": answered.result if answered else None,
            "item": answered.item if answered else None, "error": error, "draft": draft,
            "due": due}


def _deck_url(card: Card) -> str:
    # The id travels in the query: it has slashes ("gpu/h100-sxm/hbm_bandwidth").
    return reverse("deck_answer") + "?" + urlencode({"card": card.id})


def _item_url(item: RecallItem) -> str:
    return reverse("today_answer", args=[item.pk])


def _answer(request: HttpRequest, card: Card, post_url: str) -> dict[str, Any]:
    """Grade the posted answer to `card`; the card's context, answered or with the refusal."""
    text = request.POST.get("answer", "")
    try:
        answered = answer_card(request.user, card, text, timezone.now())  # type: ignore[arg-type]
    except (InvalidAnswer, NotAllowed) as exc:
        return _card(card, post_url, error=str(exc), draft=text)
    return _card(card, post_url, answered)


@login_required
def deck_page(request: HttpRequest, answered: dict[str, Any] | None = None) -> HttpResponse:
    dues = card_dues(request.user)  # type: ignore[arg-type]
    groups = [(name, [answered if answered and answered["card"] == c
                      else _card(c, _deck_url(c), due=dues.get(c.id)) for c in cards])
              for name, cards in groupby(deck.cards(), key=lambda c: c.group)]
    return render(request, "practice/deck.html", {"groups": groups, "now": timezone.now()})


@login_required
@require_POST
def deck_answer(request: HttpRequest) -> HttpResponse:
    card = deck.by_id().get(request.GET.get("card", ""))
    if card is None:
        raise Http404("no such card")
    ctx = _answer(request, card, _deck_url(card))
    if not request.htmx:  # type: ignore[attr-defined]
        return deck_page(request, answered=ctx)
    return with_due_count(request, render(request, "practice/partials/card.html", {"c": ctx}))


def _due_rows(user: User, now: datetime) -> list[dict[str, Any]]:
    """Today's rows in due order: a card (answered here) or an exercise part (reviewed on its
    own page, review_page, in a variant drawn for the review)."""
    cards = deck.by_id()
    rows: list[dict[str, Any]] = []
    for item in due_items(user, now):
        if item.card_id:
            card = cards.get(item.card_id)
            # A card gone from the deck (its catalog entry removed) has nothing left to ask.
            if card is not None:
                rows.append({"item": item, "c": _card(card, _item_url(item))})
        else:
            rows.append({"item": item, "exercise": item.exercise})
    return rows


@login_required
def today(request: HttpRequest, answered: dict[str, Any] | None = None) -> HttpResponse:
    now = timezone.now()
    rows = _due_rows(request.user, now)  # type: ignore[arg-type]
    if answered is not None:
        # The card just answered without JavaScript is no longer due: show it answered, on top.
        rows.insert(0, {"c": answered})
    return render(request, "practice/today.html", {
        "rows": rows, "next_due": next_due(request.user, now),  # type: ignore[arg-type]
    })


@login_required
@require_POST
def today_answer(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        item = get_item(request.user, pk)  # type: ignore[arg-type]
    except NotAllowed:
        raise Http404("no such item") from None
    card = deck.by_id().get(item.card_id) if item.card_id else None
    if card is None:
        raise Http404("not a card")  # an exercise part is answered on its exercise page
    ctx = _answer(request, card, _item_url(item))
    if not request.htmx:  # type: ignore[attr-defined]
        return today(request, answered=ctx)
    return with_due_count(request, render(request, "practice/partials/card.html", {"c": ctx}))


def _open(request: HttpRequest, pk: int) -> RecallItem:
    try:
        return open_review(request.user, pk, timezone.now())  # type: ignore[arg-type]
    except NotAllowed as exc:
        raise Http404(str(exc)) from None


@login_required
def review_page(request: HttpRequest, pk: int) -> HttpResponse:
    """Review one part due for recall, in a variant drawn for it (open_review): the whole
    statement of that variant and the one part, answered like on the exercise page."""
    ctx = review_part_context(request.user, _open(request, pk))  # type: ignore[arg-type]
    if request.htmx:  # type: ignore[attr-defined]
        # Today opens it in place of the part's row.
        return render(request, "practice/partials/review_row.html", {**ctx, "opened": True})
    return render(request, "practice/review_part.html", ctx)


def _drawn(request: HttpRequest, pk: int) -> RecallItem:
    """The user's review item as it stands, its variant drawn: posting an answer or fetching
    evidence never draws a new one (only opening the review page does)."""
    try:
        item = get_item(request.user, pk)  # type: ignore[arg-type]
    except NotAllowed:
        raise Http404("no such review") from None
    if item.exercise is None or not item.variant:
        raise Http404("no such review")
    return item


@login_required
@require_POST
def review_submit(request: HttpRequest, pk: int) -> HttpResponse:
    """Submit (or Run) a review's answer: graded like any answer (rate limit included); its
    first graded answer reschedules the item (practice/actions/recall.note_graded_part)."""
    item = _drawn(request, pk)
    assert item.exercise is not None
    answer = request.POST.get("answer") or ", ".join(request.POST.getlist("pick"))
    mode = "run" if request.POST.get("mode") == "run" else "submit"
    error = ""
    try:
        if request.POST.get("variant") != item.variant:
            # Drawn anew in another tab since this form was shown: its numbers are not these.
            raise NotAllowed("this review has moved on to a new variant; reload the page")
        submit_answer(request.user, item.exercise, item.part_id, answer, mode,  # type: ignore[arg-type]
                      review=item)
    except (InvalidAnswer, NotAllowed) as exc:
        error = str(exc)
    if not request.htmx:  # type: ignore[attr-defined]
        if error:
            messages.error(request, f"Not submitted: {error}")
        return redirect(reverse("review_part", args=[pk]) + f"#part-{item.part_id}")
    item.refresh_from_db()
    ctx = review_part_context(request.user, item, error=error,  # type: ignore[arg-type]
                              draft=answer if error else "")
    return with_due_count(request, render(request, "practice/partials/part.html",
                                          {"p": ctx["p"]}))


@login_required
def review_evidence(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    """One evidence file of the review's variant."""
    item = _drawn(request, pk)
    assert item.exercise is not None
    return evidence_response(registry.get(item.exercise.slug), item.variant, name)
