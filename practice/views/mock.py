"""A random unsolved question, and the timed mock interview: start, the running page, finish,
and the summary. Parse, call an action, render."""
from __future__ import annotations

import random
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from exercises import registry
from practice import interview
from practice.actions import NotAllowed
from practice.actions.exercises import assignment_for
from practice.actions.mock_interviews import (
    expire_mock_interview,
    finish_mock_interview,
    start_mock_interview,
)
from practice.models import MockInterview, PartState, User
from practice.views.parts import _sections


@login_required
def random_question(request: HttpRequest) -> HttpResponse:
    """A GET that changes nothing: pick an exercise with an unsolved part and go there."""
    slug = interview.pick_unsolved(interview.standings_for(request.user),  # type: ignore[arg-type]
                               random.SystemRandom())
    if slug is None:
        messages.success(request, "You have solved every part of every exercise. Nothing left "
                                  "to pick — try a mock interview, or come back for new ones.")
        return redirect("catalog")
    return redirect("exercise", slug=slug)


@login_required
@require_POST
def mock_start(request: HttpRequest) -> HttpResponse:
    try:
        mock = start_mock_interview(request.user)  # type: ignore[arg-type]
    except NotAllowed as exc:
        messages.error(request, f"No mock interview: {exc}.")
        return redirect("catalog")
    return redirect("mock_detail", pk=mock.pk)


@login_required
@require_POST
def mock_finish(request: HttpRequest, pk: int) -> HttpResponse:
    mock = get_object_or_404(MockInterview, pk=pk, user=request.user)
    finish_mock_interview(mock)
    return redirect("mock_detail", pk=pk)


@login_required
def mock_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The running mock (clock, questions, finish), or once over its summary and solutions.

    Someone else's mock is a 404, like someone else's submission."""
    mock = get_object_or_404(MockInterview, pk=pk, user=request.user)
    now = timezone.now()
    expire_mock_interview(mock, now)  # expire on read: there is no timer process
    questions = interview.summarize(mock, now)
    ctx: dict[str, Any] = {"mock": mock, "questions": questions,
                           "running": mock.is_running(now),
                           "duration": interview.human_duration(mock.duration_s)}
    if ctx["running"]:
        ctx["clock"] = interview.clock(mock, now)
    else:
        ended = mock.finished_at or mock.deadline
        ctx["total_used"] = interview.human_duration((ended - mock.started_at).total_seconds())
        ctx["solutions"] = [_solutions(request.user, q) for q in questions]  # type: ignore[arg-type]
    return render(request, "practice/mock.html", ctx)


def _solutions(user: User, q: interview.QuestionSummary) -> dict[str, Any]:
    """After the mock, each part of a question as the exercise page would show it now: the
    worked solution where the part is solved or given up, otherwise a way to give up."""
    spec = registry.get(q.exercise.slug)
    states = {s.part_id: s for s in PartState.objects.filter(user=user, exercise=q.exercise)}
    visible = {pid for pid, s in states.items() if s.solution_visible}
    sections: dict[str, str] = {}
    preamble = ""
    if visible:  # rendering the worked solution is the slow part; only when something shows
        variant = assignment_for(user, q.exercise).variant
        _, preamble, sections = _sections(spec, variant)
    parts = []
    for i, part in enumerate(spec.parts):
        html = ""
        if part.id in visible:
            html = (preamble if i == 0 else "") + sections.get(part.id, "")
        parts.append({"index": i + 1, "part": part, "state": states.get(part.id),
                      "solution_html": html})
    return {"q": q, "parts": parts, "unsolved": [p for p in parts if not p["solution_html"]]}
