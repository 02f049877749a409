"""Plays one operation script against a RadixCache module: `run_case(module, case_input)`.

Runs inside the sandbox against the student's `submission.py` (under `runners/case_loop.py`) and in
the worker against the reference. Standard library only, plus the shared
driver_errors module (listed in the part's sandbox_modules).

The driver is the scheduler and the KV allocator around the cache. Case input:

    {"page_size": p, "pool": N, "mode": "trace", "ops": [op, ...]}
    {"page_size": p, "pool": N, "mode": "timed", "script": {"seed": s, ...}}   (long_script)

with ops ["start", rid, tokens], ["finish", rid], ["match", tokens], ["evict", k]. A request's
life (the statement's rules): `slots, node = match_prefix(tokens)`; `inc_lock_ref(node)`; if the
allocator has fewer free slots than the request needs, `evict(shortfall, free_fn)`; if it still
cannot allocate, `dec_lock_ref(node)` and the request is rejected; else it takes that many slots
from the front of the free queue. On finish: `n = insert(tokens, matched + own slots)`; the
driver frees the request's own slots at positions < n (the tree already had those tokens) and
those past the last whole page (the tree never takes a partial page); then `dec_lock_ref(node)`.

Trace mode records, after every operation, what the calls returned, every `free_fn` call and a
snapshot of the tree (preorder, children sorted by key: [parent index, key, slots, lock_ref]),
the three sizes, which node each running request holds, and any broken link the driver saw
while reading the tree (the checks in the worker judge all of it). Timed mode builds a long script
from the case's seed (long_script) and plays it once, on a fresh cache, returning every
operation's result; the relay, not this file, times the case (runners/relay.py). This file runs
in the student's process, which can replace any of it: the script never repeats itself (a repeat
could be played once and its results copied), and its seed is drawn for each submission (a
constant script could be played at import, before the timed window opens, and replayed).
"""
from __future__ import annotations

import gc
import random
import struct
from collections import deque

from driver_errors import describe as _describe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A reference trace is a few KB per case; this only stops a runaway tree flooding the channel.
MAX_OUTPUT_BYTES = 120_000
# A tree bigger than this cannot come from the trace cases: reading stops there.
MAX_NODES = 2_000
MAX_DEPTH_STEPS = 100_000


class TreeReadError(Exception):
    """The student's tree cannot be read (a missing attribute, a cycle, a huge tree)."""


def _ints(values: Any, what: str) -> list[int]:
    try:
        out = [int(v) for v in values]
    except Exception as exc:
        raise TreeReadError(f"{what} is not a sequence of ints ({exc})") from None
    return out


def _child_key(key: list[int], page: int) -> Any:
    return key[0] if page == 1 else tuple(key[:page])


def snapshot(cache: Any, page: int) -> tuple[list[list[Any]], dict[int, int], list[str]]:
    """(nodes, index by id(node), broken links). Preorder from the root, children by key."""
    try:
        root = cache.root
    except AttributeError:
        raise TreeReadError("the cache has no attribute `root`") from None
    nodes: list[list[Any]] = []
    index: dict[int, int] = {}
    bad: list[str] = []
    # Keep the objects alive while their ids are in `index`.
    keep: list[Any] = []
    stack: list[tuple[Any, int, str]] = [(root, -1, "root")]
    while stack:
        node, parent_i, where = stack.pop()
        if id(node) in index:
            bad.append(f"{where}: the same node object is reachable twice (a cycle or a node "
                       "left under two parents)")
            continue
        if len(nodes) >= MAX_NODES:
            raise TreeReadError(f"the tree has more than {MAX_NODES} nodes")
        try:
            key = _ints(node.key, f"{where}.key")
            value = _ints(node.value, f"{where}.value")
            lock = int(node.lock_ref)
            children = dict(node.children)
        except AttributeError as exc:
            raise TreeReadError(f"a node has no attribute {exc.name!r}") from None
        i = len(nodes)
        index[id(node)] = i
        keep.append(node)
        nodes.append([parent_i, key, value, 0 if parent_i < 0 else lock])
        label = "root" if parent_i < 0 else f"node {key}"
        if parent_i >= 0:
            if not key:
                bad.append(f"{label} (under node {nodes[parent_i][1]}) has an empty key")
            if len(value) != len(key):
                bad.append(f"{label} holds {len(value)} slots for {len(key)} tokens")
            if page > 1 and len(key) % page:
                bad.append(f"{label} has {len(key)} tokens, not a whole number of "
                           f"{page}-token pages")
        kids = []
        for k, child in children.items():
            try:
                ck = _ints(child.key, "a child's key")
            except AttributeError:
                raise TreeReadError("a child has no attribute `key`") from None
            if ck and k != _child_key(ck, page):
                bad.append(f"{label}.children holds node {ck} under the key {k!r}; it must be "
                           f"keyed by {_child_key(ck, page)!r} (its first "
                           f"{'token' if page == 1 else 'page'})")
            if getattr(child, "parent", None) is not node:
                bad.append(f"node {ck} is in {label}.children but its `parent` is another "
                           "object")
            kids.append((ck, str(k), child))
        kids.sort(key=lambda t: (t[0], t[1]), reverse=True)  # popped in ascending order
        for ck, _, child in kids:
            stack.append((child, i, f"node {ck}"))
    return nodes, index, bad


