"""The exercise page's parts: submit, run, reveal, formula preview, and the status fragment.

htmx requests get the part's partial; plain form posts get a redirect back to the page, so the
page works without JavaScript too.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import floatformat
from django.urls import get_script_prefix, reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from exercises import hints, registry
from exercises.spec import ExerciseSpec, PartSpec
from graders.base import InvalidAnswer
from practice import interview, routing
from practice.actions import NotAllowed
from practice.actions.exercises import assignment_for
from practice.actions.hints import reveal_hint
from practice.actions.submissions import contest_key_point, reveal_solution, submit_answer
from practice.evidence import variant_evidence
from practice.markdown import render_markdown
from practice.models import Exercise, HintReveal, PartState, RecallItem, Submission, User
from practice.rendered import rendered
from practice.variants import variant_params
from practice.views.fragments import with_due_count


def _statement(spec: ExerciseSpec, variant: str) -> hints.Parsed:
    """The variant's statement in both modes, with its hints (exercises/hints.py)."""
    return rendered(spec, variant).parsed


def _sections(spec: ExerciseSpec, variant: str) -> tuple[str, str, dict[str, str]]:
    """The practice-mode statement, the worked solution's preamble and its parts, as HTML."""
    r = rendered(spec, variant)
    return r.statement_html, r.preamble_html, r.sections_html


@lru_cache(maxsize=64)
def _points(points: float) -> str:
    """A part's points as the page writes them: "1", "0.5" (floatformat's "-1")."""
    return str(floatformat(points, "-1"))


@lru_cache(maxsize=1024)
def _part_urls(prefix: str, slug: str, part_id: str) -> dict[str, str]:
    """A part's submit and reveal URLs, reversed once per process (the URLconf is fixed;
    the script prefix, under which the site is mounted, is part of the key)."""
    return {"submit_url": reverse("submit_part", args=[slug, part_id]),
            "reveal_url": reverse("reveal_part", args=[slug, part_id])}


def _one_part(user: User, exercise: Exercise, spec: ExerciseSpec, part: PartSpec,
              solution_html: str, hidden: bool, error: str = "", draft: str = "",
              found: tuple[PartState | None, Submission | None] | None = None,
              variant: str = "", interview_mode: bool = False) -> dict[str, Any]:
    """One part's context. `hidden`: a running mock interview hides worked solutions even for
    solved parts; callers ask `interview.solutions_hidden_for` once per page or redraw. `found`: the
    part's state and latest submission when the caller fetched them for the whole page; else the
    latest is read here, among the answers in `variant` (the page's)."""
    if found is None:
        # The latest submission before the state: a worker may finish between the two reads,
        # and a finished submission drawn beside the state from before its verdict would show
        # "correct" without the solution, with nothing left polling to redraw it. Read in this
        # order, a finished submission's effect on the state (saved in the same transaction)
        # is always seen.
        latest = (Submission.objects.filter(user=user, exercise=exercise, part_id=part.id,
                                            variant=variant, recall_item=None)
                  .order_by("-queued_at", "-id").first())
        state = PartState.objects.filter(user=user, exercise=exercise, part_id=part.id).first()
    else:
        state, latest = found
    starter = ""
    if part.type in ("code", "kernel"):
        starter = (spec.path / part.type / "starter.py").read_text(encoding="utf-8")
    return {
        "index": spec.parts.index(part) + 1,
        "exercise": exercise, "part": part, "state": state, "latest": latest, "error": error,
        # What the template asks of every part, as plain keys: on this page of six or seven
        # parts, each look-up through an object or a filter was a measurable share of it.
        "id": part.id, "kind": part.type, "field_id": f"answer-{part.id}",
        "points": _points(part.points),
        "solved": bool(state and state.solved_at),
        "provisional": latest is not None and latest.verdict == Submission.Verdict.PROVISIONAL,
        "draft": draft or (latest.answer if latest else starter),
        "prompt_html": render_markdown(part.prompt),
        "solution_html": solution_html if state and state.solution_visible and not hidden else "",
        "key_points": part.key_points if latest and part.type == "text" and not hidden else (),
        "mock_hidden": hidden,
        "kernel_on_gpu": routing.kernels_on_gpu(),
        **_part_urls(get_script_prefix(), exercise.slug, part.id),
        # Without JavaScript the form posts and the page comes back: in the mode it was in.
        "page_mode": "interview" if interview_mode else "",
        "review": None,
    }


