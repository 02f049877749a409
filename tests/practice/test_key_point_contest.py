"""Contesting the automatic reading of a text answer's key point: who may, which points, and
where it lands (the head of the instructor's review queue)."""
from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from graders.base import InvalidAnswer
from practice import grading
from practice.actions import NotAllowed
from practice.actions.cohorts import create_cohort, join_cohort
from practice.actions.reviews import override_score
from practice.actions.submissions import contest_key_point, submit_answer
from practice.models import Cohort, Exercise, KeyPointContest, Submission, User
from practice.stats import exercise_stats
from practice.views.review import queue_submissions

pytestmark = pytest.mark.django_db

SLUG, PART = "batch1_gap_trace", "what_to_fix"
PARTIAL = ("The GPU is fine, it spends most of the step waiting on the host. I would use CUDA "
           "graphs to get rid of the launch overhead inside the step.")


def answered(user: User, answer: str = PARTIAL) -> Submission:
    sub = submit_answer(user, Exercise.objects.get(slug=SLUG), PART, answer)
    assert sub.status == Submission.Status.QUEUED  # text parts are read on the worker
    grading.grade_submission(sub.pk)
    sub.refresh_from_db()
    return sub


def statuses(sub: Submission) -> list[str]:
    return [p["status"] for p in sub.result["extra"]["automatic"]["points"]]


@pytest.fixture
def people(db: Any) -> tuple[User, User, User]:
    instructor = User.objects.create_user("prof", password="pw-prof-123", is_instructor=True)
    ada = User.objects.create_user("ada", password="pw-ada-123")
    bob = User.objects.create_user("bob", password="pw-bob-123")
    cohort = create_cohort(instructor, "Spring")
    join_cohort(ada, cohort.join_code)
    join_cohort(bob, cohort.join_code)
    return instructor, ada, bob


def test_a_contested_answer_heads_the_queue(people: tuple[User, User, User]) -> None:
    instructor, ada, bob = people
    earlier = answered(bob)
    mine = answered(ada)
    assert statuses(mine) == ["covered", "missing", "covered", "missing", "missing", "missing"]
    assert list(queue_submissions(instructor)) == [earlier, mine]
    contest = contest_key_point(ada, mine.pk, 1)
    assert (contest.status, contest.sentence) == ("missing", mine.result["extra"]["automatic"]
                                                  ["points"][1]["sentence"])
    assert contest_key_point(ada, mine.pk, 1) == contest  # twice is one contest
    assert list(queue_submissions(instructor)) == [mine, earlier]
    page = Client()
    page.force_login(instructor)
    assert "contested: key point 2" in page.get(reverse("review_queue")).content.decode()


@pytest.mark.parametrize("why", ["covered", "someone else's", "no such point", "reviewed"])
def test_what_cannot_be_contested(people: tuple[User, User, User], why: str) -> None:
    instructor, ada, bob = people
    sub = answered(ada)
    user, point = {"covered": (ada, 0), "someone else's": (bob, 1),
                   "no such point": (ada, 6), "reviewed": (ada, 1)}[why]
    if why == "reviewed":
        override_score(instructor, sub, 0.5, "Good start; say what the fix buys.")
    with pytest.raises(NotAllowed):
        contest_key_point(user, sub.pk, point)
    assert not KeyPointContest.objects.exists()


@pytest.mark.parametrize(("answer", "message"), [
    ("x" * 5001, "too long"), ("a bell \x07 rings", "control"), ("   ", "empty"),
])
def test_unreadable_text_is_refused_before_it_is_queued(people: tuple[User, User, User],
                                                        answer: str, message: str) -> None:
    _, ada, _ = people
    with pytest.raises(InvalidAnswer, match=message):
        submit_answer(ada, Exercise.objects.get(slug=SLUG), PART, answer)
    assert not Submission.objects.exists()


def test_the_statistics_page_lists_the_key_points_a_cohort_misses_most(
        people: tuple[User, User, User]) -> None:
    instructor, ada, bob = people
    answered(ada, "Some first thoughts about the step.")
    answered(ada)  # ada's latest answer counts, not her first
    answered(bob, PARTIAL + " A faster GPU would close the gap.")
    cohort = Cohort.objects.get()
    part = next(p for p in exercise_stats(cohort, Exercise.objects.get(slug=SLUG)).parts
                if p.part_id == PART)
    shares = {k.index: (k.answers, k.missing, k.contradicted) for k in part.key_points}
    assert shares[0] == (2, 0, 0) and shares[2] == (2, 0, 0)  # both made these
    assert shares[5] == (2, 1, 1)  # ada missed it, bob said the opposite
    not_made = [k.not_made for k in part.key_points]  # the most often not made first
    assert not_made == sorted(not_made, reverse=True) and not_made[0] == 2
    assert {k.index for k in part.key_points[-2:]} == {0, 2}
    page = Client()
    page.force_login(instructor)
    html = page.get(reverse("exercise_stats", args=[cohort.pk, SLUG])).content.decode()
    assert 'id="key-points-what_to_fix"' in html and "Key points the cohort misses most" in html
