"""Pages through Django's test client: who may see what, htmx partials, no leftover placeholders."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from exercises import registry
from graders.selftest import answer_text
from practice.actions.exercises import assignment_for
from practice.actions.submissions import submit_answer
from practice.models import Exercise, Submission, User

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(client: Client) -> User:
    user = User.objects.create_user("alice", password="pw-alice-123")
    client.force_login(user)
    return user


def test_signup_logs_in_and_lands_on_the_catalog(client: Client) -> None:
    r = client.post("/signup/", {"username": "bob", "password1": "a-long-pass-42",
                                 "password2": "a-long-pass-42"}, follow=True)
    assert r.status_code == 200
    assert r.wsgi_request.user.username == "bob"
    from django.utils.html import escape

    for spec in registry.load_all().values():
        assert escape(spec.title) in r.content.decode()  # "don't" is served as "don&#x27;t"


def test_pages_need_a_login(client: Client) -> None:
    for url in ("/", "/history/", "/ex/kv_transfer_disagg/"):
        r = client.get(url)
        assert r.status_code == 302 and "/login/" in r["Location"]


@pytest.mark.parametrize("slug", sorted(registry.load_all()))
def test_exercise_page_renders_its_variant(client: Client, alice: User, slug: str) -> None:
    r = client.get(f"/ex/{slug}/")
    body = r.content.decode()
    assert r.status_code == 200
    assert "{{" not in body and "}}" not in body.replace("}}'", "")  # no leftover placeholder
    for part in registry.get(slug).parts:
        assert f'id="part-{part.id}"' in body
    assert "Worked solution" not in body  # nothing solved yet


def test_htmx_submit_returns_the_part_and_shows_the_solution(client: Client, alice: User) -> None:
    spec = registry.get("kv_transfer_disagg")
    part = next(p for p in spec.parts if p.type == "number")
    ex = Exercise.objects.get(slug=spec.slug)
    variant = assignment_for(alice, ex).variant
    ref = registry.solve(spec, registry.params_for(spec, variant))[part.id]
    r = client.post(f"/ex/{spec.slug}/{part.id}/submit/", {"answer": answer_text(part, ref)},
                    HTTP_HX_REQUEST="true")
    body = r.content.decode()
    assert r.status_code == 200 and body.lstrip().startswith("<article")
    assert "correct" in body and "Worked solution" in body


def test_an_invalid_answer_says_why_and_uses_no_attempt(client: Client, alice: User) -> None:
    spec = registry.get("kv_transfer_disagg")
    part = next(p for p in spec.parts if p.type == "number")
    r = client.post(f"/ex/{spec.slug}/{part.id}/submit/", {"answer": "lots"},
                    HTTP_HX_REQUEST="true")
    assert "no attempt used" in r.content.decode()
    assert not Submission.objects.exists()


def test_without_javascript_a_refused_answer_says_why_after_the_redirect(client: Client,
                                                                          alice: User) -> None:
    spec = registry.get("kv_transfer_disagg")
    part = next(p for p in spec.parts if p.type == "number")
    r = client.post(f"/ex/{spec.slug}/{part.id}/submit/", {"answer": "lots"}, follow=True)
    assert r.redirect_chain[-1][0] == f"/ex/{spec.slug}/#part-{part.id}"
    assert "Not submitted:" in r.content.decode()
    assert not Submission.objects.exists()


def test_formula_preview_echoes_math_and_never_evaluates(client: Client, alice: User) -> None:
    spec = registry.get("utilisation_rule")
    part = next(p for p in spec.parts if p.type == "expression")
    sym = part.symbols[0]
    ok = client.post(f"/ex/{spec.slug}/{part.id}/preview/", {"answer": f"1 - {sym}/2"})
    assert 'class="math inline"' in ok.content.decode()
    bad = client.post(f"/ex/{spec.slug}/{part.id}/preview/",
                      {"answer": "__import__('os').system('id')"})
    assert "error" in bad.content.decode() and "math inline" not in bad.content.decode()


def test_a_student_cannot_see_another_students_submission(client: Client, alice: User) -> None:
    mallory = User.objects.create_user("mallory", password="pw-mallory-1")
    ex = Exercise.objects.get(slug="kv_transfer_disagg")
    sub = Submission.objects.create(user=mallory, exercise=ex, part_id="x", part_type="number",
                                    variant="1", answer="secret answer")
    assert client.get(f"/submissions/{sub.pk}/status/").status_code == 404
    assert "secret answer" not in client.get("/history/").content.decode()


def test_status_fragment_polls_only_while_unfinished(client: Client, alice: User) -> None:
    ex = Exercise.objects.get(slug="stop_strings_stream")
    sub = Submission.objects.create(user=alice, exercise=ex, part_id="x", part_type="code",
                                    variant="1", answer="x")
    assert "hx-get" in client.get(f"/submissions/{sub.pk}/status/").content.decode()
    Submission.objects.filter(pk=sub.pk).update(status="graded", score=1.0, verdict="correct")
    body = client.get(f"/submissions/{sub.pk}/status/").content.decode()
    assert "hx-get" not in body and re.search(r"score\s+1\.00", body)


def test_a_row_long_queued_is_polled_less_often_and_a_new_or_running_one_quickly(
        client: Client, alice: User) -> None:
    ex = Exercise.objects.get(slug="stop_strings_stream")
    sub = Submission.objects.create(user=alice, exercise=ex, part_id="x", part_type="code",
                                    variant="1", answer="x")
    url = f"/submissions/{sub.pk}/status/"
    assert 'hx-trigger="load delay:400ms"' in client.get(url).content.decode()
    Submission.objects.filter(pk=sub.pk).update(
        queued_at=timezone.now() - timedelta(seconds=3))
    assert 'hx-trigger="load delay:1000ms"' in client.get(url).content.decode()
    Submission.objects.filter(pk=sub.pk).update(status="running", started_at=timezone.now())
    assert 'hx-trigger="load delay:400ms"' in client.get(url).content.decode()


def test_a_row_behind_others_says_so_and_asks_again_once_they_should_be_done(
        client: Client, alice: User) -> None:
    ex = Exercise.objects.get(slug="stop_strings_stream")

    def queued(status: str = "queued") -> Submission:
        return Submission.objects.create(user=alice, exercise=ex, part_id="x", status=status,
                                         part_type="code", variant="1", answer="x")

    first = queued("running")
    rows = [queued() for _ in range(12)]
    mine = rows[-1]
    url = f"/submissions/{mine.pk}/status/"
    body = client.get(url).content.decode()
    assert "12 ahead of yours in the queue" in body  # 11 queued and 1 running before it
    assert f'hx-trigger="load delay:{12 * 150}ms"' in body
    first_queued = client.get(f"/submissions/{rows[0].pk}/status/").content.decode()
    assert "1 ahead of yours" in first_queued and 'delay:400ms"' in first_queued
    Submission.objects.filter(pk__in=[first.pk] + [r.pk for r in rows[:-1]]).update(
        status="graded", score=1.0, verdict="correct")
    assert 'hx-trigger="load delay:400ms"' in client.get(url).content.decode()
    queued("running")  # a row queued after it is not ahead of it, even once it runs
    assert "ahead of yours" not in client.get(url).content.decode()
    later = [queued() for _ in range(40)]
    Submission.objects.filter(pk__in=[r.pk for r in later]).update(
        queued_at=mine.queued_at - timedelta(seconds=1))  # queued_at is set on create
    assert 'hx-trigger="load delay:4000ms"' in client.get(url).content.decode()  # at most


def test_evidence_downloads_are_the_students_own_variant(client: Client, alice: User) -> None:
    slug = next(s for s, spec in sorted(registry.load_all().items())
                if hasattr(spec.module, "evidence"))
    spec = registry.get(slug)
    ex = Exercise.objects.get(slug=slug)
    variant = assignment_for(alice, ex).variant
    mine = registry.evidence(spec, registry.params_for(spec, variant))
    page = client.get(f"/ex/{slug}/").content.decode()
    for name, ev in mine.items():
        assert f'href="/ex/{slug}/evidence/{name}/"' in page
        r = client.get(f"/ex/{slug}/evidence/{name}/")
        assert r.status_code == 200 and r["Content-Type"] == "application/json"
        assert r["Content-Disposition"] == f'attachment; filename="{ev.filename}"'
        assert r.content == registry.evidence_bytes(ev)
    assert client.get(f"/ex/{slug}/evidence/nope/").status_code == 404
    client.logout()
    r = client.get(f"/ex/{slug}/evidence/{next(iter(mine))}/")
    assert r.status_code == 302 and "/login/" in r["Location"]


def test_the_exercise_page_reads_the_same_queries_however_many_parts_it_has(
        client: Client, alice: User) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    specs = sorted(registry.load_all().values(), key=lambda sp: len(sp.parts))
    few, many = specs[0], specs[-1]
    assert len(many.parts) > len(few.parts)
    counts = {}
    for spec in (few, many):
        url = f"/ex/{spec.slug}/"
        client.get(url)  # the assignment is made on the first visit
        exercise = Exercise.objects.get(slug=spec.slug)
        solution = registry.solve(spec, registry.params_for(
            spec, assignment_for(alice, exercise).variant))
        part = next(p for p in spec.parts if p.type in ("number", "choice"))
        submit_answer(alice, exercise, part.id, answer_text(part, solution[part.id]),
                              "submit")
        with CaptureQueriesContext(connection) as q:
            body = client.get(url).content.decode()
        assert 'class="badge correct"' in body
        counts[spec.slug] = len(q.captured_queries)
    assert len(set(counts.values())) == 1, counts


def test_the_page_reads_the_kept_variant_with_its_exercise_as_the_orm_would(alice: User) -> None:
    """Assignment.objects.kept_for_page, the page's one statement for the student's variant:
    every field of both rows converted as the ORM converts it (a UUID, a JSON list, an aware
    time, a boolean, on SQLite as on PostgreSQL), and None where the ORM finds nothing."""
    from practice.models import Assignment

    exercise = Exercise.objects.get(slug="kv_transfer_disagg")
    mine = assignment_for(alice, exercise)
    bob = User.objects.create_user("bob", password="pw-bob-12345")
    assignment_for(bob, exercise)
    kept = Assignment.objects.kept_for_page(alice.pk, exercise.slug)
    assert kept is not None

    def fields(row: Assignment | Exercise) -> dict[str, object]:
        return {f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields}

    assert fields(kept) == fields(Assignment.objects.get(pk=mine.pk))
    assert fields(kept.exercise) == fields(exercise)
    assert isinstance(kept.exercise.parts, list) and kept.exercise.parts
    assert kept.exercise.synced_at.tzinfo is not None and kept.exercise.active is True
    other = Exercise.objects.exclude(pk=exercise.pk).first()
    assert other is not None
    assert Assignment.objects.kept_for_page(alice.pk, other.slug) is None  # not visited yet
    assert Assignment.objects.kept_for_page(alice.pk, "no_such_exercise") is None
    Exercise.objects.filter(pk=exercise.pk).update(active=False)
    assert Assignment.objects.kept_for_page(alice.pk, exercise.slug) is None


def test_the_page_looks_for_a_running_mock_only_when_one_is_unfinished(client: Client,
                                                                       alice: User) -> None:
    """kept_for_page says whether the student has a mock not recorded as ended; the page asks
    for the running mock (interview.running_mock) only then. Another student's mock does not
    count; a finished one does not either; one whose clock ran out before anyone recorded its
    end does, and the page then reads it and finds it over (solutions shown)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from practice.actions.mock_interviews import finish_mock_interview, start_mock_interview
    from practice.models import Assignment, MockInterview

    slug = "kv_transfer_disagg"
    client.get(f"/ex/{slug}/")  # the assignment is made on the first visit

    def unfinished() -> bool:
        kept = Assignment.objects.kept_for_page(alice.pk, slug)
        assert kept is not None
        return kept.mock_unfinished

    def mock_looked_up() -> bool:
        with CaptureQueriesContext(connection) as q:
            assert client.get(f"/ex/{slug}/").status_code == 200
        # The page's own statement names the table too, inside its EXISTS.
        return any('"practice_mockinterview"' in x["sql"] and "EXISTS" not in x["sql"]
                   for x in q.captured_queries)

    assert not unfinished() and not mock_looked_up()
    bob = User.objects.create_user("bob", password="pw-bob-12345")
    start_mock_interview(bob)
    assert not unfinished() and not mock_looked_up()
    mock = start_mock_interview(alice)
    assert unfinished() and mock_looked_up()
    finish_mock_interview(mock)
    assert not unfinished() and not mock_looked_up()
    late = start_mock_interview(alice)
    MockInterview.objects.filter(pk=late.pk).update(
        started_at=timezone.now() - timedelta(hours=2))
    assert unfinished() and mock_looked_up()
    assert "mock-banner" not in client.get(f"/ex/{slug}/").content.decode()


