"""A CPU preview is not a final grade (issue 19 item 7), through the site: a kernel answer that
passed only in Triton's interpreter is saved as "provisional". It uses an attempt but solves
nothing (no solved_at, no best score, no worked solution, not solved in statistics, the mock
interview or the catalog); the page, the cohort's statistics, the CSV export and `grade --json`
all say "provisional"; and once a GPU worker exists the provisional answers are re-graded there
(practice/provisional.py), which is what finally solves the part.

Hostile-suite case for the site layer: before the fix a preview pass was "correct" with
solved_at set, so a kernel the GPU would fail counted as solved.
"""
from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from graders.base import Check, GradeResult
from practice import grading, reports, stats, tasks
from practice.actions import publish
from practice.actions.cohorts import create_cohort, join_cohort
from practice.actions.exercises import assignment_for
from practice.actions.mock_interviews import start_mock_interview
from practice.actions.reviews import override_score
from practice.grading import claim_submission, record_result
from practice.models import Cohort, Exercise, PartState, RegradeJob, Submission, User

pytestmark = pytest.mark.django_db

SLUG, PART = "split_kv_decode", "kernel"
PREVIEW_FEEDBACK = "All 7 checks passed in Triton's interpreter on the CPU: provisional."


def preview_pass() -> GradeResult:
    """What graders/kernel.py returns for a full pass in the interpreter."""
    return GradeResult(score=1.0, verdict="provisional", feedback=PREVIEW_FEEDBACK,
                       checks=(Check("even splits", True, "2 cases match"),),
                       extra={"device": "cpu", "final": False})


def gpu_pass() -> GradeResult:
    return GradeResult(score=1.0, verdict="correct", feedback="All checks passed on an H100.",
                       checks=(Check("even splits", True, "4 cases match"),),
                       extra={"device": "gpu", "final": True})


@pytest.fixture
def people() -> tuple[User, Cohort, User]:
    prof = User.objects.create_user("prof", password="pw-prof-123", is_instructor=True)
    cohort = create_cohort(prof, "Spring")
    ann = User.objects.create_user("ann", password="pw-ann-123")
    join_cohort(ann, cohort.join_code)
    return prof, cohort, ann


def graded_by_worker(user: User, result: GradeResult) -> Submission:
    """A kernel submission taken through the worker's side of the pipeline."""
    ex = Exercise.objects.get(slug=SLUG)
    variant = assignment_for(user, ex).variant
    sub = Submission.objects.create(user=user, exercise=ex, part_id=PART, part_type="kernel",
                                    variant=variant, answer="def split_kv_decode(): ...")
    claimed = claim_submission(sub.pk)
    assert claimed is not None
    assert record_result(sub.pk, result)
    sub.refresh_from_db()
    return sub


def state_of(user: User) -> PartState:
    return PartState.objects.get(user=user, exercise__slug=SLUG, part_id=PART)


def test_a_preview_pass_uses_an_attempt_but_solves_nothing(people: Any) -> None:
    _, _, ann = people
    sub = graded_by_worker(ann, preview_pass())
    assert (sub.verdict, sub.score) == ("provisional", 1.0)
    state = state_of(ann)
    assert state.attempts == 1
    assert state.solved_at is None and not state.solution_visible
    assert state.best_score == 0.0  # the best final score: there is none yet


def test_the_page_shows_provisional_and_no_solution(people: Any, client: Client) -> None:
    _, _, ann = people
    graded_by_worker(ann, preview_pass())
    client.force_login(ann)
    html = client.get(reverse("exercise", args=[SLUG])).content.decode()
    part = html[html.index(f'id="part-{PART}"'):]
    part = part[:part.index("</article>")]
    assert 'class="badge provisional"' in part
    assert "not final" in part and "GPU" in part
    assert "badge correct" not in part and "Worked solution" not in part


def test_statistics_count_it_as_provisional_not_solved(people: Any) -> None:
    _, cohort, ann = people
    graded_by_worker(ann, preview_pass())
    ex_stats = stats.exercise_stats(cohort, Exercise.objects.get(slug=SLUG))
    part = next(p for p in ex_stats.parts if p.part_id == PART)
    assert (part.attempts, part.tried, part.provisional) == (1, 1, 1)
    assert (part.scored, part.solved, part.wrong) == (0, 0, 0)
    assert part.histogram == [0] * stats.BINS


def test_the_export_says_provisional(people: Any) -> None:
    prof, cohort, ann = people
    graded_by_worker(ann, preview_pass())
    rows = list(csv.reader(io.StringIO(reports.cohort_scores_csv(prof, cohort))))
    column = rows[0].index(next(h for h in rows[0] if h.endswith(f"{SLUG} / {PART}")))
    assert rows[1][0] == "ann" and rows[1][column] == "provisional"
    assert rows[1][-1] == "0"  # no points until the grade is final


