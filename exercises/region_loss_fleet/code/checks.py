"""Test cases and checks for `min_fleet` (runs in the worker, never in the sandbox).

A case input is {"regions": [[name, demand], ...], "r": number, "U": number}. Each result handed
to `check()` is {"output": <driver.run_case dict>} or {"error": "..."}; `expected` holds the
reference's results. The invariants (every region covers its own peak; every single-region loss
leaves enough capacity) are checked with exact fractions, independently of the reference; the
total is compared with the reference's minimum and the placement with its exact output. Each
failing check names the smallest case it fails on (fewest regions, then least demand).
"""
from __future__ import annotations

import json
import math
from fractions import Fraction
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from graders import checkkit
from graders.base import Check

Case = dict[str, Any]

CANONICAL_REGIONS: tuple[tuple[str, int], ...] = (("us-east", 500), ("us-west", 300),
                                                  ("eu-west", 200))
NAMES: tuple[str, ...] = ("us-east", "us-west", "eu-west", "eu-central", "ap-south",
                          "ap-northeast", "sa-east")
US: tuple[float, ...] = (0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 1.0)

# Hand-written cases: (name, regions, r, U).
EDGE_VALID: tuple[tuple[str, tuple[tuple[str, float], ...], float, float], ...] = (
    ("canonical", CANONICAL_REGIONS, 10, 0.7),
    ("two-regions", (("us-east", 300), ("eu-west", 100)), 10, 0.5),
    ("four-equal-regions", (("a", 100), ("b", 100), ("c", 100), ("d", 100)), 10, 0.5),
    ("five-equal-regions", tuple((n, 70) for n in NAMES[:5]), 7, 1.0),
    ("one-dominant-region", (("us-east", 900), ("us-west", 50), ("eu-west", 50)), 10, 0.8),
    ("exact-multiples", (("us-east", 140), ("us-west", 70), ("eu-west", 70)), 10, 0.7),
    ("tiny-regions", (("us-east", 1), ("us-west", 1), ("eu-west", 1)), 10, 0.7),
    ("zero-demand-region", (("us-east", 400), ("us-west", 0), ("eu-west", 200)), 10, 0.8),
    ("all-zero", (("us-east", 0), ("eu-west", 0)), 10, 0.7),
    ("ties-in-order", (("c", 50), ("a", 50), ("b", 50)), 5, 1.0),
    ("fractional-demands", (("us-east", 123.5), ("us-west", 80.25), ("eu-west", 41.75)), 3.5,
     0.75),
    ("full-utilisation", (("us-east", 95), ("us-west", 85), ("eu-west", 45),
                          ("eu-central", 15)), 10, 1.0),
)
EDGE_INVALID: tuple[tuple[str, tuple[tuple[str, float], ...], float, float], ...] = (
    ("one-region", (("us-east", 500),), 10, 0.7),
    ("no-regions", (), 10, 0.7),
    ("negative-demand", (("us-east", 500), ("us-west", -1)), 10, 0.7),
    ("zero-r", (("us-east", 500), ("us-west", 300)), 0, 0.7),
    ("zero-U", (("us-east", 500), ("us-west", 300)), 10, 0.0),
    ("U-above-one", (("us-east", 500), ("us-west", 300)), 10, 1.5),
)
RANDOM_CASES = 150
# A quotient this close to a whole number (and not exactly one) could round differently between
# two correct implementations; such draws are skipped.
CEIL_GUARD = 1e-6


def make_case(case_id: str, regions: Any, r: float, U: float) -> Case:
    return {"id": case_id, "input": {"regions": [[n, d] for n, d in regions], "r": r, "U": U}}


def public_cases(params: dict[str, Any]) -> list[Case]:
    """The examples a student can Run: the variant's fleet, the canonical one, four equal regions."""
    cases = []
    regions = [(n, d) for n, d in params.get("regions", CANONICAL_REGIONS)]
    r, U = params.get("r", 10), params.get("U", 0.7)
    cases.append(make_case("example-1", regions, r, U))
    if (tuple(map(tuple, regions)), r, U) != (CANONICAL_REGIONS, 10, 0.7):
        cases.append(make_case("example-2", CANONICAL_REGIONS, 10, 0.7))
    cases.append(make_case("example-3", (("a", 100), ("b", 100), ("c", 100), ("d", 100)), 10, 0.5))
    return cases


# ---------------------------------------------------------------- exact arithmetic


def _q(x: float) -> Fraction:
    # Through repr: 0.7 is read as 7/10, what the statement means, not the binary double.
    return Fraction(repr(x))


