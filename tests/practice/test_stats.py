"""Statistics per cohort, exercise and part: exact figures on a small hand-made cohort, the same
figures through the pages, the demo seeding command, and a query count that does not grow with
the cohort (200 students x 10 exercises renders in as many queries as 3 students)."""
from __future__ import annotations

import io
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from practice import stats
from practice.actions.cohorts import create_cohort, join_cohort, leave_cohort
from practice.actions.reviews import override_score
from practice.models import (
    Cohort,
    Exercise,
    Membership,
    PartState,
    Review,
    Submission,
    User,
)

pytestmark = pytest.mark.django_db

SLUG = "kv_page_ledger"
PART = "pool_blocks"  # number, 1 point; mistakes gb_not_gib, no_graphs, ...
TEXT = "fix"  # text, awaiting review until an instructor grades it
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
# Query budget of each statistics page: session, user, cohort, (exercise,) exercises or
# members' count, the per-student aggregate, the mistakes aggregate (and the re-grade jobs).
MAX_QUERIES = 10


def gb_not_gib_label() -> str:
    """The headline of kv_page_ledger's GB-for-GiB slip, as the statistics pages show it (the
    figures in it come from the catalog: the driver-reported total of the canonical GPU)."""
    return stats.headline(stats.mistake_labels(SLUG)[PART]["gb_not_gib"])


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def sub(user: User, minutes: float, score: float, verdict: str, mistake: str = "",
        part: str = PART, mode: str = "submit", status: str = "graded") -> Submission:
    """A graded submission at T0 + minutes, as the grader would have stored it."""
    ex = Exercise.objects.get(slug=SLUG)
    part_type = next(p["type"] for p in ex.parts if p["id"] == part)
    s = Submission.objects.create(
        user=user, exercise=ex, part_id=part, part_type=part_type, variant="canonical",
        mode=mode, answer="42", status=status, score=score, verdict=verdict,
        result={"score": score, "verdict": verdict, "feedback": "", "checks": [],
                "mistake": mistake})
    # queued_at is auto_now_add: set the time the test means afterwards.
    Submission.objects.filter(pk=s.pk).update(queued_at=at(minutes),
                                              finished_at=at(minutes) + timedelta(seconds=1))
    s.refresh_from_db()
    return s


@pytest.fixture
def instructor() -> User:
    return User.objects.create_user("prof", password="pw-prof-123", is_instructor=True)


@pytest.fixture
def cohort(instructor: User) -> Cohort:
    return create_cohort(instructor, "Spring")


@pytest.fixture
def class_of_four(cohort: Cohort) -> dict[str, User]:
    """a: two tries, solved after 10 min; b: three, solved after 30 min; c: never solves (best
    0.5); d: right at once. Plus what must not count: an invalid answer, a Run, an answer still
    being graded, and a student outside the cohort."""
    users = {n: User.objects.create_user(n, password=f"pw-{n}-123") for n in "abcde"}
    for n in "abcd":
        join_cohort(users[n], cohort.join_code)
    a, b, c, d, e = (users[n] for n in "abcde")
    sub(a, 0, 0.0, "incorrect", "gb_not_gib")
    sub(a, 10, 1.0, "correct")
    sub(b, 0, 0.0, "incorrect", "gb_not_gib")
    sub(b, 5, 0.0, "incorrect", "no_graphs")
    sub(b, 30, 1.0, "correct")
    sub(c, 0, 0.0, "incorrect", "gb_not_gib")
    sub(c, 3, 0.5, "partial")  # matched no known mistake: "other"
    sub(d, 0, 1.0, "correct")
    sub(d, 1, 0.0, "invalid")  # could not be read: no attempt, not counted
    sub(c, 4, 1.0, "correct", mode="run")  # examples only: not counted
    sub(c, 5, 0.0, "", status="queued")  # not graded yet: not counted
    sub(e, 0, 0.0, "incorrect", "no_util")  # not in the cohort
    sub(e, 1, 1.0, "correct")
    return users


def part_stats(cohort: Cohort, part_id: str = PART) -> stats.PartStats:
    ex_stats = stats.exercise_stats(cohort, Exercise.objects.get(slug=SLUG))
    return next(p for p in ex_stats.parts if p.part_id == part_id)


