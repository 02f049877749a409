"""The catalog's filters through Django's test client: every expected list is computed from the
registry's own specs (no slug is written down here), counts agree with the lists they promise,
statuses come from PartState and RecallItem, and the query count does not grow with exercises."""
from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from exercises import registry
from exercises.registry import DIFFICULTIES
from exercises.spec import PART_TYPES, ExerciseSpec
from practice import catalog_filters
from practice.models import Exercise, PartState, RecallItem, User

pytestmark = pytest.mark.django_db

SPECS: dict[str, ExerciseSpec] = registry.load_all()
TOPICS = sorted({s.topic for s in SPECS.values()})
COUNT = re.compile(r'name="(\w+)" value="([^"]*)"[^>]*>\s*[^<]*'
                   r'<span class="facet-count[^"]*" id="count-\w+-\d+">(\d+)</span>')


@pytest.fixture
def alice(client: Client) -> User:
    user = User.objects.create_user("alice", password="pw-alice-123")
    client.force_login(user)
    return user


def listed(client: Client, **params: str | list[str]) -> set[str]:
    """The slugs the catalog shows for these GET parameters."""
    r = client.get("/", params)
    assert r.status_code == 200
    results = r.content.decode().split('id="catalog-results"', 1)[1]
    return set(re.findall(r'id="ex-([\w-]+)"', results))


def counts(body: str) -> dict[tuple[str, str], int]:
    """(kind, value) -> the count printed beside it in the filter form."""
    return {(k, html.unescape(v)): int(n) for k, v, n in COUNT.findall(body)}


def where(pred: object) -> set[str]:
    return {slug for slug, s in SPECS.items() if pred(s)}  # type: ignore[operator]


def test_no_filter_lists_every_exercise(client: Client, alice: User) -> None:
    assert listed(client) == set(SPECS)


@pytest.mark.parametrize("topic", TOPICS)
def test_topic_narrows_to_its_exercises(client: Client, alice: User, topic: str) -> None:
    assert listed(client, topic=topic) == where(lambda s: s.topic == topic)


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_difficulty_narrows(client: Client, alice: User, difficulty: str) -> None:
    assert listed(client, difficulty=difficulty) == where(lambda s: s.difficulty == difficulty)


@pytest.mark.parametrize("ptype", PART_TYPES)
def test_part_type_narrows_to_exercises_with_such_a_part(
        client: Client, alice: User, ptype: str) -> None:
    expected = where(lambda s: any(p.type == ptype for p in s.parts))
    assert listed(client, type=ptype) == expected


def test_filters_combine_and_across_kinds_or_within_one(client: Client, alice: User) -> None:
    two = TOPICS[:2]
    expected = where(lambda s: s.topic in two and s.difficulty == "hard"
                     and any(p.type in ("code", "choice") for p in s.parts))
    assert listed(client, topic=two, difficulty="hard", type=["code", "choice"]) == expected
    assert listed(client, topic=two) == where(lambda s: s.topic in two)


@pytest.mark.parametrize("active", [{}, {"difficulty": "hard"},
                                    {"type": "code", "topic": TOPICS[0]}])
def test_each_count_is_the_length_of_the_list_it_leads_to(
        client: Client, alice: User, active: dict[str, str]) -> None:
    found = counts(client.get("/", active).content.decode())
    kinds = {k for k, _ in found}
    assert kinds == {"topic", "difficulty", "status", "type"}
    assert len(found) == len(TOPICS) + len(DIFFICULTIES) + 4 + len(PART_TYPES)
    for (kind, value), n in found.items():
        # Faceted: a value's count keeps every other kind's filter and replaces its own.
        assert len(listed(client, **{**active, kind: value})) == n, (kind, value)


def test_search_matches_title_and_summary_case_insensitively(
        client: Client, alice: User) -> None:
    title_word = max(next(iter(SPECS.values())).title.split(), key=len)
    needle = title_word.swapcase()
    assert listed(client, q=needle) == where(
        lambda s: needle.casefold() in s.title.casefold()
        or needle.casefold() in s.summary.casefold())
    # A word found only in some summary proves the summaries are searched too.
    word = next(w for s in SPECS.values() for w in s.summary.split()
                if len(w) > 6 and w.isalpha()
                and not any(w.casefold() in t.title.casefold() for t in SPECS.values()))
    expected = where(lambda s: word.casefold() in s.summary.casefold())
    assert expected and listed(client, q=word.upper()) == expected