def review_part_context(user: User, item: RecallItem, error: str = "", draft: str = ""
                        ) -> dict[str, Any]:
    """A review of one part due for recall (practice/actions/recall.open_review), asked in the
    item's own variant: the whole statement of that variant, the one part, its answers in that
    variant, and its worked solution once the review is answered (unless a running mock
    interview hides solutions)."""
    exercise = item.exercise
    assert exercise is not None  # open_review only opens an exercise part's item
    spec = registry.get(exercise.slug)
    part = spec.part(item.part_id)
    statement, preamble, sections = _sections(spec, item.variant)
    latest = (Submission.objects.filter(user=user, recall_item=item, variant=item.variant)
              .order_by("-queued_at", "-id").first())
    state = PartState.objects.filter(user=user, exercise=exercise, part_id=part.id).first()
    hidden = interview.solutions_hidden_for(user, exercise)
    html = sections.get(part.id, "")
    if spec.parts[0].id == part.id:
        html = preamble + html
    p = _one_part(user, exercise, spec, part, "", hidden, error, draft, found=(state, latest))
    answered = item.variant_answered_at is not None
    p.update({
        "solution_html": html if answered and not hidden else "",
        "submit_url": reverse("review_submit", args=[item.pk]),
        "reveal_url": "",  # a review has no giving up: its solution shows once it is answered
        "review": item,
    })
    evidence = variant_evidence(spec, variant_params(spec, item.variant))
    return {"exercise": exercise, "item": item, "variant": item.variant,
            "statement_html": statement, "p": p,
            "evidence": [(name, ev, reverse("review_evidence", args=[item.pk, name]))
                         for name, ev in sorted(evidence.items())],
            "charts": bool(evidence) or part.type == "kernel"}


def hint_context(user: User, exercise: Exercise, spec: ExerciseSpec, hint: hints.Hint,
                 revealed: bool) -> dict[str, Any]:
    """One hint's button or, once this user revealed it, its text; the cost is said before."""
    numbers = {p.id: i + 1 for i, p in enumerate(spec.parts)}
    return {"exercise": exercise, "id": hint.id, "title": hint.title, "revealed": revealed,
            "label": hints.share_label(hint, numbers),
            "body_html": render_markdown(hints.body_markdown(hint)) if revealed else ""}


def part_context(user: User, exercise: Exercise, spec: ExerciseSpec,
                 interview_mode: bool = False, variant: str = "",
                 mock_possible: bool = True) -> dict[str, Any]:
    """The exercise page. Interview mode (asked for, or always while a mock interview that holds
    this exercise runs) holds the statement's hints back as buttons (only this user's reveals
    show); practice mode shows the whole statement and records nothing. `variant`: the
    student's, when the caller has it (else it is read, or drawn on a first visit).
    `mock_possible=False`: the caller read, in the same statement as the variant, that the
    student has no mock interview unfinished (Assignment.objects.kept_for_page)."""
    # The running mock, looked up once for the page: it sets the mode, hides the solutions
    # (interview.solutions_hidden_for's rule) and draws the banner.
    mock = interview.running_mock_for(user, exercise) if mock_possible else None
    interview_mode = interview_mode or mock is not None
    variant = variant or assignment_for(user, exercise).variant
    statement, preamble, sections = _sections(spec, variant)
    hint_list: list[dict[str, Any]] = []
    if interview_mode:
        shown = rendered(spec, variant)
        parsed, statement = shown.parsed, shown.interview_html
        mine = set(HintReveal.objects.filter(user=user, exercise=exercise)
                   .values_list("hint_id", flat=True))
        hint_list = [hint_context(user, exercise, spec, h, h.id in mine) for h in parsed.hints]
    hidden = mock is not None
    # Every part's latest submission and state in two queries, not two per part (in this
    # order, for the reason in _one_part).
    # The page is the student's own variant: a review's answers (another variant) are not its.
    # Each latest answer also says whether an instructor's notes are on it (review_notes tag).
    latest = Submission.objects.latest_per_part(user.pk, exercise.pk, variant)
    states = {st.part_id: st for st in PartState.objects.filter(user=user, exercise=exercise)}
    parts = []
    for i, part in enumerate(spec.parts):
        html = sections.get(part.id, "")
        if i == 0:
            html = preamble + html
        parts.append(_one_part(user, exercise, spec, part, html, hidden,
                               found=(states.get(part.id), latest.get(part.id)),
                               interview_mode=interview_mode))
    evidence = variant_evidence(spec, variant_params(spec, variant))
    return {"exercise": exercise, "spec": spec, "variant": variant, "statement_html": statement,
            "interview_mode": interview_mode, "hints": hint_list, "parts": parts,
            "evidence": [(name, ev, reverse("evidence", args=[exercise.slug, name]))
                         for name, ev in sorted(evidence.items())],
            # Kernel results timed on a GPU are drawn on a roofline (static/charts.js).
            "charts": bool(evidence) or any(p.type == "kernel" for p in spec.parts),
            "mock": interview.clock(mock) if mock is not None else None}


