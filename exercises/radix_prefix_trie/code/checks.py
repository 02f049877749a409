"""Test cases and checks for the radix prefix cache (runs in the worker, never in the sandbox).

A case input is {"page_size", "pool", "mode", "ops"} (see driver.py). Each result handed to
`check()` is {"output": <driver.run_case dict>} or {"error": "..."}; `expected` holds the
reference's results for the same cases. The checks hold the student's trace to the reference's
outputs (slots, tree, insert counts, free_fn calls; lock counts and sizes where the tree is the
reference's) and to invariants worked out here from the cache's own answers (slot conservation,
and what evict may free given what the running requests matched). A lock_ref or size the driver
reads is never judged against other figures the driver reports (its `held`, its tree): the
student's process can rewrite all of them to agree. Every failure names the smallest case and
the first operation where it broke, with the operations that lead there.
"""
from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from exercises.registry import expose_shared_modules
from graders import checkkit
from graders.base import Check

HERE = Path(__file__).resolve().parent
Case = dict[str, Any]
Op = list[Any]

# Random scripts: a three-token alphabet forces shared prefixes and many splits; the pool is
# small enough that starts often have to evict.
ALPHABET = (1, 2, 3)
RANDOM_CASES = 170
MAX_OPS = 18
MAX_PROMPT = 8
# The speed check: more than this many times slower than the reference costs that check.
SLOWDOWN_LIMIT = 20.0
# Below this (CPU seconds) the timed case is too short to judge: it always passes.
SPEED_FLOOR_S = 0.05
# The speed check's script (driver.long_script): multi-turn conversations over long system
# prompts, three sessions of them in a row on one cache, each with prompts of its own, so that
# nothing in it repeats (the student's process, which plays it, could play a repeat once and
# copy the results). Its seed is the submission's (timed_case): a constant script could be
# played at import, outside the timed window. A match that re-slices the prompt for every token
# makes it over 50x slower than the reference through the sandbox.
TIMED_SCRIPT: dict[str, int] = {"sessions": 3, "systems": 2, "system_tokens": 6_000, "convs": 6,
                                "first_tokens": 400, "turns": 4, "turn_tokens": 300,
                                "evict": 2_000}
TIMED_POOL = 40_000

# name -> (weight, message when every case passes)
CHECKS: tuple[tuple[str, float, str], ...] = (
    ("runs without errors", 1.0, "Every operation ran without an exception."),
    ("match_prefix returns the cached slots and the node where the match ends", 2.0,
     "Every match returned the reference's slots and a node exactly as deep as the match."),
    ("tree shape: edges split where a match ends, children keyed by first token", 2.0,
     "After every operation your tree was the reference's, node for node, with sound links."),
    ("insert returns how many tokens were already cached", 1.0,
     "Every insert returned the reference's count."),
    ("lock counts equal the running requests through each node", 2.0,
     "After every operation each node's lock_ref was the reference's, evict never freed what a "
     "running request matched, and an evict that ran out of leaves kept only that."),
    ("evict frees whole unlocked leaves, least recently used first", 2.0,
     "Every eviction freed the reference's leaves, in its order, and returned the same count."),
    ("sizes: evictable + protected = total, as the tree says", 1.0,
     "evictable_size, protected_size and total_size always matched the tree, on the long "
     "script too."),
    ("slots: nothing freed twice, nothing leaked", 1.0,
     "Every slot was always in exactly one place: the tree, a running request, or the free "
     "queue."),
    ("speed on long prompts", 1.0, "The long-prompt script ran within 20x of the reference."),
)
NAMES = [name for name, _, _ in CHECKS]
NOT_REACHED = "not reached: "
(RUNS, MATCH, TREE, INSERT, LOCKS, EVICT, SIZES, SLOTS, SPEED) = NAMES


# ---------------------------------------------------------------- cases


def make_case(case_id: str, ops: list[Op], page_size: int = 1, pool: int = 64,
              mode: str = "trace") -> Case:
    return {"id": case_id, "input": {"page_size": page_size, "pool": pool, "mode": mode,
                                     "ops": [list(op) for op in ops]}}


def size_key(case: Case) -> tuple[int, int, str]:
    """Smaller cases first: operations, then tokens."""
    inp = case["input"]
    if inp.get("mode") == "timed":
        return (10**9, 0, "")  # the timed case is last, always
    tokens = sum(len(op[-1]) for op in inp["ops"] if op[0] in ("start", "match"))
    return (len(inp["ops"]), tokens, json.dumps(inp, sort_keys=True))


def _script(*parts: Any) -> list[Op]:
    return [list(p) for p in parts]


