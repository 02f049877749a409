"""Cases and checks for the collision-safe block pool (runs in the worker, never in the sandbox).

A case is a script of operations on one fresh pool (see driver.py), under SHA-256 or under a
weak hash (`const`: every block collides; `mod3`: three buckets), or the large speed case.
`check()` compares every step with the reference's trace, replays the student's own trace
through an oracle that knows which prefix each block's KV was computed from (so any hit on the
wrong KV is named), checks conservation after every step, runs the crafted forward-free
regression as its own check, compares scripts run under SHA-256 and under a colliding hash, and
compares the speed case's lookup time with the reference's. Each failing check names the
shortest failing operation sequence.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from exercises.prefix_scripts import (
    Case,
    FirstFailures,
    clip,
    describe_speed,
    hidden_scripts,
    ids_ok,
    judge_speed,
    make_case,
    prefix_key,
    queue_problem,
    script_inputs,
    short,
    steps_of,
    summary,
)
from exercises.prefix_scripts import size_key as size_key  # the tests read it here
from graders import checkkit
from graders.base import Check

RANDOM_CASES = 200
TWIN_EVERY = 4  # every fourth SHA-256 random script is also run under the colliding hash
# 256 prompts of 16 full blocks fill a 4096-block pool, then 1,200 lookups, each of a different
# prefix of them; the whole case is timed in CPU seconds by the relay. The workload is drawn from
# the submission's seed (speed_spec): the driver runs in the student's process, which could
# compute a constant workload at import, outside the timed window. A lookup that scans the cache
# instead of probing a dictionary makes the case over 50x slower through the sandbox, and still
# finishes well inside the part's time limit.
SPEED_SHAPE: dict[str, Any] = {"num_blocks": 4096, "block_size": 16, "fill": 256,
                               "fill_blocks": 16, "probes": 1200}


def speed_spec(seed: int) -> dict[str, Any]:
    """The speed case's spec for a submission's seed."""
    return {"seed": int(seed), **SPEED_SHAPE}

# The facts note's crafted regression: 3 blocks, B = 2, every block collides. A = [1,1,2,2,9] is
# freed FIRST block first, X = [8,8] reuses block 0, and R = [8,8,2,2,7] must hit block 0 only:
# block 1's recorded parent is block 0, but an earlier incarnation of it.
REGRESSION_OPS: list[list[Any]] = [
    ["allocate", "A", [1, 1, 2, 2, 9], None], ["free", "A", False],
    ["allocate", "X", [8, 8], None], ["lookup", [8, 8, 2, 2, 7], None],
    ["allocate", "R", [8, 8, 2, 2, 7], None],
]
REGRESSION_ID = "regression-forward-free-reuse"


def _reference() -> Any:
    return checkkit.sibling(__file__, "reference")


def trace_ops(p: dict[str, Any]) -> list[list[Any]]:
    """The statement's chunk trace: A, free A, C (running), W (running), lookup A."""
    return [
        ["hashes", p["A"], None], ["hashes", p["B"], None],
        ["allocate", "A", p["A"], None], ["free", "A", True],
        ["allocate", "C", p["B"], None],
        ["allocate", "W", p["W"], None],
        ["lookup", p["A"], None],
    ]


def _chunk(c: int, size: int) -> list[int]:
    return [1000 * c + i for i in range(1, size + 1)]


# The canonical chunk trace (the exercise's CANONICAL), used when params do not carry one.
CANONICAL_TRACE: dict[str, Any] = {
    "block_size": 16, "num_blocks": 8,
    "A": _chunk(1, 16) + _chunk(2, 16) + _chunk(3, 16) + _chunk(4, 16) + [9001, 9002, 9003, 9004],
    "B": _chunk(1, 16) + _chunk(2, 16) + _chunk(5, 16) + _chunk(4, 16) + [9001, 9002, 9003, 9004],
    "W": _chunk(6, 16) + _chunk(7, 16),
}


