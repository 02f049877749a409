"""A real Celery worker process grades a code submission through the bwrap sandbox, over real
Redis and over the embedded (filesystem) broker."""
from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import transaction

from exercises import mutants, registry
from practice.actions.submissions import submit_answer
from practice.models import Exercise, Submission, User

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

SLUG = "stop_strings_stream"


def wait_finished(pk: int, timeout: float = 90) -> Submission:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sub = Submission.objects.get(pk=pk)
        if sub.finished:
            return sub
        time.sleep(0.1)
    raise AssertionError(f"submission {pk} not graded in {timeout} s: {sub.status}")


def submit_code(user: User, source: str, mode: str = "submit") -> Submission:
    ex = Exercise.objects.get(slug=SLUG)
    part = next(p for p in registry.get(SLUG).parts if p.type == "code")
    with transaction.atomic():
        return submit_answer(user, ex, part.id, source, mode)


@pytest.mark.parametrize("celery_broker", ["redis", "embedded"], indirect=True)
def test_worker_grades_code_through_the_sandbox(celery_broker: Any, start_worker: Any) -> None:
    start_worker()
    user = User.objects.create_user("w", password="pw-w-12345")
    reference = (registry.get(SLUG).code_dir / "reference.py").read_text()
    mutant = mutants.load(registry.get(SLUG).code_dir)[0].source

    good = wait_finished(submit_code(user, reference).pk)
    assert good.status == "graded" and good.score == 1.0, good.result
    assert good.deliveries == 1
    assert good.result["extra"]["sandbox"]["backend"] == "bwrap"

    bad = wait_finished(submit_code(user, mutant).pk)
    assert bad.status == "graded" and bad.score is not None and bad.score < 1.0
    assert any(not c["passed"] for c in bad.result["checks"])

    run = wait_finished(submit_code(user, reference, mode="run").pk)
    assert run.status == "graded" and run.score == 1.0
    assert run.started_at is not None and run.finished_at is not None
