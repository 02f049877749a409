"""What the checks of the two hash-chain prefix-cache exercises share (Q27 chained_block_hash,
Q40 block_pool_hash_chain). The drivers' side of the same pair is exercises/prefix_speed.py.

A case is a script of operations on one fresh cache, `{"block_size", "num_blocks", "hash",
"ops"}`, or the one large speed case `{"speed": spec}`. A driver returns one step per op
(`{"out": ..., ...}`, or `{"error": ...}` for the op that raised, which ends the script). Each
check is judged on the first step of a script that breaks it, and a failing check shows the
shortest such prefix over all scripts: the fewest steps a student must replay to see the bug.

Runs in the worker only (imported by the two checks.py as `exercises.prefix_scripts`).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import strategies as st

from graders import checkkit
from graders.base import Check

Case = dict[str, Any]
# The speed case: the student's workload may take this many times the reference's before the
# check fails, and never fails under the floor (a fast machine's reference time is noise-sized).
SPEED_RATIO = 20.0
SPEED_FLOOR_S = 0.25
SPEED_CHECKS = ("large case matches", "lookup speed")


def make_case(case_id: str, block_size: int, num_blocks: int, ops: list[list[Any]],
              hash_name: str = "sha256") -> Case:
    return {"id": case_id, "input": {"block_size": block_size, "num_blocks": num_blocks,
                                     "hash": hash_name, "ops": ops}}


def script_inputs(strategy: st.SearchStrategy[tuple[int, int, str, list[list[Any]]]],
                  seed: int, n: int) -> tuple[str, ...]:
    """n Hypothesis scripts `(block_size, num_blocks, hash, ops)` for the seed, as the inputs'
    JSON (hashable for a cache, and copied on every use)."""
    return tuple(json.dumps(make_case("", B, N, ops, hash_name)["input"], sort_keys=True)
                 for B, N, hash_name, ops in checkkit.draw(strategy, seed, n))


def hidden_scripts(edge: list[Case], drawn: Iterable[str], speed: dict[str, Any],
                 twins_of: Callable[[int, Case], list[Case]] | None = None) -> list[Case]:
    """The edge cases and the drawn scripts no edge case has (random-001, ..., each followed by
    `twins_of(n, case)` when given), smallest first, then the large speed case last."""
    cases = list(edge)
    for n, case in enumerate(checkkit.drawn_cases(edge, [json.loads(raw) for raw in drawn]), 1):
        cases.append(case)
        if twins_of is not None:
            cases += twins_of(n, case)
    cases.sort(key=size_key)
    # "timed": the relay measures this case's CPU seconds (graders/code.py).
    cases.append({"id": "speed-large", "input": {"speed": speed}, "timed": True})
    return cases


# ---------------------------------------------------------------- describing cases


def op_size(op: list[Any]) -> int:
    return 1 + sum(len(x) for x in op if isinstance(x, list))


def size_key(case: Case) -> tuple[int, int, str]:
    inp = case["input"]
    if "speed" in inp:
        return (10**9, 0, "")
    return (len(inp["ops"]), sum(op_size(op) for op in inp["ops"]),
            json.dumps(inp, sort_keys=True))


def prefix_key(case: Case, i: int) -> tuple[int, int]:
    """The rank of a failure at step `i`: the length and size of the script up to it."""
    ops = case["input"]["ops"][: i + 1]
    return (len(ops), sum(op_size(op) for op in ops))


def describe_speed(s: dict[str, Any]) -> str:
    return (f"the large speed case ({s['fill']} prompts of {s['fill_blocks']} blocks of "
            f"{s['block_size']} tokens admitted and finished in a {s['num_blocks']}-block pool, "
            f"then {s['probes']:,} timed lookups, each of a different prefix of them)")


def clip(text: str) -> str:
    """A described script, cut to what a message can show."""
    return text if len(text) <= 3000 else text[:2990] + "\n..."


def short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- checking


def steps_of(got: Any) -> list[dict[str, Any]] | str:
    """The student's steps, or an error string when the result is unusable or malformed."""
    if not isinstance(got, dict):
        return "the output line for this case is malformed"
    if "error" in got:
        return str(got["error"])
    out = got.get("output")
    if not isinstance(out, dict) or not isinstance(out.get("steps"), list) \
            or not all(isinstance(s, dict) for s in out["steps"]):
        return "the output line for this case is malformed"
    return out["steps"]


def ids_ok(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(b, int) and not isinstance(b, bool)
                                           for b in value)


