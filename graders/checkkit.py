"""What every code part's checks.py shares: Hypothesis draws pinned to a seed, the random cases
made from them, and the per-check verdicts summed up as "N of M cases fail. Smallest: ...".

checks.py runs in the worker (graders.code.load_module loads it by path), so it imports this
module directly: `from graders import checkkit`. The sandbox never sees it.

    drawn = checkkit.draw(_random_input(), seed, RANDOM_CASES)   # Hypothesis, seeded
    cases += checkkit.drawn_cases(cases, drawn)                  # random-001, ...
    cases = checkkit.with_draws(edge, drawn_json, size_key)      # both, smallest first
    ref = checkkit.sibling(__file__, "reference")                # trusted, loaded once
    v = checkkit.Verdicts(size_key)                              # per check, per case
    v.add("no crash", case, passed, message)
    return v.checks(CHECKS)                                      # one Check per name

A failing check names one case only, the smallest by the exercise's own `size_key` (or a rank
the exercise gives per case), because the smallest failing case is the easiest to read and to
replay by hand. The passing and failing messages and the Check details are the same for every
exercise, so students read one format everywhere.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from random import Random
from types import ModuleType
from typing import Any, NamedTuple, TypeVar

from hypothesis import strategies as st
from hypothesis.control import BuildContext
from hypothesis.errors import StopTest, UnsatisfiedAssumption

# Hypothesis's internals, pinned by pyproject.toml's version bound (see draw).
from hypothesis.internal.conjecture.choice import (
    choice_constraints_key,
    choice_permitted,
    choice_size,
)
from hypothesis.internal.conjecture.data import MAX_DEPTH, ConjectureData
from hypothesis.internal.conjecture.providers import GLOBAL_CONSTANTS, HypothesisProvider
from hypothesis.internal.floats import float_to_int, int_to_float
from hypothesis.strategies._internal.lazy import unwrap_strategies

from exercises.file_module import load_file
from graders.base import Check

Case = dict[str, Any]
# A checks.py's CHECKS: (name, weight, message when every case it applies to passes), in the
# order the checks are shown.
CheckTable = Sequence[tuple[str, float, str]]
T = TypeVar("T")


def sibling(checks_file: str, stem: str) -> ModuleType:
    """`<stem>.py` beside checks.py (the reference, a simulator): trusted code the checks call
    themselves, loaded once per process under a private name. Not the module the grader loads
    for the expected outputs (graders.code.load_module), so the two never share state."""
    folder = Path(checks_file).resolve().parent
    return load_file(f"roofline_checks_{folder.parent.name}_{stem}", folder / f"{stem}.py")


def draw(strategy: st.SearchStrategy[T], seed: int, n: int) -> list[T]:
    """Up to `n` values of `strategy`, always the same list for the same seed.

    Each value is one draw of the strategy from a Hypothesis ConjectureData fed by one
    random.Random(seed), with no test engine around it. @given's engine costs 0.3-0.4 ms per
    example before the strategy draws anything (its example tree, the mutations it makes of
    earlier examples, the per-example build context and settings): half of a code grade, whose
    hidden cases are drawn afresh for every submission (practice.variants.hidden_seed). Without
    it a grade's draws take a third of the time (0.33x over the 14 code exercises), and the
    values are the strategy's own distribution with no example repeated by construction
    (bench/grade_draws.py measures both). The data object keeps only what drawing needs
    (_ValuesOnlyData): the same values, in 0.6x the time again.

    The constants Hypothesis mixes into draws come only from its own fixed list: its default
    also takes constants from every local module loaded in the process, which differ between a
    worker and a regrade in another process, so the same seed could draw other cases. A value a
    filter rejects (or an `assume`) is skipped, as @given skips it; at most 10 tries per value,
    so a strategy that rejects nearly everything yields fewer values, never an error.
    Callers cache the result per seed."""
    rng = Random(seed)
    drawn: list[T] = []
    for _ in range(10 * n):
        if len(drawn) >= n:
            break
        data = _DATA(random=rng, provider=_FixedConstantsProvider)
        try:
            with BuildContext(data, wrapped_test=draw):
                drawn.append(data.draw(strategy))
        except (StopTest, UnsatisfiedAssumption):
            continue
    return drawn


class _FixedConstantsProvider(HypothesisProvider):
    """Hypothesis's own provider, its constants taken from its built-in list only (see draw)."""

    def _maybe_draw_constant(self, choice_type: Any, constraints: Any, *,
                             p: float = 0.05) -> Any:
        if self._random is None or self._random.random() > p:
            return None
        key = (choice_type, choice_constraints_key(choice_type, constraints))
        pool = _GLOBAL_CONSTANTS.get(key)
        if pool is None:
            # Sorted by repr: a set's order of strings changes with the process's hash seed.
            pool = _GLOBAL_CONSTANTS[key] = tuple(sorted(
                (c for c in GLOBAL_CONSTANTS.set_for_type(choice_type)
                 if choice_permitted(c, constraints)), key=repr))
        return self._random.choice(pool) if pool else None