def public_cases(params: dict[str, Any]) -> list[Case]:
    """The variant's chunk trace, the same trace with every block colliding, the regression,
    a hit block held by two requests, and an evicted block re-cached."""
    p = params if "A" in params else CANONICAL_TRACE
    ops = trace_ops(p)
    return [
        make_case("example-trace", p["block_size"], p["num_blocks"], ops),
        make_case("example-trace@const", p["block_size"], p["num_blocks"], ops, "const"),
        make_case(REGRESSION_ID, 2, 3, REGRESSION_OPS, "const"),
        # ALLOCATE counts every hit: b and c both hit a's freed blocks 0 and 1, so when b
        # finishes they stay out of the free queue (c still holds them) until c finishes too.
        make_case("example-hit-blocks-held-twice", 2, 6, [
            ["allocate", "a", [1, 1, 2, 2, 3], None], ["free", "a", True],
            ["allocate", "b", [1, 1, 2, 2, 4], None], ["allocate", "c", [1, 1, 2, 2, 5], None],
            ["free", "b", True], ["free", "c", True]]),
        # Eviction takes a block out of the table: a and b cache [5, 5] in blocks 0 and 1; d
        # pops 0 again and re-caches it, now after 1, so the lookup accepts block 1 first.
        make_case("example-evicted-block-recached-last", 2, 3, [
            ["allocate", "a", [5, 5], None], ["allocate", "b", [5, 5], None],
            ["free", "a", True], ["allocate", "c", [7], None], ["allocate", "d", [5, 5], None],
            ["lookup", [5, 5, 9], None]]),
    ]


def _edge_cases() -> list[Case]:
    t = CANONICAL_TRACE
    cases = [
        make_case("edge-canonical-trace", t["block_size"], t["num_blocks"], trace_ops(t)),
        make_case("edge-same-block-different-parent", 2, 8, [
            ["allocate", "a", [1, 1, 2, 2, 3, 3, 5], None], ["free", "a", True],
            ["lookup", [4, 4, 2, 2, 3, 3, 5], None], ["lookup", [1, 1, 4, 4, 3, 3, 5], None],
            ["allocate", "b", [1, 1, 4, 4, 3, 3, 5], None]]),
        make_case("edge-freed-blocks-stay-hittable", 2, 6, [
            ["allocate", "a", [1, 1, 2, 2, 3], None], ["free", "a", True],
            ["lookup", [1, 1, 2, 2, 3], None], ["allocate", "b", [7], None],
            ["lookup", [1, 1, 2, 2, 3], None], ["allocate", "c", [1, 1, 2, 2, 3], None]]),
        make_case("edge-tail-evicted-first", 2, 5, [
            ["allocate", "a", [1, 1, 2, 2, 3, 3, 4, 4, 5], None], ["free", "a", True],
            ["allocate", "b", [7, 7, 7], None], ["lookup", [1, 1, 2, 2, 3, 3, 4, 4, 5], None]]),
        make_case("edge-forward-free-evicts-heads", 2, 5, [
            ["allocate", "a", [1, 1, 2, 2, 3, 3, 4, 4, 5], None], ["free", "a", False],
            ["allocate", "b", [7, 7, 7], None], ["lookup", [1, 1, 2, 2, 3, 3, 4, 4, 5], None]]),
        make_case("edge-cap-aligned-prompt", 2, 6, [
            ["allocate", "a", [1, 1, 2, 2], None], ["free", "a", True],
            ["lookup", [1, 1, 2, 2], None], ["allocate", "b", [1, 1, 2, 2], None],
            ["lookup", [1, 1, 2, 2, 3], None]]),
        make_case("edge-one-token", 2, 3, [
            ["allocate", "a", [1], None], ["free", "a", True], ["lookup", [1], None],
            ["allocate", "b", [1, 1, 1], None]]),
        make_case("edge-extra-isolates-tenants", 2, 8, [
            ["allocate", "a", [1, 1, 2, 2, 3], "t1"], ["free", "a", True],
            ["lookup", [1, 1, 2, 2, 3], "t2"], ["lookup", [1, 1, 2, 2, 3], None],
            ["lookup", [1, 1, 2, 2, 3], "t1"], ["allocate", "b", [1, 1, 2, 2, 3], "t2"]]),
        make_case("edge-pool-full-returns-none", 2, 3, [
            ["allocate", "a", [1, 1, 2, 2, 3], None], ["allocate", "b", [4], None],
            ["free", "a", True], ["allocate", "c", [1, 1, 2, 2, 3, 3, 4], None],
            ["allocate", "c", [1, 1, 2, 2, 5], None]]),
        make_case("edge-queued-hits-count-against-the-pool", 2, 4, [
            ["allocate", "a", [1, 2, 3, 4, 5], None], ["free", "a", True],
            ["allocate", "b", [1, 2, 3, 4, 9, 9, 9, 9, 9], None],
            ["allocate", "b", [1, 2, 3, 4, 9, 9, 9], None]]),
        make_case("edge-shared-block-held-twice", 2, 8, [
            ["allocate", "a", [1, 1, 2, 2, 3], None],
            ["allocate", "b", [1, 1, 2, 2, 6, 6, 7], None], ["free", "a", True],
            ["allocate", "c", [8, 8, 8, 8, 8, 8], None], ["free", "b", False],
            ["free", "c", True]]),
        make_case("edge-duplicates-first-cached-wins", 2, 6, [
            ["allocate", "a", [1, 1, 2, 2, 3], None], ["free", "a", True],
            ["allocate", "b", [1, 1, 2, 2], None], ["free", "b", True],
            ["lookup", [1, 1, 2, 2, 3], None], ["allocate", "c", [4, 4, 4, 4], None],
            ["lookup", [1, 1, 2, 2, 3], None]]),
        make_case("edge-reused-block-same-content", 2, 4, [
            ["allocate", "a", [1, 1, 2, 2], None], ["free", "a", True],
            ["allocate", "b", [1, 1, 2, 2], None], ["free", "b", True],
            ["allocate", "c", [5, 5, 5], None], ["free", "c", True],
            ["allocate", "d", [1, 1, 2, 2, 3], None], ["free", "d", True],
            ["lookup", [1, 1, 2, 2, 3], None]]),
        make_case("edge-evicted-copy-recached", 2, 4, [
            ["allocate", "a", [1, 1, 2, 2, 3], None], ["free", "a", True],
            ["allocate", "b", [1, 1, 2, 2], None], ["free", "b", True],
            ["allocate", "c", [5], None], ["allocate", "d", [1, 1, 2, 2], None],
            ["lookup", [1, 1, 2, 2, 3], None]]),
        make_case("edge-parent-reused-child-cached", 2, 4, [
            ["allocate", "a", [1, 1, 2, 2, 3, 3], None], ["free", "a", False],
            ["allocate", "x", [8, 8, 8], None], ["lookup", [8, 8, 2, 2, 3], None],
            ["lookup", [1, 1, 2, 2, 3], None]]),
    ]
    # The same scripts with every block colliding: the hits must not change.
    twins = [make_case(c["id"] + "@const", c["input"]["block_size"], c["input"]["num_blocks"],
                       c["input"]["ops"], "const") for c in cases[1:]]
    twins += [make_case(c["id"] + "@mod3", c["input"]["block_size"], c["input"]["num_blocks"],
                        c["input"]["ops"], "mod3") for c in cases[1:4]]
    return cases + twins


