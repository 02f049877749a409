"""Test cases and checks for the page-level KV ledger (runs in the worker, never in the sandbox).

Case inputs are described in driver.py. Each result handed to `check()` is {"output": <driver
output>} or {"error": "..."}; `expected` holds the reference's results for the same cases. The
trace check compares the student's per-step records with the reference's; the other checks test
invariants on the student's own trace (the pool is never exceeded, the used count equals what the
running requests hold, every request finishes once and nothing leaks, reserve_max never preempts,
max_num_seqs holds), so a message can say which rule broke, not only that a number differs. Those
invariants are credited only to a trace that is a schedule under the rules (no request starts
before it arrives, admission takes the head of the queue while it fits beside the watermark),
replayed in the worker from the trace's decisions; otherwise a trace made up to satisfy the
counts would earn them. Every check reports the smallest case it fails on.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from graders import checkkit
from graders.base import Check

Case = dict[str, Any]
RANDOM_CASES = 110
RANDOM_CALLS = 60
BLOCK_SIZES = (1, 2, 4, 8, 16)
MODES = ("worst", "mean_end", "time_avg")


def blocks_needed(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def peak_blocks(r: dict[str, Any], cfg: dict[str, Any]) -> int:
    """The most blocks one request can need to be admitted (its last recompute, or its
    reservation)."""
    if cfg["policy"] == "reserve_max":
        return blocks_needed(r["prompt_len"] + r["max_tokens"], cfg["block_size"])
    return blocks_needed(r["prompt_len"] + r["output_len"] - 1, cfg["block_size"])


def sim_input(num_blocks: int, block_size: int, max_num_seqs: int, watermark: int, policy: str,
              reqs: list[tuple[str, int, int, int, int]]) -> dict[str, Any]:
    cfg = {"num_blocks": num_blocks, "block_size": block_size, "max_num_seqs": max_num_seqs,
           "watermark_blocks": watermark, "policy": policy}
    inp = {"kind": "simulate", "config": cfg,
           "reqs": [{"rid": rid, "arrival_step": a, "prompt_len": p, "output_len": o,
                     "max_tokens": m} for rid, a, p, o, m in reqs]}
    assert valid(inp), inp
    return inp


def valid(inp: dict[str, Any]) -> bool:
    """The rules' promise: unique ids, sane lengths, each request fits an empty pool."""
    cfg, reqs = inp["config"], inp["reqs"]
    if cfg["max_num_seqs"] < 1 or len({r["rid"] for r in reqs}) != len(reqs):
        return False
    return all(r["prompt_len"] >= 1 and 1 <= r["output_len"] <= r["max_tokens"]
               and r["arrival_step"] >= 0
               and peak_blocks(r, cfg) + cfg["watermark_blocks"] <= cfg["num_blocks"]
               for r in reqs)


def functions_input(bn: list[list[int]], fe: list[list[int]], mc: list[list[Any]]) -> dict[str, Any]:
    return {"kind": "functions", "blocks_needed": bn, "first_exhaustion_step": fe,
            "max_concurrency": mc}


# The notes' ledger: 256 requests of 1,500 prompt tokens, 26,389 blocks of 16.
CANONICAL_CALLS = functions_input(
    [[1500, 16], [1649, 16], [0, 16], [16, 16], [17, 16], [5500, 16]],
    [[256, 1500, 16, 26389], [1, 10, 4, 2]],
    [[26389, 16, 1500, 4000, "worst"], [26389, 16, 1500, 2500, "mean_end"],
     [26389, 16, 1500, 2500, "time_avg"]],
)

# "Prompts fit, outputs exhaust the pool", shrunk: eight 37-token prompts hold 8 x 10 = 80 of 93
# blocks of 4 (86 %); at decode step 8 each needs blocks_needed(45) = 12, and 96 > 93.
SMALL_STORY = sim_input(93, 4, 8, 0, "current_length",
                        [(f"r{i}", 0, 37, 16, 16) for i in range(8)])


