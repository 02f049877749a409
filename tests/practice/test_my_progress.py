""""My progress" (/progress/, practice/progress_report.py): how each part was solved, the mistake
kinds seen most often with their drills, and the streak and 30-day activity, all as of a fixed
`now` and from the signed-in student's own rows only. Rows are created directly (real Exercise
rows, synced into the test database), with their times set, so no grading or clock is involved."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from exercises.mistake_kinds import KINDS
from practice import recall
from practice.models import (
    Exercise,
    HintReveal,
    PartState,
    RecallItem,
    RecallLog,
    Submission,
    User,
)
from practice.progress_report import CHART_DAYS, report

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LEDGER = "kv_page_ledger"  # hints: h1 free, h2 costs 0.1 (pool_blocks, exhaust_step, cap_worst)
DISAGG = "kv_transfer_disagg"


@pytest.fixture
def ann() -> User:
    return User.objects.create_user("ann", password="pw-ann-12345")


@pytest.fixture
def bob() -> User:
    return User.objects.create_user("bob", password="pw-bob-12345")


@pytest.fixture
def clock() -> Iterator[None]:
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        yield


def _ex(slug: str = LEDGER) -> Exercise:
    return Exercise.objects.get(slug=slug)


def _sub(user: User, slug: str, part: str, at: datetime, score: float = 0.0,
         verdict: str = "incorrect", kinds: list[str] | None = None, mode: str = "submit",
         status: str = "graded") -> Submission:
    result = {} if kinds is None else {"kinds": kinds}
    sub = Submission.objects.create(user=user, exercise=_ex(slug), part_id=part,
                                    part_type="number", variant="canonical", mode=mode,
                                    answer="1", status=status, score=score, verdict=verdict,
                                    result=result)
    Submission.objects.filter(pk=sub.pk).update(queued_at=at)  # auto_now_add ignores the value
    return sub


def _state(user: User, slug: str, part: str, attempts: int, solved: datetime | None = None,
           revealed: datetime | None = None) -> PartState:
    return PartState.objects.create(user=user, exercise=_ex(slug), part_id=part,
                                    attempts=attempts, solved_at=solved, revealed_at=revealed,
                                    best_score=1.0 if solved else 0.0)


def _review(user: User, at: datetime) -> RecallLog:
    # One item per user and part: each review of it is a log row.
    state = recall.start(at)
    item, _ = RecallItem.objects.get_or_create(
        user=user, exercise=_ex(), part_id="pool_blocks",
        defaults={"reason": RecallItem.Reason.WRONG, "fsrs_card": state,
                  "due": recall.due_of(state)})
    return RecallLog.objects.create(user=user, item=item, rating=3, reviewed_at=at)


def _topic(user: User, slug: str = LEDGER):  # type: ignore[no-untyped-def]
    topic = _ex(slug).topic
    return next(r for r in report(user, NOW).topics if r.topic == topic)


# --- how each part was solved ------------------------------------------------------------------

def test_each_solved_part_is_classified_once(ann: User) -> None:
    t = NOW - timedelta(days=3)
    # First try: the first graded answer is right (later answers do not change that), and the
    # free hint h1 (pool_blocks among its parts) revealed before it costs nothing.
    HintReveal.objects.create(user=ann, exercise=_ex(), hint_id="h1", revealed_at=t)
    _sub(ann, LEDGER, "pool_blocks", t, 1.0, "correct")
    _sub(ann, LEDGER, "pool_blocks", t + timedelta(hours=1), 0.0, "incorrect")
    _state(ann, LEDGER, "pool_blocks", 2, solved=t)
    # With hints: the paid h2 (exhaust_step among its parts) was revealed before solving; it
    # came after pool_blocks was solved, and does not unlock cap_capacity (still first try).
    HintReveal.objects.create(user=ann, exercise=_ex(), hint_id="h2",
                              revealed_at=t + timedelta(minutes=1))
    _sub(ann, LEDGER, "cap_capacity", t + timedelta(minutes=1), 1.0, "correct")
    _state(ann, LEDGER, "cap_capacity", 1, solved=t + timedelta(minutes=1))
    _sub(ann, LEDGER, "exhaust_step", t + timedelta(minutes=2), 1.0, "correct")
    _state(ann, LEDGER, "exhaust_step", 1, solved=t + timedelta(minutes=2))
    # After the solution: shown, then answered right (a paid hint too: the solution wins).
    _sub(ann, LEDGER, "cap_worst", t + timedelta(minutes=4), 1.0, "correct")
    _state(ann, LEDGER, "cap_worst", 1, solved=t + timedelta(minutes=4),
           revealed=t + timedelta(minutes=3))
    # Solved later: wrong, then right.
    _sub(ann, LEDGER, "next_check", t, 0.0, "incorrect")
    _sub(ann, LEDGER, "next_check", t + timedelta(minutes=5), 1.0, "correct")
    _state(ann, LEDGER, "next_check", 2, solved=t + timedelta(minutes=5))
    # Tried, not solved; and a part no longer in the exercise, which does not count.
    _sub(ann, LEDGER, "ledger", t, 0.0, "incorrect")
    _state(ann, LEDGER, "ledger", 1)
    _state(ann, LEDGER, "removed_part", 1, solved=t)

    row = _topic(ann)
    assert (row.first_try, row.with_hints, row.after_solution, row.solved_later, row.tried) \
        == (2, 1, 1, 1, 1)
    assert row.solved == 5
    total = report(ann, NOW).total
    assert total.parts == sum(len(ex.parts) for ex in Exercise.objects.filter(active=True))
    assert total.solved == 5 and total.tried == 1


def test_a_hint_revealed_after_solving_and_a_partial_first_answer(ann: User) -> None:
    t = NOW - timedelta(days=1)
    _sub(ann, LEDGER, "pool_blocks", t, 1.0, "correct")
    _state(ann, LEDGER, "pool_blocks", 1, solved=t)
    HintReveal.objects.create(user=ann, exercise=_ex(), hint_id="h2",
                              revealed_at=t + timedelta(minutes=1))
    # A partial first answer (score below 1) is not a first-try solve.
    _sub(ann, LEDGER, "exhaust_step", t, 0.5, "partial")
    _sub(ann, LEDGER, "exhaust_step", t + timedelta(minutes=9), 1.0, "correct")
    _state(ann, LEDGER, "exhaust_step", 2, solved=t + timedelta(minutes=9))
    row = _topic(ann)
    # h2 came after pool_blocks was solved but before exhaust_step was: exhaust_step is "with
    # hints" (it is checked before "solved later"), pool_blocks stays "first try".
    assert (row.first_try, row.with_hints, row.solved_later) == (1, 1, 0)


def test_an_inactive_exercise_does_not_count(ann: User) -> None:
    _sub(ann, DISAGG, "kv_size", NOW, 1.0, "correct")
    _state(ann, DISAGG, "kv_size", 1, solved=NOW)
    parts = report(ann, NOW).total.parts
    Exercise.objects.filter(slug=DISAGG).update(active=False)
    rep = report(ann, NOW)
    assert rep.total.solved == 0
    assert rep.total.parts == parts - len(_ex(DISAGG).parts)


# --- mistake kinds -----------------------------------------------------------------------------

def test_kinds_are_counted_ordered_and_linked_to_their_drill(ann: User) -> None:
    t = NOW - timedelta(days=2)
    _sub(ann, LEDGER, "pool_blocks", t, kinds=["gb_vs_gib", "bits_vs_bytes"])
    _sub(ann, LEDGER, "pool_blocks", t, kinds=["gb_vs_gib", "gb_vs_gib"])  # once per answer
    _sub(ann, DISAGG, "kv_size", t, kinds=["gb_vs_gib", "a_kind_since_removed"])
    _sub(ann, DISAGG, "kv_size", t, kinds=["bits_vs_bytes"])
    _sub(ann, DISAGG, "kv_size", t, kinds=["rounding"])
    _sub(ann, LEDGER, "ledger", t)  # an old row without kinds
    _sub(ann, LEDGER, "ledger", t, kinds=["rounding"], mode="run")  # a run is not counted
    _sub(ann, LEDGER, "ledger", t, kinds=["rounding"], status="error")  # nor an ungraded row
    kinds = report(ann, NOW).kinds
    assert [(k.kind.id, k.answers, k.exercises) for k in kinds] == [
        ("gb_vs_gib", 3, 2), ("bits_vs_bytes", 2, 2), ("rounding", 1, 1)]
    gb = KINDS["gb_vs_gib"]
    assert kinds[0].drill_url == (reverse("exercise", args=[gb.drill_exercise])
                                  + "#part-" + gb.drill_part)
    # The drill of bits_vs_bytes is kv_transfer_disagg: retired, it gets no link.
    Exercise.objects.filter(slug=DISAGG).update(active=False)
    kinds = report(ann, NOW).kinds
    assert kinds[1].kind.id == "bits_vs_bytes" and kinds[1].drill_url == ""


def test_at_most_six_kinds_are_shown(ann: User) -> None:
    _sub(ann, LEDGER, "pool_blocks", NOW, kinds=list(KINDS)[:8])
    assert len(report(ann, NOW).kinds) == 6


def test_the_page_shows_the_kinds_with_their_sentence_and_drill(
        client: Client, ann: User, clock: None) -> None:
    _sub(ann, LEDGER, "pool_blocks", NOW - timedelta(hours=1), kinds=["gb_vs_gib"])
    client.force_login(ann)
    html = client.get("/progress/").content.decode()
    gb = KINDS["gb_vs_gib"]
    assert gb.label in html and "A decimal size read as binary" in html
    assert f'href="/ex/{gb.drill_exercise}/#part-{gb.drill_part}"' in html
    assert 'data-activity-chart="activity-data"' in html and "charts.js" in html


# --- streak and activity -----------------------------------------------------------------------

def _day(n: int, hour: int = 6) -> datetime:
    """`n` days before NOW's day, at `hour` UTC (the default is before NOW's 09:00)."""
    return (NOW - timedelta(days=n)).replace(hour=hour, minute=0)


def test_the_streak_counts_today_and_the_days_before(ann: User) -> None:
    _sub(ann, LEDGER, "pool_blocks", _day(0, 8))
    _review(ann, _day(1))  # a recall review makes a day active too
    _sub(ann, LEDGER, "pool_blocks", _day(2, 23).replace(minute=59), status="queued")
    # a gap on day 3, then an older, longer run
    for n in range(10, 15):
        _sub(ann, LEDGER, "pool_blocks", _day(n))
    a = report(ann, NOW).activity
    assert (a.streak, a.longest, a.active_today) == (3, 5, True)


def test_the_streak_holds_while_today_is_still_open(ann: User) -> None:
    _sub(ann, LEDGER, "pool_blocks", _day(1))
    _review(ann, _day(2))
    a = report(ann, NOW).activity
    assert (a.streak, a.longest, a.active_today) == (2, 2, False)


def test_a_gap_breaks_the_streak(ann: User) -> None:
    _sub(ann, LEDGER, "pool_blocks", _day(2))
    _sub(ann, LEDGER, "pool_blocks", _day(3))
    a = report(ann, NOW).activity
    assert (a.streak, a.longest) == (0, 2)
    # Activity after `now` (a clock the test set back) does not count.
    _sub(ann, LEDGER, "pool_blocks", NOW + timedelta(hours=1))
    assert report(ann, NOW).activity.streak == 0


def test_thirty_days_of_counts_today_last(ann: User) -> None:
    _sub(ann, LEDGER, "pool_blocks", _day(0, 1))
    _sub(ann, LEDGER, "pool_blocks", _day(0, 2), mode="run")  # a run is not an answer
    _sub(ann, LEDGER, "exhaust_step", _day(0, 3), status="error")  # counted, not graded
    _review(ann, _day(0, 4))
    _sub(ann, LEDGER, "pool_blocks", _day(29))
    _review(ann, _day(29))
    _review(ann, _day(29, 13))
    _sub(ann, LEDGER, "pool_blocks", _day(30))  # the day before the window
    rep = report(ann, NOW)
    days = rep.activity.days
    assert len(days) == CHART_DAYS == 30
    assert days[-1].day == NOW.date() and days[0].day == _day(29).date()
    assert (days[-1].answers, days[-1].reviews) == (2, 1)
    assert (days[0].answers, days[0].reviews) == (1, 2)
    assert sum(d.total for d in days) == 6
    assert rep.chart[-1] == {"day": "2026-03-02", "answers": 2, "reviews": 1}


# --- only one's own data; the page --------------------------------------------------------------

def _main(html: str) -> str:
    """The page's own content (the head's script nonces differ per response)."""
    return html[html.index("<main"):html.index("</main>")]


def test_another_students_rows_never_show(client: Client, ann: User, bob: User,
                                          clock: None) -> None:
    _sub(ann, LEDGER, "pool_blocks", _day(1), 1.0, "correct", kinds=[])
    _state(ann, LEDGER, "pool_blocks", 1, solved=_day(1))
    client.force_login(ann)
    before = report(ann, NOW)
    page_before = _main(client.get("/progress/").content.decode())
    _sub(bob, LEDGER, "exhaust_step", _day(0), 1.0, "correct", kinds=["gb_vs_gib"])
    _sub(bob, LEDGER, "pool_blocks", _day(0), 0.0, "incorrect", kinds=["rounding"])
    _state(bob, LEDGER, "exhaust_step", 1, solved=_day(0))
    _state(bob, LEDGER, "ledger", 1, revealed=_day(0))
    HintReveal.objects.create(user=bob, exercise=_ex(), hint_id="h2", revealed_at=_day(3))
    _review(bob, _day(0))
    assert report(ann, NOW) == before
    assert _main(client.get("/progress/").content.decode()) == page_before
    assert report(bob, NOW).kinds and not before.kinds


def test_the_page_for_a_new_student_says_there_is_nothing_yet(
        client: Client, ann: User, clock: None) -> None:
    client.force_login(ann)
    r = client.get(reverse("my_progress"))
    html = r.content.decode()
    assert r.status_code == 200
    assert "<h1>My progress</h1>" in html and "Nothing to show yet" in html
    assert "chart.umd.min.js" not in html
    assert 'href="/progress/"' in html  # the header's link


def test_the_page_requires_a_login(client: Client) -> None:
    r = client.get("/progress/")
    assert r.status_code == 302 and "/login/" in r["Location"]


def test_the_page_has_its_headings_and_tables(client: Client, ann: User, clock: None) -> None:
    _sub(ann, LEDGER, "pool_blocks", _day(0), 1.0, "correct")
    _state(ann, LEDGER, "pool_blocks", 1, solved=_day(0))
    client.force_login(ann)
    html = client.get("/progress/").content.decode()
    assert html.index("<h1>") < html.index('<h2 id="streak-heading">') \
        < html.index('<h2 id="topics-heading">') < html.index('<h2 id="kinds-heading">')
    assert "Current streak: 1 day." in html
    assert '<th scope="row">' + _ex().topic in html
    assert "<details>" in html and 'id="activity-data"' in html


# --- queries ----------------------------------------------------------------------------------

def _queries(user: User) -> int:
    with CaptureQueriesContext(connection) as ctx:
        report(user, NOW)
    return len(ctx.captured_queries)


def test_the_queries_do_not_grow_with_the_exercises(
        ann: User, django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    _sub(ann, LEDGER, "pool_blocks", _day(1), 1.0, "correct", kinds=["gb_vs_gib"])
    _state(ann, LEDGER, "pool_blocks", 1, solved=_day(1))
    few = _queries(ann)
    for ex in Exercise.objects.filter(active=True)[:12]:
        for part in ex.parts:
            _sub(ann, ex.slug, part["id"], _day(2), 0.0, "incorrect", kinds=["rounding"])
            _sub(ann, ex.slug, part["id"], _day(1), 1.0, "correct")
            _state(ann, ex.slug, part["id"], 2, solved=_day(1))
        HintReveal.objects.create(user=ann, exercise=ex, hint_id="h1", revealed_at=_day(3))
        _review(ann, _day(4))
    assert _queries(ann) == few
    with django_assert_max_num_queries(6):
        report(ann, NOW)


def test_the_page_makes_a_bounded_number_of_queries(
        client: Client, ann: User, clock: None,
        django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    for ex in Exercise.objects.filter(active=True)[:8]:
        part = ex.parts[0]["id"]
        _sub(ann, ex.slug, part, _day(1), 1.0, "correct", kinds=["rounding"])
        _state(ann, ex.slug, part, 1, solved=_day(1))
    client.force_login(ann)
    with django_assert_max_num_queries(10):  # session, user, header count and the report
        assert client.get("/progress/").status_code == 200