_GLOBAL_CONSTANTS: dict[Any, tuple[Any, ...]] = {}


class _ValuesOnlyData(ConjectureData):
    """A ConjectureData that draws the same values and keeps none of the record a test engine
    reads afterwards: no choice nodes, no span tree, no structural tags, no draw timings.
    Hypothesis keeps those to shrink, replay and explain a failing example; `draw` never does
    any of that, and the record was 40 % of a grade's drawing time. What decides a value is
    untouched: the provider draws every choice with the same constraints from the same random,
    and an example still overruns at the same length and depth (then it is skipped). A test
    draws every exercise's hidden cases with both classes and compares them."""

    def draw(self, strategy: st.SearchStrategy[T], label: int | None = None,
             observe_as: str | None = None) -> T:
        strategy.validate()
        if strategy.is_empty:
            self.mark_invalid(f"empty strategy {strategy!r}")
        if self.depth >= MAX_DEPTH:
            self.mark_invalid("max depth exceeded")
        self.start_span(0)
        try:
            return unwrap_strategies(strategy).do_draw(self)
        finally:
            self.stop_span()

    def start_span(self, label: int) -> None:
        self.provider.span_start(label)
        self.depth += 1

    def stop_span(self, *, discard: bool = False) -> None:
        self.provider.span_end(discard)
        self.depth -= 1

    def _draw(self, choice_type: Any, constraints: Any, *, observe: bool,
              forced: Any) -> Any:
        if self.length == self.max_length:
            self.mark_overrun()
        value = forced if forced is not None else \
            getattr(self.provider, f"draw_{choice_type}")(**constraints)
        if choice_type == "float" and math.isnan(value):
            value = int_to_float(float_to_int(value))  # as ConjectureData: no shared NaN
        if observe:
            size = choice_size(value)
            if self.length + size > self.max_length:
                self.mark_overrun()
            self.length += size
        return value


# What `draw` draws with; a test swaps in ConjectureData to compare.
_DATA: type[ConjectureData] = _ValuesOnlyData


# --- strategies built once -----------------------------------------------------------------
# A composite that writes `draw(st.integers(0, n))` builds a new strategy object on every draw,
# and Hypothesis then looks it up in its own cache and validates it again: about half of a
# whole draw's time in the scripted exercises. Built once per process and reused, the same
# strategy draws the same values for the same seed, at about half the cost.
_BUILT: dict[tuple[Any, ...], st.SearchStrategy[Any]] = {}
MAX_BUILT = 4096