# Rule 3 (requeue at the HEAD), shown: a and b fill the 4 blocks of 2; c arrives at step 1 and
# waits. At step 3 a grows into a third block and preempts b, which goes back AHEAD of c; a
# finishes in that step, so at step 4 b is readmitted first (3 blocks) and c must wait for it.
# Sent to the tail, b would wait behind c instead.
REQUEUE_AT_HEAD = sim_input(4, 2, 4, 0, "current_length",
                            [("a", 0, 2, 4, 4), ("b", 0, 2, 4, 4), ("c", 1, 3, 2, 2)])


def public_cases(params: dict[str, Any]) -> list[Case]:
    """What Run shows: the functions on the notes' numbers, the shrunk story, a reservation, a
    preempted request going back ahead of one that was already waiting, and admission's two
    stops (max_num_seqs; a head that does not fit)."""
    return [
        {"id": "example-functions", "input": CANONICAL_CALLS},
        {"id": "example-prompts-fit-outputs-dont", "input": SMALL_STORY},
        {"id": "example-reserve-max", "input": sim_input(
            20, 4, 4, 0, "reserve_max",
            [("a", 0, 6, 3, 10), ("b", 0, 5, 4, 8), ("c", 1, 3, 2, 4)])},
        {"id": "example-preempted-requeue-at-the-head", "input": REQUEUE_AT_HEAD},
        # Rule 4's two stops. Blocks are plentiful but max_num_seqs = 2: c waits for a slot.
        {"id": "example-max-num-seqs-caps-admission", "input": sim_input(
            20, 4, 2, 0, "current_length",
            [("a", 0, 4, 2, 2), ("b", 0, 4, 2, 2), ("c", 0, 4, 2, 2)])},
        # big (5 blocks) does not fit beside a; small (1 block) would, but may not skip ahead.
        {"id": "example-blocked-head-blocks-the-queue", "input": sim_input(
            6, 2, 3, 0, "current_length",
            [("a", 0, 4, 3, 3), ("big", 0, 9, 2, 2), ("small", 0, 1, 2, 2)])},
    ]


def _edge_cases() -> list[tuple[str, dict[str, Any]]]:
    cl, rm = "current_length", "reserve_max"
    return [
        ("one-request", sim_input(4, 4, 1, 0, cl, [("a", 0, 5, 4, 4)])),
        ("one-token-reply", sim_input(2, 4, 2, 0, cl, [("a", 0, 4, 1, 1), ("b", 0, 4, 1, 1)])),
        ("prompt-fills-block-exactly", sim_input(
            4, 4, 2, 0, cl, [("a", 0, 4, 3, 3), ("b", 0, 4, 3, 3)])),
        ("block-size-one", sim_input(9, 1, 3, 0, cl, [("a", 0, 3, 4, 4), ("b", 0, 2, 5, 5)])),
        ("preempt-newest-then-readmit", sim_input(
            6, 2, 3, 0, cl, [("a", 0, 3, 5, 5), ("b", 0, 3, 5, 5), ("c", 0, 2, 3, 3)])),
        ("grown-request-preempts-itself", sim_input(
            5, 2, 2, 0, cl, [("a", 0, 4, 4, 4), ("b", 0, 3, 6, 6)])),
        ("readmitted-finishes-at-once", sim_input(
            4, 2, 2, 0, cl, [("a", 0, 3, 4, 4), ("b", 0, 2, 3, 3)])),
        ("preempted-go-ahead-of-waiting", sim_input(
            7, 2, 4, 0, cl, [("a", 0, 2, 6, 6), ("b", 0, 2, 6, 6), ("c", 0, 2, 6, 6),
                             ("d", 2, 1, 2, 2)])),
        ("head-of-line-blocks", sim_input(
            8, 4, 4, 0, cl, [("a", 0, 9, 4, 4), ("big", 0, 20, 2, 2), ("small", 0, 1, 2, 2)])),
        ("max-num-seqs", sim_input(50, 4, 2, 0, cl,
                                   [(f"r{i}", 0, 3, 3, 3) for i in range(5)])),
        ("watermark-delays-admission", sim_input(
            8, 4, 4, 2, cl, [("a", 0, 8, 3, 3), ("b", 0, 8, 3, 3), ("c", 0, 4, 2, 2)])),
        ("watermark-not-used-for-growth", sim_input(
            6, 2, 2, 2, cl, [("a", 0, 2, 6, 6), ("b", 0, 2, 4, 4)])),
        ("late-arrival-idle-steps", sim_input(
            6, 4, 2, 0, cl, [("late", 3, 5, 2, 2), ("early", 0, 2, 1, 1)])),
        ("arrivals-out-of-list-order", sim_input(
            12, 2, 3, 0, cl, [("x", 2, 3, 2, 2), ("y", 0, 3, 3, 3), ("z", 2, 1, 2, 2)])),
        ("reserve-uses-max-tokens", sim_input(
            10, 2, 4, 0, rm, [("a", 0, 2, 2, 8), ("b", 0, 2, 2, 8), ("c", 0, 2, 2, 2)])),
        ("reserve-with-watermark", sim_input(
            12, 4, 4, 1, rm, [("a", 0, 5, 3, 6), ("b", 0, 5, 3, 6), ("c", 1, 1, 1, 3)])),
        ("story", SMALL_STORY),
    ]


