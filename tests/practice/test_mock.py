"""The timed mock interview: actions (start, finish, expiry with a clock we pass in) and pages
through the test client (solutions hidden, reveal refused, summary, other users)."""
from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from exercises import registry
from graders.selftest import answer_text
from practice import interview
from practice.actions import NotAllowed
from practice.actions.exercises import assignment_for
from practice.actions.mock_interviews import (
    expire_mock_interviews,
    finish_mock_interview,
    start_mock_interview,
)
from practice.actions.submissions import reveal_solution, submit_answer
from practice.models import Exercise, MockInterview, PartState, Submission, User

pytestmark = pytest.mark.django_db

# The rendered worked-solution block (the page also mentions "worked solutions" in prose).
SOLUTION = '<details class="solution"'
MOCK_SLUGS = {"kv_transfer_disagg", "memory_beyond_kv", "max_concurrency"}


@pytest.fixture
def alice(client: Client) -> User:
    user = User.objects.create_user("alice", password="pw-alice-123")
    client.force_login(user)
    return user


def solve_all_but(user: User, keep: set[str]) -> None:
    now = timezone.now() - timedelta(days=1)
    PartState.objects.bulk_create([
        PartState(user=user, exercise=ex, part_id=p["id"], attempts=1, best_score=1.0,
                  solved_at=now)
        for ex in Exercise.objects.filter(active=True).exclude(slug__in=keep) for p in ex.parts])


def number_part(slug: str) -> str:
    return next(p.id for p in registry.get(slug).parts if p.type == "number")


def reference(user: User, slug: str, part_id: str) -> str:
    spec = registry.get(slug)
    variant = assignment_for(user, Exercise.objects.get(slug=slug)).variant
    solution = registry.solve(spec, registry.params_for(spec, variant))
    return answer_text(spec.part(part_id), solution[part_id])


@pytest.fixture
def running(alice: User) -> MockInterview:
    """Alice's mock on exactly MOCK_SLUGS: everything else is already solved."""
    solve_all_but(alice, MOCK_SLUGS)
    return start_mock_interview(alice)


# --- actions ------------------------------------------------------------------------------

def test_a_mock_has_three_distinct_unsolved_questions_and_45_minutes(alice: User) -> None:
    mock = start_mock_interview(alice, rng=random.Random(5))
    assert len(mock.exercises) == 3 == len(set(mock.exercises))
    assert mock.duration_s == 45 * 60 and mock.finished_at is None
    slugs = set(Exercise.objects.filter(active=True).values_list("slug", flat=True))
    assert set(mock.exercises) <= slugs
    assert interview.running_mock(alice) == mock


def test_start_prefers_unsolved_and_is_reproducible_with_a_seed(alice: User) -> None:
    solve_all_but(alice, MOCK_SLUGS | {"stream_stutter"})
    a = start_mock_interview(alice, rng=random.Random(9))
    assert set(a.exercises) <= MOCK_SLUGS | {"stream_stutter"}
    finish_mock_interview(a)
    b = start_mock_interview(alice, rng=random.Random(9))
    assert a.exercises == b.exercises and a.pk != b.pk


def test_starting_again_while_running_returns_the_same_mock(running: MockInterview,
                                                            alice: User) -> None:
    assert start_mock_interview(alice) == running
    assert MockInterview.objects.count() == 1


def test_expiry_by_time_with_a_clock_we_control(alice: User) -> None:
    t0 = timezone.now()
    mock = start_mock_interview(alice, now=t0)
    ex = Exercise.objects.get(slug=mock.exercises[0])
    almost = t0 + timedelta(minutes=44, seconds=59)
    assert interview.solutions_hidden_for(alice, ex, now=almost)
    assert mock.remaining_s(almost) == 1
    assert expire_mock_interviews(alice, now=almost) == 0
    late = t0 + timedelta(minutes=46)
    # Past the deadline the gate already lets solutions through, before any write...
    assert not interview.solutions_hidden_for(alice, ex, now=late)
    assert interview.running_mock(alice, now=late) is None
    # ...and the read that notices records the end at the deadline, not at the read.
    assert expire_mock_interviews(alice, now=late) == 1
    mock.refresh_from_db()
    assert mock.finished_at == t0 + timedelta(minutes=45) and mock.ended_by == "time"
    assert expire_mock_interviews(alice, now=late) == 0