# Hand-written edge cases: (name, page_size, pool, ops).
A4 = [1, 2, 3, 4]
EDGE_CASES: tuple[tuple[str, int, int, list[Op]], ...] = (
    ("split-on-match-then-evict", 1, 16,
     _script(("start", "a", A4), ("finish", "a"), ("match", [1, 2, 9]), ("evict", 1))),
    ("insert-ends-inside-edge", 1, 16,
     _script(("start", "r1", [1, 2, 3]), ("start", "r2", [1, 2, 3, 4, 5]), ("finish", "r2"),
             ("finish", "r1"), ("evict", 1))),
    ("insert-diverges-inside-edge", 1, 16,
     _script(("start", "r1", [1, 2, 3]), ("start", "r2", [1, 2, 9, 9]), ("finish", "r2"),
             ("finish", "r1"), ("evict", 9))),
    ("identical-prompts", 1, 16,
     _script(("start", "a", [1, 2, 3]), ("finish", "a"), ("start", "b", [1, 2, 3]),
             ("finish", "b"), ("evict", 3))),
    ("evict-with-everything-locked", 1, 16,
     _script(("start", "a", A4), ("finish", "a"), ("start", "b", A4), ("evict", 10),
             ("finish", "b"), ("evict", 10))),
    ("evict-zero-and-empty-tree", 1, 16,
     _script(("evict", 3), ("start", "a", [1, 2]), ("finish", "a"), ("evict", 0))),
    ("parents-become-leaves", 1, 16,
     _script(("start", "a", [1, 2, 3, 4, 5, 6]), ("finish", "a"), ("match", [1, 2]),
             ("match", [1, 2, 3, 4]), ("evict", 6))),
    ("locked-parent-stays", 1, 16,
     _script(("start", "a", A4), ("finish", "a"), ("start", "r", [1, 2, 7]), ("evict", 10),
             ("finish", "r"), ("evict", 10))),
    ("split-of-a-locked-node", 1, 24,
     _script(("start", "a", A4), ("finish", "a"), ("start", "r1", [1, 2, 3, 4, 5]),
             ("start", "r2", [1, 2, 6]), ("evict", 10), ("finish", "r1"), ("evict", 1),
             ("finish", "r2"), ("evict", 10))),
    ("pool-exhausted-rejects", 1, 4,
     _script(("start", "a", [1, 2, 3, 4, 5]), ("start", "b", [1, 2]), ("finish", "b"),
             ("start", "c", [1, 2, 3, 4]), ("finish", "a"), ("finish", "c"))),
    ("evict-on-demand-spares-the-locked-prefix", 1, 8,
     _script(("start", "a", A4), ("finish", "a"), ("start", "c", [5, 6, 7]), ("finish", "c"),
             ("start", "r", [1, 2, 3, 4, 9, 9]), ("finish", "r"))),
    ("empty-prompt", 1, 8,
     _script(("start", "a", []), ("match", []), ("finish", "a"), ("evict", 1))),
    ("lru-touch-order", 1, 16,
     _script(("start", "a", [1, 1, 1]), ("finish", "a"), ("start", "b", [2, 2, 2]),
             ("finish", "b"), ("match", [1, 1, 1]), ("evict", 1), ("evict", 1))),
    ("split-stamps-both-halves", 1, 16,
     _script(("start", "a", A4), ("finish", "a"), ("start", "b", [5, 6]), ("finish", "b"),
             ("match", [1, 2]), ("evict", 1), ("evict", 1))),
    ("two-running-requests-share-a-prefix", 1, 32,
     _script(("start", "a", [1, 2, 3, 1, 2]), ("finish", "a"), ("start", "r1", [1, 2, 3, 3]),
             ("start", "r2", [1, 2, 3, 1, 3]), ("evict", 20), ("finish", "r2"),
             ("evict", 20), ("finish", "r1"), ("evict", 20))),
    ("page2-odd-length-tail", 2, 16,
     _script(("start", "a", [1, 2, 3, 4, 5]), ("finish", "a"), ("start", "b", [1, 2, 3, 9]),
             ("finish", "b"), ("evict", 1))),
    ("page2-divergence-inside-a-page", 2, 16,
     _script(("start", "a", A4), ("finish", "a"), ("start", "b", [1, 3, 3, 4]),
             ("finish", "b"), ("match", [1, 2, 3, 7]), ("evict", 4))),
    ("page2-match-shorter-than-a-page", 2, 16,
     _script(("start", "a", [1, 2]), ("finish", "a"), ("match", [1]), ("start", "b", [1]),
             ("finish", "b"), ("evict", 2))),
    ("page4-split-at-page-boundary", 4, 32,
     _script(("start", "a", [1, 2, 3, 4, 5, 6, 7, 8]), ("finish", "a"),
             ("start", "b", [1, 2, 3, 4, 5, 6, 1, 1, 2]), ("finish", "b"), ("evict", 1),
             ("evict", 8))),
)


def public_cases(params: dict[str, Any]) -> list[Case]:
    """The variant's own script (the one parts 1-4 ask about), a paged one and a locked one."""
    ops = params.get("ops")
    pool = int(params.get("pool", 64))
    cases = [make_case("example-1", ops, 1, pool)] if ops else []
    for name, page, pool_, eops in EDGE_CASES:
        if name in ("page2-divergence-inside-a-page", "split-of-a-locked-node"):
            cases.append(make_case(f"example-{len(cases) + 1}", eops, page, pool_))
    return cases