def test_figures_of_one_part(cohort: Cohort, class_of_four: dict[str, User]) -> None:
    p = part_stats(cohort)
    assert p.attempts == 8  # 2 + 3 + 2 + 1
    assert (p.tried, p.scored, p.solved) == (4, 4, 3)
    assert p.solve_rate == 0.75 and p.solve_percent == 75
    assert sorted(p.solve_seconds) == [0.0, 600.0, 1800.0]
    assert p.median_solve_s == 600.0 and p.median_solve_text == "10 min"
    assert p.histogram == [0, 0, 0, 0, 0, 1, 0, 0, 0, 3]  # c's 0.5; a, b, d at 1.0
    assert p.pending == 0

    # Five wrong answers: gb_not_gib three times, no_graphs once, one that matched nothing.
    assert p.wrong == 5
    assert [(m.name, m.count, m.percent) for m in p.mistakes] == [
        ("gb_not_gib", 3, 60), ("no_graphs", 1, 20), ("", 1, 20)]
    top = p.mistakes[0]
    # The label is the mistake's feedback (its first sentence), the rest is kept as detail.
    assert top.label == gb_not_gib_label()
    assert top.label.startswith("You read the ") and "GB (10^9 B)" in top.label
    assert top.detail.startswith("The memory budget is in GiB")
    assert p.mistakes[-1].label.startswith("other")
    assert p.top_mistake is top


def test_figures_of_the_exercise(cohort: Cohort, class_of_four: dict[str, User]) -> None:
    overview = stats.cohort_overview(cohort)
    assert overview.students == 4
    ex_stats = next(e for e in overview.exercises if e.exercise.slug == SLUG)
    assert overview.tried == [ex_stats]
    assert ex_stats.tried == 4 and ex_stats.attempts == 8
    assert ex_stats.solve_percent == 75  # only one part tried: that part's rate
    assert ex_stats.completed == 0  # nobody solved all seven parts
    assert ex_stats.hardest is not None and ex_stats.hardest.part_id == PART
    top = ex_stats.top_mistake
    assert top is not None and top[0].part_id == PART and top[1].name == "gb_not_gib"
    assert all(not e.tried for e in overview.untried)


def test_a_review_counts_instead_of_the_grader(cohort: Cohort, instructor: User,
                                               class_of_four: dict[str, User]) -> None:
    """An override of c's 0.5 to 1 solves the part for c (after 3 minutes) and takes that
    answer out of the wrong ones."""
    c = class_of_four["c"]
    partial = Submission.objects.get(user=c, part_id=PART, verdict="partial")
    override_score(instructor, partial, 1.0, "Right idea, rounding aside.")
    p = part_stats(cohort)
    assert (p.solved, p.solve_percent) == (4, 100)
    assert sorted(p.solve_seconds) == [0.0, 180.0, 600.0, 1800.0]
    assert p.median_solve_s == 390.0
    assert p.wrong == 4
    assert [(m.name, m.count, m.percent) for m in p.mistakes] == [
        ("gb_not_gib", 3, 75), ("no_graphs", 1, 25)]
    assert p.histogram[9] == 4


def test_text_awaiting_review_is_tried_but_not_scored(cohort: Cohort, instructor: User,
                                                     class_of_four: dict[str, User]) -> None:
    a, b = class_of_four["a"], class_of_four["b"]
    pending = sub(a, 40, 0.0, "pending", part=TEXT)
    sub(b, 40, 0.0, "pending", part=TEXT)
    p = part_stats(cohort, TEXT)
    assert (p.attempts, p.tried, p.pending, p.scored, p.wrong) == (2, 2, 2, 0, 0)
    assert p.solve_rate is None and p.histogram == [0] * 10

    Review.objects.create(submission=pending, cohort=cohort, override_score=1.0, score=1.0,
                          override_reason="Names the leak.", reviewer=instructor)
    p = part_stats(cohort, TEXT)
    assert (p.tried, p.pending, p.scored, p.solved) == (2, 1, 1, 1)
    assert p.histogram[9] == 1 and p.median_solve_s == 0.0
    assert p.median_solve_text == "0 (first try)"


def test_a_member_who_left_no_longer_counts(cohort: Cohort,
                                            class_of_four: dict[str, User]) -> None:
    leave_cohort(class_of_four["b"], cohort)
    p = part_stats(cohort)
    assert (p.tried, p.solved, p.attempts) == (3, 2, 5)