def node_depth(cache: Any, node: Any) -> int | None:
    """Tokens from the root to `node` (None if its parent links do not reach the root)."""
    depth, steps = 0, 0
    root = cache.root
    while node is not root:
        if node is None or steps > MAX_DEPTH_STEPS:
            return None
        depth += len(node.key)
        node = getattr(node, "parent", None)
        steps += 1
    return depth


class Allocator:
    """The KV pool: a FIFO queue of free slot ids; freed slots join the back."""

    def __init__(self, size: int) -> None:
        self.queue: deque[int] = deque(range(size))
        self.free_set = set(self.queue)
        self.size = size
        self.calls: list[list[int]] = []
        self.double: list[int] = []

    def take(self, n: int) -> list[int]:
        out = [self.queue.popleft() for _ in range(n)]
        self.free_set.difference_update(out)
        return out

    def give(self, slots: list[int]) -> None:
        for s in slots:
            if s in self.free_set or not 0 <= s < self.size:
                self.double.append(s)  # recorded for the checks; the queue stays consistent
                continue
            self.free_set.add(s)
            self.queue.append(s)

    def free_fn(self, slots: Any) -> None:
        """What evict() gets: records the call, then frees."""
        got = [int(s) for s in slots]
        self.calls.append(got)
        self.give(got)


def _sizes(cache: Any) -> list[Any]:
    out = []
    for name in ("evictable_size", "protected_size", "total_size"):
        v = getattr(cache, name)()
        out.append(int(v) if isinstance(v, int) else repr(v)[:40])
    return out


def _play_trace(module: Any, case: dict[str, Any]) -> dict[str, Any]:
    page = int(case["page_size"])
    alloc = Allocator(int(case["pool"]))
    steps: list[dict[str, Any]] = []
    # rid -> (tokens, matched slots, own slots, held node)
    running: dict[str, tuple[list[int], list[int], list[int], Any]] = {}
    out: dict[str, Any] = {"steps": steps}
    try:
        cache = module.RadixCache(page)
    except MemoryError:
        raise
    except (Exception, SystemExit) as exc:
        out["error"] = {"op": -1, "message": _describe(exc, module)}  # -1: the constructor
        return out
    for i, op in enumerate(case["ops"]):
        kind = op[0]
        step: dict[str, Any] = {}
        alloc.calls, alloc.double = [], []
        try:
            if kind in ("start", "match"):
                tokens = list(op[2] if kind == "start" else op[1])
                res = cache.match_prefix(list(tokens))
                if not (isinstance(res, tuple | list) and len(res) == 2):
                    raise TypeError("match_prefix must return (slots, node), got "
                                    f"{type(res).__name__}")
                matched, node = _ints(res[0], "match_prefix's slots"), res[1]
                step["m"] = matched
                step["depth"] = node_depth(cache, node)
                if kind == "start":
                    rid = str(op[1])
                    cache.inc_lock_ref(node)
                    need = len(tokens) - len(matched)
                    short = need - len(alloc.queue)
                    if short > 0:
                        step["short"] = short
                        ret = cache.evict(short, alloc.free_fn)
                        step["ret"] = ret if isinstance(ret, int) else repr(ret)[:40]
                    if need > len(alloc.queue) or need < 0:
                        cache.dec_lock_ref(node)
                        step["rejected"] = True
                    else:
                        own = alloc.take(need)
                        step["alloc"] = own
                        running[rid] = (tokens, matched, own, node)
            elif kind == "finish":
                rid = str(op[1])
                if rid not in running:
                    step["skipped"] = True
                else:
                    tokens, matched, own, node = running.pop(rid)
                    n = cache.insert(list(tokens), matched + own)
                    if not isinstance(n, int):
                        raise TypeError(f"insert must return an int, got {type(n).__name__}")
                    step["n"] = n
                    m, aligned = len(matched), len(tokens) - len(tokens) % page
                    # Own slots sit at positions m.. of the request; free the duplicates the tree
                    # already had (positions < n) and the partial page past `aligned`.
                    dups = own[: max(0, min(n, aligned) - m)]
                    tail = own[max(0, aligned - m):]
                    step["dups"], step["tail"] = dups, tail
                    alloc.give(dups + tail)
                    cache.dec_lock_ref(node)
            elif kind == "evict":
                ret = cache.evict(int(op[1]), alloc.free_fn)
                step["ret"] = ret if isinstance(ret, int) else repr(ret)[:40]
            else:
                raise ValueError(f"unknown op {kind!r}")
            if alloc.calls:
                step["calls"] = alloc.calls
            nodes, index, bad = snapshot(cache, page)
            step["tree"] = nodes
            if bad:
                step["bad"] = bad[:5]
            step["held"] = {r: index.get(id(v[3]), -1) for r, v in running.items()}
            step["sizes"] = _sizes(cache)
        except MemoryError:
            raise
        except TreeReadError as exc:
            out["error"] = {"op": i, "message": f"the grader could not read your tree: {exc}"}
            break
        except (Exception, SystemExit) as exc:
            out["error"] = {"op": i, "message": _describe(exc, module)}
            break
        if alloc.double:
            step["double"] = alloc.double
        step["free"] = len(alloc.queue)
        steps.append(step)
    return out