@st.composite
def _draft(draw: st.DrawFn) -> tuple[int, int, list[tuple[Any, ...]]]:
    page = draw(checkkit.sampled_from((1, 1, 1, 2)))
    pool = draw(checkkit.integers(10, 32))
    ops = []
    for _ in range(draw(checkkit.integers(3, MAX_OPS))):
        kind = draw(checkkit.sampled_from(("start", "start", "finish", "finish", "match", "evict")))
        if kind in ("start", "match"):
            reuse = draw(checkkit.integers(0, 9))  # > 3: start from a prefix of an earlier prompt
            cut = draw(checkkit.integers(0, MAX_PROMPT))
            tail = draw(checkkit.picks(ALPHABET, max_size=MAX_PROMPT))
            ops.append((kind, reuse, cut, tail))
        elif kind == "finish":
            ops.append((kind, draw(checkkit.integers(0, 9))))
        else:
            ops.append((kind, draw(checkkit.integers(0, 12))))
    return page, pool, ops


def resolve(ops: list[tuple[Any, ...]]) -> list[Op]:
    """Turn drafted choices into a concrete script: request ids, reused prefixes, finishes of
    requests that were started (the driver skips one that was rejected)."""
    out: list[Op] = []
    prompts: list[list[int]] = []
    running: list[str] = []
    n = 0
    for op in ops:
        if op[0] in ("start", "match"):
            _, reuse, cut, tail = op
            base = prompts[reuse % len(prompts)][:cut] if prompts and reuse > 3 else []
            tokens = (base + list(tail))[:MAX_PROMPT + 4]
            prompts.append(tokens)
            if op[0] == "start":
                n += 1
                rid = f"r{n}"
                running.append(rid)
                out.append(["start", rid, tokens])
            else:
                out.append(["match", tokens])
        elif op[0] == "finish":
            if running:
                out.append(["finish", running.pop(op[1] % len(running))])
        else:
            out.append(["evict", op[1]])
    return out


@lru_cache(maxsize=16)
def _random_inputs(seed: int, n: int) -> tuple[str, ...]:
    """n Hypothesis draws for this seed, as JSON strings (hashable, and copied on every use)."""
    scripts = [(page, pool, resolve(ops)) for page, pool, ops in checkkit.draw(_draft(), seed, n)]
    return tuple(json.dumps(make_case("", script, page, pool)["input"], sort_keys=True)
                 for page, pool, script in scripts if script)


def timed_case(seed: int) -> Case:
    """The speed check's case: the script's shape and the submission's seed (the driver builds
    the script, see driver.long_script) and its pool (with the script's own evictions, every
    request fits)."""
    return {"id": "speed-long-prompts", "timed": True,  # the relay times it (graders/code.py)
            "input": {"page_size": 1, "pool": TIMED_POOL, "mode": "timed",
                      "script": {"seed": int(seed), **TIMED_SCRIPT}}}


def _driver() -> Any:
    """driver.py as the grader loaded it (one module for both), for its long_script: the one
    generator of the timed script, so the ops named in a message are the ones the driver played."""
    from graders.code import load_module  # imported late: graders.code loads this file

    expose_shared_modules(("driver_errors",))  # the driver imports it by its plain name
    return load_module(HERE / "driver.py")


@lru_cache(maxsize=8)
def _timed_ops(script_json: str) -> tuple[Op, ...]:
    return tuple(_driver().long_script(json.loads(script_json)))


def timed_ops(case: Case) -> tuple[Op, ...]:
    """The operations the timed case plays (built from its seed, as the driver builds them)."""
    return _timed_ops(json.dumps(case["input"]["script"], sort_keys=True))


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """Edge cases, Hypothesis-generated scripts (deterministic for a seed, smallest first) and
    the long-prompt timing case last."""
    edge = [make_case(f"edge-{name}", ops, page, pool) for name, page, pool, ops in EDGE_CASES]
    return [*checkkit.with_draws(edge, _random_inputs(int(seed), RANDOM_CASES), size_key),
            timed_case(seed)]


# ---------------------------------------------------------------- describing


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _toks(tokens: list[int], limit: int = 12) -> str:
    if len(tokens) <= limit:
        return "[" + ", ".join(map(str, tokens)) + "]"
    return f"[{', '.join(map(str, tokens[:limit]))}, ... ({len(tokens)} tokens)]"


def op_text(op: Op) -> str:
    if op[0] == "start":
        return f"start {op[1]} {_toks(op[2])}"
    if op[0] == "match":
        return f"match {_toks(op[1])}"
    if op[0] == "finish":
        return f"finish {op[1]}"
    return f"evict {op[1]}"


def describe(case: Case) -> str:
    inp = case["input"]
    if inp.get("mode") == "timed":
        ops = timed_ops(case)
        return (f"the long-prompt timing script ({len(ops)} operations, prompts up to "
                f"{max(len(op[2]) for op in ops if op[0] == 'start')} tokens)")
    text = "; ".join(op_text(op) for op in inp["ops"])
    if len(text) > 500:
        text = text[:497] + "..."
    return f"page_size={inp['page_size']}, pool={inp['pool']}: {text}"


def _upto(case: Case, i: int) -> str:
    """The script up to and including op i, as the student can replay it."""
    inp = case["input"]
    ops = inp["ops"][: i + 1]
    text = "; ".join(f"({j + 1}) {op_text(op)}" for j, op in enumerate(ops))
    if len(text) > 600:
        text = "..." + text[-597:]
    return (f"[{case['id']}, page_size={inp['page_size']}, pool={inp['pool']}] {text}")