@st.composite
def _random_case(draw: st.DrawFn) -> tuple[int, int, str, list[list[Any]]]:
    """A random script over the token alphabet {1, 2} (or {1, 2, 3}), so equal blocks and hash
    collisions abound."""
    ref = _reference()
    B = draw(checkkit.sampled_from((1, 2, 2, 3, 4)))
    N = draw(checkkit.integers(3, 12))
    hash_name = draw(checkkit.sampled_from(("sha256", "const", "mod3")))
    alphabet = draw(checkkit.sampled_from(((1, 2), (1, 2), (1, 2, 3))))
    pool = ref.BlockPool(N, B)  # tracks which requests are running
    ops: list[list[Any]] = []
    running: list[str] = []
    for i in range(draw(checkkit.integers(2, 10))):
        kind = draw(checkkit.sampled_from(("allocate", "allocate", "allocate", "free", "free",
                                     "lookup", "hashes")))
        if kind == "free" and not running:
            kind = "allocate"
        if kind == "free":
            rid = running.pop(draw(checkkit.integers(0, len(running) - 1)))
            tail_first = draw(checkkit.sampled_from((True, True, True, False)))
            pool.free(rid, tail_first)
            ops.append(["free", rid, tail_first])
            continue
        n = max(1, draw(checkkit.integers(0, 6)) * B + draw(checkkit.integers(0, B - 1)))
        tokens = draw(checkkit.picks(alphabet, min_size=n, max_size=n))
        extra = draw(checkkit.sampled_from((None, None, None, None, "t1", "t2")))
        if kind == "allocate":
            rid = f"r{i}"
            if pool.allocate(rid, tokens, extra) is not None:
                running.append(rid)
            ops.append(["allocate", rid, tokens, extra])
        else:
            ops.append([kind, tokens, extra])
    return B, N, hash_name, ops


