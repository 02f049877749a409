"""Every exercise has a stable id (exercise.toml `uuid`), and its row and history follow it.

Renaming a folder must not orphan its students' attempts (PrairieLearn keys questions by uuid
for the same reason): the sync finds the row by uuid and the slug follows the folder.
"""
from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest
from django.utils import timezone

from exercises import registry
from exercises.registry import ExerciseError
from exercises.spec import ExerciseSpec
from practice import recall
from practice.actions.exercises import sync_exercises
from practice.models import Exercise, HintReveal, MockInterview, PartState, RecallItem, User

SLUG = "stop_strings_stream"


def test_every_exercise_has_an_id_of_its_own() -> None:
    ids = [spec.uuid for spec in registry.load_all().values()]
    assert len(set(ids)) == len(ids) == len(registry.load_all())
    assert all(uuid.UUID(i).version == 4 for i in ids)


@pytest.mark.parametrize(("data", "says"), [({}, "missing"), ({"uuid": "Q41"}, "not a UUID"),
                                            ({"uuid": 7}, "missing")])
def test_a_missing_or_malformed_id_is_refused_with_a_fresh_one_to_paste(
        data: dict[str, object], says: str) -> None:
    with pytest.raises(ExerciseError) as caught:
        registry._exercise_id(data, Path("exercises/x/exercise.toml"))
    assert says in str(caught.value) and 'uuid = "' in str(caught.value)


def test_a_copied_folder_that_kept_its_id_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = registry.get(SLUG)
    copy = dataclasses.replace(spec, slug="stop_strings_copy", path=spec.path.parent / "copy")
    monkeypatch.setattr(registry, "exercise_folders", lambda: [spec.path, copy.path])
    monkeypatch.setattr(registry, "load", lambda folder: spec if folder == spec.path else copy)
    registry.load_all.cache_clear()
    try:
        with pytest.raises(ExerciseError, match="also stop_strings_stream's"):
            registry.load_all()
    finally:
        monkeypatch.undo()
        registry.load_all.cache_clear()


def _specs_with(monkeypatch: pytest.MonkeyPatch, *changed: ExerciseSpec,
                drop: tuple[str, ...] = ()) -> None:
    """The folders as the next sync sees them: `changed` replace the specs of their uuid."""
    specs = {s.uuid: s for s in registry.load_all().values() if s.slug not in drop}
    specs.update({s.uuid: s for s in changed})
    monkeypatch.setattr(registry, "load_all", lambda: {s.slug: s for s in specs.values()})


@pytest.mark.django_db
def test_a_renamed_folder_keeps_its_row_and_history(monkeypatch: pytest.MonkeyPatch) -> None:
    row = Exercise.objects.get(slug=SLUG)
    student = User.objects.create_user("renamer", password="pw-renamer-1")
    PartState.objects.create(user=student, exercise=row, part_id="streamer", attempts=2)
    # What the learning loop keeps per exercise: a part due for recall and a hint revealed.
    state = recall.start(timezone.now())
    item = RecallItem.objects.create(user=student, exercise=row, part_id="streamer",
                                     reason=RecallItem.Reason.WRONG, fsrs_card=state,
                                     due=recall.due_of(state), variant="17")
    HintReveal.objects.create(user=student, exercise=row, hint_id="h1",
                              revealed_at=timezone.now())
    mock = MockInterview.objects.create(user=student, started_at=timezone.now(),
                                        exercises=["kv_page_ledger", SLUG])
    renamed = dataclasses.replace(registry.get(SLUG), slug="stop_strings_renamed")
    _specs_with(monkeypatch, renamed)
    report = sync_exercises()
    assert report.renamed == 1 and report.created == 0 and report.deactivated == 0
    row.refresh_from_db()
    assert (row.slug, row.active, str(row.uuid)) == ("stop_strings_renamed", True, renamed.uuid)
    assert PartState.objects.get(user=student, part_id="streamer").exercise_id == row.pk
    kept = RecallItem.objects.get(pk=item.pk)
    assert (kept.exercise_id, kept.fsrs_card, kept.due, kept.variant) == (
        row.pk, item.fsrs_card, item.due, "17")
    assert HintReveal.objects.get(user=student).exercise_id == row.pk
    mock.refresh_from_db()
    assert mock.exercises == ["kv_page_ledger", "stop_strings_renamed"]
    assert not Exercise.objects.filter(slug=SLUG).exists()


@pytest.mark.django_db
def test_two_folders_swapping_names_keep_their_own_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = registry.get(SLUG), registry.get("kv_page_ledger")
    row_a, row_b = Exercise.objects.get(slug=a.slug), Exercise.objects.get(slug=b.slug)
    _specs_with(monkeypatch, dataclasses.replace(a, slug=b.slug),
                dataclasses.replace(b, slug=a.slug))
    assert sync_exercises().renamed == 2
    row_a.refresh_from_db()
    row_b.refresh_from_db()
    assert (row_a.slug, str(row_a.uuid)) == (b.slug, a.uuid)
    assert (row_b.slug, str(row_b.uuid)) == (a.slug, b.uuid)


@pytest.mark.django_db
def test_a_row_from_before_ids_is_adopted_by_its_slug() -> None:
    row = Exercise.objects.get(slug=SLUG)
    Exercise.objects.filter(pk=row.pk).update(uuid=None)
    report = sync_exercises()
    assert report.created == 0
    row.refresh_from_db()
    assert str(row.uuid) == registry.get(SLUG).uuid


@pytest.mark.django_db
def test_a_new_exercise_may_take_the_slug_of_a_removed_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    old = Exercise.objects.get(slug=SLUG)
    newcomer = dataclasses.replace(registry.get(SLUG), uuid=str(uuid.uuid4()))
    _specs_with(monkeypatch, newcomer, drop=(SLUG,))
    report = sync_exercises()
    assert report.created == 1
    old.refresh_from_db()
    assert old.slug == f"{SLUG}-gone-{old.pk}" and not old.active
    fresh = Exercise.objects.get(slug=SLUG)
    assert fresh.pk != old.pk and str(fresh.uuid) == newcomer.uuid and fresh.active