def render_tree(nodes: list[list[Any]], limit: int = 16) -> str:
    """One line per node, indented by depth: `[1, 2] slots [0, 1] lock 1`."""
    depth = [0] * len(nodes)
    lines = []
    for i, (p, key, value, lock) in enumerate(nodes):
        if p < 0:
            lines.append("    root")
            continue
        depth[i] = depth[p] + 1 if 0 <= p < i else 1
        lines.append("    " + "  " * depth[i] + f"{_toks(key, 8)} slots {_toks(value, 8)}"
                     + (f" lock {lock}" if lock else ""))
    if len(lines) > limit:
        lines = lines[:limit] + [f"    ... ({len(lines) - limit} more nodes)"]
    return "\n".join(lines)


# ---------------------------------------------------------------- judging one trace case


def _subtree_locks(nodes: list[list[Any]], held: dict[str, int]) -> list[int]:
    """For each node, how many running requests hold it or a node below it."""
    count = [0] * len(nodes)
    for idx in held.values():
        x = idx
        seen = 0
        while 0 <= x < len(nodes) and seen <= len(nodes):
            count[x] += 1
            x = nodes[x][0]
            seen += 1
    return count


def _owner_of(nodes: list[list[Any]]) -> dict[int, int]:
    return {s: i for i, n in enumerate(nodes) for s in n[2]}


def _evict_hint(prev: list[list[Any]] | None, got_calls: list[list[int]],
                exp_calls: list[list[int]], held: dict[str, int]) -> str:
    """Why the first wrong free_fn call is wrong, judged on the tree before the operation."""
    if prev is None:
        return ""
    owner = _owner_of(prev)
    children: dict[int, set[int]] = {}
    for j, n in enumerate(prev):
        children.setdefault(n[0], set()).add(j)
    locks = _subtree_locks(prev, held)
    gone: set[int] = set()  # nodes freed by the earlier calls of this evict
    for k, call in enumerate(got_calls):
        nodes = {owner.get(s, -1) for s in call}
        if k < len(exp_calls) and call == exp_calls[k]:
            gone |= nodes
            continue
        if -1 in nodes:
            return (f" Call {k + 1} freed {_toks(call)}, which includes slots that were not in "
                    "the tree.")
        for i in sorted(nodes):
            if prev[i][3] > 0 or locks[i] > 0:
                return (f" Call {k + 1} freed node {_toks(prev[i][1])}, which a running request "
                        "still pins (lock_ref > 0): pinned KV must never be evicted.")
        if len(nodes) == 1:
            i = nodes.pop()
            if len(call) != len(prev[i][2]):
                return (f" Call {k + 1} freed part of node {_toks(prev[i][1])}: evict frees "
                        "whole leaves, one free_fn call per leaf with all its slots.")
            if i in gone:
                return (f" Call {k + 1} freed node {_toks(prev[i][1])} a second time: it was "
                        "queued twice.")
            if children.get(i, set()) - gone:
                return (f" Call {k + 1} freed node {_toks(prev[i][1])}, which still had "
                        "children: only leaves can go, or their descendants become unreachable.")
        if k < len(exp_calls):
            return (f" Call {k + 1} should free {_toks(exp_calls[k])}, the unlocked leaf with "
                    "the smallest last_access at that point.")
        return (f" After {len(exp_calls)} call(s) the reference had freed enough (or ran out of "
                "unlocked leaves); yours went on.")
    if len(got_calls) < len(exp_calls):
        return (f" Yours stopped after {len(got_calls)} call(s); the next unlocked leaf was "
                f"{_toks(exp_calls[len(got_calls)])}. When a leaf goes, its parent becomes a "
                "candidate if it is now childless and unlocked.")
    return ""


class _Verdict(checkkit.Verdicts):
    """The kit's verdicts, with a real failure ranked before a case that crashed before the
    check could be judged (its message starts with NOT_REACHED)."""

    def __init__(self) -> None:
        super().__init__(size_key)

    def add(self, name: str, case: Case, passed: bool, message: str = "", *,
            rank: Any = None, details: dict[str, Any] | None = None) -> None:
        if rank is None and not passed:
            rank = (message.startswith(NOT_REACHED), size_key(case))
        super().add(name, case, passed, message, rank=rank, details=details)


