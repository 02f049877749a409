"""Review: the queue of answers awaiting an instructor, the attempt view (the student's variant,
every answer to the part with the grader's output, diffs, inline comments, rubric, override),
and the rubric editor.

Parse, call an action, render. Who may see what is decided in practice/access.py only: an
object the viewer may not review is a 404, never a 403 that confirms it exists. htmx posts get
back the partial they changed; plain posts a redirect to the attempt, so every form also works
without JavaScript.
"""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Exists, Max, OuterRef, Prefetch, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from exercises import registry
from exercises.spec import ExerciseSpec, PartSpec
from practice import access, diffing
from practice.actions import NotAllowed, reviews
from practice.markdown import render_markdown
from practice.models import (
    Cohort,
    Comment,
    Exercise,
    KeyPointContest,
    Membership,
    Review,
    RubricItem,
    Submission,
    User,
)
from practice.scores import effective_score
from practice.variants import variant_params
from practice.views.cohorts import forbidden
from practice.views.parts import _sections

QUEUE_STATUSES = {"awaiting": "Awaiting a grade", "reviewed": "Reviewed", "all": "All"}
QUEUE_PAGE_SIZE = 50
# A student may resubmit a part many times; the attempt view lists this many, newest first.
MAX_ANSWERS = 40
LISTED_TYPES = ("code", "kernel")  # answers shown as numbered lines, diffed, commented per line


def _viewer(request: HttpRequest) -> User:
    return request.user  # type: ignore[return-value]


def _reviewable(viewer: User, pk: int) -> Submission:
    try:
        return access.submission_for_review(viewer, pk)
    except access.Forbidden as exc:
        raise Http404("no such submission") from exc


def _is_htmx(request: HttpRequest) -> bool:
    return bool(getattr(request, "htmx", False))


# --- the queue ------------------------------------------------------------------------------

def _timing_held(sub: Submission) -> bool:
    result = sub.result if isinstance(sub.result, dict) else {}
    return ((result.get("extra") or {}).get("timing") or {}).get("status") == "held"


def queue_submissions(viewer: User, status: str = "awaiting", cohort: Cohort | None = None,
                      exercise: Exercise | None = None) -> QuerySet[Submission]:
    """Counted answers an instructor grades, from the viewer's students only.

    A text answer is saved with verdict "pending" until reviewed; a kernel whose timing looked
    implausible is held the same way (graders/kernel.py). "awaiting": pending with no review
    score yet; "reviewed": any answer a review scores (an override of a code answer included).
    """
    students = (access.visible_students(viewer, cohort) if cohort is not None
                else access.visible_students(viewer))
    subs = Submission.objects.filter(user__in=students, mode=Submission.Mode.SUBMIT,
                                     status=Submission.Status.GRADED)
    if exercise is not None:
        subs = subs.filter(exercise=exercise)
    pending = Q(verdict="pending")
    scored = Q(review__score__isnull=False)
    if status == "awaiting":
        # isnull=True on the reverse one-to-one is a LEFT JOIN: no review at all counts too.
        # Answers whose student contested the automatic reading of a key point come first.
        subs = (subs.filter(pending, review__score__isnull=True)
                .annotate(contested=Exists(KeyPointContest.objects.filter(
                    submission=OuterRef("pk"))))
                .order_by("-contested", "queued_at", "pk"))
    elif status == "reviewed":
        subs = subs.filter(scored).order_by("-review__updated_at", "-pk")
    else:
        subs = subs.filter(pending | scored).order_by("-queued_at", "-pk")
    return subs.select_related("user", "exercise", "review")


def _cohort_names(viewer: User, user_ids: set[int]) -> dict[int, list[str]]:
    names: dict[int, list[str]] = {}
    for m in (Membership.objects.filter(cohort__in=access.cohorts_of(viewer), user_id__in=user_ids)
              .select_related("cohort").order_by("cohort__name")):
        names.setdefault(m.user_id, []).append(m.cohort.name)
    return names


