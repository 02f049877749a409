"""A text part's `key_points` as exercise.toml gives them, read into KeyPoint records.

Either plain strings (the instructor's rubric, nothing more to check them by)

    key_points = ["every weight is read once per step", "..."]

or one table each, with what lets the automatic feedback check them (graders/key_points.py):

    [[parts.key_points]]
    text = "every weight is read once per step"
    also = ["each decode step streams all the weights from HBM"]
    against = ["the weights stay on chip between steps"]
    number = "weight_bytes"          # an entry of solve()'s result the sentence must state
    number_tolerance = 0.25          # relative; the default
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from exercises.spec import KeyPoint

KEY_POINT_KEYS = {"text", "also", "against", "number", "number_tolerance"}
MAX_CLAIM_CHARS = 400


class KeyPointError(ValueError):
    """A key point table that cannot be read; the message names the field."""


def _strings(raw: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise KeyPointError(f"{where}.{key}: expected a list of non-empty strings")
    too_long = [v for v in value if len(v) > MAX_CLAIM_CHARS]
    if too_long:
        raise KeyPointError(f"{where}.{key}: keep each claim under {MAX_CLAIM_CHARS} characters "
                            f"(one claim, the way a student would say it): {too_long[0][:60]!r}")
    return tuple(v.strip() for v in value)


def parse(items: list[Any], where: str) -> tuple[KeyPoint, ...]:
    """The part's key points, in order; raises KeyPointError naming the bad field."""
    points = []
    for i, raw in enumerate(items):
        at = f"{where}[{i}]"
        if isinstance(raw, str):
            points.append(KeyPoint(text=raw))
            continue
        if not isinstance(raw, dict):
            raise KeyPointError(f"{at}: expected a string or a table with `text`")
        unknown = set(raw) - KEY_POINT_KEYS
        if unknown:
            raise KeyPointError(f"{at}.{sorted(unknown)[0]}: unknown field "
                                f"(one of {', '.join(sorted(KEY_POINT_KEYS))})")
        text = raw.get("text")
        if not isinstance(text, str) or not text.strip():
            raise KeyPointError(f"{at}.text: the key point itself, as the student reads it")
        number = raw.get("number", "")
        tolerance = raw.get("number_tolerance", 0.25)
        if not isinstance(number, str):
            raise KeyPointError(f"{at}.number: the name of an entry of solve()'s result")
        if not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1:
            raise KeyPointError(f"{at}.number_tolerance: a relative tolerance in (0, 1)")
        points.append(KeyPoint(text=text.strip(), also=_strings(raw, "also", at),
                               against=_strings(raw, "against", at), number=number,
                               number_tolerance=float(tolerance)))
    return tuple(points)


def check_numbers(points: tuple[KeyPoint, ...], solution: dict[str, Any], path: Path,
                  part_id: str) -> None:
    """Every `number` names an entry of solve()'s result that is a number (checked once per
    exercise at load, on the canonical variant, so a typo fails loudly, not silently)."""
    from exercises.spec import Quantity

    for i, point in enumerate(points):
        if not point.number:
            continue
        value = solution.get(point.number)
        if not isinstance(value, (Quantity, int, float)) or isinstance(value, bool):
            raise KeyPointError(f"{path}: {part_id}.key_points[{i}].number: {point.number!r} is "
                                "not a numeric entry of solve()'s result")