def slot_ledger(inp: dict[str, Any], steps: list[dict[str, Any]]
                ) -> list[tuple[list[int] | None, int, list[int]]]:
    """The KV pool after each recorded step, per step (slots handed to a start or None, free
    slots, slots freed while already free), worked out here from the cache's own answers
    (match_prefix's slots, insert's count, the free_fn calls). driver.py keeps the same pool in
    the sandbox to run the cache; its own figures for it are not believed, since a submission can
    replace the driver."""
    page, size = int(inp["page_size"]), int(inp["pool"])
    queue: deque[int] = deque(range(size))
    free: set[int] = set(queue)
    running: dict[str, tuple[list[int], list[int], list[int]]] = {}
    out: list[tuple[list[int] | None, int, list[int]]] = []

    def give(slots: list[int], double: list[int]) -> None:
        for x in slots:
            if x in free or not 0 <= x < size:
                double.append(x)
                continue
            free.add(x)
            queue.append(x)

    for op, s in zip(inp["ops"], steps, strict=False):
        double: list[int] = []
        own: list[int] | None = None
        for call in s.get("calls", []):
            give([int(x) for x in call], double)  # free_fn: evict's own frees, in order
        if op[0] == "start":
            need = len(op[2]) - len(s["m"])
            if 0 <= need <= len(queue):
                own = [queue.popleft() for _ in range(need)]
                free.difference_update(own)
                running[str(op[1])] = (list(op[2]), list(s["m"]), own)
        elif op[0] == "finish" and str(op[1]) in running:
            tokens, matched, mine = running.pop(str(op[1]))
            n = s["n"]
            if not isinstance(n, int):
                raise TypeError("insert's count is not an int")
            m, aligned = len(matched), len(tokens) - len(tokens) % page
            give(mine[: max(0, min(n, aligned) - m)] + mine[max(0, aligned - m):], double)
        out.append((own, len(queue), double))
    return out


class _Pins:
    """What the student's cache must pin and what it holds, worked out here from its own answers
    (match_prefix's slots, the free_fn calls) and the worker's slot ledger, never from the
    driver's snapshot: a submission can rewrite every lock_ref and size the driver reads, but not
    what its evict frees. A running request pins exactly the slots its match returned (the nodes
    from the one match_prefix returned up to the root)."""

    def __init__(self, page: int) -> None:
        self.page = page
        # rid -> (tokens, matched slots, own slots) of each request the ledger let run
        self.running: dict[str, tuple[list[int], list[int], list[int]]] = {}
        # page-aligned token prefix -> the slots of its last page, for every page the cache
        # holds. By whole pages because the tree compares keys a page at a time: with pages of
        # 2, [2, 2] and [2, 3, 2, 3] are siblings under the root that share the token 2, and a
        # model keyed by token prefix would give (2,) to one and lose it with the other. Kept by
        # prefix, not by insert's count: a wrong count misleads the driver's frees, not what the
        # tree stores, and the insert check already charges it.
        self.cached: dict[tuple[int, ...], tuple[int, ...]] = {}

    def pinned(self) -> dict[int, str]:
        return {x: rid for rid, (_, matched, _) in self.running.items() for x in matched}

    def after(self, op: Op, s: dict[str, Any], freed: list[int],
              handed: list[int] | None) -> None:
        """Play the operation's effects on the model, in the driver's order."""
        gone = set(freed)
        self.cached = {k: x for k, x in self.cached.items() if not gone.intersection(x)}
        if op[0] == "start" and handed is not None:
            self.running[str(op[1])] = (list(op[2]), [int(x) for x in s["m"]], handed)
        elif op[0] == "finish" and str(op[1]) in self.running:
            tokens, matched, own = self.running.pop(str(op[1]))
            aligned = len(tokens) - len(tokens) % self.page
            values = matched + own
            # insert walks the pages the tree already has and stores the rest as a new leaf
            page = self.page
            had = 0
            while had + page <= aligned and tuple(tokens[:had + page]) in self.cached:
                had += page
            for end in range(had + page, aligned + 1, page):
                self.cached[tuple(tokens[:end])] = tuple(values[end - page:end])


def _node_of(nodes: list[list[Any]] | None, slots: list[int]) -> str:
    """`node [keys]` holding the first of `slots` in a snapshot (wording only, never judged)."""
    owner = _owner_of(nodes or [])
    j = next((owner[x] for x in slots if x in owner), None)
    if nodes and j is not None:
        return f"node {_toks(nodes[j][1])}"
    return f"slot(s) {_toks(sorted(slots))}"


def _judge_pins(i: int, op: Op, s: dict[str, Any], asked: int, pins: _Pins,
                before: list[list[Any]] | None, after: list[list[Any]],
                fail: Callable[[str, int, str], None]) -> list[int]:
    """What this operation's evict did against what the running requests pin: it may never free
    a pinned slot, and when it runs out of candidates (frees less than `asked`) everything left
    is pinned. Returns the slots freed."""
    freed = [int(x) for call in s.get("calls", []) for x in call]
    pinned = pins.pinned()
    if op[0] == "start":  # the request being started is pinned before the driver evicts for it
        pinned.update(dict.fromkeys((int(x) for x in s["m"]), f"{op[1]} (being started)"))
    hit = [x for x in freed if x in pinned]
    if hit:
        fail(LOCKS, i, f"evict freed slot(s) {_toks(hit)} ({_node_of(before, hit)}), which "
             f"running request {pinned[hit[0]]} matched and still reads. inc_lock_ref pins "
             "every node from the one match_prefix returned up to the root (a split copies the "
             "count to the new upper node), and evict never takes a node with lock_ref > 0.")
    elif asked > 0 and len(freed) < asked:
        held = {x for page in pins.cached.values() for x in page}
        kept = sorted(held - set(freed) - set(pinned))
        if kept:
            fail(LOCKS, i, f"evict({asked}) freed only {len(freed)} token(s), so it ran out of "
                 f"unlocked leaves; yet the cache still holds {_node_of(after, kept)}, which no "
                 "running request matched. Something still pins it: a lock_ref that dec_lock_ref did "
                 "not take back (it walks from the node to the root, as inc_lock_ref does; a "
                 "split copies the count to the upper node), or a parent left without children "
                 "that was never queued.")
    return freed