def test_statuses_from_part_states_and_due_recall_items(client: Client, alice: User) -> None:
    now = timezone.now()
    solved, tried, due, later = (Exercise.objects.get(slug=slug) for slug in sorted(SPECS)[:4])
    PartState.objects.bulk_create(
        [PartState(user=alice, exercise=ex, part_id=p["id"], attempts=1, solved_at=now)
         for ex in (solved, due) for p in ex.parts]
        + [PartState(user=alice, exercise=ex, part_id=ex.parts[0]["id"], attempts=2)
           for ex in (tried, later)])
    # Solved, but one part is due again: due for review wins. A future item is not due yet.
    RecallItem.objects.create(user=alice, exercise=due, part_id=due.parts[0]["id"],
                              reason=RecallItem.Reason.AFTER_SOLUTION, fsrs_card={},
                              due=now - timedelta(hours=1))
    RecallItem.objects.create(user=alice, exercise=later, part_id=later.parts[0]["id"],
                              reason=RecallItem.Reason.WRONG, fsrs_card={},
                              due=now + timedelta(days=3))
    assert listed(client, status="solved") == {solved.slug}
    assert listed(client, status="progress") == {tried.slug, later.slug}
    assert listed(client, status="due") == {due.slug}
    assert listed(client, status="new") == set(SPECS) - {solved.slug, tried.slug, due.slug,
                                                         later.slug}
    assert listed(client, status=["solved", "due"]) == {solved.slug, due.slug}
    body = client.get("/").content.decode()
    found = counts(body)
    assert [found["status", k] for k in ("new", "progress", "solved", "due")] == [
        len(SPECS) - 4, 2, 1, 1]
    assert ">due for review</span>" in body.split(f'id="ex-{due.slug}"')[1].split("</article>")[0]
    # Another user's progress is not alice's.
    bob = User.objects.create_user("bob", password="pw-bob-12345")
    client.force_login(bob)
    assert listed(client, status="new") == set(SPECS)


def test_htmx_request_gets_only_the_results_and_the_counts(client: Client, alice: User) -> None:
    r = client.get("/", {"difficulty": "hard", "view": "list"}, HTTP_HX_REQUEST="true")
    body = r.content.decode()
    assert r.status_code == 200 and "HX-Request" in r["Vary"]
    assert body.lstrip().startswith('<div id="catalog-results"')
    assert "<html" not in body and 'id="catalog-filters"' not in body and "<h1>" not in body
    assert 'class="catalog-list"' in body
    hard_n = len(where(lambda s: s.difficulty == "hard"))
    assert f'<p id="catalog-summary" hx-swap-oob="innerHTML">{hard_n} of {len(SPECS)} exercises' \
        in body
    assert body.count('hx-swap-oob="true"') == len(counts(client.get("/").content.decode()))
    hard = where(lambda s: s.difficulty == "hard")
    assert set(re.findall(r'id="ex-([\w-]+)"', body)) == hard
    # A back button with htmx's history cache gone asks again: that needs the whole page.
    restore = client.get("/", {"difficulty": "hard"}, HTTP_HX_REQUEST="true",
                         HTTP_HX_HISTORY_RESTORE_REQUEST="true").content.decode()
    assert "<html" in restore and 'id="catalog-filters"' in restore


def test_the_form_works_without_javascript_and_keeps_its_state(
        client: Client, alice: User) -> None:
    body = client.get("/", {"topic": TOPICS[0], "q": "kv", "view": "list"}).content.decode()
    form = body.split('id="catalog-filters"', 1)[1].split("</form>", 1)[0]
    assert re.search(r'<form id="catalog-filters"[^>]*method="get" action="/"', body)
    assert 'hx-push-url="true"' in form and 'type="submit"' in form
    assert 'name="q" value="kv"' in form
    assert f'value="{TOPICS[0]}" checked' in form
    assert 'value="list" checked' in form


