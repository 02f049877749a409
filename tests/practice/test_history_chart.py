"""The data behind the charts, through Django's test client: the history page's per-topic
progress (json_script) and the exercise page's evidence plot placeholders."""
from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from typing import Any

import pytest
from django.test import Client

from exercises import registry
from graders.selftest import answer_text
from practice.actions.exercises import assignment_for
from practice.actions.submissions import reveal_solution, submit_answer
from practice.models import Exercise, User

pytestmark = pytest.mark.django_db

SLUG = "kv_transfer_disagg"  # any exercise with at least two inline-graded parts


@pytest.fixture
def alice(client: Client) -> User:
    user = User.objects.create_user("alice", password="pw-alice-123")
    client.force_login(user)
    return user


def progress_data(body: str) -> list[dict[str, Any]]:
    m = re.search(r'<script id="progress-data" type="application/json">(.*?)</script>', body,
                  re.S)
    assert m, "no json_script element for the progress chart"
    return json.loads(m.group(1))


def expected_totals() -> dict[str, int]:
    parts: dict[str, int] = defaultdict(int)
    for spec in registry.load_all().values():
        parts[spec.topic] += len(spec.parts)
    return dict(parts)


def test_history_has_every_topic_with_nothing_solved(client: Client, alice: User) -> None:
    r = client.get("/history/")
    body = r.content.decode()
    assert r.status_code == 200
    rows = progress_data(body)
    assert [row["topic"] for row in rows] == sorted(expected_totals())
    assert {row["topic"]: row["parts"] for row in rows} == expected_totals()
    assert all(row["solved"] == 0 and row["tried"] == 0 for row in rows)
    # The chart is drawn by charts.js from the data, not by an inline script.
    assert 'data-progress-chart="progress-data"' in body
    assert "charts.js" in body
    assert not re.search(r"<script(?![^>]*(src=|application/json))[^>]*>", body)


def test_a_solved_part_and_a_wrong_one_show_in_their_topic(client: Client, alice: User) -> None:
    spec = registry.get(SLUG)
    ex = Exercise.objects.get(slug=SLUG)
    inline = [p for p in spec.parts if p.type == "number"]
    assert len(inline) >= 2
    solution = registry.solve(spec, registry.params_for(
        spec, assignment_for(alice, ex).variant))
    submit_answer(alice, ex, inline[0].id, answer_text(inline[0], solution[inline[0].id]))
    ref = solution[inline[1].id]
    wrong = float(getattr(ref, "value", ref)) * 7 + 1  # far outside any tolerance
    sub = submit_answer(alice, ex, inline[1].id, f"{wrong:.12g} {inline[1].unit}".strip())
    assert sub.score is not None and sub.score < 1

    rows = {row["topic"]: row for row in progress_data(client.get("/history/").content.decode())}
    assert rows[spec.topic] == {"topic": spec.topic, "parts": expected_totals()[spec.topic],
                                "solved": 1, "tried": 1}
    for topic, row in rows.items():
        if topic != spec.topic:
            assert row["solved"] == 0 and row["tried"] == 0
    # Another student's progress is not mixed in.
    bob = User.objects.create_user("bob", password="pw-bob-12345")
    other = Client()
    other.force_login(bob)
    assert all(row["solved"] == 0 for row in progress_data(other.get("/history/").content.decode()))


def test_giving_up_counts_as_tried(client: Client, alice: User) -> None:
    spec = registry.get(SLUG)
    reveal_solution(alice, Exercise.objects.get(slug=SLUG), spec.parts[0].id)
    rows = {row["topic"]: row for row in progress_data(client.get("/history/").content.decode())}
    assert rows[spec.topic]["tried"] == 1 and rows[spec.topic]["solved"] == 0


def test_exercise_page_marks_each_drawable_evidence(client: Client, alice: User) -> None:
    for slug, spec in sorted(registry.load_all().items()):
        body = client.get(f"/ex/{slug}/").content.decode()
        ex = Exercise.objects.get(slug=slug)
        found = registry.evidence(spec, registry.params_for(
            spec, assignment_for(alice, ex).variant))
        plots = re.findall(r'<div class="evidence-plot" ([^>]*)>', body)
        drawable = {n: ev for n, ev in found.items() if ev.kind in ("series", "trace")}
        assert len(plots) == len(drawable), slug
        for attrs in plots:
            a = dict(re.findall(r'([\w-]+)="([^"]*)"', attrs))
            name = a["data-evidence-plot"]
            assert a["data-kind"] == drawable[name].kind
            assert html.unescape(a["data-src"]) == f"/ex/{slug}/evidence/{name}/"
        # charts.js only where there is something to draw: evidence, or a kernel part whose
        # GPU timing is drawn on a roofline.
        kernel = any(p.type == "kernel" for p in spec.parts)
        assert ("charts.js" in body) == (bool(found) or kernel), slug