def _edge_calls() -> dict[str, Any]:
    return functions_input(
        [[1, 1], [1, 16], [15, 16], [32, 16], [33, 16], [95, 4], [7, 8]],
        [[0, 10, 4, 8], [3, 10, 4, 8], [2, 8, 4, 4], [1, 3, 4, 9], [4, 16, 16, 4]],
        [[100, 4, 10, 10, "worst"], [100, 4, 10, 10, "mean_end"], [100, 4, 10, 10, "time_avg"],
         [9, 4, 3, 2, "mean_end"], [10, 1, 3, 5, "time_avg"], [7, 16, 1, 1, "worst"]],
    )


def size_key(case: Case) -> tuple[int, int, int, str]:
    """Smaller cases first: total tokens, then requests (function batches go last)."""
    inp = case["input"]
    if inp["kind"] == "functions":
        return (10**9, 0, 0, json.dumps(inp, sort_keys=True))
    tokens = sum(r["prompt_len"] + r["output_len"] for r in inp["reqs"])
    return (tokens, len(inp["reqs"]), inp["config"]["num_blocks"],
            json.dumps(inp, sort_keys=True))


@st.composite
def _random_sim(draw: st.DrawFn) -> dict[str, Any]:
    block = draw(checkkit.sampled_from(BLOCK_SIZES))
    policy = draw(checkkit.sampled_from(("current_length", "current_length", "reserve_max")))
    watermark = draw(checkkit.sampled_from((0, 0, 0, 1, 2, 3)))
    reqs = []
    for i in range(draw(checkkit.integers(1, 7))):
        prompt = draw(checkkit.integers(1, 40))
        out = draw(checkkit.integers(1, 24))
        cap = out + draw(checkkit.sampled_from((0, 0, 1, 5, 16)))
        arrival = draw(checkkit.sampled_from((0, 0, 0, 0, 1, 2, 5)))
        reqs.append((f"r{i}", arrival, prompt, out, cap))
    cfg = {"policy": policy, "block_size": block}
    peak = max(peak_blocks({"prompt_len": p, "output_len": o, "max_tokens": m}, cfg)
               for _, _, p, o, m in reqs)
    # A pool from just big enough (heavy preemption) to roomy (none).
    num_blocks = peak + watermark + draw(checkkit.integers(0, 30))
    return sim_input(num_blocks, block, draw(checkkit.integers(1, 8)), watermark, policy, reqs)


@st.composite
def _random_calls(draw: st.DrawFn) -> list[Any]:
    kind = draw(checkkit.sampled_from(("bn", "fe", "mc")))
    block = draw(checkkit.sampled_from(BLOCK_SIZES))
    if kind == "bn":
        return ["bn", [draw(checkkit.integers(0, 99)), block]]
    if kind == "fe":
        return ["fe", [draw(checkkit.integers(0, 20)), draw(checkkit.integers(1, 60)), block,
                       draw(checkkit.integers(1, 99))]]
    return ["mc", [draw(checkkit.integers(1, 99)), block, draw(checkkit.integers(1, 40)),
                   draw(checkkit.integers(1, 40)), draw(checkkit.sampled_from(MODES))]]