def test_finish_early_is_recorded_once(alice: User) -> None:
    t0 = timezone.now()
    mock = start_mock_interview(alice, now=t0)
    finish_mock_interview(mock, now=t0 + timedelta(minutes=10))
    assert mock.finished_at == t0 + timedelta(minutes=10) and mock.ended_by == "finish"
    finish_mock_interview(mock, now=t0 + timedelta(minutes=20))
    mock.refresh_from_db()
    assert mock.finished_at == t0 + timedelta(minutes=10)


def test_finish_after_the_deadline_ends_by_time(alice: User) -> None:
    t0 = timezone.now()
    mock = start_mock_interview(alice, now=t0)
    finish_mock_interview(mock, now=t0 + timedelta(hours=2))
    assert mock.ended_by == "time" and mock.finished_at == mock.deadline


def test_a_new_mock_can_start_once_the_old_one_ran_out(alice: User) -> None:
    t0 = timezone.now() - timedelta(hours=1)
    old = start_mock_interview(alice, now=t0)
    new = start_mock_interview(alice)
    assert new.pk != old.pk
    old.refresh_from_db()
    assert old.ended_by == "time"


def test_summary_counts_parts_attempts_and_time_during_the_mock(running: MockInterview,
                                                                 alice: User) -> None:
    t0 = running.started_at
    first, second = "kv_transfer_disagg", "memory_beyond_kv"
    p1, p2 = number_part(first), number_part(second)
    ex1 = Exercise.objects.get(slug=first)

    def answer(slug: str, part_id: str, text: str, at: timedelta, mode: str = "submit") -> None:
        sub = submit_answer(alice, Exercise.objects.get(slug=slug), part_id, text, mode)
        Submission.objects.filter(pk=sub.pk).update(queued_at=t0 + at)

    answer(first, p1, "1", -timedelta(minutes=5))  # before the mock: not counted
    answer(first, p1, "1", timedelta(minutes=2))  # wrong
    answer(first, p1, reference(alice, first, p1), timedelta(minutes=7))  # right
    answer(second, p2, "1", timedelta(minutes=10))  # wrong
    Submission.objects.create(user=alice, exercise=ex1, part_id=p1, part_type="number",
                              variant="1", answer="?", status="graded", verdict="invalid",
                              score=0.0, queued_at=t0)  # unreadable: no attempt
    Submission.objects.filter(verdict="invalid").update(queued_at=t0 + timedelta(minutes=8))
    finish_mock_interview(running, now=t0 + timedelta(minutes=12))

    rows = {q.exercise.slug: q for q in interview.summarize(running)}
    assert [q.exercise.slug for q in interview.summarize(running)] == running.exercises
    assert (rows[first].solved, rows[first].attempts, rows[first].time_used_s) == (1, 2, 7 * 60)
    assert (rows[second].solved, rows[second].attempts, rows[second].time_used_s) == (0, 1, 3 * 60)
    third = rows["max_concurrency"]
    assert (third.solved, third.attempts, third.time_used_s) == (0, 0, 0)
    assert rows[first].time_used == "7 min" and interview.human_duration(125) == "2 min 05 s"
    assert rows[first].parts == len(registry.get(first).parts)


# --- pages --------------------------------------------------------------------------------

def test_start_from_the_catalog_opens_the_mock_page(client: Client, alice: User) -> None:
    r = client.post("/mock/start/")
    mock = MockInterview.objects.get(user=alice)
    assert r.status_code == 302 and r["Location"] == f"/mock/{mock.pk}/"
    body = client.get(r["Location"]).content.decode()
    assert "data-countdown" in body and 'data-remaining-s="2700"' in body and ">45:00<" in body
    for slug in mock.exercises:
        assert f'href="/ex/{slug}/"' in body
    assert SOLUTION not in body
    catalog = client.get("/").content.decode()
    assert f'href="/mock/{mock.pk}/"' in catalog and "in your mock" in catalog


def test_start_needs_a_post_and_a_login(client: Client) -> None:
    assert client.get("/mock/start/").status_code in (302, 405)
    r = client.post("/mock/start/")
    assert r.status_code == 302 and "/login/" in r["Location"]
    assert not MockInterview.objects.exists()