def _render_part(request: HttpRequest, exercise: Exercise, part_id: str, error: str = "",
                 draft: str = "", interview_mode: bool = False) -> HttpResponse:
    spec = registry.get(exercise.slug)
    try:
        part = spec.part(part_id)
    except KeyError:
        raise Http404("no such part") from None
    variant = assignment_for(request.user, exercise).variant  # type: ignore[arg-type]
    _, preamble, sections = _sections(spec, variant)
    html = sections.get(part.id, "")
    if spec.parts[0].id == part.id:
        html = preamble + html
    hidden = interview.solutions_hidden_for(request.user, exercise)  # type: ignore[arg-type]
    ctx = _one_part(request.user, exercise, spec, part, html, hidden,  # type: ignore[arg-type]
                    error, draft, variant=variant, interview_mode=interview_mode)
    return render(request, "practice/partials/part.html", {"p": ctx})


@login_required
@require_POST
def submit_part(request: HttpRequest, slug: str, part_id: str) -> HttpResponse:
    """Submit (or Run) an answer. `submit_answer` grades an inline part at once
    (practice.grading.grade_inline) and queues any other for a worker, which grades it with
    practice.grading.grade_submission (claim → grade → record)."""
    exercise = get_object_or_404(Exercise, slug=slug, active=True)
    # Several checkboxes (a multi-choice part) arrive as `pick`; everything else as `answer`.
    answer = request.POST.get("answer") or ", ".join(request.POST.getlist("pick"))
    mode = "run" if request.POST.get("mode") == "run" else "submit"
    error = ""
    try:
        submit_answer(request.user, exercise, part_id, answer, mode)  # type: ignore[arg-type]
    except InvalidAnswer as exc:
        error = str(exc)
    except NotAllowed as exc:
        error = str(exc)
    interview_mode = request.POST.get("page_mode") == "interview"
    if not request.htmx:  # type: ignore[attr-defined]
        # Without JavaScript the refusal (a bad answer, the rate limit) travels as a message.
        if error:
            messages.error(request, f"Not submitted: {error}")
        return _back_to_page(slug, part_id, interview_mode)
    return _render_part(request, exercise, part_id, error=error, draft=answer if error else "",
                        interview_mode=interview_mode)


def _back_to_page(slug: str, part_id: str, interview_mode: bool) -> HttpResponse:
    """The exercise page after a plain form post, in the mode it was in, at the part."""
    query = "?mode=interview" if interview_mode else ""
    return redirect(reverse("exercise", args=[slug]) + query + f"#part-{part_id}")


