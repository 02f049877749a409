"""Evidence that hands out an answer: a number part's reference printed where a student can read it.

An evidence file (a profiler trace, a timeline) is there to be read, measured or checked against.
It must not *state* a graded answer: the overload timeline used to plot the queue length whose peak
is part 1's backlog, the wait whose peak is part 2's, and a running dead-request count ending on
part 4's. `find_leaks` lists every such number; the registry refuses evidence that has one, and the
suite runs it over hundreds of variants of every exercise with evidence.

What counts as stated (the rule). A number is *stated* when a student gets it without computing
anything, by reading a label or by hovering over a point the plot singles out:

1. Text: every number written in a title, caption, axis or series label, series unit, a trace
   event's name or any other string (``"98,304 tokens"``, ``"cap 41"``, ``"1.5k"``).
2. Trace event args: every number under an event's ``args`` (a trace's own annotations).
3. A series' landmarks: its first and last point's y, its largest and smallest y, and the value
   of a constant series (every point the same). These are what a chart shows without effort: the
   peak of a queue, where a cumulative count ends, a flat line. A value that is merely *one of many
   points* (a stall among thousands of steps, a TTFT in the middle of a list) is not stated: a
   part that asks for a percentile or a mean of the series must be computed from the points.
4. A trace event's duration (one event whose span is the answer, e.g. an "idle" slice). Event
   timestamps are positions, like a series' x values, and are not checked.

A part is *measured* when the exercise says so in `EVIDENCE_MEASURED = {part_id: reason}` in
exercise.py: its statement asks the student to read it from the evidence (Q37's p99 of the step
times, Q03's gaps in the trace). Reading is then the skill, and a landmark equal to it (the
largest stall is within the p99's tolerance) is the point of the exercise; only labels (rules 1
and 2) are still checked, because a caption that prints the answer skips the measuring too.

When a number matches. A stated number matches a part when the number grader would accept it as
that part's answer: within the part's tolerance of its reference (exact for tolerance 0), after
the scaling a student would apply.
- A series or trace value with a known unit is converted exactly: a series' own ``unit`` (Pint,
  as the grader reads units) when it has the part's dimension (a "ms" series against a part in
  s); trace ``dur`` is in µs (the Chrome trace-event format; ``displayTimeUnit`` only changes the
  display). A series with no unit (or a dimensionless one, "%") is compared with any
  dimensionless part. A series counting things ("requests", "tokens", or a word Pint does not
  know, such as "steps") is compared as written with a count part only: its whole numbers can
  state a count, while a mean or a ratio matching its peak within tolerance is a coincidence. A
  series of a physical quantity ("tokens/s", "ms") is never compared with a part of another
  dimension.
- A number in text (or an arg) is read with the word right after it. When that word is a unit of
  the part's dimension ("0.41 s", "408 ms", "320 KiB"), the number is converted exactly from it.
  A dimensionless part takes a number followed by nothing, an ordinary word or a count of things
  ("41 requests", "cap 41 (reserve"); a non-integral one also as a percentage of it (0.033
  written "3.3"), as students type fractions both ways. A part with a unit never takes a bare
  number: without its unit a caption's "8.5" is no more 8.5 ms than 8.5 reservations, and trying
  every SI step on bare numbers would match almost any caption at some scale.

What is skipped, and why.
- A non-count part whose reference is a small whole number (|ref| <= 10 in its unit: "2.0 s",
  "4 ms"): such numbers are in every caption and axis (step 2, TP4, "3 decode steps") and a match
  says nothing. A count is still checked however small, because a label that prints a count (the
  cap of 7, 41 requests) is exactly the giveaway this guards against; counts match exactly or
  within their own (small) tolerance.
- A number the statement already prints (equal to a number in the rendered statement, or to one
  of the variant's numeric parameters): repeating a given is not a leak, even when the variant
  makes it equal to an answer (a 60 s spike that also leaves a 60 s wait).
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from exercises.spec import Evidence, ExerciseSpec, Quantity

SMALL_INTEGER = 10  # a non-count reference this small (and whole) is not checked: see above
EXACT_REL = 1e-9  # tolerance 0 means exact, up to float noise from unit conversion
TRACE_TIME_UNIT = "µs"  # ts and dur of the Chrome trace-event format
# Dimensions of physical quantities: a value in one of these is never a count.
PHYSICAL = frozenset({"[time]", "[length]", "[mass]", "[information]", "[current]",
                      "[temperature]", "[substance]", "[luminosity]"})

# A written number: an optional sign, digits with optional thousands commas, an optional
# fraction and exponent, and an optional k/M/G suffix ("44.9k") that multiplies it.
_NUMBER = re.compile(
    r"(?<![\w.])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?:([kMG])(?![A-Za-z]))?"
    r"(?:[ \u00a0]?([A-Za-zµ%][A-Za-zµ%]*(?:/[A-Za-z]+)?))?")
_SUFFIX = {"k": 1e3, "M": 1e6, "G": 1e9}


@dataclass(frozen=True)
class Target:
    """One number part's reference, as the check compares against it."""

    part: str
    value: float  # in the part's unit
    unit: str
    rel: float
    abs: float
    count: bool
    measured: bool

    def accepts(self, x: float) -> bool:
        return abs(x - self.value) <= max(self.rel * abs(self.value), self.abs)