def _judge_lock_counts(i: int, tree: list[list[Any]], held: dict[str, int],
                       e: dict[str, Any], fail: Callable[[str, int, str], None]) -> None:
    """Where the student's tree is the reference's node for node: the same node held by each
    request running in both, and the reference's lock_ref on every node."""
    for rid, idx in held.items():
        want = e["held"].get(rid)
        if want is None or idx == want:
            continue  # a request only one side runs: the slot and evict checks say why
        if idx < 0:
            fail(LOCKS, i, f"request {rid} is still running but the node it holds is no longer "
                 "in the tree: a pinned node was evicted or unlinked.")
        else:
            fail(LOCKS, i, f"request {rid} holds node {_toks(tree[idx][1])}, but its match "
                 f"ended at node {_toks(e['tree'][want][1])}.")
        return
    for n, x in zip(tree[1:], e["tree"][1:], strict=True):
        if n[3] != x[3]:
            fail(LOCKS, i, f"node {_toks(n[1])} has lock_ref {n[3]}, but {x[3]} running "
                 "request(s) pass through it (inc_lock_ref and dec_lock_ref walk from the node "
                 "to the root; a split copies the count to the new upper node).")
            return


def _judge_trace(case: Case, out: dict[str, Any], exp: dict[str, Any], v: _Verdict) -> None:
    inp = case["input"]
    ops = inp["ops"]
    pool = int(inp["pool"])
    page = int(inp["page_size"])
    steps, e_steps = out["steps"], exp["steps"]
    first: dict[str, str] = {}

    def fail(name: str, i: int, msg: str) -> None:
        if name not in first:
            first[name] = f"after operation {i + 1} ({op_text(ops[i])}): {msg}\n  Script: " \
                          f"{_upto(case, i)}"

    own: dict[str, list[int]] = {}
    ledger = slot_ledger(inp, steps)
    pins = _Pins(page)
    prev_tree: list[list[Any]] | None = None
    prev_held: dict[str, int] = {}
    for i, (s, e) in enumerate(zip(steps, e_steps, strict=False)):
        op = ops[i]
        kind = op[0]
        tree = s["tree"]
        held = s["held"]
        # -- match --
        if kind in ("start", "match"):
            if s["m"] != e["m"]:
                fail(MATCH, i, f"match_prefix returned the slots {_toks(s['m'])}; expected "
                     f"{_toks(e['m'])} (the longest cached prefix of the prompt"
                     + (" in whole pages" if page > 1 else "") + ").")
            elif s["depth"] != e["depth"]:
                if s["depth"] is None:
                    fail(MATCH, i, "the node match_prefix returned is not connected to the "
                         "root through its parent links.")
                else:
                    fail(MATCH, i, f"the slots were right ({len(e['m'])} tokens) but the node "
                         f"returned ends {s['depth']} tokens from the root. It must end exactly "
                         "where the match ends: when the match stops inside an edge, split the "
                         "edge and return the upper half.")
        # -- tree --
        if s.get("bad"):
            fail(TREE, i, "an invariant broke: " + "; ".join(s["bad"][:3]) + ".")
        elif [n[:3] for n in tree] != [n[:3] for n in e["tree"]]:
            fail(TREE, i, "the tree should be\n" + render_tree(e["tree"]) + "\n  but yours "
                 "is\n" + render_tree(tree))
        # -- insert --
        if kind == "finish" and s.get("n") != e.get("n"):
            fail(INSERT, i, f"insert returned {s.get('n')}; {e.get('n')} of its tokens were "
                 "already in the tree (in whole pages). The driver frees the request's own "
                 "slots for those positions, so a wrong count frees slots the tree owns or "
                 "leaks them.")
        # -- locks: against the reference where the trees agree, and by what evict did --
        aligned = [n[:3] for n in tree] == [n[:3] for n in e["tree"]]
        if aligned:
            _judge_lock_counts(i, tree, held, e, fail)
        # evict(k) for an evict, or the shortfall a start evicted for (the ledger's queue)
        asked = int(op[1]) if kind == "evict" else (
            len(op[2]) - len(s["m"]) - (ledger[i - 1][1] if i else pool)
            if kind == "start" else 0)
        freed = _judge_pins(i, op, s, asked, pins, prev_tree, tree, fail)
        pins.after(op, s, freed, ledger[i][0])
        # -- evict --
        if "ret" in e or "ret" in s or "calls" in e or "calls" in s:
            g_calls, x_calls = s.get("calls", []), e.get("calls", [])
            if kind == "start" and ("ret" in s) != ("ret" in e):
                fail(EVICT, i, f"the reference had {'a' if 'ret' in e else 'no'} shortfall of "
                     f"free slots here (so it {'called' if 'ret' in e else 'did not call'} "
                     f"evict), yours had {'one' if 'ret' in s else 'none'}: the free queue "
                     "already differed because of an earlier mistake (see the slot and insert "
                     "checks).")
            elif g_calls != x_calls or s.get("ret") != e.get("ret"):
                k = op[1] if kind == "evict" else s.get("short")
                where = "" if kind == "evict" else (
                    f"{op[1]} needed {k} more slot(s) than were free, so the driver called "
                    f"evict({k}): ")
                fail(EVICT, i, f"{where}evict({k}) made free_fn calls {_short(g_calls)} and "
                     f"returned {s.get('ret')}; expected calls {_short(x_calls)} returning "
                     f"{e.get('ret')}." + _evict_hint(prev_tree, g_calls, x_calls, prev_held))
        # -- sizes: against the reference's, where the tree and its locks are the reference's --
        # Elsewhere they cannot be judged (the tree or lock check fails there): counts worked
        # out from the snapshot would be figures of the driver, which the student's process can
        # rewrite to agree with any sizes it likes.
        if s["tree"] == e["tree"] and held == e["held"] and s["sizes"] != e["sizes"]:
            ev, pr, total = e["sizes"]
            fail(SIZES, i, f"(evictable_size, protected_size, total_size) returned "
                 f"{tuple(s['sizes'])}, but your tree (the reference's here, node for node and "
                 f"lock for lock) holds {ev} unlocked and {pr} locked tokens, so ({ev}, {pr}, "
                 f"{total}).")
        # -- slots (conservation) --
        handed, free_now, double = ledger[i]
        if kind == "start" and handed is not None:
            own[str(op[1])] = handed
        if kind == "finish":
            own.pop(str(op[1]), None)
        in_tree = [x for n in tree for x in n[2]]
        running_own = [x for r, slots in own.items() if r in held for x in slots]
        problem = ""
        if double:
            problem = (f"slot(s) {_toks(double)} were freed while already free "
                       "(a double free).")
        elif len(set(in_tree)) != len(in_tree):
            problem = "the same slot id appears in two places of the tree."
        elif set(in_tree) & set(running_own):
            problem = ("a running request's own slots ended up in the tree before it "
                       "finished.")
        else:
            total = len(in_tree) + len(running_own) + free_now
            if total > pool:
                problem = (f"{total - pool} slot(s) are both free and in use (the tree holds "
                           f"{len(in_tree)}, running requests {len(running_own)}, the free "
                           f"queue {free_now}, of {pool}): something freed slots it still "
                           "holds.")
            elif total < pool:
                problem = (f"{pool - total} slot(s) leaked: the tree holds {len(in_tree)}, "
                           f"running requests {len(running_own)}, the free queue {free_now}, "
                           f"of {pool}.")
        if problem:
            fail(SLOTS, i, problem)
        prev_tree, prev_held = tree, held

    error = out.get("error")
    if error is not None or len(steps) < len(e_steps):
        at = int(error["op"]) if error else len(steps)
        msg = str(error["message"]) if error else "nothing (the trace stopped early)"
        if at < 0 or not ops:
            line = f"RadixCache(page_size={page}) raised {msg}"
        else:
            at = min(at, len(ops) - 1)
            line = f"operation {at + 1} ({op_text(ops[at])}) raised {msg}\n  Script: " \
                   f"{_upto(case, at)}"
        first.setdefault(RUNS, line)
        for name in NAMES[1:8]:
            first.setdefault(name, f"{NOT_REACHED}{line}")
    for name in NAMES[:8]:
        v.add(name, case, name not in first, first.get(name, ""))


