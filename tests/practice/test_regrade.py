"""Re-grading an exercise after its grader changed: the actions (one entry at a time, idempotent
on redelivery), the task, the progress page that polls itself until the job is done, and a real
Celery worker over real Redis doing the whole job."""
from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from exercises import registry
from graders.base import GradeResult
from graders.selftest import answer_text
from practice import grading, tasks
from practice.actions import publish
from practice.actions.cohorts import create_cohort, join_cohort
from practice.actions.publish import enqueue_regrade
from practice.actions.regrade import start_regrade
from practice.grading import fail_regrade_entry, grade_claimed, regrade_one
from practice.models import (
    Cohort,
    Exercise,
    PartState,
    RegradeEntry,
    RegradeJob,
    Submission,
    User,
)
from practice.routing import REGRADE_TASK

SLUG, PART = "kv_page_ledger", "pool_blocks"  # a number part, graded inline


def reference_answer() -> str:
    spec = registry.get(SLUG)
    solution = registry.solve(spec, registry.params_for(spec, registry.CANONICAL_VARIANT))
    return answer_text(spec.part(PART), solution[PART])


def gb_not_gib_answer() -> str:
    """The known GB-for-GiB slip of the canonical variant, as a student types it."""
    spec = registry.get(SLUG)
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    slip = next(m for m in registry.mistakes(spec, params, PART) if m.name == "gb_not_gib")
    return f"{slip.answer:.0f}"


def stale(user: User, answer: str | None = None, score: float = 0.0,
          verdict: str = "incorrect") -> Submission:
    """A right answer that yesterday's grader scored 0 (the bug the re-grade fixes), with the
    progress it left behind."""
    ex = Exercise.objects.get(slug=SLUG)
    sub = Submission.objects.create(
        user=user, exercise=ex, part_id=PART, part_type="number", variant="canonical",
        answer=answer or reference_answer(), status="graded", score=score, verdict=verdict,
        result={"score": score, "verdict": verdict, "feedback": "old grader", "checks": []})
    state, _ = PartState.objects.get_or_create(user=user, exercise=ex, part_id=PART)
    state.attempts += 1
    state.best_score = max(state.best_score, score)
    state.save()
    return sub


def make_class() -> tuple[User, Cohort, list[User], User]:
    prof = User.objects.create_user("prof", password="pw-prof-123", is_instructor=True)
    cohort = create_cohort(prof, "Spring")
    students = [User.objects.create_user(n, password=f"pw-{n}-123") for n in ("ann", "bob")]
    for s in students:
        join_cohort(s, cohort.join_code)
    other = User.objects.create_user("other-inst", password="pw-oi-123", is_instructor=True)
    outsider = User.objects.create_user("zed", password="pw-zed-123")
    join_cohort(outsider, create_cohort(other, "Theirs").join_code)
    return prof, cohort, students, outsider


# --- actions and the task, in this process -----------------------------------------------------