@lru_cache(maxsize=16)
def _random_inputs(seed: int, n: int) -> tuple[str, ...]:
    return script_inputs(_random_case(), seed, n)


def _twins(n: int, case: Case) -> list[Case]:
    """Every fourth SHA-256 random script is also run with every block colliding."""
    inp = case["input"]
    if inp["hash"] == "sha256" and n % TWIN_EVERY == 0:
        return [{"id": f"{case['id']}@const", "input": dict(inp, hash="const")}]
    return []


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """Edge cases and their colliding twins, the regression, Hypothesis scripts (deterministic
    for a seed; every fourth SHA-256 one also under the colliding hash), smallest first, and the
    large speed case last."""
    return hidden_scripts(_edge_cases(), _random_inputs(int(seed), RANDOM_CASES),
                          speed_spec(seed), _twins)


# ---------------------------------------------------------------- describing cases


HASH_NOTE = {
    "const": "const_fn(parent, tokens, extra) = bytes(32): every block collides",
    "mod3": "mod3_fn(parent, tokens, extra) = bytes([(sum(tokens) + parent[0]) % 3])",
}


def _fmt_op(op: list[Any]) -> str:
    kind = op[0]
    if kind == "free":
        return f"pool.free({op[1]!r})" if op[2] else f"pool.free({op[1]!r}, tail_first=False)"
    if kind == "allocate":
        args, extra = f"{op[1]!r}, {op[2]!r}", op[3]
    else:
        args, extra = repr(op[1]), op[2]
    if extra is not None:
        args += f", extra={extra!r}"
    name = {"hashes": "block_hashes"}.get(kind, kind)
    return f"pool.{name}({args})"


def describe(case: Case, upto: int | None = None) -> str:
    """The case as code a student can paste; `upto` cuts the script after that op index."""
    inp = case["input"]
    if "speed" in inp:
        return describe_speed(inp["speed"])
    ops = inp["ops"] if upto is None else inp["ops"][: upto + 1]
    lines = [] if inp["hash"] == "sha256" else ["# " + HASH_NOTE[inp["hash"]]]
    hash_arg = "" if inp["hash"] == "sha256" else f", {inp['hash']}_fn"
    lines.append(f"pool = BlockPool(num_blocks={inp['num_blocks']}, "
                 f"block_size={inp['block_size']}{hash_arg})")
    lines += [_fmt_op(op) for op in ops]
    return clip("\n".join(lines))


# ---------------------------------------------------------------- checking


CHECKS: tuple[tuple[str, float, str], ...] = (
    ("no crash", 1.0, "Every operation ran without an exception."),
    ("block hashes", 1.0, "block_hashes matched every value."),
    ("lookup results", 1.0, "Every lookup returned the right verified hit chain."),
    ("allocate results", 2.0,
     "Every allocate returned the right blocks and cached tokens (or None when it must)."),
    ("free queue after every step", 1.0,
     "free_order() matched the reference after every step."),
    ("never hands out wrong KV", 2.0,
     "No lookup or allocate ever hit a block whose KV was computed from a different prefix, "
     "under SHA-256 or under hashes where blocks collide."),
    ("forward-free regression", 1.0,
     "After a first-block-first free and the parent block's reuse, the child was not hit."),
    ("collisions never change a hit", 1.0,
     "Scripts run with every block colliding gave exactly the results they gave with SHA-256."),
    ("invariants after every step", 1.0,
     "Conservation held after every step: num_free() = len(free_order()), free + held = all "
     "blocks, nothing both free and held, hits block-aligned and within the last-token cap, "
     "lookup changed nothing."),
    ("large case matches", 1.0, "The large case gave the reference's results."),
    ("lookup speed", 1.0, "The large case's lookups ran within 20x of the reference's time."),
)


def _where(case: Case, i: int) -> str:
    return f"at step {i + 1} of:\n{describe(case, i)}"


CHECK_OF_OP = {"hashes": "block hashes", "lookup": "lookup results",
               "allocate": "allocate results", "free": "allocate results"}


