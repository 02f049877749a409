"""Cases and checks for the chained-hash prefix-cache model (runs in the worker, never in the
sandbox).

A case is a script of operations on one fresh model (see driver.py for the format), or the one
large speed case. `check()` compares every step with the reference's trace (hash values, lookup
and allocate results, the free queue after every step, the blocks cached under each hash),
checks conservation invariants on the student's own trace, and compares the speed case's time
with the reference's. Each failing check names the shortest failing operation sequence.
"""
from __future__ import annotations

import random
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
    queue_problem,
    script_inputs,
    short,
    size_key,
    steps_of,
    summary,
)
from graders import checkkit
from graders.base import Check

# The facts note's trace: B = 4, 8 blocks, A = 14 tokens (3 full blocks and a 2-token tail).
A = [11, 12, 13, 14, 21, 22, 23, 24, 31, 32, 33, 34, 41, 42]
C = A[:4] + [99] + A[5:]  # token 21 -> 99: block 0 shared, everything after diverges
E = A[4:8] + A[0:4]  # A's block 1 then A's block 0: same tokens, different positions
G = [51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62]  # needs 3 fresh blocks

RANDOM_CASES = 200
# 256 prompts of 32 full blocks fill an 8192-block pool (about 8,000 cached hashes), then 3,000
# lookups, each of a different prefix of them; the relay times the whole case in CPU seconds. A
# cheap hash keeps the time on the cache's own work: a lookup that scans the cache instead of
# probing a dictionary makes the case over 50x slower through the sandbox. The workload is drawn
# from the submission's seed (speed_spec): the driver runs in the student's process, which could
# compute a constant workload at import, outside the timed window.
SPEED_SHAPE: dict[str, Any] = {"num_blocks": 8192, "block_size": 16, "fill": 256,
                               "fill_blocks": 32, "probes": 3000, "fast_hash": True}


def speed_spec(seed: int) -> dict[str, Any]:
    """The speed case's spec for a submission's seed."""
    return {"seed": int(seed), **SPEED_SHAPE}


def _reference() -> Any:
    return checkkit.sibling(__file__, "reference")


def trace_ops(a: list[int], c: list[int], g: list[int], block_size: int) -> list[list[Any]]:
    """The statement's trace as operations: A, free, D (A's full blocks), free, C, lookup F
    (D plus one token), G, lookup A."""
    k = len(a) // block_size
    return [
        ["allocate", "A", a, None], ["free", "A"],
        ["allocate", "D", a[: k * block_size], None], ["free", "D"],
        ["allocate", "C", c, None],
        ["lookup", a[: k * block_size + 1], None],
        ["allocate", "G", g, None],
        ["lookup", a, None],
    ]


def public_cases(params: dict[str, Any]) -> list[Case]:
    """The facts note's trace, its hash values, and the variant's own trace when it differs."""
    cases = [
        make_case("example-trace", 4, 8, trace_ops(A, C, G, 4)),
        make_case("example-hashes", 4, 8, [
            ["request_hashes", A, None], ["request_hashes", A, "loraA"],
            ["request_hashes", C, None], ["request_hashes", E, None],
            ["hash_block", None, A[:4], None],
        ]),
    ]
    if "A" in params and (params["A"], params["C"], params["G"], params["block_size"],
                          params["num_blocks"]) != (A, C, G, 4, 8):
        cases.append(make_case("example-variant", params["block_size"], params["num_blocks"],
                               trace_ops(params["A"], params["C"], params["G"],
                                         params["block_size"])))
    return cases