@pytest.mark.django_db
class TestActions:
    @pytest.fixture(autouse=True)
    def setup(self) -> None:
        self.prof, self.cohort, (self.ann, self.bob), self.outsider = make_class()
        self.right = stale(self.ann)  # right, scored 0: the re-grade changes it
        self.wrong = stale(self.bob, answer=gb_not_gib_answer(), score=0.0)  # a known mistake: stays 0
        self.theirs = stale(self.outsider)  # another instructor's student: not touched

    def start(self) -> RegradeJob:
        return start_regrade(self.prof, Exercise.objects.get(slug=SLUG))

    def entry(self, job: RegradeJob, sub: Submission) -> RegradeEntry:
        return RegradeEntry.objects.get(job=job, submission=sub)

    def test_a_job_covers_the_instructors_students_only(self) -> None:
        job = self.start()
        assert job.status == RegradeJob.Status.QUEUED and job.total == 2
        subs = set(job.entries.values_list("submission_id", flat=True))
        assert subs == {self.right.pk, self.wrong.pk}
        e = self.entry(job, self.right)
        assert (e.old_score, e.old_verdict, e.old_result["feedback"]) == (0.0, "incorrect",
                                                                          "old grader")
        assert e.new_score is None and e.finished_at is None

    def test_regrade_one_saves_the_new_score_and_keeps_the_old(self) -> None:
        job = self.start()
        entry = regrade_one(self.entry(job, self.right).pk)
        assert (entry.old_score, entry.new_score, entry.new_verdict) == (0.0, 1.0, "correct")
        self.right.refresh_from_db()
        assert (self.right.score, self.right.verdict) == (1.0, "correct")
        assert self.right.result["verdict"] == "correct"
        state = PartState.objects.get(user=self.ann, part_id=PART)
        assert state.best_score == 1.0 and state.solved_at is not None
        assert state.attempts == 1  # a re-grade is not another attempt
        job.refresh_from_db()
        assert (job.done, job.changed, job.failed) == (1, 1, 0)

        # Unchanged: a known mistake is still that mistake.
        regrade_one(self.entry(job, self.wrong).pk)
        self.wrong.refresh_from_db()
        assert (self.wrong.score, self.wrong.result["mistake"]) == (0.0, "gb_not_gib")
        job.refresh_from_db()
        assert (job.done, job.changed) == (2, 1)

    def test_regrade_one_twice_counts_once(self) -> None:
        """A redelivered task finds the entry finished and does nothing."""
        job = self.start()
        pk = self.entry(job, self.right).pk
        first = regrade_one(pk)
        again = regrade_one(pk)
        assert again.finished_at == first.finished_at
        job.refresh_from_db()
        assert (job.done, job.changed) == (1, 1)

    def test_fail_regrade_entry_is_idempotent(self) -> None:
        job = self.start()
        pk = self.entry(job, self.right).pk
        fail_regrade_entry(pk, "RuntimeError: grader exploded")
        fail_regrade_entry(pk, "RuntimeError: again")
        entry = RegradeEntry.objects.get(pk=pk)
        assert entry.error == "RuntimeError: grader exploded" and entry.finished_at
        job.refresh_from_db()
        assert (job.done, job.failed, job.changed) == (1, 1, 0)
        # A failed entry is finished: re-grading it again later changes nothing.
        regrade_one(pk)
        self.right.refresh_from_db()
        assert self.right.score == 0.0
        job.refresh_from_db()
        assert job.done == 1
        # ... and an entry that finished cannot be failed afterwards.
        ok = self.entry(job, self.wrong).pk
        regrade_one(ok)
        fail_regrade_entry(ok, "late failure")
        assert RegradeEntry.objects.get(pk=ok).error == ""
        job.refresh_from_db()
        assert (job.done, job.failed) == (2, 1)

    def test_the_task_survives_a_broken_submission_and_a_redelivery(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        job = self.start()
        real = grade_claimed
        broken = self.wrong.pk

        def grade(sub: Submission) -> Any:
            if sub.pk == broken:
                raise RuntimeError("the grader broke")
            return real(sub)

        monkeypatch.setattr(grading, "grade_claimed", grade)
        assert tasks.run_regrade(job.pk) == "done"
        tasks.run_regrade(job.pk)  # delivered again: nothing is counted twice
        job.refresh_from_db()
        assert job.status == RegradeJob.Status.DONE and job.finished_at is not None
        assert (job.total, job.done, job.changed, job.failed) == (2, 2, 1, 1)
        assert "RuntimeError: the grader broke" in self.entry(job, self.wrong).error
        self.right.refresh_from_db()
        assert self.right.score == 1.0

    def test_a_long_job_goes_on_in_fresh_tasks_one_slice_at_a_time(
            self, monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
        settings.ROOFLINE_REGRADE_SLICE_S = 0  # every slice is over after its first entry
        job = self.start()
        queued: list[tuple[str, Any, str]] = []
        monkeypatch.setattr(publish, "send",
                            lambda task, args, queue: queued.append((task, args, queue)))
        assert tasks.run_regrade(job.pk) == "continued"
        job.refresh_from_db()
        assert job.status == RegradeJob.Status.RUNNING and job.done == 1
        assert queued == [(REGRADE_TASK, (job.pk, "grade"), "grade")]
        assert tasks.run_regrade(job.pk) == "done"  # the last entry: nothing left to hand on
        job.refresh_from_db()
        assert job.status == RegradeJob.Status.DONE and job.done == 2 and len(queued) == 1

    def test_kernel_answers_are_regraded_where_kernels_are_graded(
            self, monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
        """With GPU workers, a kernel answer's re-grade goes to `gpu`: a CPU worker would
        replace its GPU grade by an interpreter preview."""
        settings.ROOFLINE_KERNEL_QUEUE = "gpu"
        ex = Exercise.objects.get(slug="split_kv_decode")
        for part_id, part_type in (("ctas", "number"), ("kernel", "kernel")):
            Submission.objects.create(
                user=self.ann, exercise=ex, part_id=part_id, part_type=part_type,
                variant="canonical", answer="x", status="graded", score=0.0,
                verdict="incorrect", result={"score": 0.0, "verdict": "incorrect"})
        job = start_regrade(self.prof, ex)
        queued: list[tuple[str, Any, str]] = []
        monkeypatch.setattr(publish, "send",
                            lambda task, args, queue: queued.append((task, args, queue)))
        enqueue_regrade(job.pk)
        assert sorted(queued) == [(REGRADE_TASK, (job.pk, "gpu"), "gpu"),
                                  (REGRADE_TASK, (job.pk, "grade"), "grade")]
        graded: list[str] = []

        def grade(sub: Submission) -> GradeResult:
            graded.append(sub.part_type)
            return GradeResult(score=1.0, verdict="correct", feedback="")

        monkeypatch.setattr(grading, "grade_claimed", grade)
        assert tasks.run_regrade(job.pk, "grade") == "done on this queue"
        job.refresh_from_db()
        assert graded == ["number"] and job.status == RegradeJob.Status.RUNNING
        assert tasks.run_regrade(job.pk, "gpu") == "done"
        job.refresh_from_db()
        assert graded == ["number", "kernel"] and job.status == RegradeJob.Status.DONE

    def test_the_progress_page_polls_until_done(self) -> None:
        client = Client()
        client.force_login(self.prof)
        r = client.post(reverse("regrade_start", args=[SLUG]))
        job = RegradeJob.objects.get()
        assert r.status_code == 302 and r["Location"] == reverse("regrade_progress",
                                                                 args=[job.pk])
        url = reverse("regrade_progress", args=[job.pk])

        page = client.get(url)
        assert page.status_code == 200 and "<html" in page.content.decode()
        assert f'hx-get="{url}"' in page.content.decode()  # queued: it asks again
        assert "0 of 2" in " ".join(page.content.decode().split()).replace("</span>", "")

        fragment = client.get(url, headers={"HX-Request": "true"})
        assert "<html" not in fragment.content.decode()  # the partial alone, for the swap
        assert f'hx-get="{url}"' in fragment.content.decode()

        tasks.run_regrade(job.pk)
        done = client.get(url, headers={"HX-Request": "true"}).content.decode()
        assert "hx-get" not in done  # done: the fragment stops polling
        assert 'data-status="done"' in done
        assert '<span id="regrade-changed">1</span>' in done
        # The changed entry is listed first, with its old and new score.
        rows = done.split('<tr id="entry-')[1:]
        assert rows[0].startswith(f'{self.right.pk}"') and 'class="changed"' in rows[0]
        assert "0.00" in rows[0] and "1.00" in rows[0] and "incorrect → correct" in rows[0]

    def test_only_its_instructor_and_staff_see_a_job(self) -> None:
        job = self.start()
        url = reverse("regrade_progress", args=[job.pk])
        for name, status in (("other-inst", 404), ("ann", 404)):
            client = Client()
            client.force_login(User.objects.get(username=name))
            assert client.get(url).status_code == status
        staff = User.objects.create_user("root", password="pw-root-123", is_staff=True)
        client = Client()
        client.force_login(staff)
        assert client.get(url).status_code == 200

    def test_students_cannot_start_one(self) -> None:
        client = Client()
        client.force_login(self.ann)
        assert client.post(reverse("regrade_start", args=[SLUG])).status_code == 404
        assert client.get(reverse("regrade_start", args=[SLUG])).status_code == 405
        assert not RegradeJob.objects.exists()


# --- a real worker over real Redis -------------------------------------------------------------

def wait_done(job_id: int, timeout: float = 90) -> RegradeJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = RegradeJob.objects.get(pk=job_id)
        if job.status == RegradeJob.Status.DONE:
            return job
        time.sleep(0.2)
    raise AssertionError(f"re-grade {job_id} not done in {timeout} s: {job.status} "
                         f"{job.done}/{job.total}")


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("celery_broker", ["redis"], indirect=True)
def test_a_worker_regrades_over_redis(celery_broker: Any, start_worker: Any) -> None:
    start_worker()
    prof, cohort, (ann, bob), outsider = make_class()
    right = [stale(ann), stale(bob), stale(ann)]
    wrong = stale(bob, answer=gb_not_gib_answer())  # still wrong
    theirs = stale(outsider)
    with transaction.atomic():  # enqueued when this commits (on_commit), as in a request
        job = start_regrade(prof, Exercise.objects.get(slug=SLUG))
    job = wait_done(job.pk)

    assert (job.total, job.done, job.changed, job.failed) == (4, 4, 3, 0)
    assert job.finished_at is not None
    for sub in right:
        sub.refresh_from_db()
        assert (sub.score, sub.verdict) == (1.0, "correct"), sub.result
        entry = RegradeEntry.objects.get(job=job, submission=sub)
        assert (entry.old_score, entry.old_verdict, entry.new_score) == (0.0, "incorrect", 1.0)
        assert entry.old_result["feedback"] == "old grader"
    wrong.refresh_from_db()
    assert wrong.score == 0.0 and wrong.result["mistake"] == "gb_not_gib"
    for user in (ann, bob):
        state = PartState.objects.get(user=user, part_id=PART)
        assert state.best_score == 1.0 and state.solved_at is not None
    theirs.refresh_from_db()
    assert theirs.score == 0.0  # another instructor's student: not re-graded
    assert not RegradeEntry.objects.filter(submission=theirs).exists()

    client = Client()
    client.force_login(prof)
    page = client.get(reverse("regrade_progress", args=[job.pk])).content.decode()
    assert 'data-status="done"' in page and "hx-get" not in page


# --- in Chromium: the button, then the progress fragment polling until the job is done ----------

@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_progress_page_updates_itself_in_the_browser(page: Any, live_server: Any) -> None:
    prof, cohort, (ann, bob), _ = make_class()
    right = stale(ann)
    stale(bob, answer=gb_not_gib_answer())
    client = Client()
    client.force_login(prof)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                               "url": live_server.url}])
    problems: list[str] = []
    polls: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("request", lambda r: polls.append(r.url)
            if r.headers.get("hx-request") == "true" else None)

    page.goto(live_server.url + reverse("exercise_stats", args=[cohort.pk, SLUG]))
    page.click("#regrade-form button")
    page.wait_for_selector('#regrade-progress[data-status="queued"]')
    job = RegradeJob.objects.get()
    assert page.url.endswith(reverse("regrade_progress", args=[job.pk]))
    page.wait_for_timeout(1500)
    assert polls, "the queued job's fragment should ask for itself again"

    tasks.run_regrade(job.pk)  # what the worker does (it runs over Redis in the test above)
    page.wait_for_selector('#regrade-progress[data-status="done"]', timeout=10_000)
    assert page.inner_text("#regrade-done") == "2" and page.inner_text("#regrade-changed") == "1"
    assert "1.00" in page.inner_text(f"#entry-{right.pk} .new-score")
    settled = len(polls)
    page.wait_for_timeout(2500)
    assert len(polls) == settled, "a finished job's fragment must stop polling"
    assert problems == []