def _oracle(case: Case, steps: list[dict[str, Any]]) -> tuple[int, str] | None:
    """Replay the student's own trace, tracking which prefix each block's KV was computed from;
    the first hit on a block whose prefix differs from the request's is wrong KV."""
    inp = case["input"]
    B = inp["block_size"]
    content: dict[int, tuple[Any, tuple[int, ...]]] = {}
    for i, (op, step) in enumerate(zip(inp["ops"], steps, strict=False)):
        if "error" in step or op[0] not in ("lookup", "allocate"):
            continue
        out = step.get("out")
        if op[0] == "lookup":
            tokens, extra = op[1], op[2]
            hits = out if ids_ok(out) else []
            new: list[int] = []
        else:
            tokens, extra = op[2], op[3]
            if not (isinstance(out, list) and len(out) == 2 and ids_ok(out[0])
                    and isinstance(out[1], int)):
                continue
            hits, new = out[0][: out[1] // B], out[0][out[1] // B:]
        for j, b in enumerate(hits):
            want = (extra, tuple(tokens[: (j + 1) * B]))
            have = content.get(b)
            if have != want:
                held = "nothing (it was never written)" if have is None else (
                    f"the KV of prefix {list(have[1])}" + (f" with extra={have[0]!r}"
                                                           if have[0] is not None else ""))
                return i, (f"{op[0]} used block {b} for position {j} of {tokens}, but block "
                           f"{b} holds {held}; position {j} needs the KV of prefix "
                           f"{list(want[1])}" + (f" with extra={extra!r}" if extra else ""))
        if op[0] == "allocate":
            for j, b in enumerate(new, start=len(hits)):
                content[b] = (extra, tuple(tokens[: (j + 1) * B]))
    return None


def _invariants(case: Case, steps: list[dict[str, Any]]) -> tuple[int, str] | None:
    inp = case["input"]
    N, B = inp["num_blocks"], inp["block_size"]
    held: dict[str, list[int]] = {}
    prev: list[int] = list(range(N))
    for i, (op, step) in enumerate(zip(inp["ops"], steps, strict=False)):
        if "error" in step:
            continue
        out, queue, nfree = step.get("out"), step.get("queue"), step.get("num_free")
        if not ids_ok(queue):
            return i, "free_order() did not return a list of block ids"
        problem = ""
        if op[0] == "allocate" and isinstance(out, list) and len(out) == 2 and ids_ok(out[0]):
            n = len(op[2])
            ids, cached = out
            cap = B * ((n - 1) // B)
            if len(ids) != -(-n // B):
                problem = (f"allocate returned {len(ids)} blocks for a {n}-token prompt; it needs "
                           f"ceil({n}/{B}) = {-(-n // B)}")
            elif len(set(ids)) != len(ids):
                problem = f"allocate returned a block twice: {ids}"
            elif not isinstance(cached, int) or cached % B or cached > cap:
                problem = (f"allocate reported {cached} cached tokens for a {n}-token prompt: a "
                           f"multiple of {B} and at most {B}·floor(({n} − 1)/{B}) = {cap}")
            elif any(b in blocks for blocks in held.values() for b in ids[cached // B:]):
                problem = (f"allocate handed out as new a block that a running request still "
                           f"holds (new blocks {ids[cached // B:]})")
            held[op[1]] = ids
        if op[0] == "lookup" and ids_ok(out) and len(out) > (len(op[1]) - 1) // B:
            problem = (f"lookup returned {len(out)} hits for a {len(op[1])}-token prompt; at most "
                       f"floor(({len(op[1])} − 1)/{B}) = {(len(op[1]) - 1) // B} blocks may hit")
        if op[0] == "free":
            held.pop(op[1], None)
        holding = {b for blocks in held.values() for b in blocks}
        if not problem and nfree != len(queue):
            problem = f"num_free() is {nfree} but free_order() lists {len(queue)} blocks"
        if not problem:
            problem = queue_problem(op, out, queue, prev, holding, N, pure=("lookup", "hashes"))
        if problem:
            return i, problem
        prev = queue
    return None


def _judge(case: Case, got: Any, exp: dict[str, Any], v: checkkit.Verdicts,
           first_out: dict[str, Any]) -> None:
    inp = case["input"]
    steps = steps_of(got)
    e_steps = exp["output"]["steps"]
    names = {CHECK_OF_OP[op[0]] for op in inp["ops"]} | {"free queue after every step",
                                                          "never hands out wrong KV",
                                                          "invariants after every step"}
    if case["id"] == REGRESSION_ID:
        names.add("forward-free regression")
    if isinstance(steps, str):
        for name in names | {"no crash"}:
            v.add(name, case, False, f"{steps.rstrip()} — on:\n{describe(case)}", rank=(1, 0))
        return
    failures = FirstFailures()
    fail, first = failures.fail, failures.first

    for i, (op, e) in enumerate(zip(inp["ops"], e_steps, strict=True)):
        g = steps[i] if i < len(steps) else {"error": "no result"}
        if "error" in g:
            if i < len(steps):
                fail("no crash", i, f"{str(g['error']).rstrip()}\n— {_where(case, i)}")
            for name in names:
                fail(name, i, f"the step raised an exception — {_where(case, i)}")
            break
        if g.get("out") != e["out"]:
            what = {"hashes": "block_hashes returned", "lookup": "lookup returned",
                    "allocate": "allocate returned", "free": "free returned"}[op[0]]
            fail(CHECK_OF_OP[op[0]], i, f"{what} {short(g.get('out'))}, expected "
                                        f"{short(e['out'])} — {_where(case, i)}")
        if g.get("queue") != e["queue"]:
            fail("free queue after every step", i,
                 f"after this step free_order() is {short(g.get('queue'))}, expected "
                 f"{short(e['queue'])} — {_where(case, i)}")
    bad = _oracle(case, steps)
    if bad is not None:
        fail("never hands out wrong KV", bad[0], f"wrong KV: {bad[1]} — {_where(case, bad[0])}")
    bad = _invariants(case, steps)
    if bad is not None:
        fail("invariants after every step", bad[0], f"{bad[1]} — {_where(case, bad[0])}")
    if case["id"] == REGRESSION_ID:
        broken = [first[n][0] for n in ("lookup results", "allocate results",
                                        "never hands out wrong KV", "no crash") if n in first]
        if broken:
            i = min(broken)
            detail = next(first[n][1] for n in ("never hands out wrong KV", "lookup results",
                                                 "allocate results", "no crash") if n in first)
            fail("forward-free regression", i, (
                "A was freed first block first, so block 0 went back to the queue before block "
                "1, and X then reused block 0. Block 1 is still cached with parent \"block 0\", "
                "but that was block 0's previous contents. R = [8, 8, 2, 2, 7] may hit block 0 "
                "(X's [8, 8]) and must stop there: lookup [0], allocate [[0, 1, 2], 2]. Record "
                "the parent's incarnation (its id and a generation that changes each time the "
                "block is handed out), not its id alone or its hash. What happened: " + detail))
    if not any("error" in s for s in steps):
        v.add("no crash", case, True)
    failures.report(v, case, names)
    first_out[case["id"]] = [s.get("out") if "error" not in s else {"error": True}
                             for s in steps]


def _judge_twins(cases: list[Case], outs: dict[str, Any], v: checkkit.Verdicts) -> None:
    """A script run under a colliding hash must give exactly what it gave under SHA-256."""
    by_id = {c["id"]: c for c in cases}
    for case in cases:
        base_id, at, _ = case["id"].partition("@")
        if not at or base_id not in by_id or base_id not in outs or case["id"] not in outs:
            continue
        base, twin = outs[base_id], outs[case["id"]]
        ops = case["input"]["ops"]
        diff = next((i for i, op in enumerate(ops) if op[0] != "hashes" and (
            i >= len(base) or i >= len(twin) or base[i] != twin[i])), None)
        if diff is None:
            v.add("collisions never change a hit", case, True)
            continue
        b = base[diff] if diff < len(base) else "nothing"
        t = twin[diff] if diff < len(twin) else "nothing"
        v.add("collisions never change a hit", case, False, rank=prefix_key(case, diff), message=(
            f"with {case['input']['hash']}_fn your pool's step "
            f"{diff + 1} gave {short(t)}, but with SHA-256 the same script gave {short(b)}. "
            "The hash only nominates candidates; verification must decide, so collisions may "
            f"cost lookups but never change a hit — {_where(case, diff)}"))


def check(cases: list[Case], got: list[Any], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    v = checkkit.Verdicts()  # every failure is ranked by its own failing prefix
    outs: dict[str, Any] = {}
    for case, g, e in zip(cases, got, expected, strict=True):
        if "speed" in case["input"]:
            judge_speed(case, g, e, v, mismatch=(
                "on {case} your results differ from the reference's; the smaller cases show "
                "where"), advice=(
                "Use the hash to find the few candidates with one dictionary probe per block, "
                "then verify only those; scanning every cached block makes each lookup grow "
                "with the cache (about 4,000 blocks here). Your results are still graded on "
                "every other check; this one is worth one point."))
        else:
            _judge(case, g, e, v, outs)
    _judge_twins(cases, outs, v)
    return summary(v, CHECKS)
