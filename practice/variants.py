"""Reading a student's variant: its parameters and the seed its hidden cases are drawn with.
Nothing here writes; drawing a variant at first visit is `practice.actions.exercises`."""
from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings

from exercises import registry
from exercises.spec import ExerciseSpec


def variant_params(spec: ExerciseSpec, variant: str) -> dict[str, Any]:
    return registry.params_for(spec, variant)


def hidden_seed(exercise_id: str, variant: str, submission_id: int | None = None) -> int:
    """The seed a code part's hidden cases are drawn with: a server secret (so they cannot be
    precomputed), the variant and the submission. Submit's failure message shows the smallest
    failing hidden case with its expected output and attempts are unlimited, so each submission
    draws its own cases (a case shown once is worth nothing to the next submission); derived
    from the row's id rather than stored, so the worker and an instructor's regrade reproduce
    them with nothing more than the row. `exercise_id` is the exercise's uuid, which a renamed
    folder keeps. None: the variant's own seed (tools, benchmarks)."""
    key = f"{settings.SECRET_KEY}:{exercise_id}:{variant}"
    if submission_id is not None:
        key += f":submission:{submission_id}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")