def test_an_empty_cohort(cohort: Cohort) -> None:
    overview = stats.cohort_overview(cohort)
    assert overview.students == 0 and overview.tried == []
    p = part_stats(cohort)
    assert p.tried == 0 and p.solve_rate is None and p.median_solve_text == "—"
    assert p.mistakes == []


@pytest.mark.parametrize(("score", "expected"), [
    (0.0, 0), (0.05, 0), (0.1, 1), (0.3, 3), (0.5, 5), (0.7, 7), (0.99, 9), (1.0, 9)])
def test_score_bins(score: float, expected: int) -> None:
    assert stats.score_bin(score) == expected


def test_headline_and_durations() -> None:
    assert stats.headline("One step late. At decode step t ...") == "One step late."
    assert stats.headline("No stop here") == "No stop here"
    assert stats.headline("x" * 300).endswith("…") and len(stats.headline("x" * 300)) == 140
    assert [stats.duration_text(s) for s in (None, 42, 600, 3 * 3600, 3 * 86400)] == [
        "—", "42 s", "10 min", "3.0 h", "3.0 d"]


# --- the pages -------------------------------------------------------------------------------

def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def text_of(html: bytes) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.decode())).replace("&nbsp;", " ")


def test_the_exercise_page_shows_the_figures(cohort: Cohort, instructor: User,
                                             class_of_four: dict[str, User]) -> None:
    r = client_for(instructor).get(reverse("exercise_stats", args=[cohort.pk, SLUG]))
    assert r.status_code == 200
    page = text_of(r.content)
    assert "4 of 4 students tried it" in page
    assert "75 % (3 of 4)" in page
    assert "10 min" in page
    assert f"60 % {gb_not_gib_label()}" in page
    assert "20 % other wrong answers" in page
    # The histogram's data for static/charts.js, and the same numbers as a table.
    assert f'data-histogram-chart="hist-{PART}"' in r.content.decode()
    assert '"counts": [0, 0, 0, 0, 0, 1, 0, 0, 0, 3]' in r.content.decode()
    assert 'src="/static/vendor/chartjs/chart.umd.min.js"' in r.content.decode()
    # The re-grade button posts to the action.
    assert reverse("regrade_start", args=[SLUG]) in r.content.decode()


def test_the_cohort_page_lists_exercises(cohort: Cohort, instructor: User,
                                         class_of_four: dict[str, User]) -> None:
    r = client_for(instructor).get(reverse("cohort_stats", args=[cohort.pk]))
    assert r.status_code == 200
    page = text_of(r.content)
    assert "4 students · 1 exercise tried" in page
    row = re.search(rf'<tr id="ex-{SLUG}">(.*?)</tr>', r.content.decode(), re.S)
    assert row is not None
    cells = text_of(row.group(1).encode())
    assert "4 of 4" in cells and " 8 " in cells and "75 %" in cells
    assert f"{PART} 60 %: {gb_not_gib_label()}" in cells
    assert reverse("exercise_stats", args=[cohort.pk, SLUG]) in row.group(1)


def test_other_instructors_and_students_get_404(cohort: Cohort,
                                                class_of_four: dict[str, User]) -> None:
    other = User.objects.create_user("other", password="pw-other-123", is_instructor=True)
    for user in (other, class_of_four["a"]):
        client = client_for(user)
        assert client.get(reverse("cohort_stats", args=[cohort.pk])).status_code == 404
        assert client.get(reverse("exercise_stats", args=[cohort.pk, SLUG])).status_code == 404
    staff = User.objects.create_user("root", password="pw-root-123", is_staff=True)
    assert client_for(staff).get(reverse("cohort_stats", args=[cohort.pk])).status_code == 200
    # An exercise that does not exist is a 404 too.
    r = client_for(cohort.owner).get(reverse("exercise_stats", args=[cohort.pk, "nope"]))
    assert r.status_code == 404


# --- the demo cohort and the query budget ----------------------------------------------------

def seed(students: int, exercises: int, **kwargs: Any) -> Cohort:
    out = io.StringIO()
    call_command("seed_cohort", students=students, exercises=exercises, stdout=out, **kwargs)
    assert "join code" in out.getvalue()
    return Cohort.objects.order_by("-pk").first()  # type: ignore[return-value]


