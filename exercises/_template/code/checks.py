"""Cases and checks for the template's code part (runs in the worker, never in the sandbox).

A case input is {"num_tokens": n, "block_size": b}. Each result handed to `check()` is
{"output": <driver.run_case dict>} or {"error": "..."}; `expected` holds the reference's results
for the same cases. Every failing check names the smallest case it fails on. The shared pieces
(seeded draws, random case ids, the "N of M cases fail. Smallest: ..." summary) are
graders/checkkit.py's.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from graders import checkkit
from graders.base import Check

Case = dict[str, Any]
RANDOM_CASES = 60
EDGE_CASES: tuple[tuple[str, int, int], ...] = (
    ("zero-tokens", 0, 16), ("one-token", 1, 16), ("exact-multiple", 32, 16),
    ("one-past-a-multiple", 33, 16), ("block-size-one", 7, 1),
    ("invalid-block-size", 5, 0), ("invalid-negative-tokens", -1, 16),
)


def make_case(case_id: str, num_tokens: int, block_size: int) -> Case:
    return {"id": case_id, "input": {"num_tokens": num_tokens, "block_size": block_size}}


def public_cases(params: dict[str, Any]) -> list[Case]:
    """What Run plays: a prompt with a partial last block and one that fills its blocks."""
    return [make_case("example-1", 14, 4), make_case("example-2", 16, 4)]


@st.composite
def _random_input(draw: st.DrawFn) -> dict[str, Any]:
    # Any range draws the same values for a seed in every process (checkkit.draw leaves out the
    # literals Hypothesis would collect from loaded source files). A list of small choices is
    # cheaper as checkkit.picks: one Hypothesis choice for the whole list.
    tokens = draw(checkkit.integers(0, 99)) * draw(checkkit.sampled_from((1, 7, 33)))
    return {"num_tokens": tokens, "block_size": draw(checkkit.sampled_from((1, 2, 4, 16, 32)))}


@lru_cache(maxsize=16)
def _random_inputs(seed: int) -> tuple[str, ...]:
    """The drawn inputs for a seed, as JSON (hashable for the cache, copied on every use)."""
    return tuple(json.dumps(d, sort_keys=True)
                 for d in checkkit.draw(_random_input(), seed, RANDOM_CASES))


def size_key(case: Case) -> tuple[int, int, str]:
    """Smaller cases first: fewer tokens, then smaller blocks."""
    inp = case["input"]
    return (abs(inp["num_tokens"]), inp["block_size"], json.dumps(inp, sort_keys=True))


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """The edge cases plus Hypothesis draws, deterministic for a seed, smallest first."""
    edge = [make_case(f"edge-{name}", n, b) for name, n, b in EDGE_CASES]
    return checkkit.with_draws(edge, _random_inputs(int(seed)), size_key)


def describe(case: Case) -> str:
    inp = case["input"]
    return f"blocks_needed({inp['num_tokens']}, {inp['block_size']})"


# name, weight, message when every case it applies to passes
CHECKS: tuple[tuple[str, float, str], ...] = (
    ("no crash", 1.0, "blocks_needed returned an int on every valid input."),
    ("block count", 2.0, "blocks_needed matched on every valid input."),
    ("rejects invalid input", 1.0,
     "A negative num_tokens or a block_size below 1 raised ValueError."),
)


def _valid(inp: dict[str, Any]) -> bool:
    return inp["num_tokens"] >= 0 and inp["block_size"] >= 1


def _well_formed(out: Any) -> bool:
    """The shape the driver writes (code in the sandbox can send anything JSON instead)."""
    if not isinstance(out, dict) or len(out) != 1:
        return False
    if "value" in out:
        return isinstance(out["value"], int) and not isinstance(out["value"], bool)
    return isinstance(out.get("raised", out.get("bad")), str)


def _judge(case: Case, got: dict[str, Any], exp: dict[str, Any], v: checkkit.Verdicts) -> None:
    inp, where = case["input"], describe(case)
    names = ("no crash", "block count") if _valid(inp) else ("rejects invalid input",)
    out = got.get("output")
    if "error" in got or not _well_formed(out):
        msg = str(got.get("error") or "the output for this case is malformed").rstrip()
        for name in names:
            v.add(name, case, False, f"{msg} — on {where}")
        return
    if not _valid(inp):
        raised = out.get("raised", "")
        did = f"raised {raised.strip()}" if raised else f"returned {out.get('value', out.get('bad'))}"
        v.problem("rejects invalid input", case, "" if raised.startswith("ValueError") else (
            f"{where} should raise ValueError (a block holds at least one token, and a request "
            f"at least zero), but it {did}"))
        return
    if "value" not in out:
        msg = f"{where} {'raised ' + out['raised'].strip() if 'raised' in out else out['bad']}"
        v.add("no crash", case, False, msg)
        v.add("block count", case, False, msg)
        return
    v.add("no crash", case, True)
    want = exp["output"]["value"]
    v.problem("block count", case, "" if out["value"] == want else (
        f"{where} returned {out['value']}, expected {want} (a partly filled block is still a "
        "whole block)"))


def check(cases: list[Case], got: list[dict[str, Any]], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    """Named checks over all cases; each failure names the smallest case it fails on."""
    v = checkkit.Verdicts(size_key)
    for case, g, e in zip(cases, got, expected, strict=True):
        _judge(case, g if isinstance(g, dict) else {"error": "no result"}, e, v)
    return v.checks(CHECKS)