def _edge_cases() -> list[Case]:
    h0 = _reference().request_block_hashes(A, 4)[0].hex()
    return [
        make_case("edge-hash-values", 4, 8, [
            ["hash_block", None, [1, 2, 3, 4], None],
            ["hash_block", h0, A[4:8], None],
            ["hash_block", h0, A[4:8], "loraA"],
            ["hash_block", None, [-1, 0, 2**31 - 1], "salt"],
            ["request_hashes", [], None],
            ["request_hashes", A[:3], None],
            ["request_hashes", A[:12], None],
            ["request_hashes", A, "loraA"],
        ]),
        make_case("edge-blake2b-trace", 4, 8, trace_ops(A, C, G, 4) + [["request_hashes", A, None]],
                  "blake2b"),
        make_case("edge-one-token-prompt", 4, 4, [
            ["allocate", "x", [5], None], ["free", "x"], ["allocate", "y", [5], None],
            ["lookup", [5, 6, 7, 8, 9], None]]),
        make_case("edge-aligned-prompt-recomputes-a-block", 2, 6, [
            ["allocate", "x", [1, 2, 3, 4], None], ["free", "x"],
            ["lookup", [1, 2, 3, 4], None], ["allocate", "y", [1, 2, 3, 4], None],
            ["lookup", [1, 2, 3, 4, 5], None]]),
        make_case("edge-block-size-1", 1, 6, [
            ["allocate", "x", [7, 8, 9], None], ["free", "x"],
            ["allocate", "y", [7, 8, 9], None], ["allocate", "z", [7, 8, 6], None]]),
        make_case("edge-pool-exhausted", 2, 3, [
            ["allocate", "x", [1, 1, 2, 2, 3], None], ["allocate", "y", [4], None],
            ["free", "x"], ["allocate", "y", [4, 4, 5, 5, 6, 6, 7], None],
            ["allocate", "y", [4, 4, 5, 5, 6], None], ["lookup", [1, 1, 2, 2, 3], None]]),
        make_case("edge-queued-hits-count-against-the-pool", 2, 4, [
            ["allocate", "x", [1, 2, 3, 4, 5], None], ["free", "x"],
            ["allocate", "y", [1, 2, 3, 4, 9, 9, 9, 9, 9], None],
            ["allocate", "y", [1, 2, 3, 4, 9, 9, 9], None]]),
        make_case("edge-shared-hit-held-by-two", 2, 8, [
            ["allocate", "x", [1, 2, 3, 4, 5], None],
            ["allocate", "y", [1, 2, 3, 4, 6, 6, 7], None],
            ["free", "x"], ["allocate", "z", [8, 8, 8, 8, 8, 8], None],
            ["free", "y"], ["free", "z"]]),
        make_case("edge-extra-isolates", 2, 8, [
            ["allocate", "x", [1, 2, 3, 4, 5], "loraA"], ["free", "x"],
            ["lookup", [1, 2, 3, 4, 5], None], ["lookup", [1, 2, 3, 4, 5], "loraB"],
            ["lookup", [1, 2, 3, 4, 5], "loraA"],
            ["allocate", "y", [1, 2, 3, 4, 5], None]]),
        make_case("edge-lookup-is-pure", 2, 5, [
            ["allocate", "x", [1, 2, 3, 4, 5, 6, 7], None], ["free", "x"],
            ["lookup", [1, 2, 3, 4, 5, 6, 7], None], ["lookup", [1, 2, 3, 4, 5, 6, 7], None],
            ["allocate", "y", [9, 9, 9, 9, 9, 9, 9, 9, 9], None]]),
        make_case("edge-evicted-block-is-not-hit", 2, 2, [
            ["allocate", "x", [1, 1, 2], None], ["free", "x"],
            ["allocate", "y", [3, 3, 4], None], ["free", "y"],
            ["lookup", [1, 1, 2], None], ["allocate", "z", [1, 1, 2], None]]),
        make_case("edge-tail-evicted-first", 2, 6, [
            ["allocate", "x", [1, 1, 2, 2, 3, 3, 4, 4, 5], None], ["free", "x"],
            ["allocate", "y", [7, 7, 7], None],
            ["lookup", [1, 1, 2, 2, 3, 3, 4, 4, 5], None]]),
        make_case("edge-duplicate-copies", 2, 6, [
            ["allocate", "x", [1, 1, 2, 2, 3], None], ["free", "x"],
            ["allocate", "y", [1, 1, 2, 2], None], ["free", "y"],
            ["lookup", [1, 1, 2, 2, 3], None], ["allocate", "z", [4, 4, 4, 4], None],
            ["lookup", [1, 1, 2, 2, 3], None]]),
    ]


