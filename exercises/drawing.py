"""Drawing a sensible variant: the rejection loop every exercise's `generate()` used to repeat.

Most exercises draw a candidate from a few tables, keep it if `is_sensible()` accepts it and
otherwise draw again, giving up after a fixed number of tries (the ranges are then wrong, and a
loud error beats a hang). The loop and its error message live here once.

The random draws must stay exactly as the exercises made them (a variant is named by its seed), so
`choose` draws in the table's order, one `rng.choice` per key, as the hand-written dicts did.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Params = dict[str, Any]


def choose(rng: random.Random, table: Mapping[str, Sequence[Any]]) -> Params:
    """One `rng.choice` per key, in the table's order: a draw of independent choices."""
    return {key: rng.choice(options) for key, options in table.items()}


def draw_sensible(rng: random.Random, draw: Callable[[random.Random], Params | None],
                  is_sensible: Callable[[Params], bool], tries: int = 1000,
                  message: str | None = None) -> Params:
    """The first `draw(rng)` that `is_sensible` accepts, in at most `tries` draws.

    `draw` may return None for a candidate it already knows is no good (the loops' `continue`),
    which uses up a try just as a rejected candidate does. `message` replaces the error's usual
    wording, for the exercises that already said it their own way."""
    for _ in range(tries):
        p = draw(rng)
        if p is not None and is_sensible(p):
            return p
    # The exercise's ranges are wrong: say so rather than hand out a variant that isn't sensible.
    raise RuntimeError(message or f"no sensible variant in {tries} draws")