@lru_cache(maxsize=16)
def _random_inputs(seed: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (tuple(json.dumps(d, sort_keys=True)
                  for d in checkkit.draw(_random_sim(), seed, RANDOM_CASES)),
            tuple(json.dumps(d, sort_keys=True)
                  for d in checkkit.draw(_random_calls(), seed + 1, RANDOM_CALLS)))


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """Edge cases plus Hypothesis-drawn workloads and calls, deterministic for a seed, smallest
    first."""
    cases: list[Case] = [{"id": f"edge-{name}", "input": inp} for name, inp in _edge_cases()]
    cases.append({"id": "edge-function-calls", "input": _edge_calls()})
    sims, calls = _random_inputs(int(seed))
    cases += checkkit.drawn_cases(cases, [json.loads(raw) for raw in sims])
    batch: dict[str, list[Any]] = {"bn": [], "fe": [], "mc": []}
    for raw in dict.fromkeys(calls):
        kind, args = json.loads(raw)
        batch[kind].append(args)
    cases.append({"id": "random-function-calls",
                  "input": functions_input(batch["bn"], batch["fe"], batch["mc"])})
    cases.sort(key=size_key)
    return cases


# ---------------------------------------------------------------- checks


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(case: Case) -> str:
    inp = case["input"]
    if inp["kind"] == "functions":
        return f"the function calls of case {case['id']}"
    c = inp["config"]
    reqs = ", ".join(f"Req({r['rid']!r}, {r['arrival_step']}, {r['prompt_len']}, "
                     f"{r['output_len']}, {r['max_tokens']})" for r in inp["reqs"])
    text = (f"LedgerConfig(num_blocks={c['num_blocks']}, block_size={c['block_size']}, "
            f"max_num_seqs={c['max_num_seqs']}, watermark_blocks={c['watermark_blocks']}, "
            f"policy={c['policy']!r}) with reqs [{reqs}]")
    return text if len(text) <= 700 else text[:697] + "..."


# name -> (weight, message when every applicable case passes)
CHECKS: tuple[tuple[str, float, str], ...] = (
    ("blocks_needed", 1.0, "blocks_needed() matched on every call."),
    ("first_exhaustion_step", 1.0, "first_exhaustion_step() matched on every call."),
    ("max_concurrency", 1.0, "max_concurrency() matched on every call and mode."),
    ("trace matches the reference step by step", 4.0,
     "Every step's used blocks, running, preempted and finished ids matched the reference."),
    ("never more blocks than the pool", 1.0, "used_blocks never exceeded num_blocks."),
    ("used blocks equal what the running requests hold", 1.0,
     "At every step used_blocks equalled the blocks the running requests must hold."),
    ("every request finishes once and nothing leaks", 1.0,
     "Every request finished exactly once, after output_len tokens, and the pool ended empty."),
    ("reserve_max never preempts", 1.0, "No preemption under reserve_max."),
    ("never more than max_num_seqs running", 1.0, "The running set never exceeded max_num_seqs."),
)
FUNCTION_CHECKS = ("blocks_needed", "first_exhaustion_step", "max_concurrency")
TRACE_CHECKS = tuple(name for name, _, _ in CHECKS[3:])


def _well_formed_functions(out: Any, inp: dict[str, Any]) -> bool:
    if not isinstance(out, dict):
        return False
    for name in FUNCTION_CHECKS:
        got = out.get(name)
        if not isinstance(got, list) or len(got) != len(inp[name]):
            return False
        for v in got:
            ok = v is None or (isinstance(v, int) and not isinstance(v, bool)) or (
                isinstance(v, dict) and isinstance(v.get("error"), str))
            if not ok:
                return False
    return True


def _well_formed_steps(out: Any) -> bool:
    if not isinstance(out, dict):
        return False
    if "error" in out:
        return isinstance(out["error"], str)
    steps = out.get("steps")
    if not isinstance(steps, list):
        return False
    for s in steps:
        if not (isinstance(s, list) and len(s) == 5 and all(
                isinstance(x, int) and not isinstance(x, bool) for x in s[:2])
                and all(isinstance(ids, list) and all(isinstance(i, str) for i in ids)
                        for ids in s[2:])):
            return False
    return True


def _show(v: Any) -> str:
    if isinstance(v, dict) and "error" in v:
        return f"raised {v['error'].strip()}"
    return f"returned {v!r}"


def _judge_functions(case: Case, got: dict[str, Any], exp: dict[str, Any],
                     v: checkkit.Verdicts) -> None:
    inp = case["input"]
    out = got.get("output")
    if "error" in got or not _well_formed_functions(out, inp):
        msg = got.get("error") or "the output for this case is malformed"
        for name in FUNCTION_CHECKS:
            if inp[name]:
                v.add(name, case, False, f"{msg} — on {describe(case)}")
        return
    for name in FUNCTION_CHECKS:
        calls = inp[name]
        if not calls:
            continue
        bad = [(args, g, e) for args, g, e in zip(calls, out[name], exp["output"][name],
                                                  strict=True) if g != e]
        if not bad:
            v.add(name, case, True)
            continue
        # The call with the smallest arguments first.
        args, g, e = min(bad, key=lambda b: [x if isinstance(x, int) else 0 for x in b[0]])
        call = f"{name}({', '.join(repr(a) for a in args)})"
        v.add(name, case, False,
              f"{len(bad)} of {len(calls)} calls differ. {call} {_show(g)}, expected {e!r}"
              + _function_hint(name, args, e),
              details={"call": call, "expected": e, "got": g if not isinstance(g, dict) else None})


def _function_hint(name: str, args: list[Any], expected: Any) -> str:
    if name == "blocks_needed":
        return " (a partly filled block counts as a whole block)."
    if name == "first_exhaustion_step":
        n, p, b, nb = args
        if not n:
            return " (no requests: None)."
        return (f" (at step t each of the {n} requests holds blocks_needed({p} + t, {b}); the "
                f"first t where {n} x that exceeds {nb}).")
    return {"worst": " (\"worst\" reserves prompt_len + output_len tokens per request).",
            "mean_end": " (\"mean_end\" counts prompt_len + output_len - 1 tokens: the last "
                        "sampled token has no KV).",
            "time_avg": " (\"time_avg\": num_blocks * output_len // sum of blocks_needed("
                        "prompt_len + k) for k in 0 .. output_len - 1)."}.get(args[4], ".")


def _fmt_step(s: list[Any]) -> str:
    return (f"used_blocks={s[1]}, running={s[2]}, preempted={s[3]}, finished={s[4]}")


def _admission_problem(inp: dict[str, Any], steps: list[list[Any]]) -> str:
    """The first step at which the trace breaks the arrival or admission rules, or "".

    Replayed in the worker from the trace's own decisions (who runs, who is preempted, who
    finishes) and the input alone, by the starter's rules 1, 3 and 4: requests join the queue
    at their arrival_step, victims go back to its head, and admission takes the head while
    fewer than max_num_seqs run and its need plus watermark_blocks fits the blocks the running
    requests leave free (nobody in a step that preempted). Without this, a trace need not be a
    schedule at all: requests run one after another keep every count consistent with itself.
    """
    cfg = inp["config"]
    reqs = {r["rid"]: r for r in inp["reqs"]}
    size, total = cfg["block_size"], cfg["num_blocks"]
    watermark, seats = cfg["watermark_blocks"], cfg["max_num_seqs"]
    reserve = cfg["policy"] == "reserve_max"
    generated = dict.fromkeys(reqs, 0)

    def need(rid: str) -> int:
        """Blocks rid holds once grown or admitted this step (before it samples)."""
        r = reqs[rid]
        return blocks_needed(r["prompt_len"] + (r["max_tokens"] if reserve else generated[rid]),
                             size)

    running: list[str] = []  # admission order
    waiting: list[str] = []
    for k, (_, _, run_ids, preempted, finished) in enumerate(steps):
        waiting += [r["rid"] for r in inp["reqs"] if r["arrival_step"] == k]
        now = [*run_ids, *finished]
        unknown = [rid for rid in [*now, *preempted] if rid not in reqs]
        if unknown:
            return f"step {k} names unknown request ids {unknown}"
        if len(set(now)) != len(now):
            return f"step {k} lists a request twice in running and finished ({now})"
        not_running = [rid for rid in preempted if rid not in running]
        if not_running:
            return (f"step {k} preempted {not_running}, which were not running after step "
                    f"{k - 1} (running: {running})")
        kept = [rid for rid in running if rid not in preempted]
        vanished = [rid for rid in kept if rid not in now]
        if vanished:
            return (f"{vanished} ran after step {k - 1} but at step {k} neither run, finish nor "
                    "are preempted: every running request generates a token each step")
        new = [rid for rid in now if rid not in kept]
        early = [rid for rid in new if reqs[rid]["arrival_step"] > k]
        if early:
            return (f"{early[0]} runs at step {k} but arrives at step "
                    f"{reqs[early[0]]['arrival_step']}: no request starts before its "
                    "arrival_step")
        if preempted and new:
            return (f"step {k} preempted {preempted} and admitted {new}: a step that preempts "
                    "admits nobody")
        # Rule 3: the victims go back to the head, the oldest admission first.
        queue = [rid for rid in running if rid in preempted] + waiting
        head = queue[:len(new)]
        if set(new) != set(head):
            return (f"step {k} admitted {new}, but the head of the waiting queue was {head} "
                    f"(queue: {queue}): admission takes the head and never skips ahead")
        free = total - sum(need(rid) for rid in kept)
        for rid in head:
            if len(kept) + head.index(rid) >= seats:
                return (f"step {k} admitted {rid} with {len(kept) + head.index(rid)} requests "
                        f"already running, but max_num_seqs = {seats}")
            if need(rid) + watermark > free:
                return (f"step {k} admitted {rid}, which needs {need(rid)} blocks, with {free} "
                        f"blocks free: admission needs need + watermark_blocks ({watermark}) "
                        "<= free blocks")
            free -= need(rid)
        if not preempted and len(queue) > len(new):
            nxt = queue[len(new)]
            if len(kept) + len(new) < seats and need(nxt) + watermark <= free:
                return (f"at step {k} {nxt} waited at the head of the queue although "
                        f"{len(kept) + len(new)} requests ran (max_num_seqs = {seats}) and its "
                        f"{need(nxt)} blocks plus watermark_blocks ({watermark}) fitted in the "
                        f"{free} free blocks: admission takes the head while it fits")
        for rid in now:
            generated[rid] += 1
        running = [rid for rid in kept + head if rid not in finished]
        waiting = queue[len(new):]
    return ""


def _judge_sim(case: Case, got: dict[str, Any], exp: dict[str, Any], v: checkkit.Verdicts) -> None:
    inp = case["input"]
    cfg = inp["config"]
    where = describe(case)
    out = got.get("output")
    if "error" in got or not _well_formed_steps(out) or "error" in out:
        msg = (got.get("error") or (out.get("error") if isinstance(out, dict) else None)
               or "the output for this case is malformed")
        for name in TRACE_CHECKS:
            if name == "reserve_max never preempts" and cfg["policy"] != "reserve_max":
                continue
            v.add(name, case, False, f"simulate() {msg.strip()} — on {where}")
        return
    g_steps: list[list[Any]] = out["steps"]
    e_steps: list[list[Any]] = exp["output"]["steps"]

    # 1. The trace, step by step.
    problem = ""
    for k in range(max(len(g_steps), len(e_steps))):
        if k >= len(g_steps):
            problem = (f"your trace ends after {len(g_steps)} steps; the reference runs "
                       f"{len(e_steps)} (step {k}: {_fmt_step(e_steps[k])})")
            break
        if k >= len(e_steps):
            problem = (f"your trace has {len(g_steps)} steps; the reference ends after "
                       f"{len(e_steps)} (the last request finishes at step {len(e_steps) - 1})")
            break
        g, e = g_steps[k], e_steps[k]
        if g != e:
            fields = [n for n, a, b in zip(("step", "used_blocks", "running", "preempted",
                                             "finished"), g, e, strict=True) if a != b]
            problem = (f"first difference at step {k} ({', '.join(fields)}): expected "
                       f"{_fmt_step(e)}; got {_fmt_step(g)}")
            if k:
                problem += f". The step before was {_fmt_step(e_steps[k - 1])}"
            break
    v.add("trace matches the reference step by step", case, not problem,
          f"{problem} — on {where}" if problem else "")

    # 2. Invariants on the student's own trace. Each holds only of a trace that is a schedule
    # under the rules (arrivals, head-of-line admission, the watermark), so a trace that breaks
    # them earns none of these: a violation of the check's own rule is reported first.
    rules = _admission_problem(inp, g_steps)

    def invariant(name: str, problem: str) -> None:
        rules_only = not problem and bool(rules)
        if rules_only:
            problem = ("your trace is not a schedule the rules allow, so this count proves "
                       f"nothing: {rules}")
        # Ranked after every case that breaks the check's own rule: that one says more.
        v.add(name, case, not problem, f"{problem} — on {where}" if problem else "",
              rank=(True, size_key(case)) if rules_only else None)

    reqs = {r["rid"]: r for r in inp["reqs"]}
    over = next((s for s in g_steps if s[1] > cfg["num_blocks"]), None)
    invariant("never more blocks than the pool",
              f"at step {over[0]} used_blocks = {over[1]} but the pool has {cfg['num_blocks']} "
              "blocks" if over else "")

    seqs = next((s for s in g_steps if len(s[2]) > cfg["max_num_seqs"]), None)
    invariant("never more than max_num_seqs running",
              f"at step {seqs[0]} {len(seqs[2])} requests run ({seqs[2]}) but max_num_seqs = "
              f"{cfg['max_num_seqs']}" if seqs else "")

    if cfg["policy"] == "reserve_max":
        pre = next((s for s in g_steps if s[3]), None)
        invariant("reserve_max never preempts",
                  f"at step {pre[0]} you preempted {pre[3]}, but a reservation for prompt_len + "
                  "max_tokens can never run out" if pre else "")

    generated = dict.fromkeys(reqs, 0)
    finished_at: dict[str, list[int]] = {rid: [] for rid in reqs}
    held_msg = leak = ""
    for s in g_steps:
        step, used, running, _, finished = s
        for rid in [*running, *finished]:
            if rid in generated:
                generated[rid] += 1
        for rid in finished:
            if rid in finished_at:
                finished_at[rid].append(step)
        unknown = [rid for rid in [*running, *finished] if rid not in reqs]
        if unknown and not leak:
            leak = f"step {step} names unknown request ids {unknown}"
        if held_msg:
            continue
        parts, total = [], 0
        for rid in running:
            r = reqs.get(rid)
            if r is None:
                continue
            if cfg["policy"] == "reserve_max":
                tokens = r["prompt_len"] + r["max_tokens"]
            else:
                tokens = r["prompt_len"] + generated[rid] - 1
            b = blocks_needed(tokens, cfg["block_size"])
            total += b
            parts.append(f"{rid}: {tokens} tokens -> {b}")
        if total != used:
            held_msg = (f"at step {step} used_blocks = {used}, but by your own trace the running "
                        f"requests hold {total} blocks ({'; '.join(parts) or 'none running'}). "
                        + ("Under reserve_max each holds blocks_needed(prompt_len + max_tokens)."
                           if cfg["policy"] == "reserve_max" else
                           "After a request's g-th token it holds the KV of prompt_len + g - 1 "
                           "tokens; finished and preempted requests hold nothing."))
    invariant("used blocks equal what the running requests hold", held_msg)

    if not leak:
        for rid, r in reqs.items():
            steps = finished_at[rid]
            if len(steps) != 1:
                leak = (f"{rid} finished {len(steps)} times (steps {steps})" if steps
                        else f"{rid} never finished")
                break
            if generated[rid] != r["output_len"]:
                leak = (f"{rid} finished at step {steps[0]} after running {generated[rid]} steps, "
                        f"but it generates one token per step it runs and its output_len is "
                        f"{r['output_len']}")
                break
    if not leak and g_steps and (g_steps[-1][1] or g_steps[-1][2]):
        leak = (f"after the last step {len(g_steps[-1][2])} requests still run and "
                f"{g_steps[-1][1]} blocks are still used")
    if not leak and not g_steps and reqs:
        leak = "the trace is empty"
    invariant("every request finishes once and nothing leaks", leak)


def check(cases: list[Case], got: list[dict[str, Any]], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    """Named checks over all cases; each failure names the smallest case it fails on."""
    v = checkkit.Verdicts(lambda case: (False, size_key(case)))
    for case, g, e in zip(cases, got, expected, strict=True):
        if not isinstance(g, dict):
            g = {"error": "the output line for this case is malformed"}
        if case["input"]["kind"] == "functions":
            _judge_functions(case, g, e, v)
        else:
            _judge_sim(case, g, e, v)
    return v.checks(CHECKS)