def _exact(inp: dict[str, Any]) -> tuple[list[int], int, Fraction]:
    """(a_i, B, D / q) computed exactly."""
    q = _q(inp["r"]) * _q(inp["U"])
    demands = [_q(d) for _, d in inp["regions"]]
    a = [math.ceil(d / q) for d in demands]
    need = sum(demands, Fraction(0)) / q
    return a, math.ceil(need), need


def _float_safe(inp: dict[str, Any]) -> bool:
    """Every quotient a student computes in floats rounds up the same as the exact one."""
    r, U = inp["r"], inp["U"]
    values = [d for _, d in inp["regions"]] + [sum(d for _, d in inp["regions"])]
    for d in values:
        exact = _q(d) / (_q(r) * _q(U))
        if exact.denominator == 1:
            if not (d / (r * U) == d / r / U == d / (U * r) == exact):
                return False
        elif abs(exact - round(exact)) <= CEIL_GUARD:
            return False
    return True


def _bound_text(inp: dict[str, Any], total: int, best: int) -> str:
    """The case's a_i and B and what is wrong, not the closed form for the minimum: that form
    answers parts 1 and 3 (the smallest fleet and the cap), so the message must not print it."""
    a, b, _ = _exact(inp)
    given = f"a = {a} (sum {sum(a)}), B = {b}"
    if total > best:
        return (f"{given}; a smaller fleet still covers every region's own peak and leaves at "
                "least B after the loss of any one region")
    return f"{given}; {_replicas(total)} cannot cover both after every single loss"


# ---------------------------------------------------------------- hidden cases