def test_solutions_stay_hidden_during_the_mock_even_after_a_correct_answer(
        client: Client, alice: User, running: MockInterview) -> None:
    slug = "kv_transfer_disagg"
    part = number_part(slug)
    r = client.post(f"/ex/{slug}/{part}/submit/", {"answer": reference(alice, slug, part)},
                    HTTP_HX_REQUEST="true")
    body = r.content.decode()
    assert "correct" in body and SOLUTION not in body
    assert "worked solutions stay hidden" in body and "Give up" not in body
    assert PartState.objects.get(user=alice, exercise__slug=slug, part_id=part).solved_at
    page = client.get(f"/ex/{slug}/").content.decode()
    assert SOLUTION not in page
    assert 'class="mock-banner"' in page and f'href="/mock/{running.pk}/"' in page
    assert "data-countdown" in page
    # The htmx status redraw takes the same gate as the page.
    sub = Submission.objects.filter(user=alice, part_id=part).latest("queued_at")
    redraw = client.get(f"/submissions/{sub.pk}/status/", HTTP_HX_REQUEST="true")
    assert SOLUTION not in redraw.content.decode()
    # An exercise outside the mock behaves as usual: solved there means shown, no banner.
    other = next(s for s in sorted(registry.load_all()) if s not in MOCK_SLUGS)
    outside = client.get(f"/ex/{other}/").content.decode()
    assert SOLUTION in outside and "mock-banner" not in outside


def test_reveal_is_refused_during_the_mock_with_a_clear_message(
        client: Client, alice: User, running: MockInterview) -> None:
    slug = "memory_beyond_kv"
    part = number_part(slug)
    client.post(f"/ex/{slug}/{part}/submit/", {"answer": "1"})
    r = client.post(f"/ex/{slug}/{part}/reveal/", HTTP_HX_REQUEST="true")
    body = r.content.decode()
    assert r.status_code == 200 and SOLUTION not in body
    assert "worked solutions stay hidden" in body
    r = client.post(f"/ex/{slug}/{part}/reveal/", follow=True)
    body = r.content.decode()
    assert r.redirect_chain == [(f"/ex/{slug}/#part-{part}", 302)]
    assert "Not now: worked solutions stay hidden until your mock interview ends." in body
    assert SOLUTION not in body
    assert PartState.objects.get(user=alice, exercise__slug=slug, part_id=part).revealed_at is None
    # The action refuses on its own, whatever calls it.
    with pytest.raises(NotAllowed, match="mock interview"):
        reveal_solution(alice, Exercise.objects.get(slug=slug), part)
    # Once the mock is over, giving up works again.
    finish_mock_interview(running)
    client.post(f"/ex/{slug}/{part}/reveal/")
    assert PartState.objects.get(user=alice, exercise__slug=slug, part_id=part).revealed_at


def test_finish_shows_the_summary_and_then_the_solutions(
        client: Client, alice: User, running: MockInterview) -> None:
    slug = "kv_transfer_disagg"
    part = number_part(slug)
    client.post(f"/ex/{slug}/{part}/submit/", {"answer": "1"})
    client.post(f"/ex/{slug}/{part}/submit/", {"answer": reference(alice, slug, part)})
    r = client.post(f"/mock/{running.pk}/finish/", follow=True)
    body = r.content.decode()
    assert r.redirect_chain == [(f"/mock/{running.pk}/", 302)]
    assert "Mock interview summary" in body and "finished by you" in body
    row = body.split(f'data-slug="{slug}"', 1)[1].split("</tr>", 1)[0]
    n = len(registry.get(slug).parts)
    assert f'class="solved">1/{n}' in row and 'class="attempts">2<' in row
    assert SOLUTION in body  # the solved part's solution, on the summary itself
    assert "Give up and show the solution" in body  # the unsolved ones, on request
    page = client.get(f"/ex/{slug}/").content.decode()
    assert SOLUTION in page and "mock-banner" not in page


def test_the_mock_page_ends_the_mock_when_read_after_the_clock_ran_out(
        client: Client, alice: User, running: MockInterview) -> None:
    MockInterview.objects.filter(pk=running.pk).update(
        started_at=timezone.now() - timedelta(minutes=50))
    body = client.get(f"/mock/{running.pk}/").content.decode()
    running.refresh_from_db()
    assert running.ended_by == "time" and running.finished_at == running.deadline
    assert "Mock interview summary" in body and "ended when the clock ran out" in body
    assert "after 45 min (of 45 min)" in body  # the whole clock, not the time until the read


def test_another_users_mock_is_not_visible_and_does_not_hide_anything(
        client: Client, alice: User) -> None:
    bob = User.objects.create_user("bob", password="pw-bob-12345")
    theirs = start_mock_interview(bob)
    assert client.get(f"/mock/{theirs.pk}/").status_code == 404
    assert client.post(f"/mock/{theirs.pk}/finish/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.finished_at is None
    assert f"/mock/{theirs.pk}/" not in client.get("/").content.decode()
    ex = Exercise.objects.get(slug=theirs.exercises[0])
    assert not interview.solutions_hidden_for(alice, ex)
    assert "mock-banner" not in client.get(f"/ex/{ex.slug}/").content.decode()
