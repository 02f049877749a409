"""A submission that kills its worker child every time it is graded is stopped after
ROOFLINE_MAX_DELIVERIES deliveries with an error verdict, not retried for ever; the worker
survives (prefork replaces the child) and goes on grading everyone else.

The poison is injected by tests/reliability/poison_app.py (see why there), over Redis and over
the embedded broker, whose redelivery paths differ.
"""
from __future__ import annotations

import time

import pytest

from practice.actions.submissions import submit_answer
from practice.models import Exercise, PartState, Submission, User
from tests.reliability.conftest import (
    CODE_SLUG,
    Recovery,
    SiteFactory,
    code_reference,
    wait_until,
)
from tests.reliability.poison_app import POISON_MARK

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services,
              pytest.mark.reliability, pytest.mark.timed]

RECOVERY = Recovery(
    # Each delivery after the first waits for the sweeper, so both are short here: the running
    # grace is 5 s (10x a code grade here; only the bystander's grade could be caught by it,
    # which would cost a redelivery, not a second result) and the sweeper runs every 2 s.
    sweep_period_s=2.0,
    running_grace_s=5,
    max_deliveries=3,  # the production default
)
# After each kill the worker notices the dead child and prefork starts a new one (Django is
# loaded already; the sandbox probe runs again). Over Redis that takes a second or two; on the
# embedded broker the worker runs without an event loop and billiard first waits Celery's
# worker_lost_wait (10 s) for a result the child might have sent before dying.
CHILD_RESTART_BUDGET_S = 15.0


@pytest.mark.parametrize("broker", ["redis", "embedded"])
def test_poison_submission_is_stopped_after_max_deliveries(
        broker: str, request: pytest.FixtureRequest) -> None:
    fixture = "redis_site" if broker == "redis" else "embedded_site"
    make: SiteFactory = request.getfixturevalue(fixture)
    site = make(RECOVERY)
    site.app = "tests.reliability.poison_app"
    beat = site.start_beat()
    worker = site.start_worker()

    exercise = Exercise.objects.get(slug=CODE_SLUG)
    part_id, source = code_reference()
    victim = User.objects.create_user("poisoner", password="pw-poison-12345")
    bystander = User.objects.create_user("bystander", password="pw-poison-12345")
    t0 = time.monotonic()
    poison = submit_answer(victim, exercise, part_id, f"{source}\n{POISON_MARK}\n")
    good = submit_answer(bystander, exercise, part_id, source)

    # Delivery k+1 comes when the sweeper finds delivery k's row running past the grace.
    n = RECOVERY.max_deliveries
    bound_s = n * (RECOVERY.running_grace_s + RECOVERY.sweep_period_s + CHILD_RESTART_BUDGET_S)
    # The deadline is a liveness bound only (it is stopped, not retried for ever; the counts
    # below say how). How long the three child restarts take depends on what else the two cores
    # run: alone it stops in ~17 s over Redis, and once, beside the outage tests, in 73 s.
    wait_until(lambda: Submission.objects.get(pk=poison.pk).finished, bound_s * 2,
               "the poison stopped", site.logs, step=0.2)
    stopped_s = time.monotonic() - t0
    poison.refresh_from_db()
    wait_until(lambda: Submission.objects.get(pk=good.pk).finished, 60, "the bystander graded",
               site.logs)
    good.refresh_from_db()
    child_deaths = worker.text().count("exited with 'signal 9 (SIGKILL)'")

    # Not retried for ever: the sweeper takes up only queued and running rows, so nothing
    # happens to it over the next sweeps.
    sweeps = beat.text().count("Sending due task")
    wait_until(lambda: beat.text().count("Sending due task") >= sweeps + 3,
               10 * RECOVERY.sweep_period_s, "three more sweeps", site.logs)
    time.sleep(1)  # the last sweep's message reaches the worker and runs
    after = Submission.objects.get(pk=poison.pk)
    print(f"\npoison ({broker}): stopped {stopped_s:.1f} s after submitting (bound "
          f"{bound_s:.0f} s = {n} x (running grace {RECOVERY.running_grace_s} + sweep period "
          f"{RECOVERY.sweep_period_s:.0f} + child restart {CHILD_RESTART_BUDGET_S:.0f})), "
          f"{child_deaths} pool children killed, deliveries {poison.deliveries}; "
          f"the bystander graded in {good.run_s:.2f} s")

    assert poison.status == Submission.Status.ERROR and poison.verdict == "error"
    assert poison.deliveries == n + 1  # n crashes, then the claim that stops it
    assert f"stopped after {n} tries" in poison.result["feedback"]
    assert child_deaths == n
    assert (after.status, after.deliveries, after.finished_at) == (
        poison.status, poison.deliveries, poison.finished_at)
    # An error uses no attempt; the bystander's answer was graded normally, once.
    assert not PartState.objects.filter(user=victim, attempts__gt=0).exists()
    assert good.status == Submission.Status.GRADED and good.score == 1.0
    assert PartState.objects.get(user=bystander, exercise=exercise, part_id=part_id).attempts == 1
    assert worker.alive()
