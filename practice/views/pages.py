"""Student pages: catalog, exercise, history, sign-up. Parse, call an action, render."""
from __future__ import annotations

from typing import Any

from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.cache import patch_vary_headers

from exercises import registry
from exercises.spec import ExerciseSpec
from practice import catalog_filters, interview
from practice.actions.exercises import active_assignment, assignment_for
from practice.actions.people import sign_up
from practice.evidence import variant_evidence
from practice.models import Exercise, MockInterview, PartState, Submission, User
from practice.variants import variant_params
from practice.views.parts import part_context


class SignUpForm(UserCreationForm):
    class Meta(UserCreationForm.Meta):
        model = User
        fields = ("username",)


def signup(request: HttpRequest) -> HttpResponse:
    form = SignUpForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = sign_up(form.cleaned_data["username"], form.cleaned_data["password1"])
        login(request, user)
        return redirect("catalog")
    return render(request, "registration/signup.html", {"form": form})


@login_required
def catalog(request: HttpRequest) -> HttpResponse:
    """The exercises, filtered by the query string (practice/catalog_filters.py). An htmx
    request gets only the results and the facet counts; a history restore needs the page."""
    # The page needs a login today; the filters do not (no user: no status kind).
    user = request.user if request.user.is_authenticated else None
    entries = catalog_filters.load_entries(user, timezone.now())  # type: ignore[arg-type]
    options = catalog_filters.options_for(entries, with_status=user is not None)
    filters = catalog_filters.parse(dict(request.GET.lists()), options)
    shown = [e for e in entries if catalog_filters.matches(e, filters)]
    running = interview.running_mock(request.user)  # type: ignore[arg-type]
    ctx: dict[str, Any] = {
        "entries": shown, "total": len(entries), "filters": filters,
        "facets": catalog_filters.facets(entries, filters, options),
        "max_query": catalog_filters.MAX_QUERY,
        "mock_slugs": set(running.exercises) if running is not None else set(),
    }
    htmx = getattr(request, "htmx", None)
    if htmx and not htmx.history_restore_request:
        response = render(request, "practice/partials/catalog_results.html", {**ctx, "oob": True})
    else:
        response = render(request, "practice/catalog.html", {
            **ctx,
            "mock": interview.clock(running) if running is not None else None,
            # Past its deadline counts as over even before its page records the end.
            "last_mock": (None if running
                          else MockInterview.objects.filter(user=request.user).first()),
            "mock_questions": interview.QUESTIONS_PER_MOCK,
            "mock_minutes": interview.DEFAULT_DURATION_S // 60,
        })
    # The same URL answers with a fragment or a page: caches must keep them apart.
    patch_vary_headers(response, ("HX-Request",))
    return response


@login_required
def exercise_page(request: HttpRequest, slug: str) -> HttpResponse:
    # After the first visit the exercise comes with the student's variant, in one query.
    kept = active_assignment(request.user, slug)  # type: ignore[arg-type]
    if kept is not None:
        exercise, variant, mock_possible = kept.exercise, kept.variant, kept.mock_unfinished
    else:  # the first visit: part_context draws the variant (assignment_for)
        exercise, variant = get_object_or_404(Exercise, slug=slug, active=True), ""
        mock_possible = True
    spec = registry.get(slug)
    # ?mode=interview holds the statement's hints back; a running mock interview always does
    # (part_context asks for it, unless the assignment's row said no mock is unfinished).
    ctx = part_context(request.user, exercise, spec,  # type: ignore[arg-type]
                       request.GET.get("mode") == "interview", variant=variant,
                       mock_possible=mock_possible)
    return render(request, "practice/exercise.html", ctx)


@login_required
def evidence_download(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    """One evidence file of the student's own variant, as a JSON download."""
    exercise = get_object_or_404(Exercise, slug=slug, active=True)
    variant = assignment_for(request.user, exercise).variant  # type: ignore[arg-type]
    return evidence_response(registry.get(slug), variant, name)


def evidence_response(spec: ExerciseSpec, variant: str, name: str) -> HttpResponse:
    """One evidence file of `variant` as a JSON download; 404 for a name it does not have."""
    found = variant_evidence(spec, variant_params(spec, variant))
    if name not in found:
        raise Http404("no such evidence")
    ev = found[name]
    response = HttpResponse(registry.evidence_bytes(ev), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{ev.filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
def history(request: HttpRequest) -> HttpResponse:
    subs = (Submission.objects.filter(user=request.user)
            .select_related("exercise").order_by("-queued_at")[:200])
    # Parts per topic, for the progress chart (static/charts.js reads it from json_script):
    # solved, tried but not solved (an attempt used or the solution revealed), and the total.
    exercises = {ex.pk: ex for ex in Exercise.objects.filter(active=True)}
    progress: dict[str, dict[str, Any]] = {}
    for ex in exercises.values():
        row = progress.setdefault(ex.topic, {"topic": ex.topic, "parts": 0, "solved": 0,
                                             "tried": 0})
        row["parts"] += len(ex.parts)
    for st in PartState.objects.filter(user=request.user, exercise_id__in=exercises):
        ex = exercises[st.exercise_id]
        if st.part_id not in {p["id"] for p in ex.parts}:
            continue  # a part since removed from the exercise folder
        if st.solved_at:
            progress[ex.topic]["solved"] += 1
        elif st.attempts or st.revealed_at:
            progress[ex.topic]["tried"] += 1
    return render(request, "practice/history.html", {
        "submissions": subs, "progress": [progress[t] for t in sorted(progress)]})
