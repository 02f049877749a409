"""The catalog's practice entries: the pure pickers (seeded), the random-question view, and what
each catalog item shows."""
from __future__ import annotations

import random
from collections import Counter

import pytest
from django.test import Client
from django.utils import timezone

from practice import interview
from practice.interview import Standing
from practice.models import Exercise, MockInterview, PartState, User

STANDINGS = [Standing("c", 3, 3), Standing("a", 2, 0), Standing("b", 4, 1), Standing("d", 1, 1),
             Standing("e", 0, 0)]


def test_pick_unsolved_is_uniform_over_exercises_with_an_unsolved_part() -> None:
    rng = random.Random(1234)
    counts = Counter(interview.pick_unsolved(STANDINGS, rng) for _ in range(6000))
    assert set(counts) == {"a", "b"}  # c, d fully solved; e has no parts
    assert abs(counts["a"] - counts["b"]) < 300  # 3000 ± a few standard deviations (≈39)


def test_pick_unsolved_is_reproducible_and_independent_of_row_order() -> None:
    seq = random.Random(42)
    other = random.Random(42)
    assert ([interview.pick_unsolved(STANDINGS, seq) for _ in range(20)]
            == [interview.pick_unsolved(STANDINGS[::-1], other) for _ in range(20)])


def test_pick_unsolved_says_none_when_nothing_is_left() -> None:
    assert interview.pick_unsolved([Standing("a", 2, 2), Standing("z", 0, 0)], random.Random(0)) is None
    assert interview.pick_unsolved([], random.Random(0)) is None


def test_mock_questions_prefer_unsolved_and_top_up_with_solved() -> None:
    many = [Standing(f"x{i}", 3, 0) for i in range(10)] + [Standing("done", 2, 2)]
    for seed in range(50):
        picked = interview.pick_mock_questions(many, random.Random(seed))
        assert len(picked) == 3 == len(set(picked)) and "done" not in picked
    few = [Standing("a", 2, 0), Standing("s1", 1, 1), Standing("s2", 1, 1), Standing("s3", 1, 1)]
    picked = interview.pick_mock_questions(few, random.Random(3))
    assert picked[0] == "a" and len(set(picked)) == 3
    assert interview.pick_mock_questions([Standing("a", 1, 0)], random.Random(0)) == ["a"]
    assert interview.pick_mock_questions([], random.Random(0)) == []


# --- through the test client --------------------------------------------------------------

@pytest.fixture
def alice(client: Client) -> User:
    user = User.objects.create_user("alice", password="pw-alice-123")
    client.force_login(user)
    return user


def solve_all_but(user: User, keep: set[str]) -> None:
    """Mark every part of every active exercise solved, except the exercises in `keep`."""
    now = timezone.now()
    PartState.objects.bulk_create([
        PartState(user=user, exercise=ex, part_id=p["id"], attempts=1, best_score=1.0,
                  solved_at=now)
        for ex in Exercise.objects.filter(active=True).exclude(slug__in=keep) for p in ex.parts])


@pytest.mark.django_db
def test_random_question_goes_to_an_unsolved_exercise_and_changes_nothing(
        client: Client, alice: User) -> None:
    keep = {"kv_transfer_disagg", "memory_beyond_kv"}
    solve_all_but(alice, keep)
    states = PartState.objects.count()
    seen = set()
    for _ in range(30):
        r = client.get("/practice/random/")
        assert r.status_code == 302
        seen.add(r["Location"])
    assert seen == {f"/ex/{slug}/" for slug in keep}
    assert PartState.objects.count() == states and not MockInterview.objects.exists()


@pytest.mark.django_db
def test_random_question_with_nothing_left_says_so_kindly(client: Client, alice: User) -> None:
    solve_all_but(alice, set())
    r = client.get("/practice/random/", follow=True)
    assert r.redirect_chain == [("/", 302)]
    assert "You have solved every part of every exercise" in r.content.decode()


@pytest.mark.django_db
def test_random_question_needs_a_login(client: Client) -> None:
    r = client.get("/practice/random/")
    assert r.status_code == 302 and "/login/" in r["Location"]


@pytest.mark.django_db
def test_catalog_shows_difficulty_minutes_and_state_of_each_exercise(
        client: Client, alice: User) -> None:
    solved = Exercise.objects.get(slug="kv_transfer_disagg")
    tried = Exercise.objects.get(slug="memory_beyond_kv")
    PartState.objects.bulk_create(
        [PartState(user=alice, exercise=solved, part_id=p["id"], attempts=1,
                   solved_at=timezone.now()) for p in solved.parts]
        + [PartState(user=alice, exercise=tried, part_id=tried.parts[0]["id"], attempts=2)])
    body = client.get("/").content.decode()
    for ex in Exercise.objects.filter(active=True):
        item = body.split(f'id="ex-{ex.slug}"', 1)[1].split("</article>", 1)[0]
        assert f"{ex.difficulty} · ~{ex.minutes} min" in item
        state = ("solved" if ex == solved else "in progress" if ex == tried else "new")
        assert f">{state}</span>" in item, ex.slug
    n = len(solved.parts)
    assert f"{n}/{n} parts solved" in body
    assert 'href="/practice/random/"' in body and "Practice a random unsolved question" in body
    assert 'action="/mock/start/"' in body