def _queue_filters(request: HttpRequest, viewer: User
                   ) -> tuple[Cohort | None, Exercise | None, str]:
    """The queue's filters from the query string: a cohort the viewer may not see, or an
    exercise that does not exist, is a 404 (the queue learns nothing about other cohorts)."""
    cohort = exercise = None
    raw = request.GET.get("cohort", "").strip()
    if raw:
        try:
            cohort = access.cohort_for(viewer, int(raw))
        except (ValueError, access.Forbidden) as exc:
            raise Http404("no such cohort") from exc
    slug = request.GET.get("exercise", "").strip()
    if slug:
        exercise = get_object_or_404(Exercise, slug=slug)
    status = request.GET.get("status", "awaiting")
    return cohort, exercise, status if status in QUEUE_STATUSES else "awaiting"


@login_required
def queue(request: HttpRequest) -> HttpResponse:
    viewer = _viewer(request)
    if not access.is_instructor(viewer):
        return forbidden(request)
    cohort, exercise, status = _queue_filters(request, viewer)
    page = Paginator(queue_submissions(viewer, status, cohort, exercise),
                     QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    subs = list(page.object_list)
    cohorts = _cohort_names(viewer, {s.user_id for s in subs})
    contests: dict[int, list[int]] = {}
    for sub_id, point in (KeyPointContest.objects.filter(submission__in=subs)
                          .values_list("submission_id", "point")):
        contests.setdefault(sub_id, []).append(point)
    rows = [{"sub": s, "cohorts": cohorts.get(s.user_id, []),
             "why": _why(s, contests.get(s.pk, [])),
             "score": effective_score(s),
             "reviewed": getattr(getattr(s, "review", None), "score", None) is not None}
            for s in subs]
    # The filters travel with the page links and into the attempt view (its "back to the
    # queue" and "next awaiting" keep them).
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "practice/teach/queue.html", {
        "rows": rows, "page": page, "status": status, "statuses": QUEUE_STATUSES,
        "status_label": QUEUE_STATUSES[status],
        "cohort": cohort, "exercise": exercise, "filters": query.urlencode(),
        "cohorts": access.cohorts_of(viewer).order_by("name"),
        "exercises": Exercise.objects.filter(active=True).order_by("seed", "slug"),
    })


def _why(sub: Submission, contested: list[int]) -> str:
    if contested:
        points = ", ".join(str(p + 1) for p in sorted(contested))
        return f"contested: key point{'s' if len(contested) > 1 else ''} {points}"
    return "timing held" if _timing_held(sub) else f"{sub.part_type} answer"


# --- the attempt view -----------------------------------------------------------------------

def _previous(sub: Submission) -> Submission | None:
    """The answer the student gave to the same part just before this one."""
    return (Submission.objects
            .filter(user_id=sub.user_id, exercise_id=sub.exercise_id, part_id=sub.part_id)
            .filter(Q(queued_at__lt=sub.queued_at) | Q(queued_at=sub.queued_at, pk__lt=sub.pk))
            .order_by("-queued_at", "-pk").only("pk", "answer", "queued_at").first())


def answer_context(sub: Submission, previous: Submission | None, *, focused: bool = False,
                   error: str = "") -> dict[str, Any]:
    """One answer for templates/practice/teach/partials/answer.html: its lines with their
    comments, its general comments, the grader's output, and the diff from the answer before."""
    comments = list(sub.comments.all())
    by_line: dict[int, list[Comment]] = {}
    for c in comments:
        if c.line is not None:
            by_line.setdefault(c.line, []).append(c)
    listed = sub.part_type in LISTED_TYPES
    lines = sub.answer.split("\n")
    # Comments not shown under a line go with the general ones: all of them for an answer not
    # listed line by line (text), and any line number past the end (the action refuses those;
    # listed here anyway so that no comment is ever hidden from the reviewer).
    shown_by_line = {n for n in by_line if listed and 1 <= n <= len(lines)}
    return {
        "sub": sub, "focused": focused, "error": error, "listed": listed,
        "lines": [{"no": i, "text": text, "comments": by_line.get(i, [])}
                  for i, text in enumerate(lines, start=1)] if listed else [],
        "general": [c for c in comments if c.line not in shown_by_line],
        "previous": previous,
        "diff": (diffing.line_diff(previous.answer, sub.answer)
                 if listed and previous is not None else None),
        "score": effective_score(sub),
        "reviewed": getattr(getattr(sub, "review", None), "score", None) is not None,
        "timing_held": _timing_held(sub),
    }