def _built(factory: Callable[..., st.SearchStrategy[Any]], *args: Any,
           **kwargs: Any) -> st.SearchStrategy[Any]:
    key = (factory, args, tuple(sorted(kwargs.items())))
    try:
        hit = _BUILT.get(key)
    except TypeError:  # an unhashable argument (a list of lists): built each time
        return factory(*args, **kwargs)
    if hit is None:
        if len(_BUILT) >= MAX_BUILT:  # a key that never repeats (a strategy built afresh
            _BUILT.clear()            # as an argument) must not grow a worker's memory
        hit = _BUILT[key] = factory(*args, **kwargs)
    return hit


def integers(min_value: int, max_value: int) -> st.SearchStrategy[int]:
    """st.integers(min_value, max_value), built once."""
    return _built(st.integers, min_value, max_value)


def sampled_from(options: Sequence[T]) -> st.SearchStrategy[T]:
    """st.sampled_from(options), built once per distinct options (a list is keyed as a tuple:
    the same elements in the same order draw the same values)."""
    return _built(st.sampled_from, tuple(options) if isinstance(options, list) else options)


def booleans() -> st.SearchStrategy[bool]:
    """st.booleans(), built once."""
    return _built(st.booleans)


def picks(options: Sequence[T], *, min_size: int = 0, max_size: int) -> st.SearchStrategy[list[T]]:
    """A list of `options` (each equally likely, repeats allowed), sized as st.lists sizes
    one: st.lists(st.sampled_from(options), min_size=, max_size=) in distribution, drawn as one
    st.binary whose bytes pick the options. A list of sampled_from draws is one Hypothesis
    choice per element, and a choice costs about as much as the rest of a simple case; the
    bytes are one choice. Up to 16 options: byte % len(options) then favours none by more than
    len(options)/256 of its share."""
    if not 1 <= len(options) <= 16:
        raise ValueError(f"picks takes 1 to 16 options, not {len(options)}")
    return _built(_picks, tuple(options), min_size, max_size)


def _picks(options: tuple[T, ...], min_size: int, max_size: int) -> st.SearchStrategy[list[T]]:
    n = len(options)
    return st.binary(min_size=min_size, max_size=max_size).map(
        lambda raw: [options[b % n] for b in raw])


def lists(elements: st.SearchStrategy[T], **sizes: Any) -> st.SearchStrategy[list[T]]:
    """st.lists(elements, **sizes), built once per element strategy and sizes (give it a
    strategy built once, so that it is the same key each time)."""
    return _built(st.lists, elements, **sizes)