def test_each_part_shows_its_newest_answer_in_the_page_variant(alice: User) -> None:
    """Submission.objects.latest_per_part, the page's one query for every part's latest: the
    newest queued_at wins, the higher id breaks a tie, and neither another variant's answer nor
    a review's counts, however new; another student's rows are not read."""
    from practice.models import RecallItem

    exercise = Exercise.objects.get(slug="kv_transfer_disagg")
    bob = User.objects.create_user("bob", password="pw-bob-12345")
    t0 = timezone.now() - timedelta(hours=1)

    def row(part: str, minutes: int, *, variant: str = "v1", user: User = alice,
            review: RecallItem | None = None) -> Submission:
        sub = Submission.objects.create(user=user, exercise=exercise, part_id=part,
                                        part_type="number", variant=variant, answer=part,
                                        recall_item=review, result={"minutes": minutes})
        Submission.objects.filter(pk=sub.pk).update(queued_at=t0 + timedelta(minutes=minutes))
        return sub

    item = RecallItem.objects.create(user=alice, exercise=exercise, part_id="a", variant="v2",
                                     reason="wrong", fsrs_card={}, due=t0)
    row("a", 1)
    newest_a = row("a", 5)
    row("a", 9, variant="v2")  # another variant: the page does not show it
    row("a", 10, review=item)  # a review's answer, not the page's
    row("a", 11, user=bob)
    row("b", 3)
    tie_low = row("b", 7)
    tie_high = row("b", 7)  # the same moment: the later row is the newer
    latest = Submission.objects.latest_per_part(alice.pk, exercise.pk, "v1")
    assert {p: s.pk for p, s in latest.items()} == {"a": newest_a.pk, "b": tie_high.pk}
    assert tie_low.pk < tie_high.pk
    # Whole rows, with their fields converted as the ORM does (a JSON result, an aware time).
    assert latest["a"].result == {"minutes": 5}
    assert latest["a"].queued_at == t0 + timedelta(minutes=5)
    assert Submission.objects.latest_per_part(alice.pk, exercise.pk, "v3") == {}