def long_script(spec: dict[str, Any]) -> list[list[Any]]:
    """The timed case's script: `sessions` sessions in a row, each with `systems` system prompts
    of `system_tokens` tokens and `convs` conversations over them (`first_tokens` of their own),
    played for `turns` turns that each add `turn_tokens` tokens to every conversation, with an
    `["evict", evict]` after each turn. A turn's prompt is its conversation's last one plus new
    tokens, so matches run thousands of tokens deep. The checks (in the worker) expand it with
    this same function, to name the operation where a result went wrong.

    Built here rather than sent: the case's input crosses the sandbox as JSON, and decoding a
    few megabytes of token lists inside the timed window would cost more than the reference's
    whole play. Tokens come from random bytes, decoded in C, for the same reason."""
    rng = random.Random(spec["seed"])

    def draw(n: int) -> list[int]:
        return list(struct.unpack(f"<{n}H", rng.randbytes(2 * n)))

    ops: list[list[Any]] = []
    for s in range(spec["sessions"]):
        # Each session has prompts of its own: no part of the script repeats another.
        systems = [draw(spec["system_tokens"]) for _ in range(spec["systems"])]
        convs = [systems[c % len(systems)] + draw(spec["first_tokens"])
                 for c in range(spec["convs"])]
        for turn in range(spec["turns"]):
            for c, conv in enumerate(convs):
                if turn:
                    conv.extend(draw(spec["turn_tokens"]))
                ops.append(["start", f"s{s}c{c}t{turn}", list(conv)])
                ops.append(["finish", f"s{s}c{c}t{turn}"])
            ops.append(["evict", spec["evict"]])
    return ops


def _play_timed(module: Any, case: dict[str, Any]) -> list[list[int]]:
    """The long script: per op [result, evictable_size()] (the scheduler asks for the sizes
    after every op, as SGLang's does). Untimed here: the relay times the case."""
    page = int(case["page_size"])
    alloc = Allocator(int(case["pool"]))
    running: dict[str, tuple[list[int], list[int], list[int], Any]] = {}
    results: list[list[int]] = []
    cache = module.RadixCache(page)
    for op in case["ops"]:
        kind = op[0]
        if kind in ("start", "match"):
            tokens = op[2] if kind == "start" else op[1]
            matched, node = cache.match_prefix(tokens)
            r = len(matched)
            if kind == "start":
                cache.inc_lock_ref(node)
                need = len(tokens) - r
                if need > len(alloc.queue):
                    cache.evict(need - len(alloc.queue), alloc.free_fn)
                if need > len(alloc.queue):
                    cache.dec_lock_ref(node)
                    r = -1
                else:
                    running[str(op[1])] = (tokens, list(matched), alloc.take(need), node)
        elif kind == "finish":
            held = running.pop(str(op[1]), None)
            if held is None:  # rejected at start (only a wrong cache can get here)
                results.append([-1, -1])
                continue
            tokens, matched, own, node = held
            r = cache.insert(tokens, matched + own)
            m, aligned = len(matched), len(tokens) - len(tokens) % page
            alloc.give(own[: max(0, min(r, aligned) - m)] + own[max(0, aligned - m):])
            cache.dec_lock_ref(node)
        else:  # evict
            r = cache.evict(int(op[1]), alloc.free_fn)
        ev = cache.evictable_size()
        cache.protected_size()
        results.append([int(r), int(ev)])
    return results


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    if case_input.get("mode") != "timed":
        return _play_trace(module, case_input)
    out: dict[str, Any] = {}
    # The worker's process (where the reference is timed) has a far bigger heap than the
    # sandbox's; with the collector off, the play never pays for scanning it. No gc.collect()
    # here: the whole case is timed now, and a full collection of the worker's heap (~0.1 s,
    # more than the reference's whole play) would swamp the reference's figure and with it the
    # ratio the speed check reads.
    gc.disable()
    try:
        ops = long_script(case_input["script"])
        out["results"] = _play_timed(module, {**case_input, "ops": ops})
    except MemoryError:
        raise
    except (Exception, SystemExit) as exc:
        out["error"] = {"op": -1, "message": _describe(exc, module)}
    finally:
        gc.enable()
    return out