@st.composite
def _random_case(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(checkkit.integers(2, 6))
    names = draw(st.permutations(NAMES))[:n]
    # Each demand is drawn on its own scale so that one region can dominate, or none does.
    regions = [[name, draw(checkkit.integers(0, 99))
                * draw(checkkit.sampled_from((1, 1, 10, 10, 10)))
                + draw(checkkit.integers(0, 9))] for name in names]
    return {"regions": regions, "r": draw(checkkit.integers(1, 40)),
            "U": draw(checkkit.sampled_from(US))}


@lru_cache(maxsize=16)
def _random_inputs(seed: int, n: int) -> tuple[str, ...]:
    """n Hypothesis draws for this seed, as JSON strings (hashable, copied on every use).

    The same cases in every process (graders.checkkit.draw)."""
    return tuple(json.dumps(case) for case in checkkit.draw(_random_case(), seed, n))


def size_key(case: Case) -> tuple[int, float, str]:
    """Smaller cases first: fewer regions, then less total demand."""
    inp = case["input"]
    return (len(inp["regions"]), sum(d for _, d in inp["regions"]), json.dumps(inp))


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """Hand-written edges, invalid inputs, then Hypothesis draws for the seed; smallest first."""
    cases = [make_case(f"edge-{name}", regions, r, U)
             for name, regions, r, U in EDGE_VALID + EDGE_INVALID]
    drawn = [json.loads(raw) for raw in _random_inputs(int(seed), RANDOM_CASES)]
    cases += checkkit.drawn_cases(cases, [inp for inp in drawn if _float_safe(inp)])
    cases.sort(key=size_key)
    return cases


# ---------------------------------------------------------------- checks


def describe(case: Case) -> str:
    inp = case["input"]
    demands = "{" + ", ".join(f"{n!r}: {d!r}" for n, d in inp["regions"]) + "}"
    return f"min_fleet({demands}, r={inp['r']!r}, U={inp['U']!r})"


# name -> (weight, message when every case passes)
CHECKS: tuple[tuple[str, float, str], ...] = (
    ("whole replicas for the same regions", 1.0,
     "Every answer had the input's regions, in order, with a whole number of replicas each."),
    ("each region covers its own peak", 1.0,
     "Every region had at least ceil(d_i / (r·U)) replicas."),
    ("survives the loss of any one region", 2.0,
     "After losing any one region, the rest could carry the whole demand under U."),
    ("smallest total", 2.0, "Every fleet had the smallest possible total."),
    ("spare placed by the rule", 1.0,
     "Every placement matched the rule (emptiest region first, ties to the first listed)."),
    ("rejects invalid input", 1.0, "Every invalid input raised ValueError."),
)
VALID_CHECKS = tuple(name for name, _, _ in CHECKS[:5])


def _well_formed(result: Any) -> bool:
    """Whether a result has the shape the driver writes (a line can be forged from inside)."""
    out = checkkit.envelope(result)
    if not isinstance(out, dict):
        return out is not None  # a run's error text is well formed; any other shape is not
    if "fleet" in out:
        rows = out["fleet"]
        return isinstance(rows, list) and all(
            isinstance(row, list) and len(row) == 2 and isinstance(row[0], str)
            and isinstance(row[1], int) and not isinstance(row[1], bool) for row in rows)
    return isinstance(out.get("raised"), str) or isinstance(out.get("bad"), str)


def _judge(case: Case, got: Any, exp: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """(check name, passed, message) for each check that applies to this case."""
    inp = case["input"]
    where = describe(case)
    e_out = exp["output"]
    if "fleet" not in e_out:  # the reference refused it: so must the student
        name = "rejects invalid input"
        if not _well_formed(got) or "error" in got:
            why = "the output is malformed" if not _well_formed(got) else got["error"]
            return [(name, False, f"{why} — on {where}")]
        g_out = got["output"]
        if str(g_out.get("raised", "")).split(":", 1)[0].strip() == "ValueError":
            return [(name, True, "")]
        what = ("raised " + g_out["raised"].strip()) if "raised" in g_out else (
            "returned " + json.dumps(g_out.get("fleet", g_out.get("bad")))[:120])
        return [(name, False, f"{where} should raise ValueError ({_why_invalid(inp)}), but it "
                              f"{what}")]
    if not _well_formed(got):
        return [(n, False, f"the output for {where} is malformed") for n in VALID_CHECKS]
    if "error" in got:
        return [(n, False, f"{got['error']} — on {where}") for n in VALID_CHECKS]
    g_out = got["output"]
    if "fleet" not in g_out:
        what = ("raised " + g_out["raised"].strip()) if "raised" in g_out else g_out["bad"]
        return [(n, False, f"{where} {what}") for n in VALID_CHECKS]

    fleet = g_out["fleet"]
    want = e_out["fleet"]
    names = [n for n, _ in inp["regions"]]
    out: list[tuple[str, bool, str]] = []
    shape_ok = [n for n, _ in fleet] == names and all(c >= 0 for _, c in fleet)
    out.append(("whole replicas for the same regions", shape_ok, "" if shape_ok else (
        f"{where} returned regions {[n for n, _ in fleet]} with {[c for _, c in fleet]} replicas; "
        f"expected the regions {names}, in that order, each with >= 0 replicas")))
    if not shape_ok:
        return out + [(n, False, f"{where}: the regions are wrong, see the first check")
                      for n in VALID_CHECKS[1:]]
    counts = [c for _, c in fleet]
    a, b, need = _exact(inp)
    q = _q(inp["r"]) * _q(inp["U"])
    short = [(names[i], counts[i], a[i]) for i in range(len(a)) if counts[i] < a[i]]
    out.append(("each region covers its own peak", not short, "" if not short else (
        f"{where} gives {short[0][0]} {short[0][1]} replicas, but its own peak needs "
        f"ceil({inp['regions'][names.index(short[0][0])][1]!r} / (r·U)) = {short[0][2]}")))
    total = sum(counts)
    lost = [(names[j], total - counts[j]) for j in range(len(counts))
            if total - counts[j] < need]
    msg = ""
    if lost:
        name, left = max(lost, key=lambda x: need - x[1])
        msg = (f"{where} returned {dict(zip(names, counts, strict=True))}: losing {name} leaves "
               f"{_replicas(left)} = {float(left * q):g} req/s under U, but the fleet's peak is "
               f"{float(need * q):g} req/s (needs {_replicas(b)})")
    out.append(("survives the loss of any one region", not lost, msg))
    best = sum(c for _, c in want)
    ok_total = total == best
    out.append(("smallest total", ok_total, "" if ok_total else (
        f"{where} returned {_replicas(total)} in all; the minimum is {best} — "
        f"{_bound_text(inp, total, best)}")))
    ok_place = counts == [c for _, c in want]
    out.append(("spare placed by the rule", ok_place, "" if ok_place else (
        f"{where} returned {dict(zip(names, counts, strict=True))}, expected "
        f"{dict(want)} (start at a_i, then one replica at a time to the emptiest region, "
        "ties to the first listed)")))
    return out


def _replicas(k: int) -> str:
    return f"{k} replica" if k == 1 else f"{k} replicas"


def _why_invalid(inp: dict[str, Any]) -> str:
    if len(inp["regions"]) < 2:
        return "one region cannot survive its own loss"
    if any(d < 0 for _, d in inp["regions"]):
        return "a demand is negative"
    if not inp["r"] > 0:
        return "r must be positive"
    return "U must be in (0, 1]"


def check(cases: list[Case], got: list[Any], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    """Named checks over all cases; each failure names the smallest case it fails on."""
    v = checkkit.Verdicts(size_key)
    for case, g, e in zip(cases, got, expected, strict=True):
        for name, ok, message in _judge(case, g, e):
            v.add(name, case, ok, message)
    return v.checks(CHECKS)
