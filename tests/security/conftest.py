"""Fixtures for the security tests: a fresh cache per test, and a small cohort with answers
(so instructors' pages show their forms). Helpers are in tests/security/support.py."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone

from practice.actions.cohorts import create_cohort, join_cohort
from practice.actions.exercises import assignment_for
from practice.actions.submissions import submit_answer
from practice.models import Exercise, Submission, User
from tests.security.support import People

SLUG, TEXT_PART, CODE_PART = "kv_page_ledger", "fix", "ledger"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Log-in counters live in the cache (LocMem under test settings): no test sees another's."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def people(db: Any) -> People:
    """A student in an instructor's cohort, with a graded text answer and a graded code answer:
    enough for the review queue, the attempt page, its comment/rubric/override forms."""
    student = User.objects.create_user("ada", password="pw-ada-12345")
    instructor = User.objects.create_user("inst", password="pw-inst-12345", is_instructor=True)
    cohort = create_cohort(instructor, "Spring")
    join_cohort(student, cohort.join_code)
    ex = Exercise.objects.get(slug=SLUG)
    text_sub = submit_answer(student, ex, TEXT_PART, "Admission counts the prompt only.")
    now = timezone.now()
    code_sub = Submission.objects.create(
        user=student, exercise=ex, part_id=CODE_PART, part_type="code",
        variant=assignment_for(student, ex).variant,
        answer="def ledger(pool):\n    return sum(pool)\n", status="graded", score=0.5,
        verdict="partial", started_at=now, finished_at=now,
        result={"score": 0.5, "verdict": "partial", "feedback": "", "checks": []})
    return People(student, instructor, cohort.join_code, text_sub, code_sub)
