"""Graders: one module per part type, each with `grade(part, answer_text, ctx) -> GradeResult`.

Listed explicitly (adding a part type = one module + one line here). `grade_answer` is the single
entry point the site, the command line and the selftest share, so all three grade identically.
No Django here.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exercises import registry
from exercises.spec import ExerciseSpec, PartSpec, Quantity
from graders import choice, code, expression, kernel, number, text
from graders.base import GradeContext, GradeResult, InvalidAnswer

Grader = Callable[[PartSpec, str, GradeContext], GradeResult]

GRADERS: dict[str, Grader] = {
    "number": number.grade,
    "expression": expression.grade,
    "choice": choice.grade,
    "ranking": choice.grade,
    "text": text.grade,
    "code": code.grade,
    "kernel": kernel.grade,
}

MAX_ANSWER_CHARS = 100_000


def context_for(spec: ExerciseSpec, part: PartSpec, params: dict[str, Any], *,
                mode: str = "submit", seed: int = 0) -> GradeContext:
    solution = registry.solve(spec, params)
    return GradeContext(
        reference=solution[part.id],
        mistakes=registry.mistakes(spec, params, part.id),
        params=params,
        symbol_values=(registry.symbol_values(spec, params).get(part.id, {})
                       if part.type == "expression" else {}),
        exercise_path=str(spec.path),
        mode="run" if mode == "run" else "submit",
        seed=seed,
        key_numbers=key_numbers(part, solution) if part.type == "text" else {},
    )


def key_numbers(part: PartSpec, solution: dict[str, Any]) -> dict[int, tuple[float, str, float]]:
    """This variant's value of each key point's `number` (an entry of solve()'s result)."""
    out = {}
    for i, point in enumerate(part.key_point_specs):
        if point.number:
            value = solution[point.number]
            if isinstance(value, Quantity):
                out[i] = (float(value.value), value.unit, point.number_tolerance)
            else:
                out[i] = (float(value), "", point.number_tolerance)
    return out


def grade_answer(spec: ExerciseSpec, part_id: str, answer_text: str, params: dict[str, Any], *,
                 mode: str = "submit", seed: int = 0) -> GradeResult:
    """Grade one answer to one part of one variant. Raises InvalidAnswer for unreadable input."""
    part = spec.part(part_id)
    if not isinstance(answer_text, str):
        raise InvalidAnswer("the answer must be text")
    if len(answer_text) > MAX_ANSWER_CHARS:
        raise InvalidAnswer(f"the answer is longer than {MAX_ANSWER_CHARS:,} characters")
    if "\x00" in answer_text:
        raise InvalidAnswer("the answer contains a NUL character")
    grader = GRADERS.get(part.type)
    if grader is None:
        raise InvalidAnswer(f"parts of type {part.type!r} cannot be graded yet")
    return grader(part, answer_text, context_for(spec, part, params, mode=mode, seed=seed))


def invalid_result(message: str) -> GradeResult:
    return GradeResult(score=0.0, verdict="invalid", feedback=message)