@login_required
@require_POST
def reveal_part(request: HttpRequest, slug: str, part_id: str) -> HttpResponse:
    exercise = get_object_or_404(Exercise, slug=slug, active=True)
    interview_mode = request.POST.get("page_mode") == "interview"
    try:
        reveal_solution(request.user, exercise, part_id)  # type: ignore[arg-type]
    except KeyError:
        raise Http404("no such part") from None
    except NotAllowed as exc:
        # Refused by the action, not only by a hidden button: a stale page or a crafted post
        # must not show a solution mid-interview. The redrawn part (htmx) or a message says why.
        if not request.htmx:  # type: ignore[attr-defined]
            messages.error(request, f"Not now: {exc}.")
            return _back_to_page(slug, part_id, interview_mode)
        return _render_part(request, exercise, part_id, interview_mode=interview_mode)
    if not request.htmx:  # type: ignore[attr-defined]
        return _back_to_page(slug, part_id, interview_mode)
    return _render_part(request, exercise, part_id, interview_mode=interview_mode)


@login_required
@require_POST
def preview_formula(request: HttpRequest, slug: str, part_id: str) -> HttpResponse:
    """Echo a formula as math while the student types, from the server's safe parser."""
    from graders import expression

    spec = registry.get(slug)
    try:
        part = spec.part(part_id)
    except KeyError:
        raise Http404("no such part") from None
    text = request.POST.get("answer", "")
    ctx: dict[str, Any] = {"tex": "", "error": ""}
    if text.strip():
        try:
            ctx["tex"] = expression.preview(text, part.symbols)
        except InvalidAnswer as exc:
            ctx["error"] = str(exc)
    return render(request, "practice/partials/echo.html", ctx)


@login_required
def submission_status(request: HttpRequest, pk: int) -> HttpResponse:
    # Only the owner can see a submission: anyone else gets a 404, not a 403 that confirms it.
    sub = get_object_or_404(Submission.objects.select_related("exercise", "recall_item"), pk=pk,
                            user=request.user)
    if sub.finished and request.htmx:  # type: ignore[attr-defined]
        # The verdict may have solved the part: redraw the whole part (score, solution) in
        # place of the polling fragment. The redrawn status has no hx-get, so polling stops.
        if sub.recall_item is not None:  # a review's answer redraws the review's part
            ctx = review_part_context(request.user, sub.recall_item)  # type: ignore[arg-type]
            response = with_due_count(
                request, render(request, "practice/partials/part.html", {"p": ctx["p"]}))
        else:
            response = _render_part(request, sub.exercise, sub.part_id)
        response["HX-Retarget"] = f"#part-{sub.part_id}"
        response["HX-Reswap"] = "outerHTML"
        return response
    return render(request, "practice/partials/status.html", {"sub": sub})


@login_required
@require_POST
def contest_point(request: HttpRequest, pk: int, point: int) -> HttpResponse:
    """"The automatic reading is wrong here": one key point of a text answer goes to review."""
    sub = get_object_or_404(Submission.objects.select_related("exercise"), pk=pk,
                            user=request.user)
    try:
        contest_key_point(request.user, sub.pk, point)  # type: ignore[arg-type]
    except NotAllowed as exc:
        if request.htmx:  # type: ignore[attr-defined]
            return HttpResponse(str(exc), status=409)
        messages.error(request, str(exc))
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "practice/partials/status.html", {"sub": sub})
    return redirect(reverse("exercise", args=[sub.exercise.slug]) + f"#part-{sub.part_id}")


@login_required
@require_POST
def reveal_hint_view(request: HttpRequest, slug: str, hint_id: str) -> HttpResponse:
    """Reveal one hint in interview mode: recorded once, then its text replaces the button."""
    exercise = get_object_or_404(Exercise, slug=slug, active=True)
    spec = registry.get(slug)
    try:
        reveal_hint(request.user, exercise, hint_id, timezone.now())  # type: ignore[arg-type]
    except NotAllowed:
        raise Http404("no such hint") from None
    if not request.htmx:  # type: ignore[attr-defined]
        return redirect(reverse("exercise", args=[slug]) + f"?mode=interview#hint-{hint_id}")
    variant = assignment_for(request.user, exercise).variant  # type: ignore[arg-type]
    hint = next(h for h in _statement(spec, variant).hints if h.id == hint_id)
    ctx = hint_context(request.user, exercise, spec, hint, True)  # type: ignore[arg-type]
    return render(request, "practice/partials/hint.html", {"h": ctx})