def _judge_timed(case: Case, out: dict[str, Any], got_cpu: float, exp: dict[str, Any],
                 v: _Verdict) -> None:
    if "error" in out:
        v.add(SPEED, case, False, f"the long-prompt script raised {out['error']['message']}")
        return
    want = exp["output"]["results"]
    if out["results"] != want:
        ops = timed_ops(case)
        i = next(k for k, (a, b) in enumerate(zip(out["results"], want, strict=False))
                 if a != b) if len(out["results"]) == len(want) else 0
        v.add(SPEED, case, False,
              f"on the long-prompt script, operation {i + 1} ({op_text(ops[i])}) gave "
              f"[result, evictable_size] = {out['results'][i]}; expected {want[i]}. "
              "Fix the other checks first.")
        return
    # The relay's CPU seconds for the whole case (outside the sandbox's Python), never a figure
    # the driver reports: code in the sandbox can rewrite the driver and its clock.
    mine, ref = got_cpu, float(exp["cpu_s"])
    ratio = mine / ref if ref > 0 else 1.0
    ops = timed_ops(case)
    longest = max(len(op[2]) for op in ops if op[0] == "start")
    timing = (f"{len(ops)} operations on prompts of up to {longest:,} tokens took "
              f"{mine * 1e3:.0f} ms of CPU time against "
              f"{ref * 1e3:.0f} ms for the reference, {ratio:.1f}x.")
    if mine < SPEED_FLOOR_S or ratio <= SLOWDOWN_LIMIT:
        v.add(SPEED, case, True, timing)
        return
    v.add(SPEED, case, False,
          f"{timing} Beyond {SLOWDOWN_LIMIT:.0f}x this check is lost (the others still count). "
          "A match should cost time linear in the prompt: compare an edge against the prompt "
          "from an index instead of re-slicing the rest of the prompt for every token, and do "
          "not rebuild lists of slots token by token.")


