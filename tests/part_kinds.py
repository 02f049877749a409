"""The fewest exercises that hold every kind of part: what `make test` walks where a walk through
every exercise is `make test-full`'s (the Chromium walk, the command line's grade contract)."""
from __future__ import annotations

from exercises.spec import ExerciseSpec, PartSpec


def part_kind(part: PartSpec) -> str:
    """A part's type as a student meets it: one choice or several are different forms."""
    return f"{part.type}-multi" if part.type == "choice" and part.multi else part.type


def part_type_cover(specs: dict[str, ExerciseSpec]) -> list[str]:
    """The fewest exercises (greedy: the one adding most new part kinds first, ties by slug)
    whose parts hold every kind of part any exercise has."""
    kinds = {slug: {part_kind(p) for p in spec.parts} for slug, spec in specs.items()}
    missing = set().union(*kinds.values())
    chosen: list[str] = []
    while missing:
        best = max(sorted(kinds), key=lambda slug: len(kinds[slug] & missing))
        chosen.append(best)
        missing -= kinds[best]
    return sorted(chosen)
