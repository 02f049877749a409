"""Typed shape of an exercise folder (DESIGN.md §2).

An exercise is `exercises/<slug>/` with `exercise.toml` (metadata and parts), `statement.md`,
`solution.md`, `exercise.py` (CANONICAL, generate, solve, mistakes), `selftest.toml` and, for code
parts, `code/`. These dataclasses are what `registry.load()` turns that folder into; nothing here
imports Django so graders, the command line and tests share one definition.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

PartType = Literal["number", "expression", "choice", "ranking", "text", "code", "kernel"]
# What an expression part's symbol stands for, so the grader samples it where it can live:
# "real" a positive real (the default), "count" an integer >= 1, "count0" an integer >= 0.
SymbolKind = Literal["real", "count", "count0"]
SYMBOL_KINDS: tuple[str, ...] = ("real", "count", "count0")
PART_TYPES: tuple[str, ...] = ("number", "expression", "choice", "ranking", "text", "code", "kernel")


@dataclass(frozen=True)
class Option:
    """One option of a `choice` or `ranking` part."""

    id: str
    label: str


@dataclass(frozen=True)
class KeyPoint:
    """One key point of a `text` part, as the automatic feedback checks it (graders/key_points.py).

    `text` is what the student and the instructor read. `also` are other ways a strong answer
    says it (short, one claim each); `against` are claims that assert the opposite, so an answer
    making one is marked contradicted rather than covered. `number` names an entry of the
    exercise's solution (a Quantity or a number) that a sentence must state, within
    `number_tolerance` (relative) of this variant's own value, for the point to count.
    """

    text: str
    also: tuple[str, ...] = ()
    against: tuple[str, ...] = ()
    number: str = ""
    number_tolerance: float = 0.25


@dataclass(frozen=True)
class PartSpec:
    """One graded part, as declared in `[[parts]]` of exercise.toml."""

    id: str
    type: PartType
    prompt: str
    points: float = 1.0
    # number: relative tolerance (0.02 = 2 %); 0 means exact. Also used as `abs_tolerance` floor.
    tolerance: float = 0.02
    abs_tolerance: float = 0.0
    unit: str = ""
    # expression: the names a formula may use (e.g. ["S", "T", "rho"]).
    symbols: tuple[str, ...] = ()
    # expression: (symbol, kind) for the symbols that are not positive reals, from the part's
    # `symbol_kinds` table; pairs, not a dict, so the spec stays hashable.
    symbol_kinds: tuple[tuple[str, SymbolKind], ...] = ()
    # choice / ranking
    options: tuple[Option, ...] = ()
    multi: bool = False
    # text: the key points shown after submitting (instructors grade on them)
    key_points: tuple[str, ...] = ()
    # text: the same key points with what checks them (paraphrases, contradictions, a number)
    key_point_specs: tuple[KeyPoint, ...] = ()
    # code / kernel
    language: str = "python"
    weight_checks: bool = True
    time_limit_s: float = 10.0  # CPU seconds for one sandboxed run of all cases (the wall clock
    # only backstops it, WALL_FACTOR times longer: runners/cpuclock.py)
    memory_mb: int = 512  # the sandbox's memory limit
    output_limit_kb: int = 1024  # stdout + stderr kept; more is cut and the run stopped
    # Shared, standard-library-only modules of exercises/ (e.g. "engine_sim") that the driver
    # imports by that plain name: copied into the sandbox beside driver.py.
    sandbox_modules: tuple[str, ...] = ()
    # Why the tolerance is not the default, shown to authors and reviewers.
    tolerance_reason: str = ""

    def symbol_kind(self, name: str) -> SymbolKind:
        """The kind of one of this part's symbols ("real" unless the part says otherwise)."""
        return dict(self.symbol_kinds).get(name, "real")


@dataclass(frozen=True)
class Quantity:
    """A number with its unit, the reference answer of a `number` part."""

    value: float
    unit: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"value": float(self.value), "unit": self.unit}


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer for one part and the feedback it earns.

    `answer` is in the part's own form: a float in the part's unit for `number`, a formula string
    for `expression`, an option id (or list of ids) for `choice`/`ranking`.
    """

    part: str
    answer: Any
    feedback: str
    name: str = ""
    # What sort of slip it is, an id of `exercises.mistake_kinds.KINDS` (gb_vs_gib, k_without_v,
    # ...), so a student's slips can be counted across exercises. Required: an exercise whose
    # mistake has no known kind does not load (registry.check_mistake_kinds). Slips that coincide
    # on one value keep every kind, joined by "|" (see `kinds`).
    kind: str = ""

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kind ids this entry stands for (several only for coinciding slips)."""
        return tuple(k for k in self.kind.split("|") if k)


@dataclass(frozen=True)
class Evidence:
    """Data a statement hands the student to read (a profiler trace, a latency series), made per
    variant by the exercise's optional `evidence(params) -> dict[str, Evidence]`.

    `data` is JSON-able and is served as `filename` for download; `kind` tells the page how to
    draw it: "trace" (Chrome trace-event JSON: {"traceEvents": [...]}) or "series" ({"x": {"label",
    "unit"}, "series": [{"label", "unit", "points": [[x, y], ...]}], and optionally "histogram":
    [unit, ...], the y units whose values are also drawn as a histogram).
    Everything in it comes from the variant, so a student's copy matches the numbers their parts
    are graded against.
    """

    title: str
    filename: str
    kind: str
    data: Any
    caption: str = ""


@dataclass(frozen=True)
class SelftestCase:
    """One line of selftest.toml: an answer and what it must earn."""

    part: str
    answer: str
    score: float | None = None  # expected score (None when `invalid`)
    invalid: bool = False
    feedback: str = ""  # a substring the feedback must contain
    variant: str = "canonical"
    file: str = ""  # a code file relative to the exercise folder (code parts)
    mutant: str = ""  # a mutant's name in the part's mutants.toml (code and kernel parts)
    tolerance: float = 1e-9  # how close the score must be
    # text parts: the key points (indices into key_points) the answer covers and contradicts,
    # as an expert labelled them; None when the case does not label key points. `label` names
    # the kind of answer ("strong", "partial", "negated", "keywords", "paraphrase", ...).
    covered: tuple[int, ...] | None = None
    contradicted: tuple[int, ...] = ()
    label: str = ""


@dataclass(frozen=True)
class ExerciseSpec:
    """A loaded exercise folder."""

    slug: str
    title: str
    seed: str
    topic: str
    difficulty: str
    minutes: int
    summary: str
    parts: tuple[PartSpec, ...]
    path: Path
    module: ModuleType = field(repr=False, compare=False)
    selftest: tuple[SelftestCase, ...] = ()
    # Stable across renames of the folder (exercise.toml `uuid`); always set by the registry,
    # empty only for a spec a test makes up.
    uuid: str = ""

    def part(self, part_id: str) -> PartSpec:
        for p in self.parts:
            if p.id == part_id:
                return p
        raise KeyError(f"{self.slug} has no part {part_id!r}")

    @property
    def code_dir(self) -> Path:
        return self.path / "code"

    @property
    def statement_template(self) -> str:
        return (self.path / "statement.md").read_text(encoding="utf-8")

    @property
    def solution_template(self) -> str:
        return (self.path / "solution.md").read_text(encoding="utf-8")
