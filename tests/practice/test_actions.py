"""State changes: inline grading, invalid answers, claiming, recording, the sweeper, poison."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from exercises import registry
from graders.base import GradeResult, InvalidAnswer
from graders.selftest import answer_text
from practice import grading
from practice.actions import publish
from practice.actions.exercises import assignment_for, sync_exercises
from practice.actions.publish import enqueue
from practice.actions.submissions import submit_answer
from practice.grading import claim_submission, record_result, requeue_stuck
from practice.models import Exercise, PartState, Submission, User

pytestmark = pytest.mark.django_db


@pytest.fixture
def student() -> User:
    return User.objects.create_user("alice", password="pw-alice-123")


def _first(spec_slug: str, part_type: str) -> tuple[Exercise, Any]:
    spec = registry.get(spec_slug)
    part = next(p for p in spec.parts if p.type == part_type)
    return Exercise.objects.get(slug=spec_slug), part


def _reference(user: User, ex: Exercise, part_id: str) -> str:
    spec = registry.get(ex.slug)
    variant = assignment_for(user, ex).variant
    solution = registry.solve(spec, registry.params_for(spec, variant))
    return answer_text(spec.part(part_id), solution[part_id])


def test_exercises_are_synced_on_migrate() -> None:
    slugs = set(Exercise.objects.filter(active=True).values_list("slug", flat=True))
    assert slugs == set(registry.load_all())


def test_sync_deactivates_a_removed_folder() -> None:
    Exercise.objects.create(slug="gone", seed="Q01", title="Gone", topic="x", difficulty="easy")
    report = sync_exercises()
    assert report.deactivated == 1
    assert not Exercise.objects.get(slug="gone").active


def test_a_number_part_is_graded_inline_and_counts(student: User) -> None:
    ex, part = _first("kv_transfer_disagg", "number")
    sub = submit_answer(student, ex, part.id, _reference(student, ex, part.id))
    assert sub.status == Submission.Status.GRADED and sub.score == 1.0
    state = PartState.objects.get(user=student, exercise=ex, part_id=part.id)
    assert state.attempts == 1 and state.solved_at is not None


def test_an_invalid_answer_is_rejected_and_uses_no_attempt(student: User) -> None:
    ex, part = _first("kv_transfer_disagg", "number")
    with pytest.raises(InvalidAnswer):
        submit_answer(student, ex, part.id, "two point seven gigabytes please")
    assert not Submission.objects.exists()
    assert not PartState.objects.filter(user=student, attempts__gt=0).exists()


def test_a_hostile_formula_is_rejected_in_the_request(student: User) -> None:
    ex, part = _first("utilisation_rule", "expression")
    with pytest.raises(InvalidAnswer):
        submit_answer(student, ex, part.id, "__import__('os').system('id')")
    assert not Submission.objects.exists()


def test_a_code_part_is_queued_on_commit(student: User, monkeypatch: pytest.MonkeyPatch,
                                         django_capture_on_commit_callbacks: Any) -> None:
    sent: list[tuple[int, str]] = []
    monkeypatch.setattr(publish, "enqueue", lambda pk, queue="grade": sent.append((pk, queue)))
    ex, part = _first("stop_strings_stream", "code")
    with django_capture_on_commit_callbacks(execute=True):
        sub = submit_answer(student, ex, part.id, "print('hi')\n")
    assert sub.status == Submission.Status.QUEUED
    assert sent == [(sub.pk, "grade")]


def _queued(student: User) -> Submission:
    ex, part = _first("stop_strings_stream", "code")
    assignment_for(student, ex)
    return Submission.objects.create(user=student, exercise=ex, part_id=part.id,
                                     part_type="code", variant="canonical", answer="x = 1\n")


def test_a_submission_is_claimed_once(student: User) -> None:
    sub = _queued(student)
    assert claim_submission(sub.pk) is not None
    assert claim_submission(sub.pk) is None  # a redelivered message does nothing
    sub.refresh_from_db()
    assert sub.status == Submission.Status.RUNNING and sub.deliveries == 1


def test_a_result_is_recorded_once(student: User) -> None:
    sub = _queued(student)
    claim_submission(sub.pk)
    result = GradeResult(score=1.0, verdict="correct", feedback="ok")
    assert record_result(sub.pk, result) is True
    assert record_result(sub.pk, result) is False
    state = PartState.objects.get(user=student, part_id=sub.part_id)
    assert state.attempts == 1


def test_a_run_uses_no_attempt(student: User) -> None:
    sub = _queued(student)
    Submission.objects.filter(pk=sub.pk).update(mode=Submission.Mode.RUN)
    claim_submission(sub.pk)
    record_result(sub.pk, GradeResult(score=1.0, verdict="correct", feedback=""))
    assert not PartState.objects.filter(user=student, attempts__gt=0).exists()


def test_a_poison_submission_is_stopped(student: User, settings: Any) -> None:
    sub = _queued(student)
    settings.ROOFLINE_MAX_DELIVERIES = 2
    Submission.objects.filter(pk=sub.pk).update(deliveries=2)
    assert claim_submission(sub.pk) is None
    sub.refresh_from_db()
    assert sub.status == Submission.Status.ERROR
    assert "stopped after 2 tries" in sub.result["feedback"]


def test_the_sweeper_resends_lost_and_abandoned_rows(student: User,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[int] = []
    monkeypatch.setattr(publish, "enqueue", lambda pk, queue="grade": sent.append(pk))
    fresh, lost, abandoned, done = (_queued(student) for _ in range(4))
    old = timezone.now() - timedelta(hours=1)
    Submission.objects.filter(pk=lost.pk).update(queued_at=old)
    Submission.objects.filter(pk=abandoned.pk).update(status="running", started_at=old,
                                                      queued_at=old)
    Submission.objects.filter(pk=done.pk).update(status="graded", queued_at=old)
    assert requeue_stuck() == 2
    assert sorted(sent) == sorted([lost.pk, abandoned.pk])
    abandoned.refresh_from_db()
    assert abandoned.status == Submission.Status.QUEUED
    fresh.refresh_from_db()
    assert fresh.status == Submission.Status.QUEUED


def test_enqueue_records_when_the_broker_took_the_message(student: User,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    sub = _queued(student)
    monkeypatch.setattr(publish, "send", lambda *a, **kw: None)
    assert enqueue(sub.pk) is True
    sub.refresh_from_db()
    assert sub.sent_at is not None
    down = _queued(student)

    def refuse(*a: Any, **kw: Any) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(publish, "send", refuse)
    assert enqueue(down.pk) is False
    down.refresh_from_db()
    assert down.sent_at is None


def test_the_sweeper_spaces_out_copies_of_a_row_waiting_in_a_long_queue(
        student: User, monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    """No worker takes the queue for ten minutes: one sweep every 30 s used to add a copy of
    every waiting row each time (18 copies of this one); now the copies double their spacing."""
    settings.ROOFLINE_QUEUED_GRACE_S = 60
    sent: list[Any] = []
    monkeypatch.setattr(publish, "send",
                        lambda *a, **kw: sent.append(timezone.now()))
    t0 = timezone.now()
    sub = _queued(student)
    Submission.objects.filter(pk=sub.pk).update(queued_at=t0, sent_at=t0)
    copies = []
    for k in range(1, 21):  # sweeps at 30 s, 60 s, ..., 600 s
        now = t0 + timedelta(seconds=30 * k)
        if requeue_stuck(now=now):
            copies.append(30 * k)
            Submission.objects.filter(pk=sub.pk).update(sent_at=now)  # what enqueue records
    assert copies == [90, 180, 360]  # first past the grace, then twice as far each time


def test_the_sweeper_resends_at_once_what_never_reached_the_broker_or_lost_its_worker(
        student: User, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[int] = []
    monkeypatch.setattr(publish, "enqueue", lambda pk, queue="grade": sent.append(pk))
    now = timezone.now()
    hour_ago, ten_min_ago = now - timedelta(hours=1), now - timedelta(minutes=10)
    never_sent, waiting, long_unsent, orphan, orphan_resent = (_queued(student) for _ in range(5))
    Submission.objects.filter(pk=never_sent.pk).update(queued_at=hour_ago, sent_at=None)
    Submission.objects.filter(pk=waiting.pk).update(queued_at=hour_ago, sent_at=ten_min_ago)
    Submission.objects.filter(pk=long_unsent.pk).update(queued_at=hour_ago,
                                                        sent_at=now - timedelta(minutes=40))
    Submission.objects.filter(pk=orphan.pk).update(status="running", queued_at=hour_ago,
                                                   sent_at=hour_ago, started_at=hour_ago)
    Submission.objects.filter(pk=orphan_resent.pk).update(
        status="queued", queued_at=hour_ago, started_at=hour_ago, sent_at=ten_min_ago)
    assert requeue_stuck(now=now) == 3
    assert sorted(sent) == sorted([never_sent.pk, long_unsent.pk, orphan.pk])


def test_the_task_records_an_error_when_grading_breaks(student: User,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from practice import tasks

    def broken(sub: Submission) -> GradeResult:
        raise RuntimeError("sandbox unavailable: bwrap missing")

    monkeypatch.setattr(grading, "grade_claimed", broken)
    sub = _queued(student)
    assert tasks.grade_submission.run(sub.pk) == "error"
    sub.refresh_from_db()
    assert sub.status == Submission.Status.ERROR and "bwrap missing" in sub.result["feedback"]
    assert not PartState.objects.filter(user=student, attempts__gt=0).exists()