@st.composite
def _random_case(draw: st.DrawFn) -> tuple[int, int, str, list[list[Any]]]:
    """A random script over a small token alphabet, so prefixes repeat and hits happen."""
    ref = _reference()
    B = draw(checkkit.sampled_from((1, 2, 4, 16)))
    max_blocks = {1: 12, 2: 10, 4: 8, 16: 12}[B]  # prompts up to 207 tokens
    N = draw(checkkit.integers(3, 2 * max_blocks + 4))
    hash_name = draw(checkkit.sampled_from(("sha256", "sha256", "sha256", "blake2b")))
    alphabet = draw(checkkit.sampled_from((2, 3, 40)))
    rng = random.Random(draw(checkkit.integers(0, 99)))
    docs = [[rng.randint(1, alphabet) for _ in range((max_blocks + 1) * B)] for _ in range(3)]
    model = ref.PrefixCacheModel(N, B)  # tracks which requests are running
    ops: list[list[Any]] = []
    running: list[str] = []
    for i in range(draw(checkkit.integers(2, 10))):
        kind = draw(checkkit.sampled_from(("allocate", "allocate", "allocate", "free", "free",
                                     "lookup", "request_hashes")))
        if kind == "free" and not running:
            kind = "allocate"
        if kind == "free":
            rid = running.pop(draw(checkkit.integers(0, len(running) - 1)))
            model.free(rid)
            ops.append(["free", rid])
            continue
        doc = docs[draw(checkkit.sampled_from((0, 0, 1, 2)))]
        n = max(1, draw(checkkit.integers(0, max_blocks)) * B + draw(checkkit.integers(0, B - 1)))
        tokens = list(doc[:n])
        if draw(checkkit.integers(0, 4)) == 0:  # change one token: the chain diverges from there
            tokens[draw(checkkit.integers(0, 99)) % n] = alphabet + 1
        extra = draw(checkkit.sampled_from((None, None, None, None, None, None, "loraA", "loraB")))
        if kind == "allocate":
            rid = f"r{i}"
            if model.allocate(rid, tokens, extra) is not None:
                running.append(rid)
            ops.append(["allocate", rid, tokens, extra])
        else:
            ops.append([kind, tokens, extra])
    return B, N, hash_name, ops


@lru_cache(maxsize=16)
def _random_inputs(seed: int, n: int) -> tuple[str, ...]:
    return script_inputs(_random_case(), seed, n)


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """Edge cases, Hypothesis-generated scripts (deterministic for a seed, smallest first) and
    the large speed case last."""
    return hidden_scripts(_edge_cases(), _random_inputs(int(seed), RANDOM_CASES),
                                 speed_spec(seed))


# ---------------------------------------------------------------- describing cases


def _fmt_op(op: list[Any]) -> str:
    kind = op[0]
    if kind == "free":
        return f"m.free({op[1]!r})"
    if kind == "allocate":
        args = f"{op[1]!r}, {op[2]!r}"
        extra = op[3]
    elif kind == "hash_block":
        parent = "None" if op[1] is None else f"bytes.fromhex({op[1]!r})"
        args = f"{parent}, {op[2]!r}"
        extra = op[3]
    else:
        args = repr(op[1])
        extra = op[2]
    if extra is not None:
        args += f", extra={extra!r}"
    owner = {"allocate": "m.", "lookup": "m.", "hash_block": "", "request_hashes": ""}[kind]
    name = {"hash_block": "hash_block_tokens", "request_hashes": "request_block_hashes"}.get(
        kind, kind)
    return f"{owner}{name}({args})"


