"""The known slips of an exercise's number parts, listed the way the graders need them.

Every exercise's `mistakes()` used to carry its own copy of two things: the part tolerances,
mirrored by hand from exercise.toml, and an `add()` closure that drops a slip the grader would
accept anyway and merges a slip that lands within tolerance of an earlier one (one entry, both
explanations, worded by `coinciding`). Both live here once.

The exercises do not all measure closeness the same way (relative to the reference or to either
value, with or without a floor under a zero tolerance), and their mistake lists depend on it, so
the rule is a parameter, never a shared default that would move some exercise's slips.
"""
from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from exercises.coinciding import coinciding
from exercises.spec import Mistake, Quantity

# What exercises.registry gives a number part without a `tolerance` (tests/exercises/
# test_contract.py checks every TOLERANCE against the loaded spec, so a drift shows there).
DEFAULT_TOLERANCE = 0.02

# closeness(a, b, rel): is `a` within `rel` of `b`?
Closeness = Callable[[float, float, float], bool]


def tolerances(exercise_file: str | Path) -> dict[str, float]:
    """The number parts' tolerances from the exercise.toml beside `exercise_file` (pass
    `__file__`), in the TOML's part order, so a module never keeps a copy that can go stale."""
    toml_path = Path(exercise_file).resolve().parent / "exercise.toml"
    data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    return {part["id"]: float(part.get("tolerance", DEFAULT_TOLERANCE))
            for part in data["parts"] if part.get("type") == "number"}


def within(a: float, b: float, rel: float) -> bool:
    """`a` within `rel` of `b`, measured from `b`; a zero tolerance means the same number."""
    return a == b if rel == 0 else abs(a - b) <= rel * abs(b)


def near(a: float, b: float, rel: float) -> bool:
    """Within `rel` measured from either value (the larger band): neither can be told from the
    other by a grader that centres its band on either."""
    return within(a, b, rel) or within(b, a, rel)


def isclose(a: float, b: float, rel: float) -> bool:
    """`math.isclose` with no absolute floor (symmetric, and an infinity is close only to
    itself); a zero tolerance means the same number."""
    return a == b if rel == 0 else math.isclose(a, b, rel_tol=rel, abs_tol=0.0)


def nonpositive(value: float) -> bool:
    """A count, size or time at or below zero: a slip no student would give."""
    return value <= 0


def negative(value: float) -> bool:
    return value < 0


def unusable(value: float) -> bool:
    """Not finite, or at or below zero (a slip that divides by a zero or goes negative)."""
    return not math.isfinite(value) or value <= 0


class Slips:
    """Collects the slips of number parts into `mistakes`: `add(part, value, feedback, name, kind)`
    skips a value that `accept` puts within the part's tolerance of the reference (the grader
    would take it as right) and merges a value that `merge` puts within tolerance of an earlier
    slip of the same part into that entry, whose feedback then names both.

    `solved` maps part ids to the reference (a Quantity or a plain number); `out` is the list to
    add to (choice slips may already be in it). `merge_floor` / `accept_floor` raise a zero
    tolerance to a sliver so that float noise cannot split one value in two. `skip` rejects
    values that are no slip at all (zero, negative, infinite). `drop` drops a coinciding slip
    instead of merging it; `as_float` stores answers as floats (counts computed as ints).
    """

    def __init__(self, solved: Mapping[str, Any], tolerance: Mapping[str, float],
                 out: list[Mistake] | None = None, *, accept: Closeness = within,
                 merge: Closeness = within, accept_floor: float = 0.0, merge_floor: float = 0.0,
                 skip: Callable[[Any], bool] | None = None, drop: bool = False,
                 as_float: bool = False) -> None:
        self.solved = solved
        self.tolerance = tolerance
        self.mistakes: list[Mistake] = [] if out is None else out
        self.accept = accept
        self.merge = merge
        self.accept_floor = accept_floor
        self.merge_floor = merge_floor
        self.skip = skip
        self.drop = drop
        self.as_float = as_float

    def reference(self, part: str) -> float:
        ref = self.solved[part]
        return float(ref.value if isinstance(ref, Quantity) else ref)

    def add(self, part: str, value: Any, feedback: str, name: str, kind: str = "") -> None:
        ref = self.reference(part)
        tol = self.tolerance[part]
        if (self.skip is not None and self.skip(value)) \
                or self.accept(value, ref, max(tol, self.accept_floor)):
            return  # the grader would accept it (or it is meaningless): not a slip here
        merge_tol = max(tol, self.merge_floor)
        out = self.mistakes
        for i, old in enumerate(out):
            if old.part == part and self.merge(value, float(old.answer), merge_tol):
                # Two slips on one number: the number alone cannot say which was made.
                if not self.drop:
                    out[i] = Mistake(part, old.answer, coinciding(old.feedback, feedback),
                                     old.name, join_kinds(old.kind, kind))
                return
        out.append(Mistake(part, float(value) if self.as_float else value, feedback, name, kind))


def join_kinds(*kinds: str) -> str:
    """The kind of an entry that stands for several coinciding slips: each kind once, in order,
    joined by "|" (what `Mistake.kinds` splits), so none is lost when the feedback is merged."""
    return "|".join(dict.fromkeys(k for kind in kinds for k in kind.split("|") if k))
