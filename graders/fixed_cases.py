"""Submit's hidden cases that every submission gets, and failures they alone show.

Submit draws its hidden cases per submission (practice.variants.hidden_seed), so a failing case
shown with its expected output is worth nothing in the next submission: it is not drawn again.
Some are drawn every time, whatever the seed: the hand-written edge cases and the smallest
draws, which Hypothesis tries first (10-30 % of each exercise's hidden set). A solution wrong on
one of those could copy the shown input and expected output into an `if` and reach 1.0 on the
next submission. So when a check fails on such cases only, its message names the check and
withholds the case; when it also fails on a case drawn for this submission alone, the message
is the one the checks write for those cases, which teaches just as well.

"The same for every seed" is approximated by "drawn for both of two fixed probe seeds": a case
drawn for both is treated as fixed (a little more is withheld than must be, never less). Timed
cases are left out: their output is a digest of a long script, nothing to copy.
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import ModuleType
from typing import Any

from graders import outputs

PROBE_SEEDS = (0x5EED_0001, 0x5EED_0002)
CACHE_SIZE = 64
WITHHELD = ("fails on a hidden edge case, one that every submission is graded on, so it is not "
            "shown (a case you could see and copy would stop telling a fix from a patch). "
            "Read the statement's rules for this check again, and try the edges in Run.")

_lock = threading.Lock()
_fixed: OrderedDict[tuple[int, str], dict[str, str]] = OrderedDict()


def input_key(case: dict[str, Any]) -> str:
    """A case's input as canonical JSON."""
    return json.dumps(case["input"], sort_keys=True, default=str)


def fixed_inputs(checks: ModuleType, params: dict[str, Any]) -> frozenset[str]:
    """The hidden inputs (as canonical JSON) drawn for every probe seed and not public: cached
    per checks module and variant, since drawing costs a Hypothesis run per probe seed."""
    return frozenset(fixed_ids(checks, params).values())


def fixed_ids(checks: ModuleType, params: dict[str, Any]) -> dict[str, str]:
    """fixed_inputs by the id their case had for the first probe seed (an edge case's id is
    its own; a draw's may differ by seed, so a case is fixed only if its input is too)."""
    cache_key = (id(checks), json.dumps(params, sort_keys=True, default=str))
    with _lock:
        hit = _fixed.get(cache_key)
        if hit is not None:
            _fixed.move_to_end(cache_key)
            return hit
    public = {input_key(c) for c in checks.public_cases(params)}
    drawn = [{input_key(c): c["id"] for c in checks.hidden_cases(params, seed)
              if not c.get("timed")} for seed in PROBE_SEEDS]
    found = set(drawn[0]).intersection(*drawn[1:]) - public
    ids = {drawn[0][key]: key for key in found}
    with _lock:
        _fixed[cache_key] = ids
        while len(_fixed) > CACHE_SIZE:
            _fixed.popitem(last=False)
    return ids


Checks = Callable[[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]],
                   dict[str, Any]], Sequence[Any]]


def _failing(check: Checks, keep: list[int], cases: list[dict[str, Any]],
             got: list[dict[str, Any]], expected: list[dict[str, Any]],
             params: dict[str, Any]) -> dict[str, Any] | None:
    """The checks' failures on the cases at `keep`, by name (None when the checks cannot be
    run on that subset: then nothing about the subset is known)."""
    if not keep:
        return {}
    try:
        results, _ = outputs.run_checks(check, [cases[i] for i in keep], [got[i] for i in keep],
                                        [expected[i] for i in keep], params)
    except Exception:
        return None
    return {c.name: c for c in results if not c.passed}


def retell(check: Checks, cases: list[dict[str, Any]], got: list[dict[str, Any]],
           expected: list[dict[str, Any]], params: dict[str, Any], results: list[Any],
           fixed: frozenset[str]) -> list[Any]:
    """`results` (the checks over every case) with each failure told without a fixed case: the
    score and pass/fail of every check stay as they are; only messages and details change."""
    if all(c.passed for c in results):
        return results
    is_fixed = [input_key(c) in fixed for c in cases]
    if not any(is_fixed):
        return results
    on_fixed = _failing(check, [i for i, f in enumerate(is_fixed) if f], cases, got, expected,
                        params)
    on_fresh = _failing(check, [i for i, f in enumerate(is_fixed) if not f], cases, got,
                        expected, params)
    told: list[Any] = []
    for c in results:
        if c.passed or (on_fixed is not None and c.name not in on_fixed):
            told.append(c)  # a fixed case plays no part in this failure
        elif on_fresh is not None and c.name in on_fresh:
            fresh = on_fresh[c.name]
            told.append(replace(c, message=fresh.message, details=fresh.details))
        else:
            told.append(replace(c, message=WITHHELD, details={}))
    return told
