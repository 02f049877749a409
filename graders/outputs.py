"""What the sandbox returns for one case, checked before any check reads it (issue 19, item 5).

A case's output is what `driver.run_case` returned inside the sandbox, and a submission can
replace that function, so the output is the student's to choose: any JSON the reply limit allows.
Checks are written for the shapes the driver produces; an integer like 10**4000 (float() of it
raises), an infinity, a string with a NUL (PostgreSQL refuses to store it) or an output nested a
thousand deep is none of those, and must cost the student that case, never crash the grade.

Two layers, both here so graders/code.py stays about the channel:

- `parse_output`: the strict parse of one reply plus range checks that hold for every exercise
  (finite numbers, integers within int64, bounded nesting, storable strings). A reply that fails
  becomes `{"error": "your output ..."}`, which every checks.py already reports as a failed case.
- `run_checks`: calls the exercise's `check`; should it still raise on an output of a type it did
  not expect, the outputs whose shape differs from the reference's are replaced by such an error
  and the checks run once more. Only an exception that no malformed output explains propagates
  (a bug in the checks: the pipeline's error verdict, as it should be).
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)

# No exercise's output holds an integer beyond int64 (hashes are hex strings) nor nests deeper
# than 6 levels (measured over every reference output); these leave room and stay cheap.
MAX_INT = 2**63 - 1
MAX_INT_DIGITS = len(str(MAX_INT))  # checked on the literal, before int() parses it
MAX_DEPTH = 32
# Where a shape problem is reported, at most this much of the path is shown.
MAX_PATH_CHARS = 120


class Malformed(ValueError):
    """One output cannot be handed to the checks; the message says why, to the student."""


def _reject_constant(name: str) -> Any:
    raise Malformed(f"holds {name}, which is not a JSON number: return a finite number")


def _parse_int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > MAX_INT_DIGITS or abs(int(text)) > MAX_INT:
        raise Malformed(f"holds an integer of {len(digits)} digits, outside the 64-bit range "
                        f"(at most {MAX_INT:,} in size)")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise Malformed(f"holds {text[:40]}, which overflows to an infinity: return a finite "
                        "number")
    return value


def _children(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        yield from value.keys()
        yield from value.values()
    elif isinstance(value, list):
        yield from value


def _bad_string(text: str) -> str:
    if "\x00" in text:
        return "holds a string with a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a string with an unpaired surrogate (not valid Unicode text)"
    return ""


def _check_tree(value: Any) -> None:
    """Depth and strings, without recursion (the value may be as deep as the parser allows)."""
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            why = _bad_string(node)
            if why:
                raise Malformed(why)
        elif isinstance(node, dict | list):
            if depth >= MAX_DEPTH:
                raise Malformed(f"is nested more than {MAX_DEPTH} levels deep")
            stack.extend((child, depth + 1) for child in _children(node))


# What could break a range check in an ASCII reply shows in its bytes with every digit read as
# 0, E as e and + as -: a run of 19 digits (an integer beyond int64 has one; so has a float
# literal that could overflow, with a 3-digit exponent the other way), or a \u escape (a NUL
# and the UTF-16 surrogates, the only strings that cannot be stored, are written as one). One
# translate and a few substring tests: a regex over every digit cost more than the parse.
_CHAR_CLASSES = bytes(ord("0") if 48 <= b <= 57 else ord("e") if chr(b) in "eE"
                      else ord("-") if chr(b) in "+-" else ord(".") for b in range(256))
_RISKY = (b"0" * 19, b"e000", b"e-000")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
# Everything but brackets, deleted before counting levels; braces count as brackets.
_NOT_A_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_ONE_BRACKET = bytes.maketrans(b"{}", b"[]")


def parse_output(payload: bytes) -> Any:
    """One case's output from its reply, or Malformed with the reason (in the student's terms:
    the message follows "your output for this case").

    Most replies are plain ASCII JSON with no long digit runs and no risky escapes: nothing in
    them can fail a range check but NaN, an infinity or depth, so the C parser reads them alone
    and the depth is counted on the bytes. A walk of every value in Python (`parse_walked`)
    was most of a grade's reading time for the large outputs. Any other reply is walked; a
    test holds the two to the same values and the same messages."""
    if not payload.isascii() or b"\x00" in payload or b"\\u" in payload:
        return parse_walked(payload)
    classes = payload.translate(_CHAR_CLASSES)
    if any(risky in classes for risky in _RISKY):
        return parse_walked(payload)
    value = _loads(payload)
    if _levels_above(payload, MAX_DEPTH):
        raise Malformed(f"is nested more than {MAX_DEPTH} levels deep")
    return value


def _levels_above(payload: bytes, limit: int) -> bool:
    """Whether valid JSON nests lists and dicts more than `limit` deep: its brackets outside
    strings, each round deleting every innermost pair (one level a round)."""
    if payload.count(b"[") + payload.count(b"{") <= limit:
        return False
    brackets = _STRING.sub(b"", payload).translate(_ONE_BRACKET, _NOT_A_BRACKET)
    for _ in range(limit):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
    return bool(brackets)


def parse_walked(payload: bytes) -> Any:
    """parse_output for any reply: every integer checked as it is parsed, every value walked."""
    value = _loads(payload, parse_int=_parse_int, parse_float=_parse_float)
    _check_tree(value)
    return value


def _loads(payload: bytes, **hooks: Any) -> Any:
    """json.loads (NaN and infinities refused, `hooks` added), its errors as Malformed."""
    try:
        return json.loads(payload, parse_constant=_reject_constant, **hooks)
    except Malformed:
        raise
    except RecursionError as exc:
        raise Malformed(f"is nested more than {MAX_DEPTH} levels deep") from exc
    except ValueError as exc:  # JSONDecodeError, and int()'s own digit limit
        raise Malformed("is not valid JSON") from exc


# -- the checks' own safety net ------------------------------------------------------------------

def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "a dict" if isinstance(value, dict) else type(value).__name__


def shape_problem(got: Any, expected: Any, where: str = "") -> str:
    """Where `got` differs in type from the reference's output for the same case ("" if
    nowhere): the dict keys the reference has, and the type at each place. A list is compared
    item by item, items past the reference's length against its last one. Values are never
    compared, and nothing of the expected value but its types is named."""
    stack = [(got, expected, where)]
    while stack:
        g, e, at = stack.pop()
        if e is None:
            continue  # the reference has nothing there: any value is a wrong answer, not a shape
        here = at or "the output"
        if _kind(g) != _kind(e):
            return f"{here[:MAX_PATH_CHARS]} is {_kind(g)} where {_kind(e)} was expected"
        if isinstance(e, dict):
            missing = [k for k in e if k not in g]
            if missing:
                return f"{here[:MAX_PATH_CHARS]} has no key {missing[0]!r}"
            stack.extend((g[k], e[k], f"{at}[{k!r}]") for k in e)
        elif isinstance(e, list) and e:
            stack.extend((x, e[min(i, len(e) - 1)], f"{at}[{i}]") for i, x in enumerate(g))
    return ""


Checks = Callable[[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]],
                   dict[str, Any]], Any]


def run_checks(check: Checks, cases: list[dict[str, Any]], got: list[dict[str, Any]],
               expected: list[dict[str, Any]], params: dict[str, Any]
               ) -> tuple[list[Any], list[str]]:
    """(the checks' results, ids of outputs refused as malformed after the checks raised)."""
    try:
        return list(check(cases, got, expected, params)), []
    except Exception as exc:
        refused: list[str] = []
        safe = list(got)
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            if "output" not in g or "output" not in e:
                continue
            problem = shape_problem(g["output"], e["output"])
            if problem:
                safe[i] = {"error": f"your output for this case is malformed: {problem}"}
                refused.append(cases[i]["id"])
        if not refused:
            raise
        log.warning("checks raised %r on malformed outputs %s; graded without them", exc,
                    refused[:10])
        return list(check(cases, safe, expected, params)), refused