def test_list_view_has_one_row_per_exercise(client: Client, alice: User) -> None:
    body = client.get("/", {"view": "list"}).content.decode()
    rows = re.findall(r'<tr id="ex-([\w-]+)".*?</tr>', body, re.S)
    assert set(rows) == set(SPECS) and "<article" not in body
    spec = SPECS[sorted(SPECS)[0]]
    row = body.split(f'<tr id="ex-{spec.slug}"', 1)[1].split("</tr>", 1)[0]
    types = ", ".join(t for t in PART_TYPES if any(p.type == t for p in spec.parts))
    for text in (html.escape(spec.title), spec.topic, spec.difficulty, types, ">new</span>"):
        assert text in row, text


def _grow_exercises(user: User, n: int) -> None:
    """n more active exercises, each with a solved part, a tried part and a due item."""
    now = timezone.now()
    parts = [{"id": "a", "type": "number", "points": 1}, {"id": "b", "type": "text", "points": 1}]
    extra = Exercise.objects.bulk_create(
        Exercise(slug=f"extra-{i}", seed=f"x{i % 100}", title=f"Extra {i}", topic="Extra",
                 difficulty="easy", summary="filler", parts=parts) for i in range(n))
    PartState.objects.bulk_create(
        [PartState(user=user, exercise=ex, part_id="a", attempts=1, solved_at=now)
         for ex in extra] + [PartState(user=user, exercise=ex, part_id="b", attempts=3)
                             for ex in extra])
    RecallItem.objects.bulk_create(
        RecallItem(user=user, exercise=ex, part_id="b", reason=RecallItem.Reason.WRONG,
                   fsrs_card={}, due=now - timedelta(minutes=1)) for ex in extra)


def test_query_count_does_not_grow_with_exercises(
        client: Client, alice: User, django_assert_max_num_queries: object) -> None:
    params = {"difficulty": ["easy", "hard"], "status": "due", "view": "list"}
    client.get("/")  # first-request work (sessions, caches) out of the way
    with CaptureQueriesContext(connection) as before:
        client.get("/", params)
    _grow_exercises(alice, 60)
    with CaptureQueriesContext(connection) as after:
        r = client.get("/", params)
    assert len(listed(client, **params)) == 60 and r.status_code == 200
    assert len(after) == len(before), [q["sql"] for q in after.captured_queries]
    with django_assert_max_num_queries(8):  # type: ignore[operator]
        client.get("/", {**params, "view": "cards"}, HTTP_HX_REQUEST="true")


def test_hostile_input_is_cut_escaped_or_ignored(client: Client, alice: User) -> None:
    r = client.get("/", {"q": "<script>alert(1)</script>"})
    body = r.content.decode()
    assert r.status_code == 200 and "<script>alert(1)" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body

    r = client.get("/", {"q": "a" * 10_000})
    body = r.content.decode()
    limit = catalog_filters.MAX_QUERY
    assert r.status_code == 200 and "a" * limit in body and "a" * (limit + 1) not in body

    r = client.get("/", {"topic": ["nope", TOPICS[0]], "difficulty": "impossible",
                         "status": "<b>x</b>", "type": "<img src=x>", "view": "<svg/onload=1>"})
    body = r.content.decode()
    assert r.status_code == 200
    assert "nope" not in body and "<b>x" not in body and "<img src=x" not in body
    assert "<svg/onload" not in body and "were not recognised" in body
    # The known value still filters; the unknown ones are dropped, not a reason to show nothing.
    assert listed(client, topic=["nope", TOPICS[0]], difficulty="impossible") == where(
        lambda s: s.topic == TOPICS[0])


def test_without_a_user_there_is_no_status_filter() -> None:
    with CaptureQueriesContext(connection) as queries:
        entries = catalog_filters.load_entries(None, timezone.now())
    assert len(queries) == 1 and all(e.status is None for e in entries)
    options = catalog_filters.options_for(entries, with_status=False)
    assert "status" not in options
    filters = catalog_filters.parse({"status": ["new"], "difficulty": ["hard"]}, options)
    assert filters.ignored == ("status",) and not filters.chosen["status"]
    facets = catalog_filters.facets(entries, filters, options)
    assert [f.kind for f in facets] == ["topic", "difficulty", "type"]