def test_seed_cohort_makes_a_realistic_cohort() -> None:
    cohort = seed(30, 3, instructor="demo-prof", seed=7)
    owner = cohort.owner
    assert owner.username == "demo-prof" and owner.is_instructor
    assert Membership.objects.filter(cohort=cohort).count() == 30
    members = User.objects.filter(memberships__cohort=cohort)
    subs = Submission.objects.filter(user__in=members)
    slugs = list(Exercise.objects.filter(active=True).order_by("seed", "slug")
                 .values_list("slug", flat=True)[:3])
    assert set(subs.values_list("exercise__slug", flat=True)) <= set(slugs)
    assert subs.count() > 30 * 3
    # Realistic: right answers, known mistakes and other wrong ones; times spread over days.
    verdicts = set(subs.values_list("verdict", flat=True))
    assert {"correct", "incorrect", "pending"} <= verdicts
    assert subs.exclude(result__mistake="").filter(verdict="incorrect").exists()
    times = subs.values_list("queued_at", flat=True)
    assert max(times) - min(times) > timedelta(days=2)
    assert Review.objects.filter(submission__in=subs).exists()  # some text answers graded

    # Progress agrees with the submissions, so the statistics agree with every other page.
    for e in stats.cohort_overview(cohort).tried:
        for p in e.parts:
            states = PartState.objects.filter(user__in=members, exercise=e.exercise,
                                              part_id=p.part_id)
            assert p.tried == states.filter(attempts__gt=0).count(), (e.exercise.slug, p)
            assert p.solved == states.filter(solved_at__isnull=False).count(), (
                e.exercise.slug, p)

    # The same seed makes the same cohort.
    again = seed(30, 3, instructor="demo-prof", seed=7)
    assert again.pk != cohort.pk
    again_subs = Submission.objects.filter(user__memberships__cohort=again)
    assert sorted(again_subs.values_list("score", flat=True)) == sorted(
        subs.values_list("score", flat=True))


def test_statistics_pages_take_a_fixed_number_of_queries(
        django_assert_max_num_queries: Any) -> None:
    small = seed(3, 10, seed=1)
    big = seed(200, 10, seed=2)
    assert Submission.objects.filter(user__memberships__cohort=big).count() > 5000
    client = client_for(big.owner)
    slug = Exercise.objects.filter(active=True).order_by("seed", "slug").first().slug
    for cohort in (small, big):
        with django_assert_max_num_queries(MAX_QUERIES):
            r = client.get(reverse("cohort_stats", args=[cohort.pk]))
        assert r.status_code == 200
        assert cohort is small or "10 exercises tried" in text_of(r.content)
        with django_assert_max_num_queries(MAX_QUERIES):
            r = client.get(reverse("exercise_stats", args=[cohort.pk, slug]))
        assert r.status_code == 200
        assert "data-histogram-chart" in r.content.decode()


# --- in Chromium: static/charts.js draws a histogram per part -----------------------------------

HISTOGRAMS = """() => [...document.querySelectorAll('canvas[data-histogram-chart]')].map((c) => {
  const chart = Chart.getChart(c);
  const source = JSON.parse(document.getElementById(c.dataset.histogramChart).textContent);
  return {drawn: c.dataset.drawn, type: chart && chart.config.type, width: c.width,
          shown: !c.closest('[hidden]'), data: chart && chart.data.datasets[0].data,
          counts: source.counts};
})"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_histograms_are_drawn_in_the_browser(page: Any, live_server: Any) -> None:
    cohort = seed(12, 1, seed=3)
    slug = Exercise.objects.filter(active=True).order_by("seed", "slug").first().slug
    client = client_for(cohort.owner)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                               "url": live_server.url}])
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("request", lambda r: problems.append("outside: " + r.url)
            if not r.url.startswith(live_server.url) else None)
    page.on("response", lambda r: problems.append(f"{r.status} {r.url}")
            if r.status >= 400 else None)

    page.goto(live_server.url + reverse("exercise_stats", args=[cohort.pk, slug]))
    page.wait_for_function("""() => [...document.querySelectorAll('canvas[data-histogram-chart]')]
        .every((c) => c.dataset.drawn === 'ok')""", timeout=20_000)
    charts = page.evaluate(HISTOGRAMS)
    expected = [p for p in stats.exercise_stats(cohort, Exercise.objects.get(slug=slug)).parts
                if p.scored]
    assert len(charts) == len(expected) > 0
    for chart, part in zip(charts, expected, strict=True):
        assert chart["type"] == "bar" and chart["shown"] and chart["width"] > 100, chart
        assert chart["data"] == chart["counts"] == part.histogram
    assert problems == []