def test_a_gpu_regrade_settles_it(people: Any, settings: Any,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from practice import provisional

    _, _, ann = people
    sub = graded_by_worker(ann, preview_pass())
    sent: list[tuple[str, Any, str]] = []
    monkeypatch.setattr(publish, "send", lambda task, args, queue: sent.append((task, args, queue)))

    # No GPU worker yet: nothing to re-grade on, and nothing is queued.
    settings.ROOFLINE_KERNEL_QUEUE = "grade"
    assert provisional.regrade_provisional() == []
    assert sent == [] and not RegradeJob.objects.exists()

    settings.ROOFLINE_KERNEL_QUEUE = "gpu"
    with django_capture_on_commit():
        jobs = provisional.regrade_provisional()
    assert len(jobs) == 1 and jobs[0].total == 1 and jobs[0].created_by is None
    assert sent == [("practice.tasks.run_regrade", (jobs[0].pk, "gpu"), "gpu")]
    # Asked again while that job is unfinished (a second GPU worker starting): no second job.
    assert provisional.regrade_provisional() == []

    # The GPU worker runs the job.
    monkeypatch.setattr(grading, "grade_claimed", lambda s: gpu_pass())
    assert tasks.run_regrade(jobs[0].pk, "gpu") == "done"
    sub.refresh_from_db()
    assert (sub.verdict, sub.score) == ("correct", 1.0)
    state = state_of(ann)
    assert state.solved_at is not None and state.best_score == 1.0
    assert state.attempts == 1  # a re-grade is not another attempt


def test_a_gpu_regrade_that_fails_it_leaves_it_unsolved(people: Any, settings: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from practice import provisional

    _, _, ann = people
    sub = graded_by_worker(ann, preview_pass())
    settings.ROOFLINE_KERNEL_QUEUE = "gpu"
    monkeypatch.setattr(publish, "send", lambda task, args, queue: None)
    (job,) = provisional.regrade_provisional()
    failed = GradeResult(score=0.5, verdict="partial", feedback="bf16 cases fail on the GPU")
    monkeypatch.setattr(grading, "grade_claimed", lambda s: failed)
    tasks.run_regrade(job.pk, "gpu")
    sub.refresh_from_db()
    assert sub.verdict == "partial"
    state = state_of(ann)
    assert state.solved_at is None and state.best_score == 0.5


def test_the_command_and_the_gpu_worker_start_queue_the_regrade(
        people: Any, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from practice import provisional

    _, _, ann = people
    graded_by_worker(ann, preview_pass())
    calls: list[str] = []
    real = provisional.regrade_provisional

    def counted() -> list[RegradeJob]:
        calls.append("called")
        return real()

    monkeypatch.setattr(provisional, "regrade_provisional", counted)
    monkeypatch.setattr(publish, "send", lambda task, args, queue: None)
    settings.ROOFLINE_KERNEL_QUEUE = "gpu"
    out = io.StringIO()
    call_command("regrade_provisional", stdout=out)
    assert calls == ["called"] and "1 provisional submission" in out.getvalue()

    # A worker that consumes `gpu` with the GPU device starts the re-grade; a CPU worker does not.
    monkeypatch.setenv("ROOFLINE_KERNEL_DEVICE", "cpu")
    provisional.regrade_on_gpu_worker_start(queues=["grade"])
    assert calls == ["called"]
    monkeypatch.setenv("ROOFLINE_KERNEL_DEVICE", "gpu")
    provisional.regrade_on_gpu_worker_start(queues=["gpu"])
    assert calls == ["called", "called"]

    # Wired to Celery's worker_ready, whose sender (the consumer) knows the queues it serves.
    from types import SimpleNamespace

    from celery.signals import worker_ready

    class Consumer:  # hashable, as the signal's sender must be
        app = SimpleNamespace(amqp=SimpleNamespace(
            queues=SimpleNamespace(consume_from={"gpu": object()})))

    consumer = Consumer()

    worker_ready.send(sender=consumer)
    assert calls == ["called", "called", "called"]


def test_the_models_verdicts_are_the_graders() -> None:
    from typing import get_args

    from graders.base import Verdict

    assert set(Submission.Verdict.values) == set(get_args(Verdict))
    assert Submission.Verdict.PROVISIONAL == "provisional"


def test_a_mock_interview_does_not_count_a_preview_pass_as_solved(people: Any) -> None:
    from practice import interview

    _, _, ann = people
    mock = start_mock_interview(ann)
    ex = Exercise.objects.get(slug=SLUG)
    mock.exercises = [SLUG]
    mock.save(update_fields=["exercises"])
    graded_by_worker(ann, preview_pass())
    (summary,) = [q for q in interview.summarize(mock) if q.exercise == ex]
    assert summary.attempts == 1 and summary.solved == 0


def test_a_reviewers_score_is_final(people: Any) -> None:
    """An instructor who scores a provisional answer decides it: that score counts."""
    prof, _, ann = people
    sub = graded_by_worker(ann, preview_pass())
    override_score(prof, sub, 1.0, "ran it on our H100 by hand")
    state = state_of(ann)
    assert state.solved_at is not None and state.best_score == 1.0


def test_grade_json_says_provisional_for_a_real_preview() -> None:
    """The command line's pipeline, run now on the CPU: the exercise's own reference kernel."""
    from runners import SandboxUnavailable, get_backend

    try:
        get_backend()
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox: {exc}")
    from exercises import registry

    reference = registry.get("fused_rope_positions").path / "kernel" / "reference.py"
    out = io.StringIO()
    call_command("grade", "fused_rope_positions", "kernel", "--file", str(reference), "--json",
                 stdout=out)
    doc = json.loads(out.getvalue())
    assert doc["verdict"] == "provisional", doc["feedback"]
    assert doc["score"] == 1.0 and doc["final"] is False
    assert "not final" in doc["feedback"]


class django_capture_on_commit:
    """Run on_commit callbacks at the end of the block (the test runs inside a transaction)."""

    def __enter__(self) -> None:
        from django.db import connection

        self._before = len(connection.run_on_commit)

    def __exit__(self, *exc: object) -> None:
        from django.db import connection

        pending = connection.run_on_commit[self._before:]
        del connection.run_on_commit[self._before:]
        for _, callback, _ in pending:
            callback()