@dataclass(frozen=True)
class Leak:
    """A stated number in an evidence file that a part would accept as its answer."""

    evidence: str  # the evidence's name
    where: str  # what in it states the number
    written: float  # the number as it is written there
    part: str
    reference: float  # the part's reference, in the part's unit
    unit: str

    def __str__(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return (f"{self.evidence}: {self.where} states {self.written:g}, which part "
                f"{self.part!r} accepts (reference {self.reference:g}{unit})")


def written_numbers(text: str) -> list[tuple[float, str]]:
    """Every number written in `text` with the word right after it ("98,304 tokens" ->
    (98304, "tokens"), "1.5k" -> (1500, ""), "−3" -> (-3, ""))."""
    found = []
    for m in _NUMBER.finditer(text):
        raw = m.group(0)
        suffix, word = m.group(1), m.group(2) or ""
        raw = raw[:len(raw) - len(word)].rstrip(" \u00a0")
        if suffix:
            raw = raw[:-1]
        try:
            x = float(raw.replace(",", "").replace("−", "-"))
        except ValueError:
            continue
        found.append((x * _SUFFIX[suffix] if suffix else x, word))
    return found


def numbers_in(text: str) -> list[float]:
    """Every number written in `text`."""
    return [x for x, _ in written_numbers(text)]


def targets(spec: ExerciseSpec, solution: dict[str, Any]) -> list[Target]:
    """The number parts' references that evidence is checked against (see the module doc)."""
    from graders.units import conversion_factor, parse_unit  # Pint: only when checking

    measured = getattr(spec.module, "EVIDENCE_MEASURED", {})
    out = []
    for part in spec.parts:
        if part.type != "number":
            continue
        ref = solution[part.id]
        target_unit = parse_unit(part.unit or "")
        if isinstance(ref, Quantity):
            value = float(ref.value) * conversion_factor(parse_unit(ref.unit or ""), target_unit)
        else:
            value = float(ref)
        count = target_unit.is_dimensionless and part.unit != "%" and value == round(value)
        if not count and value == round(value) and abs(value) <= SMALL_INTEGER:
            continue
        rel = part.tolerance if part.tolerance and part.tolerance > 0 else EXACT_REL
        out.append(Target(part.id, value, part.unit or "", rel, max(part.abs_tolerance, 0.0),
                          count, part.id in measured))
    return out


@lru_cache(maxsize=4096)  # the same few units and words recur thousands of times
def _read_unit(word: str) -> Any:
    """The unit `word` names, or None for an ordinary word or none."""
    from graders.base import InvalidAnswer
    from graders.units import parse_unit

    if not word:
        return None
    try:
        return parse_unit(word)
    except InvalidAnswer:
        return None


def _counts_things(unit: Any) -> bool:
    """A unit a count part may be written in: none, dimensionless, or a count of things
    ("requests", "tokens"), as opposed to a physical quantity ("tokens/s", "ms", "GB")."""
    return unit is None or not set(dict(unit.unit.dimensionality)) & PHYSICAL


@lru_cache(maxsize=4096)  # the same few units and words recur thousands of times
def _text_factors(t: Target, word: str) -> tuple[float, ...]:
    """How many of the written unit one of the part's unit may be, for a number in text followed
    by `word` (see the module doc); empty when the number cannot be this part's answer."""
    from graders.units import compatible, conversion_factor, parse_unit

    part_unit = parse_unit(t.unit)
    unit = _read_unit(word)
    if unit is not None and compatible(unit, part_unit):
        return (conversion_factor(part_unit, unit),)
    if not part_unit.is_dimensionless or not _counts_things(unit):
        return ()
    if t.count:
        return (1.0,)
    return (1.0, 0.01) if t.unit == "%" else (1.0, 100.0)


@lru_cache(maxsize=4096)  # the same few units and words recur thousands of times
def _unit_factor(t: Target, unit_text: str) -> float | None:
    """How many `unit_text` one of the part's unit is, or None when a value in `unit_text`
    cannot be compared with the part (see the module doc)."""
    from graders.units import compatible, conversion_factor, parse_unit

    part_unit = parse_unit(t.unit)
    if not unit_text.strip():
        return 1.0 if part_unit.is_dimensionless else None
    unit = _read_unit(unit_text)
    if unit is not None and compatible(unit, part_unit):
        return conversion_factor(part_unit, unit)
    # A series counting things ("requests", or a word Pint does not know, such as "steps")
    # holds whole numbers: its peak can state a count, not a mean or a ratio within tolerance.
    return 1.0 if t.count and _counts_things(unit) else None


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string inside a JSON value, with where it is."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k, f"{where} key")
            yield from _strings(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{where}[{i}]")


def _numbers(value: Any, where: str) -> Iterator[tuple[str, float, str]]:
    """Every number inside a JSON value (strings parsed too, with the word after each), with
    where it is."""
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield where, float(value), ""
    elif isinstance(value, str):
        for x, word in written_numbers(value):
            yield where, x, word
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{where}[{i}]")


def _landmarks(points: list[Any]) -> Iterator[tuple[str, float]]:
    ys = [float(p[1]) for p in points if isinstance(p, list | tuple) and len(p) >= 2
          and isinstance(p[1], int | float) and not isinstance(p[1], bool)]
    if not ys:
        return
    if all(y == ys[0] for y in ys):
        yield "constant value", ys[0]
        return
    yield "first point", ys[0]
    yield "last point", ys[-1]
    yield "largest value", max(ys)
    yield "smallest value", min(ys)


def _givens(spec: ExerciseSpec, params: dict[str, Any], solution: dict[str, Any]) -> set[float]:
    """Numbers the statement already prints: in the rendered statement, and the parameters."""
    from exercises.hints import parse
    from exercises.templating import render

    found: set[float] = set()
    try:
        # The practice statement: a hint marker's cost is not a number the student is given.
        text = parse(render(spec.statement_template, params, solution)).practice
        found.update(_key(x) for x in numbers_in(text))
    except (ValueError, KeyError):  # the selftest reports a template that does not render
        pass
    for _, x, _ in _numbers(params, "params"):
        found.add(_key(x))
    return found


def _key(x: float) -> float:
    """`x` to 9 significant figures: a given and its copy in the evidence differ by float noise."""
    return float(f"{x:.9g}")


def _is_given(x: float, givens: set[float]) -> bool:
    return _key(x) in givens


def find_leaks(spec: ExerciseSpec, params: dict[str, Any], solution: dict[str, Any],
               found: dict[str, Evidence]) -> list[Leak]:
    """Every stated number in the evidence that a number part would accept (module doc)."""
    ts = targets(spec, solution)
    if not ts or not found:
        return []
    givens = _givens(spec, params, solution)
    leaks: list[Leak] = []

    def text(name: str, where: str, x: float, word: str = "") -> None:
        if _is_given(x, givens):
            return
        for t in ts:
            if any(t.accepts(x / f) for f in _text_factors(t, word)):
                leaks.append(Leak(name, where, x, t.part, t.value, t.unit))

    def valued(name: str, where: str, x: float, unit: str) -> None:
        if _is_given(x, givens):
            return
        for t in ts:
            if t.measured:
                continue
            factor = _unit_factor(t, unit)
            if factor is not None and t.accepts(x / factor):
                leaks.append(Leak(name, where, x, t.part, t.value, t.unit))

    for name, ev in found.items():
        for where, s in _strings({"title": ev.title, "caption": ev.caption}, name):
            for x, word in written_numbers(s):
                text(name, where, x, word)
        data = ev.data
        if ev.kind == "series":
            rest = {k: v for k, v in data.items() if k != "series"}
            for where, s in _strings(rest, name):
                for x, word in written_numbers(s):
                    text(name, where, x, word)
            for i, series in enumerate(data["series"]):
                label = series.get("label", f"series {i}")
                meta = {k: v for k, v in series.items() if k != "points"}
                for where, s in _strings(meta, f"{name} series {label!r}"):
                    for x, word in written_numbers(s):
                        text(name, where, x, word)
                for what, y in _landmarks(series["points"]):
                    valued(name, f"series {label!r}: its {what}", y, str(series.get("unit", "")))
        else:
            rest = {k: v for k, v in data.items() if k != "traceEvents"}
            for where, x, word in _numbers(rest, name):
                text(name, where, x, word)
            for i, event in enumerate(data["traceEvents"]):
                if not isinstance(event, dict):
                    continue
                label = f"event {i} ({event.get('name', '?')})"
                for key, value in event.items():
                    if key == "args":
                        for where, x, word in _numbers(value, f"{label} args"):
                            text(name, where, x, word)
                    elif key == "dur" and isinstance(value, int | float):
                        valued(name, f"{label} dur", float(value), TRACE_TIME_UNIT)
                    elif isinstance(value, str):
                        for x, word in written_numbers(value):
                            text(name, f"{label} {key}", x, word)
    return leaks