def _with_comments(subs: QuerySet[Submission]) -> QuerySet[Submission]:
    return subs.select_related("review", "user", "exercise").prefetch_related(
        Prefetch("comments", queryset=Comment.objects.select_related("author")))


def _answers(sub: Submission) -> list[Submission]:
    """The student's answers to the part, newest first, one more than the view shows."""
    return list(_with_comments(Submission.objects.filter(
        user_id=sub.user_id, exercise_id=sub.exercise_id, part_id=sub.part_id))
        .order_by("-queued_at", "-pk")[:MAX_ANSWERS + 1])


def _answers_of(pks: list[int]) -> list[Submission]:
    return list(_with_comments(Submission.objects.filter(pk__in=pks)))


def _part(spec: ExerciseSpec, part_id: str) -> PartSpec | None:
    try:
        return spec.part(part_id)
    except KeyError:
        return None  # the part was removed from the exercise folder since; its answers stay


def review_context(viewer: User, sub: Submission, *, error: str = "",
                   form: dict[str, str] | None = None) -> dict[str, Any]:
    """The grading panel (templates/practice/teach/partials/review_panel.html): the effective
    score, the cohort's rubric for a text part, and the override form."""
    spec = registry.get(sub.exercise.slug)
    part = _part(spec, sub.part_id)
    review = (Review.objects.filter(submission=sub).select_related("cohort")
              .prefetch_related("items").first())
    cohort = (review.cohort if review is not None and review.cohort is not None
              else access.review_cohort(viewer, sub.user))
    items: list[RubricItem] = []
    if part is not None and part.type == "text" and cohort is not None:
        items = list(RubricItem.objects.filter(cohort=cohort, exercise=sub.exercise,
                                               part_id=sub.part_id))
    applied = {i.pk for i in review.items.all()} if review is not None else set()
    override = review is not None and review.override_score is not None
    return {
        "sub": sub, "part": part, "review": review, "cohort": cohort, "error": error,
        "items": [{"item": i, "applied": i.pk in applied} for i in items],
        "rubric_points": sum(i.points for i in items if i.pk in applied),
        "score": review.score if review is not None and review.score is not None else sub.score,
        "override": override,
        "from_rubric": not override and review is not None and review.score is not None,
        "form": form or ({"score": f"{review.override_score:g}", "reason": review.override_reason}
                         if override and review is not None else {"score": "", "reason": ""}),
    }


def _parts_answered(sub: Submission, spec: ExerciseSpec) -> list[dict[str, Any]]:
    """The student's latest answer to each part of the exercise, in the exercise's order, so
    the reviewer can move from a text answer to the code beside it."""
    found = {row["part_id"]: row for row in
             Submission.objects.filter(user_id=sub.user_id, exercise_id=sub.exercise_id)
             .values("part_id").annotate(latest=Max("pk"), n=Count("pk"))}
    order = [p.id for p in spec.parts] + sorted(set(found) - {p.id for p in spec.parts})
    return [{"part_id": pid, "latest": found[pid]["latest"], "n": found[pid]["n"],
             "current": pid == sub.part_id} for pid in order if pid in found]