def test_each_latest_answer_says_whether_an_instructors_notes_are_on_it(alice: User) -> None:
    """latest_per_part's has_review_notes, which spares the review_notes tag its two queries for
    an answer nobody reviewed: a review, a comment, or nothing (and another answer's notes do
    not count)."""
    from practice.models import Comment, Review

    exercise = Exercise.objects.get(slug="kv_transfer_disagg")
    teacher = User.objects.create_user("teacher", password="pw-teacher-1")

    def row(part: str) -> Submission:
        return Submission.objects.create(user=alice, exercise=exercise, part_id=part,
                                         part_type="number", variant="v1", answer=part)

    reviewed, commented, bare = row("a"), row("b"), row("c")
    older = row("d")
    row("d")  # the newest of d: the older one's comment is not on it
    Review.objects.create(submission=reviewed, override_score=0.5, reviewer=teacher)
    Comment.objects.create(submission=commented, author=teacher, body="see line 1", line=1)
    Comment.objects.create(submission=older, author=teacher, body="old")
    latest = Submission.objects.latest_per_part(alice.pk, exercise.pk, "v1")
    assert {p: s.has_review_notes for p, s in latest.items()} == {
        "a": True, "b": True, "c": False, "d": False}
    assert latest["c"].pk == bare.pk


def test_a_part_reads_its_latest_submission_before_its_state(client: Client,
                                                             alice: User) -> None:
    """A worker may finish between the two reads. Reading the state first could draw a finished
    "correct" beside the state from before that verdict: no solution, and nothing left polling to
    redraw the part (seen once in the Chromium walk through every exercise). The submission
    first, and its verdict's effect on the state is always seen."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    spec = registry.get("kv_transfer_disagg")
    client.get(f"/ex/{spec.slug}/")
    exercise = Exercise.objects.get(slug=spec.slug)
    part = next(p for p in spec.parts if p.type == "number")
    sub = submit_answer(alice, exercise, part.id, "1 GB", "submit")  # graded inline
    # The whole page, and the part redrawn when its submission is finished.
    for url in (f"/ex/{spec.slug}/", f"/submissions/{sub.pk}/status/"):
        with CaptureQueriesContext(connection) as q:
            assert client.get(url, HTTP_HX_REQUEST="true").status_code == 200
        tables = [("submission" if '"practice_submission"' in x["sql"] else "state")
                  for x in q.captured_queries
                  if '"practice_submission"' in x["sql"] or '"practice_partstate"' in x["sql"]]
        assert tables and tables[0] == "submission", (url, tables)