def tuples(*parts: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    """st.tuples(*parts), built once per part strategies."""
    return _built(st.tuples, *parts)


def drawn_cases(cases: Sequence[Case], drawn: Iterable[dict[str, Any]]) -> list[Case]:
    """The drawn inputs as new cases `random-001`, `random-002`, ...: each input that no case
    in `cases` has and no earlier draw had (compared as canonical JSON), numbered in draw order.
    A repeat would be graded twice and count twice in "N of M cases fail"."""
    seen = {json.dumps(c["input"], sort_keys=True) for c in cases}
    fresh: list[Case] = []
    for inp in drawn:
        key = json.dumps(inp, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        fresh.append({"id": f"random-{len(fresh) + 1:03d}", "input": inp})
    return fresh


def with_draws(edge: list[Case], drawn: Iterable[str], size_key: Callable[[Case], Any]
               ) -> list[Case]:
    """The hidden cases most checks.py play: the edge cases and the fresh draws (JSON text, the
    form a per-seed cache keeps them in) as random-001, ..., smallest first."""
    cases = edge + drawn_cases(edge, [json.loads(raw) for raw in drawn])
    cases.sort(key=size_key)
    return cases


class Row(NamedTuple):
    rank: Any  # None: the Verdicts' rank(case)
    case: Case
    passed: bool
    message: str
    details: dict[str, Any]


class Verdicts:
    """Per check name, one row per case the check applies to: the case, whether it passed,
    the message for a failure and the rank that picks the smallest failure (by default
    `rank(case)`, the exercise's size_key). A check no case applies to is left out of the
    result (Run plays the public cases only, which may not reach every check)."""

    def __init__(self, rank: Callable[[Case], Any] | None = None) -> None:
        # Without `rank`, every add() gives its own.
        self.rank = rank
        # rank(case) by the case object: a starter fails every case on every check, and a
        # size_key may serialise the whole case, so each case is ranked once per grade.
        self._ranks: dict[int, Any] = {}
        self.rows: dict[str, list[Row]] = {}

    def add(self, name: str, case: Case, passed: bool, message: str = "", *,
            rank: Any = None, details: dict[str, Any] | None = None) -> None:
        """One case's verdict on one check. `rank` replaces `rank(case)` where the smallest
        failure is not the smallest case (the shortest failing prefix of a script, say);
        `details` go into the Check's details when this row is the failure shown."""
        self.rows.setdefault(name, []).append(Row(rank, case, passed, message, details or {}))

    def problem(self, name: str, case: Case, message: str) -> None:
        """A verdict written as the problem found: the case passes when `message` is empty."""
        self.add(name, case, not message, message)

    def _rank(self, row: Row) -> Any:
        if row.rank is not None:
            return row.rank
        if self.rank is None:
            raise TypeError(f"no rank for case {row.case['id']}: give Verdicts a rank(case)")
        key = id(row.case)  # the rows hold the case, so no other object takes its id meanwhile
        if key not in self._ranks:
            self._ranks[key] = self.rank(row.case)
        return self._ranks[key]

    def checks(self, table: CheckTable, *, noun: str = "cases", lead: str = "Smallest: ",
               bare_when_alone: bool = False) -> list[Check]:
        """One Check per name of `table` that some case applies to, in the table's order.

        A failure reads "{failing} of {total} {noun} fail. {lead}{message}", the message of the
        failing row of least rank (the first such row on a tie). `bare_when_alone`: a check
        that applies to a single case shows that case's message alone (a count "1 of 1" says
        nothing). Details: "cases" always; on a failure also "failing", "case" (the id of the
        case shown) and the shown row's own details."""
        out: list[Check] = []
        for name, weight, ok_message in table:
            rows = self.rows.get(name)
            if not rows:
                continue
            failures = [r for r in rows if not r.passed]
            if not failures:
                out.append(Check(name, True, ok_message, weight, {"cases": len(rows)}))
                continue
            # Ranked only here, on the failures: a size_key may serialise the whole case.
            shown = min(failures, key=self._rank)
            head = f"{len(failures)} of {len(rows)} {noun} fail. {lead}"
            if bare_when_alone and len(rows) == 1:
                head = ""
            out.append(Check(name, False, head + shown.message, weight,
                             {"case": shown.case["id"], **shown.details,
                              "failing": len(failures), "cases": len(rows)}))
        return out


def envelope(result: Any) -> dict[str, Any] | str | None:
    """What one case's result line holds, by shape alone (code in the sandbox can forge any
    line): the error text of a run that raised, the output dict of one that returned, or None
    for anything else."""
    if not isinstance(result, dict):
        return None
    if "error" in result:
        return result["error"] if isinstance(result["error"], str) else None
    out = result.get("output")
    return out if isinstance(out, dict) else None


def judge_each(cases: Sequence[Case], got: Sequence[Any], expected: Sequence[Any],
               judge: Callable[[Case, Any, Any, Verdicts], None], rank: Callable[[Case], Any],
               table: CheckTable, **summary: Any) -> list[Check]:
    """The usual `check()`: `judge(case, got, expected, verdicts)` for every case, then one
    Check per name of `table`, each failure naming its smallest case (`summary` goes to
    Verdicts.checks: noun, lead, bare_when_alone)."""
    v = Verdicts(rank)
    for case, g, e in zip(cases, got, expected, strict=True):
        judge(case, g, e, v)
    return v.checks(table, **summary)