@login_required
def attempt(request: HttpRequest, pk: int) -> HttpResponse:
    viewer = _viewer(request)
    sub = _reviewable(viewer, pk)
    try:
        spec = registry.get(sub.exercise.slug)
    except KeyError as exc:  # the exercise's folder was removed (the row is only deactivated)
        raise Http404("this exercise is no longer on the site") from exc
    part = _part(spec, sub.part_id)
    # Newest first, one more than shown: each answer's previous one is the next in the list.
    fetched = _answers(sub)
    previous = {a.pk: fetched[i + 1] if i + 1 < len(fetched) else None
                for i, a in enumerate(fetched)}
    answers = fetched[:MAX_ANSWERS]
    focused = next((a for a in answers if a.pk == sub.pk), None)
    if focused is None:  # an old answer past the cap, opened from a link: show it too
        focused = _answers_of([sub.pk])[0]
        previous[focused.pk] = _previous(focused)
        answers.append(focused)
    statement, preamble, sections = _sections(spec, sub.variant)
    worked = sections.get(sub.part_id, "")
    if spec.parts and spec.parts[0].id == sub.part_id:
        worked = preamble + worked
    try:
        cohort, exercise, _ = _queue_filters(request, viewer)
    except Http404:
        cohort = exercise = None  # a stale filter must not hide the attempt itself
    query = request.GET.urlencode()
    return render(request, "practice/teach/attempt.html", {
        "sub": sub, "student": sub.user, "exercise": sub.exercise, "spec": spec, "part": part,
        "prompt_html": render_markdown(part.prompt) if part is not None else "",
        "params": list(variant_params(spec, sub.variant).items()),
        "statement_html": statement, "worked_html": worked,
        "focused": answer_context(focused, previous[focused.pk], focused=True),
        "answers": [{"sub": a, "ctx": None if a.pk == sub.pk
                     else answer_context(a, previous[a.pk])} for a in answers],
        "more_answers": len(fetched) > MAX_ANSWERS,
        "panel": review_context(viewer, sub),
        "parts_answered": _parts_answered(sub, spec),
        "next_awaiting": queue_submissions(viewer, "awaiting", cohort, exercise)
        .exclude(pk=sub.pk).first(),
        "query": f"?{query}" if query else "",
    })


def _back_to_attempt(sub: Submission, anchor: str = "") -> HttpResponse:
    return redirect(reverse("attempt", args=[sub.pk]) + (f"#{anchor}" if anchor else ""))


@login_required
@require_POST
def comment(request: HttpRequest, pk: int) -> HttpResponse:
    """A comment on one line of the answer (`line`, 1-based) or on all of it (no `line`)."""
    viewer = _viewer(request)
    sub = _reviewable(viewer, pk)
    error = ""
    raw_line = request.POST.get("line", "").strip()
    line: int | None = None
    if raw_line:
        try:
            line = int(raw_line)
        except ValueError:
            error = "the line is a number"
    if not error:
        try:
            reviews.add_comment(viewer, sub, request.POST.get("body", ""), line)
        except NotAllowed as exc:
            error = str(exc)
    if not _is_htmx(request):
        if error:
            messages.error(request, f"No comment saved: {error}.")
        return _back_to_attempt(sub, f"answer-{sub.pk}")
    fresh = _answers_of([sub.pk])[0]
    focused = request.POST.get("focused") == "1"
    ctx = answer_context(fresh, _previous(fresh), focused=focused,
                         error=f"No comment saved: {error}." if error else "")
    return render(request, "practice/teach/partials/answer.html", {"a": ctx})


def _panel(request: HttpRequest, viewer: User, sub: Submission, error: str = "",
           form: dict[str, str] | None = None, done: str = "") -> HttpResponse:
    if not _is_htmx(request):
        if error:
            messages.error(request, error)
        elif done:
            messages.success(request, done)
        return _back_to_attempt(sub, "review")
    sub = Submission.objects.select_related("user", "exercise").get(pk=sub.pk)
    ctx = review_context(viewer, sub, error=error, form=form)
    ctx["done"] = done
    return render(request, "practice/teach/partials/review_panel.html", {"panel": ctx})


@login_required
@require_POST
def apply_rubric(request: HttpRequest, pk: int) -> HttpResponse:
    """Exactly the checked items (`item`, repeated) apply; none checked clears the rubric."""
    viewer = _viewer(request)
    sub = _reviewable(viewer, pk)
    try:
        ids = [int(x) for x in request.POST.getlist("item")]
    except ValueError:
        return _panel(request, viewer, sub, error="Rubric not applied: bad item.")
    try:
        reviews.apply_rubric(viewer, sub, ids)
    except NotAllowed as exc:
        return _panel(request, viewer, sub, error=f"Rubric not applied: {exc}.")
    return _panel(request, viewer, sub, done="Rubric applied.")