def _judge_timed_sizes(case: Case, result: Any, exp: dict[str, Any]) -> tuple[bool, str]:
    """The long script's evictable_size() after every operation against the reference's. The
    trace cases cannot settle the sizes alone: there the driver also reports the tree, and a
    submission that rewrites the driver can write sizes to agree with it; here nothing but the
    cache's own answers comes back, so a counter that misses the locks shows."""
    out = result.get("output") if isinstance(result, dict) else None
    rows = out.get("results") if isinstance(out, dict) else None
    if not isinstance(rows, list):
        return False, f"the long-prompt script gave no results — on {describe(case)}"
    want = exp["output"]["results"]
    if rows == want:
        return True, ""
    ops = timed_ops(case)
    i = next((k for k, (a, b) in enumerate(zip(rows, want, strict=False)) if a != b),
             min(len(rows), len(want)))
    if i >= len(want) or i >= len(rows):
        return False, (f"the long-prompt script gave {len(rows)} results for {len(want)} "
                       f"operations — on {describe(case)}")
    got, exp_row = rows[i], want[i]
    where = f"on the long-prompt script, after operation {i + 1} ({op_text(ops[i])})"
    if isinstance(got, list) and len(got) == 2 and got[0] == exp_row[0]:
        return False, (f"{where}, evictable_size() returned {got[1]}; the reference's, after "
                       f"the same operations with the same results, {exp_row[1]}. It counts the "
                       "tokens of nodes with lock_ref 0: inc_lock_ref and dec_lock_ref move a "
                       "node's tokens between evictable and protected.")
    return False, (f"{where}, [result, evictable_size] was {got}; expected {exp_row}: the long "
                   "script shows a mistake the shorter scripts did not, and the sizes after it "
                   "could not be checked.")


def _well_formed(result: Any, case: Case) -> bool:
    """Whether a result has the shape the driver writes (a forged line must fail, not crash)."""
    out = checkkit.envelope(result)
    if not isinstance(out, dict):
        return out is not None  # a run's error text is well formed; any other shape is not
    if case["input"].get("mode") == "timed":
        if "error" in out:
            return isinstance(out["error"], dict) and isinstance(out["error"].get("message"), str)
        # cpu_s is the relay's (graders/code.py): its absence means the case was not timed.
        return isinstance(out.get("results"), list) and isinstance(result.get("cpu_s"), float)
    steps = out.get("steps")
    if not isinstance(steps, list) or len(steps) > len(case["input"]["ops"]):
        return False
    err = out.get("error")
    if err is not None and not (isinstance(err, dict) and isinstance(err.get("op"), int)
                                and isinstance(err.get("message"), str)):
        return False
    for s in steps:
        if not (isinstance(s, dict) and isinstance(s.get("tree"), list) and s["tree"]
                and isinstance(s.get("held"), dict) and isinstance(s.get("sizes"), list)
                and isinstance(s.get("free"), int)):
            return False
        for n in s["tree"]:
            if not (isinstance(n, list) and len(n) == 4 and isinstance(n[0], int)
                    and isinstance(n[1], list) and isinstance(n[2], list)
                    and isinstance(n[3], int)):
                return False
        if not all(isinstance(x, int) for x in s["held"].values()):
            return False
    return True


def check(cases: list[Case], got: list[dict[str, Any]], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    """Named checks over all cases; each failure names the smallest case it fails on."""
    v = _Verdict()
    timed_sizes: list[tuple[Case, bool, str]] = []
    for case, g, e in zip(cases, got, expected, strict=True):
        timed = case["input"].get("mode") == "timed"
        names = [SPEED] if timed else NAMES[:8]
        if timed:
            timed_sizes.append((case, *_judge_timed_sizes(case, g, e)))
        if not _well_formed(g, case):
            g = {"error": "the output for this case is malformed"}
        if "error" in g:
            msg = f"{g['error']} — on {describe(case)}"
            for name in names:
                v.add(name, case, False, msg)
            continue
        try:
            if timed:
                _judge_timed(case, g["output"], g["cpu_s"], e, v)
            else:
                _judge_trace(case, g["output"], e["output"], v)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, StopIteration):
            # Only a hand-made output line gets here: the driver always writes every field.
            for name in names:
                v.add(name, case, False, f"the output for this case is malformed — on "
                                         f"{describe(case)}")
    # The long script's sizes count only when every other trace check passed: a wrong tree,
    # lock count, eviction or slot moves the sizes too, and is charged to its own check.
    if all(row.passed for name in NAMES[:8] if name != SIZES
           for row in v.rows.get(name, [])):
        for case, ok, message in timed_sizes:
            v.add(SIZES, case, ok, message)
    # A passing speed check says how fast it ran (its row's message), not only that it passed.
    timing = v.rows[SPEED][0].message if SPEED in v.rows else ""
    return [replace(c, message=timing) if c.name == SPEED and c.passed and timing else c
            for c in v.checks(CHECKS)]