def describe(case: Case, upto: int | None = None) -> str:
    """The case as code a student can paste; `upto` cuts the script after that op index."""
    inp = case["input"]
    if "speed" in inp:
        return describe_speed(inp["speed"])
    ops = inp["ops"] if upto is None else inp["ops"][: upto + 1]
    hash_kw = "" if inp["hash"] == "sha256" else ", hash_fn=blake2b_fn"
    lines = [f"m = PrefixCacheModel(num_blocks={inp['num_blocks']}, "
             f"block_size={inp['block_size']}{hash_kw})"]
    if any(op[0] == "request_hashes" for op in ops):
        lines.append(f"# request_block_hashes uses block_size={inp['block_size']}{hash_kw}")
    lines += [_fmt_op(op) for op in ops]
    if inp["hash"] != "sha256":
        lines.append("# blake2b_fn(p, t, e) = blake2b(p + int32-LE tokens + repr(e), "
                     "digest_size=32)")
    return clip("\n".join(lines))


# ---------------------------------------------------------------- checking


CHECKS: tuple[tuple[str, float, str], ...] = (
    ("no crash", 1.0, "Every operation ran without an exception."),
    ("block hashes", 1.0, "hash_block_tokens and request_block_hashes matched every value."),
    ("lookup results", 1.0, "Every lookup returned the right hit blocks and cached tokens."),
    ("allocate results", 2.0,
     "Every allocate returned the right blocks and cached tokens (or None when it must)."),
    ("free queue after every step", 1.0,
     "The free queue matched the reference after every lookup, allocate and free."),
    ("blocks cached under each hash", 1.0,
     "blocks_for_hash matched after every allocate (duplicates kept, evicted blocks gone)."),
    ("invariants after every step", 1.0,
     "Conservation held after every step: free + held = all blocks, nothing both free and held, "
     "hits block-aligned and within the last-token cap, lookup changed nothing."),
    ("large case matches", 1.0, "The large case gave the reference's results."),
    ("lookup speed", 1.0, "The large case's lookups ran within 20x of the reference's time."),
)