@login_required
@require_POST
def override(request: HttpRequest, pk: int) -> HttpResponse:
    """Set a score (0..1) with a reason the student reads, or clear it (`clear`)."""
    viewer = _viewer(request)
    sub = _reviewable(viewer, pk)
    form = {"score": request.POST.get("score", "").strip(),
            "reason": request.POST.get("reason", "")}
    score: float | None = None
    if "clear" not in request.POST:
        try:
            score = float(form["score"])
        except ValueError:
            return _panel(request, viewer, sub, form=form,
                          error="No override: give a score from 0 to 1 (or clear it).")
    try:
        reviews.override_score(viewer, sub, score, form["reason"])
    except NotAllowed as exc:
        return _panel(request, viewer, sub, form=form, error=f"No override: {exc}.")
    done = "Override cleared." if score is None else f"Score overridden to {score:g}."
    return _panel(request, viewer, sub, done=done)


# --- the rubric editor ----------------------------------------------------------------------

def _points(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise NotAllowed("points are a number, e.g. 0.5 or -1") from None
    if value != value:  # NaN compares unequal to itself and would pass every range check
        raise NotAllowed("points are a number, e.g. 0.5 or -1")
    return value


@login_required
def rubric(request: HttpRequest, pk: int, slug: str, part_id: str) -> HttpResponse:
    """A cohort's rubric for one text part: add, edit (points too: every review applying the
    item is re-scored by the action) and delete items."""
    viewer = _viewer(request)
    try:
        cohort = access.cohort_for(viewer, pk)
    except access.Forbidden as exc:
        raise Http404("no such cohort") from exc
    exercise = get_object_or_404(Exercise, slug=slug)
    try:
        spec = registry.get(slug)
    except KeyError as exc:
        raise Http404("no such exercise") from exc
    part = _part(spec, part_id)
    if part is None or part.type != "text":
        raise Http404("rubrics are for text parts")
    items = RubricItem.objects.filter(cohort=cohort, exercise=exercise, part_id=part_id)
    error, form, editing = "", {"label": "", "points": "", "explanation": ""}, None
    if request.method == "POST":
        op = request.POST.get("op", "save")
        item = None
        if request.POST.get("item"):
            try:
                item = items.filter(pk=int(request.POST["item"])).first()
            except ValueError:
                item = None
            if item is None:
                raise Http404("no such rubric item")
        form = {k: request.POST.get(k, "") for k in form}
        try:
            if op == "delete":
                if item is None:
                    raise Http404("no such rubric item")
                reviews.delete_rubric_item(viewer, item)
                messages.success(request, f"Deleted “{item.label}”; reviews that applied it "
                                          "were re-scored.")
            else:
                saved = reviews.save_rubric_item(
                    viewer, cohort, exercise, part_id, label=form["label"],
                    points=_points(form["points"]), explanation=form["explanation"], item=item)
                messages.success(request, f"Saved “{saved.label}” ({saved.points:+g} pt)"
                                 + ("; reviews that apply it were re-scored." if item else "."))
            return redirect(request.get_full_path())
        except NotAllowed as exc:
            error = f"Not saved: {exc}."
            editing = item.pk if item is not None else None
    back = None
    raw_from = request.GET.get("from", "")
    if raw_from.isdigit():
        try:
            back = access.submission_for_review(viewer, int(raw_from))
        except access.Forbidden:
            back = None
    return render(request, "practice/teach/rubric.html", {
        "cohort": cohort, "exercise": exercise, "spec": spec, "part": part,
        "prompt_html": render_markdown(part.prompt),
        "items": items.annotate(uses=Count("reviews")), "error": error, "form": form,
        "editing": editing, "back": back,
    }, status=400 if error else 200)