def queue_problem(op: list[Any], out: Any, queue: list[int], prev: list[int] | None,
                  holding: set[int], num_blocks: int, pure: tuple[str, ...] = ("lookup",)
                  ) -> str:
    """The first conservation rule the free queue after `op` breaks, or "": every block is
    either free (once) or held by a running request, and an op in `pure` (or an allocate that
    returned None) leaves the queue as it was (`prev`)."""
    N = num_blocks
    if len(set(queue)) != len(queue):
        return f"the free queue lists a block twice: {queue}"
    if any(not 0 <= b < N for b in queue):
        return f"the free queue holds a block id outside 0..{N - 1}: {queue}"
    if holding & set(queue):
        return (f"block(s) {sorted(holding & set(queue))} are in the free queue while a running "
                "request holds them")
    if len(queue) + len(holding) != N:
        return (f"{len(queue)} free + {len(holding)} held by running requests = "
                f"{len(queue) + len(holding)}, but the pool has {N} blocks: a block leaked or "
                "is counted twice")
    if op[0] in pure and queue != prev:
        return f"{op[0]} changed the free queue from {prev} to {queue}"
    if op[0] == "allocate" and out is None and queue != prev:
        return f"allocate returned None but changed the free queue to {queue}"
    return ""


class FirstFailures:
    """Per check, the first step of one script that breaks it, with its message."""

    def __init__(self) -> None:
        self.first: dict[str, tuple[int, str]] = {}

    def fail(self, name: str, i: int, message: str) -> None:
        if name not in self.first:
            self.first[name] = (i, message)

    def report(self, v: checkkit.Verdicts, case: Case, names: set[str]) -> None:
        """One row per check of `names` (and per check that failed): a failure ranked by the
        prefix up to its first failing step, a pass otherwise."""
        for name in names | set(self.first):
            if name in self.first:
                i, message = self.first[name]
                v.add(name, case, False, message, rank=prefix_key(case, i))
            else:
                v.add(name, case, True)


def judge_speed(case: Case, got: Any, exp: dict[str, Any], v: checkkit.Verdicts, *,
                mismatch: str, advice: str) -> None:
    """The speed case: its digest must be the reference's, and then its CPU time within
    SPEED_RATIO of the reference's. `mismatch` words a wrong digest ({case}, {got} and
    {expected} are filled in); `advice` ends the message of a slow run."""
    e = exp["output"]["speed"]
    out = got.get("output") if isinstance(got, dict) else None
    g = out.get("speed") if isinstance(out, dict) else None
    # The time is the relay's (CPU seconds of the whole case, measured outside the sandbox's
    # Python), never a figure the driver reports: code in the sandbox can rewrite the driver.
    mine = got.get("cpu_s") if isinstance(got, dict) else None
    rank = (0,)  # one speed case per run: nothing to rank it against
    if not (isinstance(g, dict) and isinstance(g.get("digest"), str)
            and isinstance(mine, float)):
        error = got.get("error") if isinstance(got, dict) else None
        msg = f"the large case did not finish: {str(error or 'malformed output').rstrip()}"
        v.add("large case matches", case, False, msg, rank=rank)
        v.add("lookup speed", case, False, msg + " (so its time could not be measured)",
              rank=rank)
        return
    ok = g["digest"] == e["digest"]
    v.add("large case matches", case, ok, "" if ok else mismatch.format(
        case=describe_speed(case["input"]["speed"]), got=g["digest"], expected=e["digest"]),
        rank=rank)
    if not ok:
        # Only the time of the right results counts: a replaced driver that skips part of the
        # work (or copies results instead of looking up) is fast and wrong.
        v.add("lookup speed", case, False, "the large case's results differ from the "
              "reference's, so its time is not judged; fix the other checks first", rank=rank)
        return
    ref = float(exp["cpu_s"])
    ratio = mine / max(ref, 1e-9)
    fast = mine <= max(SPEED_RATIO * ref, SPEED_FLOOR_S)
    v.add("lookup speed", case, fast, "" if fast else (
        f"the large case (one fill, then {case['input']['speed']['probes']:,} lookups, each of "
        f"a different prefix) took {mine:.3f} CPU seconds, {ratio:.0f}x the reference's "
        f"{ref:.4f} s "
        f"(the bound is {SPEED_RATIO:.0f}x, generous so that noise never fails you). "
        + advice), rank=rank)


def summary(v: checkkit.Verdicts, table: checkkit.CheckTable) -> list[Check]:
    """The Checks: a failure names the shortest failing sequence (a check that applies to one
    case only, the speed case's, shows its message alone)."""
    return v.checks(table, lead="Shortest failing sequence, ", bare_when_alone=True)