def _pair_ok(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and ids_ok(value[0]) \
        and isinstance(value[1], int)


CHECK_OF_OP = {"hash_block": "block hashes", "request_hashes": "block hashes",
               "lookup": "lookup results", "allocate": "allocate results",
               "free": "allocate results"}


def _where(case: Case, i: int) -> str:
    return f"at step {i + 1} of:\n{describe(case, i)}"


def _invariants(case: Case, steps: list[dict[str, Any]]) -> tuple[int, str] | None:
    """The first step whose own output breaks a conservation rule, with the message."""
    inp = case["input"]
    N, B = inp["num_blocks"], inp["block_size"]
    held: dict[str, list[int]] = {}
    prev_queue: list[int] | None = list(range(N))
    for i, (op, step) in enumerate(zip(inp["ops"], steps, strict=False)):
        if "error" in step or op[0] in ("hash_block", "request_hashes"):
            continue
        out, queue = step.get("out"), step.get("queue")
        if not ids_ok(queue):
            return i, "free_queue() did not return a list of block ids"
        problem = ""
        if op[0] == "allocate" and out is not None and _pair_ok(out):
            n = len(op[2])
            ids, cached = out
            if len(ids) != -(-n // B):
                problem = (f"allocate returned {len(ids)} blocks for a {n}-token prompt; it needs "
                           f"ceil({n}/{B}) = {-(-n // B)}")
            elif len(set(ids)) != len(ids):
                problem = f"allocate returned a block twice: {ids}"
            elif any(b in blocks for blocks in held.values() for b in ids[cached // B:]):
                problem = (f"allocate handed out a block that a running request still holds "
                           f"(new blocks {ids[cached // B:]})")
            held[op[1]] = ids
        if op[0] in ("allocate", "lookup") and out is not None and _pair_ok(out):
            n = len(op[2] if op[0] == "allocate" else op[1])
            cached = out[1]
            cap = B * ((n - 1) // B)
            if not problem and (cached % B or cached > cap or cached != B * len(
                    out[0] if op[0] == "lookup" else out[0][: cached // B])):
                problem = (f"{op[0]} reported {cached} cached tokens for a {n}-token prompt: "
                           f"cached tokens must be a multiple of {B} and at most "
                           f"{B}·floor(({n} − 1)/{B}) = {cap}")
        if op[0] == "free":
            held.pop(op[1], None)
        holding = {b for blocks in held.values() for b in blocks}
        if not problem:
            problem = queue_problem(op, out, queue, prev_queue, holding, N)
        if problem:
            return i, problem
        prev_queue = queue
    return None


def _judge(case: Case, got: Any, exp: dict[str, Any], v: checkkit.Verdicts) -> None:
    inp = case["input"]
    steps = steps_of(got)
    e_steps = exp["output"]["steps"]
    if isinstance(steps, str):
        key = (1, size_key(case))
        for name in ("no crash", "block hashes", "lookup results", "allocate results",
                     "free queue after every step", "blocks cached under each hash",
                     "invariants after every step"):
            v.add(name, case, False, f"{steps.rstrip()} — on:\n{describe(case)}", rank=key)
        return
    failures = FirstFailures()
    fail = failures.fail
    for i, (op, e) in enumerate(zip(inp["ops"], e_steps, strict=True)):
        g = steps[i] if i < len(steps) else {"error": "no result (an earlier step failed)"}
        if "error" in g:
            if i < len(steps):
                fail("no crash", i, f"{str(g['error']).rstrip()}\n— {_where(case, i)}")
            names = [CHECK_OF_OP[op[0]]]
            if op[0] in ("lookup", "allocate", "free"):
                names += ["free queue after every step", "blocks cached under each hash",
                          "invariants after every step"]
            for name in names:
                fail(name, i, f"the step raised an exception — {_where(case, i)}")
            break
        kind = op[0]
        if g.get("out") != e["out"]:
            what = {"hash_block": "hash_block_tokens returned",
                    "request_hashes": "request_block_hashes returned",
                    "lookup": "lookup returned", "allocate": "allocate returned",
                    "free": "free returned"}[kind]
            fail(CHECK_OF_OP[kind], i, f"{what} {short(g.get('out'))}, expected "
                                       f"{short(e['out'])} — {_where(case, i)}")
        if "queue" in e and g.get("queue") != e["queue"]:
            fail("free queue after every step", i,
                 f"after this step the free queue (head first) is {short(g.get('queue'))}, "
                 f"expected {short(e['queue'])} — {_where(case, i)}")
        if "owners" in e and g.get("owners") != e["owners"]:
            fail("blocks cached under each hash", i,
                 f"after this allocate, blocks_for_hash(h_i) for the prompt's full blocks gave "
                 f"{short(g.get('owners'))}, expected {short(e['owners'])} — {_where(case, i)}")
    bad = _invariants(case, steps)
    if bad is not None:
        fail("invariants after every step", bad[0], f"{bad[1]} — {_where(case, bad[0])}")
    if not any("error" in s for s in steps):
        v.add("no crash", case, True)
    uses = {CHECK_OF_OP[op[0]] for op in inp["ops"]}
    if any(op[0] in ("lookup", "allocate", "free") for op in inp["ops"]):
        uses |= {"free queue after every step", "invariants after every step"}
    if any(op[0] == "allocate" for op in inp["ops"]):
        uses.add("blocks cached under each hash")
    failures.report(v, case, uses)


def check(cases: list[Case], got: list[Any], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    v = checkkit.Verdicts()  # every failure is ranked by its own failing prefix
    for case, g, e in zip(cases, got, expected, strict=True):
        if "speed" in case["input"]:
            judge_speed(case, g, e, v, mismatch=(
                "on {case} your results differ from the reference's (digest {got} vs "
                "{expected}); the smaller cases above show where"), advice=(
                "A lookup should cost one dictionary probe per full block of the prompt; "
                "scanning the cache (or every block) for each hash makes it grow with the "
                "cache, here about 8,000 cached blocks. Your results are still graded on every "
                "other check; this one is worth one point."))
        else:
            _judge(case, g, e, v)
    return summary(v, CHECKS)
