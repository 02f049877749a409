"""Hints revealed in interview mode (practice/actions/hints.py): recorded once per user, and
charged on the credited score of the parts they unlock (practice/actions/progress.py), never on
the Submission's raw grade."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from exercises import registry
from graders.selftest import answer_text
from practice.actions import NotAllowed
from practice.actions.exercises import assignment_for
from practice.actions.hints import reveal_hint
from practice.actions.progress import refresh_part_state
from practice.actions.submissions import submit_answer
from practice.models import Exercise, HintReveal, PartState, User
from practice.variants import variant_params

pytestmark = pytest.mark.django_db

# max_concurrency's hints: h1 the model (0.2 of kv_gpu, kv_budget, pool_tokens, max_conc),
# h2 the KV dtype and block (0.1 of kv_gpu, pool_tokens), h3 the driver's total (free),
# h5 max_num_seqs (0.25 of ceiling).
SLUG = "max_concurrency"


@pytest.fixture
def ann() -> User:
    return User.objects.create_user("ann", password="pw-ann-123")


def _ex() -> Exercise:
    return Exercise.objects.get(slug=SLUG)


def _right(user: User, part_id: str) -> str:
    spec = registry.get(SLUG)
    params = variant_params(spec, assignment_for(user, _ex()).variant)
    return answer_text(spec.part(part_id), registry.solve(spec, params)[part_id])


def _best(user: User, part_id: str) -> float:
    return PartState.objects.get(user=user, exercise=_ex(), part_id=part_id).best_score


def test_a_reveal_is_recorded_once_per_user(ann: User) -> None:
    bob = User.objects.create_user("bob", password="pw-bob-123")
    now = timezone.now()
    first = reveal_hint(ann, _ex(), "h1", now)
    again = reveal_hint(ann, _ex(), "h1", now + timedelta(minutes=5))
    assert again.pk == first.pk and again.revealed_at == now
    reveal_hint(bob, _ex(), "h1", now)
    assert HintReveal.objects.filter(exercise=_ex(), hint_id="h1").count() == 2


def test_an_unknown_hint_is_refused(ann: User) -> None:
    with pytest.raises(NotAllowed, match="no hint"):
        reveal_hint(ann, _ex(), "h99", timezone.now())
    assert not HintReveal.objects.exists()


def test_the_credit_is_reduced_on_the_unlocked_parts_only(ann: User) -> None:
    reveal_hint(ann, _ex(), "h1", timezone.now() - timedelta(seconds=1))
    reveal_hint(ann, _ex(), "h2", timezone.now() - timedelta(seconds=1))
    sub = submit_answer(ann, _ex(), "kv_gpu", _right(ann, "kv_gpu"))
    assert sub.score == 1.0  # the raw grade stays as graded
    assert _best(ann, "kv_gpu") == pytest.approx(0.7)
    state = PartState.objects.get(user=ann, exercise=_ex(), part_id="kv_gpu")
    assert state.solved_at is not None  # a right answer solves the part, hints or not
    # h1 and h2 do not unlock the ceiling part: full credit there.
    submit_answer(ann, _ex(), "ceiling", _right(ann, "ceiling"))
    assert _best(ann, "ceiling") == 1.0


def test_a_free_hint_costs_nothing(ann: User) -> None:
    reveal_hint(ann, _ex(), "h3", timezone.now() - timedelta(seconds=1))
    submit_answer(ann, _ex(), "kv_budget", _right(ann, "kv_budget"))
    assert _best(ann, "kv_budget") == 1.0


def test_the_credit_is_never_below_zero(ann: User) -> None:
    reveal_hint(ann, _ex(), "h1", timezone.now() - timedelta(seconds=1))
    submit_answer(ann, _ex(), "kv_gpu", "1")
    assert _best(ann, "kv_gpu") == 0.0


def test_a_hint_revealed_after_the_answer_does_not_cost_it(ann: User) -> None:
    submit_answer(ann, _ex(), "kv_gpu", _right(ann, "kv_gpu"))
    reveal_hint(ann, _ex(), "h1", timezone.now() + timedelta(seconds=1))
    refresh_part_state(ann, _ex(), "kv_gpu")  # a review or re-grade recomputes the same way
    assert _best(ann, "kv_gpu") == 1.0


def test_a_recomputed_state_keeps_the_penalty(ann: User) -> None:
    reveal_hint(ann, _ex(), "h2", timezone.now() - timedelta(seconds=1))
    submit_answer(ann, _ex(), "kv_gpu", _right(ann, "kv_gpu"))
    refresh_part_state(ann, _ex(), "kv_gpu")
    assert _best(ann, "kv_gpu") == pytest.approx(0.9)


def test_another_users_reveal_costs_nothing(ann: User) -> None:
    bob = User.objects.create_user("bob", password="pw-bob-123")
    reveal_hint(bob, _ex(), "h1", timezone.now() - timedelta(seconds=1))
    submit_answer(ann, _ex(), "kv_gpu", _right(ann, "kv_gpu"))
    assert _best(ann, "kv_gpu") == 1.0


# --- the page ----------------------------------------------------------------------------------

GPU_ROW = "the driver reports a total of"  # the free hint h3's text (the GPU row)


@pytest.fixture
def ann_client(client, ann: User):  # type: ignore[no-untyped-def]
    client.force_login(ann)
    return client


def test_interview_mode_hides_hints_and_states_the_cost(ann_client) -> None:  # type: ignore[no-untyped-def]
    page = ann_client.get(f"/ex/{SLUG}/?mode=interview").content.decode()
    assert GPU_ROW not in page
    assert "Reveal: the model&#x27;s attention shape and weights (costs 20% of parts 1, 2, 3 and 4)" \
        in page
    assert "Reveal: the GPU memory the driver reports (free)" in page
    assert f'href="/ex/{SLUG}/"' in page  # the switch back to practice mode


def test_practice_mode_shows_everything(ann_client) -> None:  # type: ignore[no-untyped-def]
    page = ann_client.get(f"/ex/{SLUG}/").content.decode()
    assert GPU_ROW in page and "Reveal:" not in page and "&lt;!--" not in page
    assert f'href="/ex/{SLUG}/?mode=interview"' in page


def test_a_reveal_shows_in_place_and_is_recorded(ann_client, ann: User) -> None:  # type: ignore[no-untyped-def]
    r = ann_client.post(f"/ex/{SLUG}/hints/h3/", HTTP_HX_REQUEST="true")
    body = r.content.decode()
    assert r.status_code == 200 and GPU_ROW in body and 'id="hint-h3"' in body
    assert HintReveal.objects.filter(user=ann, hint_id="h3").count() == 1
    page = ann_client.get(f"/ex/{SLUG}/?mode=interview").content.decode()
    assert GPU_ROW in page and "Reveal: the GPU memory" not in page
    assert ann_client.post(f"/ex/{SLUG}/hints/nope/").status_code == 404


def test_another_users_reveal_does_not_show(ann_client) -> None:  # type: ignore[no-untyped-def]
    bob = User.objects.create_user("bob", password="pw-bob-123")
    reveal_hint(bob, _ex(), "h3", timezone.now())
    page = ann_client.get(f"/ex/{SLUG}/?mode=interview").content.decode()
    assert GPU_ROW not in page and "Reveal: the GPU memory the driver reports (free)" in page


def test_a_running_mock_interview_opens_in_interview_mode(ann_client, ann: User) -> None:  # type: ignore[no-untyped-def]
    from practice.models import MockInterview

    MockInterview.objects.create(user=ann, started_at=timezone.now(), exercises=[SLUG],
                                 duration_s=3600)
    page = ann_client.get(f"/ex/{SLUG}/").content.decode()
    assert GPU_ROW not in page and "Reveal: the GPU memory the driver reports (free)" in page
