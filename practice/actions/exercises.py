"""Exercises: the Exercise rows follow the folders, and a student's variant is drawn at first
visit and kept. Reading a variant's parameters is practice/variants.py."""
from __future__ import annotations

import random
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from exercises import registry
from practice.models import Assignment, Exercise, MockInterview, User


@dataclass(frozen=True)
class SyncReport:
    created: int
    updated: int
    deactivated: int
    renamed: int = 0


def sync_exercises() -> SyncReport:
    """Make the Exercise rows match the folders. A folder's row is the one with its uuid (or,
    for a row made before exercises had ids, the one with its slug, which then takes the uuid);
    the slug and everything else follow the folder, so a renamed folder keeps its students'
    history. Rows whose folder is gone are deactivated, and step aside (slug "<slug>-gone-<pk>")
    if a new exercise takes their slug. Mock interviews list exercises by slug: a rename is
    carried into them."""
    specs = registry.load_all()
    created = updated = 0
    renames: dict[str, str] = {}
    with transaction.atomic():
        rows = list(Exercise.objects.select_for_update().order_by("pk"))
        by_uuid = {str(r.uuid): r for r in rows if r.uuid is not None}
        legacy = {r.slug: r for r in rows if r.uuid is None}
        plan = [(spec, by_uuid.get(spec.uuid) or legacy.pop(spec.slug, None))
                for spec in specs.values()]
        kept = {row.pk for _, row in plan if row is not None}
        # Slugs are unique: every row whose slug changes, and every row of a removed folder
        # that holds a slug now wanted, moves to a free one first.
        for spec, row in plan:
            if row is not None and row.slug != spec.slug:
                renames[row.slug] = spec.slug
                Exercise.objects.filter(pk=row.pk).update(slug=f"renaming-{row.pk}")
        for row in rows:
            if row.pk not in kept and row.slug in specs:
                Exercise.objects.filter(pk=row.pk).update(slug=f"{row.slug[:40]}-gone-{row.pk}",
                                                          active=False)
        for spec, row in plan:
            fields = {
                "uuid": spec.uuid, "slug": spec.slug, "seed": spec.seed, "title": spec.title,
                "topic": spec.topic, "difficulty": spec.difficulty, "minutes": spec.minutes,
                "summary": spec.summary, "active": True,
                "parts": [{"id": p.id, "type": p.type, "points": p.points} for p in spec.parts],
            }
            if row is None:
                kept.add(Exercise.objects.create(**fields).pk)
                created += 1
            else:
                Exercise.objects.filter(pk=row.pk).update(**fields, synced_at=timezone.now())
                updated += 1
        deactivated = Exercise.objects.exclude(pk__in=kept).filter(active=True).update(
            active=False)
        if renames:
            for mock in MockInterview.objects.select_for_update():
                listed = [renames.get(slug, slug) for slug in mock.exercises]
                if listed != mock.exercises:
                    mock.exercises = listed
                    mock.save(update_fields=["exercises"])
    return SyncReport(created, updated, deactivated, len(renames))


def draw_variant(slug: str, avoid: set[str] | frozenset[str] = frozenset()) -> str:
    """A fresh variant of exercise `slug`: a seed the registry turns into parameters, none of
    `avoid`. A seed whose parameters cannot be drawn (an exercise's generate() gives up after its
    tries: kv_page_ledger's seed 721086 is one in about thirteen thousand) is skipped, so no
    student is handed a variant whose page cannot be made."""
    draw = random.SystemRandom()
    spec = registry.get(slug)
    while True:
        variant = str(draw.randrange(1, 1_000_000))
        if variant in avoid:
            continue
        try:
            registry.params_for(spec, variant)  # kept by the registry for the page that follows
        except RuntimeError:
            continue
        return variant


def active_assignment(user: User, slug: str) -> Assignment | None:
    """The student's kept variant of the active exercise `slug` with the exercise itself, in one
    query, which also says whether a mock interview may be running (`mock_unfinished`,
    Assignment.objects.kept_for_page); None before the first visit (or for no such active
    exercise): then the caller looks the exercise up and `assignment_for` draws the variant."""
    return Assignment.objects.kept_for_page(user.pk, slug)


def assignment_for(user: User, exercise: Exercise) -> Assignment:
    """The student's variant of an exercise, drawn at first visit and kept."""
    found = Assignment.objects.filter(user=user, exercise=exercise).first()
    if found is not None:
        return found
    assignment, _ = Assignment.objects.get_or_create(
        user=user, exercise=exercise, defaults={"variant": draw_variant(exercise.slug)})
    return assignment
