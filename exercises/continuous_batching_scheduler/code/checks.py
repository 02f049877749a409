"""Test cases and checks for the continuous-batching scheduler (runs in the worker only).

A case input is a small engine configuration and a list of requests with arrival steps (see
driver.py). Each result handed to `check()` is {"output": <driver.run_case dict>} or
{"error": "..."}; `expected` holds the reference's results for the same cases. The checks compare
the student's trace step by step with the reference's, and also test invariants on the student's
own trace (token budget, block conservation, KV accounting, preemption policy), so a message can
say which rule broke and not only that a number differs. Every check reports the smallest case
it fails on.
"""
from __future__ import annotations

import json
from functools import lru_cache
from types import ModuleType
from typing import Any

from hypothesis import strategies as st

from exercises.registry import expose_shared_modules
from graders import checkkit
from graders.base import Check

VOCAB = 7  # the fake model's vocabulary, as in driver.py
RANDOM_CASES = 160
MAX_TOKEN = 49  # prompt token ids are drawn from 0..MAX_TOKEN
# Most requests arrive together (they compete for the pool); some come later.
ARRIVALS = (0, 0, 1, 0, 2, 4, 7)

Case = dict[str, Any]


def _load(name: str) -> ModuleType:
    """reference.py or driver.py from this folder (trusted), under a private module name."""
    expose_shared_modules(("driver_errors",))  # the driver imports it by its plain name
    return checkkit.sibling(__file__, name)


def model_token(seq: list[int]) -> int:
    """The fake model (the same rule as driver.fake_model)."""
    return (31 * sum(seq) + len(seq)) % VOCAB


def unbatched(prompt: list[int], max_new_tokens: int, eos_id: int) -> list[int]:
    """What a request generates when it runs alone, one token at a time."""
    seq, out = list(prompt), []
    while True:
        tok = model_token(seq)
        out.append(tok)
        if tok == eos_id or len(out) >= max_new_tokens:
            return out
        seq.append(tok)


def make_input(num_blocks: int, block_size: int, max_num_seqs: int, budget: int,
               requests: list[dict[str, Any]]) -> dict[str, Any]:
    """A case input; `max_steps` is twice what the reference needs, plus ten."""
    inp: dict[str, Any] = {
        "num_blocks": num_blocks, "block_size": block_size, "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": budget, "max_steps": 1000,
        "requests": [{"rid": r["rid"], "prompt": list(r["prompt"]),
                      "max_new_tokens": r["max_new_tokens"], "eos_id": r.get("eos_id", -1),
                      "arrival": r.get("arrival", 0)} for r in requests],
    }
    ref = _load("driver").run_case(_load("reference"), inp)
    assert "error" not in ref, ref.get("error")
    inp["max_steps"] = 2 * len(ref["steps"]) + 10
    return inp


def req(rid: str, prompt: list[int] | range, max_new: int, arrival: int = 0,
        eos: int = -1) -> dict[str, Any]:
    return {"rid": rid, "prompt": list(prompt), "max_new_tokens": max_new, "arrival": arrival,
            "eos_id": eos}


def fits(inp: dict[str, Any]) -> bool:
    """Every request fits the pool on its own (its last sampled token needs no KV)."""
    b, n = inp["block_size"], inp["num_blocks"]
    return all(-(-(len(r["prompt"]) + r["max_new_tokens"] - 1) // b) <= n
               for r in inp["requests"])


# The trace in the facts notes: 6 blocks of 4 tokens, budget 8, three requests.
CANONICAL_REQUESTS = (req("R0", range(1, 11), 6), req("R1", range(20, 26), 6),
                      req("R2", range(30, 35), 4, arrival=1))
CANONICAL_CONFIG = (6, 4, 3, 8)  # num_blocks, block_size, max_num_seqs, budget


def params_input(params: dict[str, Any]) -> dict[str, Any]:
    """The variant's trace (exercise.py's parameters) as a case input."""
    return make_input(params["num_blocks"], params["block_size"], params["max_num_seqs"],
                      params["budget"],
                      [req(r["rid"], r["prompt"], r["max_new"], r["arrival"])
                       for r in params["requests"]])


def size_key(case: Case) -> tuple[int, int, int, str]:
    """Smaller cases first: total tokens, then requests, then steps allowed."""
    inp = case["input"]
    tokens = sum(len(r["prompt"]) + r["max_new_tokens"] for r in inp["requests"])
    return (tokens, len(inp["requests"]), inp["max_steps"], json.dumps(inp, sort_keys=True))


def _edge_cases() -> list[tuple[str, dict[str, Any]]]:
    e7 = unbatched(list(range(3, 7)), 5, -1)[0]  # the first token R0 generates
    return [
        ("canonical", make_input(*CANONICAL_CONFIG, list(CANONICAL_REQUESTS))),
        ("one-request", make_input(4, 4, 2, 8, [req("R0", [5, 6, 7], 3)])),
        ("max-new-one", make_input(4, 2, 2, 8, [req("R0", [1, 2, 3], 1), req("R1", [4], 1)])),
        ("eos-on-first-token", make_input(4, 4, 2, 8, [req("R0", range(3, 7), 5, eos=e7),
                                                         req("R1", [9, 9], 3, eos=e7)])),
        ("budget-one-token-per-step", make_input(6, 2, 3, 1, [req("R0", [1, 2, 3], 2),
                                                              req("R1", [4, 5], 2)])),
        ("block-size-one", make_input(7, 1, 3, 4, [req("R0", [1, 2, 3, 4], 3),
                                                   req("R1", [5, 6], 3)])),
        ("prompt-fills-whole-blocks", make_input(5, 4, 2, 16, [req("R0", range(8), 3),
                                                               req("R1", range(10, 14), 2)])),
        ("pool-fits-one-request", make_input(3, 2, 3, 6, [req("R0", [1, 2, 3, 4], 3),
                                                          req("R1", [5, 6, 7, 8], 3)])),
        ("max-num-seqs-one", make_input(8, 2, 1, 8, [req("R0", [1, 2], 2), req("R1", [3, 4], 2),
                                                     req("R2", [5], 2)])),
        ("late-arrival-after-idle", make_input(4, 2, 2, 4, [req("R0", [1, 2], 2),
                                                            req("R1", [3, 4, 5], 2, arrival=6)])),
        ("head-of-queue-blocks-smaller", make_input(4, 2, 3, 16, [
            req("R0", range(1, 6), 3), req("R1", range(10, 16), 2), req("R2", [7], 2)])),
        ("victim-is-not-the-needer", make_input(3, 1, 3, 5, [req("R0", [1, 2], 2),
                                                             req("R1", [11], 2)])),
        ("two-victims-in-one-step", make_input(5, 2, 3, 8, [
            req("R0", [1, 2, 3], 5), req("R1", [4, 5, 6], 4), req("R2", [7], 3, arrival=1)])),
        ("preempted-then-eos", make_input(4, 2, 2, 6, [req("R0", [1, 2, 3], 4),
                                                       req("R1", [4, 5, 6], 4, eos=3)])),
    ]


@st.composite
def _random_input(draw: st.DrawFn) -> dict[str, Any]:
    # sampled_from rather than integers(): Hypothesis favours the bounds of a range, which would
    # make half the traces one request or one sequence wide, with nothing to schedule.
    block = draw(checkkit.sampled_from((2, 4, 1, 3, 4, 2)))
    requests = []
    for i in range(draw(checkkit.sampled_from((3, 2, 4, 3, 5, 1, 4, 3, 5)))):
        plen = draw(checkkit.sampled_from((6, 10, 3, 14, 1, 20, 8, 5)))
        max_new = draw(checkkit.sampled_from((4, 6, 2, 8, 1, 5, 3)))
        prompt = draw(checkkit.lists(checkkit.integers(0, MAX_TOKEN), min_size=plen, max_size=plen))
        eos = draw(checkkit.sampled_from((-1, -1, -1, 0, 3, -1, 5)))
        requests.append(req(f"R{i}", prompt, max_new, draw(checkkit.sampled_from(ARRIVALS)), eos))
    # The pool holds the largest request plus a few blocks, so requests compete for it and
    # preemptions are common; sometimes it is roomy.
    largest = max(-(-(len(r["prompt"]) + r["max_new_tokens"] - 1) // block) for r in requests)
    blocks = largest + draw(checkkit.sampled_from((1, 0, 2, 0, 1, 0, 3, 0, 5, 12)))
    seqs = draw(checkkit.sampled_from((3, 2, 4, 6, 3, 1, 5, 4)))
    budget = draw(checkkit.sampled_from((8, 4, 12, 6, 1, 16, 24, 3, 10, 2)))
    return {"config": [blocks, block, seqs, budget],
            "requests": requests}


@lru_cache(maxsize=16)
def _random_inputs(seed: int, n: int) -> tuple[str, ...]:
    """n Hypothesis draws for this seed, as JSON strings (hashable, copied on every use)."""
    return tuple(json.dumps(raw, sort_keys=True) for raw in checkkit.draw(_random_input(), seed, n))


def public_cases(params: dict[str, Any]) -> list[Case]:
    """What Run plays: the statement's trace, the facts-notes trace, one with EOS, and two
    small ones for admission's limits (max_num_seqs; a queue head that does not fit)."""
    cases = [{"id": "example-1", "input": params_input(params)}]
    edges = dict(_edge_cases())
    if cases[0]["input"] != edges["canonical"]:
        cases.append({"id": "example-2", "input": edges["canonical"]})
    cases.append({"id": f"example-{len(cases) + 1}", "input": edges["preempted-then-eos"]})
    # Rule 5's two limits on admission. Blocks and budget are plentiful, but max_num_seqs = 2:
    # R2 waits until a running request finishes.
    cases.append({"id": f"example-{len(cases) + 1}", "input": make_input(
        8, 2, 2, 16, [req("R0", [1, 2], 2), req("R1", [3, 4], 2), req("R2", [5, 6], 2)])})
    # R1 (3 blocks) does not fit beside R0; R2 (1 block) would, but must not overtake R1.
    cases.append({"id": f"example-{len(cases) + 1}", "input": make_input(
        4, 2, 3, 16, [req("R0", [1, 2, 3], 3), req("R1", range(10, 16), 2), req("R2", [7], 2)])})
    return cases


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """Edge cases plus Hypothesis-drawn traces, deterministic for a seed, smallest first."""
    cases: list[Case] = [{"id": f"edge-{name}", "input": inp} for name, inp in _edge_cases()]
    drawn = [json.loads(raw) for raw in _random_inputs(int(seed), RANDOM_CASES)]
    cases += checkkit.drawn_cases(cases, [make_input(*d["config"], d["requests"]) for d in drawn])
    cases.sort(key=size_key)
    return cases


# ---------------------------------------------------------------- messages


def describe(case: Case) -> str:
    inp = case["input"]
    reqs = []
    for r in inp["requests"]:
        text = (f"{r['rid']}: prompt {_tokens(r['prompt'])}, max_new_tokens {r['max_new_tokens']}"
                f", arrives at step {r['arrival']}")
        if r["eos_id"] >= 0:
            text += f", eos_id {r['eos_id']}"
        reqs.append(text)
    return (f"Scheduler(num_blocks={inp['num_blocks']}, block_size={inp['block_size']}, "
            f"max_num_seqs={inp['max_num_seqs']}, max_num_batched_tokens="
            f"{inp['max_num_batched_tokens']}) with " + "; ".join(reqs))


def _tokens(tokens: list[int]) -> str:
    if len(tokens) > 2 and tokens == list(range(tokens[0], tokens[0] + len(tokens))):
        return f"[{tokens[0]}..{tokens[-1]}]"
    return "[" + ", ".join(map(str, tokens)) + "]"


def _pairs(pairs: list[list[Any]]) -> str:
    return "{" + ", ".join(f"{a}: {b}" for a, b in pairs) + "}"


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _state_before(case: Case, steps: list[dict[str, Any]], k: int) -> str:
    """The reference's state at the start of step k, in words."""
    inp = case["input"]
    if k == 0:
        return "nothing has run yet"
    prev = steps[k - 1]
    parts = []
    for rid in prev["running"]:
        _, computed, blocks = prev["state"][rid]
        parts.append(f"{rid} running ({computed} tokens computed, {len(blocks)} blocks)")
    if prev["waiting"]:
        parts.append("waiting " + ", ".join(prev["waiting"]))
    held = sum(len(s[2]) for s in prev["state"].values())
    parts.append(f"{inp['num_blocks'] - held} free blocks")
    return "; ".join(parts)


# ---------------------------------------------------------------- checks


# name -> (weight, message when every applicable case passes)
CHECKS: tuple[tuple[str, float, str], ...] = (
    ("runs without an exception", 1.0, "Every trace ran to the end without an exception."),
    ("each request's tokens equal its unbatched generation", 3.0,
     "Every request produced exactly the tokens it generates when it runs alone."),
    ("each token is streamed exactly once", 1.0,
     "The stream carried each request's tokens once, in order, with no repeats after a "
     "preemption."),
    ("step outputs match the reference", 2.0,
     "Every step scheduled, preempted, finished and streamed exactly what the reference did."),
    ("queues and request state match the reference", 1.0,
     "After every step the running and waiting queues and each request's num_computed, status "
     "and block count matched the reference."),
    ("token budget and max_num_seqs respected", 1.0,
     "No step scheduled more than max_num_batched_tokens tokens or more than max_num_seqs "
     "requests."),
    ("blocks conserved: nothing leaked, shared or over-held", 1.0,
     "Every block was free or held by exactly one running request, and each running request "
     "held exactly the blocks its computed tokens need."),
    ("KV accounting follows the scheduled tokens", 1.0,
     "num_computed always equalled the tokens scheduled since the last preemption, and tokens "
     "were sampled only for fully computed sequences."),
    ("preemption policy", 1.0,
     "Victims were the most recently admitted running requests, went to the head of the "
     "waiting queue, and no step that preempted admitted anyone."),
    ("allocator calls match the reference", 1.0,
     "Every allocate() and release() handed out and returned the same blocks, in the same "
     "order, as the reference."),
    ("every request finishes", 1.0, "Every request finished within the step limit."),
)


def well_formed(result: Any) -> bool:
    """Whether a result has the shape the driver writes (student code could forge a reply)."""
    if not isinstance(result, dict):
        return False
    if "error" in result:
        return isinstance(result["error"], str)
    out = result.get("output")
    if not isinstance(out, dict) or not isinstance(out.get("steps"), list):
        return False
    if not isinstance(out.get("outputs"), dict):
        return False
    if "error" in out and not (isinstance(out["error"], str)
                               and isinstance(out.get("error_step"), int)):
        return False
    for rec in out["steps"]:
        if not isinstance(rec, dict):
            return False
        try:
            ok = (all(isinstance(r, str) and isinstance(n, int) for r, n in rec["scheduled"])
                  and all(isinstance(r, str) for r in rec["preempted"] + rec["finished"]
                          + rec["running"] + rec["waiting"])
                  and all(isinstance(r, str) and isinstance(t, int) for r, t in rec["stream"])
                  and all(isinstance(s, str) and isinstance(c, int)
                          and all(isinstance(b, int) for b in bl)
                          for s, c, bl in rec["state"].values())
                  and all(k in ("allocate", "release") and all(isinstance(b, int) for b in ids)
                          for k, ids in rec["calls"]))
        except (KeyError, TypeError, ValueError, AttributeError):
            return False
        if not ok:
            return False
    return all(isinstance(v, list) and all(isinstance(t, int) for t in v)
               for v in out["outputs"].values())


def _judge_case(case: Case, got: Any, exp: dict[str, Any], v: checkkit.Verdicts) -> None:
    inp = case["input"]
    where = " — on " + describe(case)
    if not well_formed(got):
        got = {"error": "the output for this case is malformed"}
    if "error" in got:
        for name, _, _ in CHECKS:
            v.problem(name, case, got["error"] + where)
        return
    g, e = got["output"], exp["output"]
    if "error" in g:
        step = g["error_step"]
        head, _, frames = g["error"].rstrip().partition("\n")
        msg = (f"{'Scheduler()' if step < 0 else f'step {step}'} raised {head}" + where
               + (f"\n{frames}" if frames else ""))
        for name, _, _ in CHECKS:
            v.problem(name, case, msg)
        return
    v.problem("runs without an exception", case, "")
    specs = {r["rid"]: r for r in inp["requests"]}
    alone = {rid: unbatched(r["prompt"], r["max_new_tokens"], r["eos_id"])
             for rid, r in specs.items()}
    gs, es = g["steps"], e["steps"]

    v.problem("each request's tokens equal its unbatched generation", case,
          _outputs_message(alone, g["outputs"], where))
    v.problem("each token is streamed exactly once", case, _stream_message(alone, gs, where))
    v.problem("step outputs match the reference", case, _steps_message(case, gs, es, where))
    v.problem("queues and request state match the reference", case,
          _state_message(case, gs, es, where))
    v.problem("token budget and max_num_seqs respected", case, _budget_message(inp, gs, where))
    v.problem("blocks conserved: nothing leaked, shared or over-held", case,
          _blocks_message(inp, gs, where) or _pool_message(inp, gs, where))
    v.problem("KV accounting follows the scheduled tokens", case, _shadow_message(inp, gs, where))
    v.problem("preemption policy", case, _policy_message(inp, gs, where))
    v.problem("allocator calls match the reference", case, _calls_message(case, gs, es, where))
    finished = {rid for rec in gs for rid in rec["finished"]}
    missing = [rid for rid in specs if rid not in finished]
    msg = ""
    if missing:
        msg = (f"after {len(gs)} steps (this case's limit; the reference needs {len(es)}) "
               f"{', '.join(missing)} had not finished" + where)
    v.problem("every request finishes", case, msg)


def _outputs_message(alone: dict[str, list[int]], outputs: dict[str, list[int]],
                     where: str) -> str:
    for rid, want in alone.items():
        have = outputs.get(rid)
        if have != want:
            return (f"{rid}.output ended as {_short(have)}, but {rid} alone generates "
                    f"{want}: batching must not change what a request produces" + where)
    return ""


def _stream_message(alone: dict[str, list[int]], steps: list[dict[str, Any]],
                    where: str) -> str:
    streamed: dict[str, list[int]] = {}
    for k, rec in enumerate(steps):
        for rid, tok in rec["stream"]:
            got = streamed.setdefault(rid, [])
            want = alone.get(rid, [])
            if len(got) >= len(want) or want[len(got)] != tok:
                return (f"step {k} streamed ({rid}, {tok}) after {rid} had already streamed "
                        f"{got}; {rid}'s tokens are {want}, so this token is "
                        + ("one too many (repeated after a preemption?)"
                           if len(got) >= len(want) or tok in got else "not the next one")
                        + where)
            got.append(tok)
    for rid, want in alone.items():
        if streamed.get(rid, []) != want:
            return (f"the stream carried {streamed.get(rid, [])} for {rid}, but {rid}'s tokens "
                    f"are {want}" + where)
    return ""


def _step_view(rec: dict[str, Any]) -> tuple[Any, ...]:
    return (rec["scheduled"], rec["preempted"], rec["finished"], rec["stream"])


def _step_text(rec: dict[str, Any]) -> str:
    text = f"scheduled {_pairs(rec['scheduled'])}"
    if rec["preempted"]:
        text += f", preempted {rec['preempted']}"
    if rec["finished"]:
        text += f", finished {rec['finished']}"
    if rec["stream"]:
        text += ", streamed " + ", ".join(f"({r}, {t})" for r, t in rec["stream"])
    return text


def _steps_message(case: Case, gs: list[dict[str, Any]], es: list[dict[str, Any]],
                   where: str) -> str:
    for k in range(min(len(gs), len(es))):
        if _step_view(gs[k]) != _step_view(es[k]):
            return (f"step {k}: expected {_step_text(es[k])}; got {_step_text(gs[k])}. At the "
                    f"start of the step the reference had: {_state_before(case, es, k)}" + where)
    if len(gs) != len(es):
        return (f"the reference needs {len(es)} steps (every request finished after step "
                f"{len(es) - 1}); your trace ran {len(gs)}" + where)
    return ""


def _state_message(case: Case, gs: list[dict[str, Any]], es: list[dict[str, Any]],
                   where: str) -> str:
    for k in range(min(len(gs), len(es))):
        g, e = gs[k], es[k]
        if g["running"] != e["running"]:
            return (f"after step {k} `running` should be {e['running']} (admission order), got "
                    f"{g['running']}" + where)
        if g["waiting"] != e["waiting"]:
            return (f"after step {k} `waiting` should be {e['waiting']} (queue order), got "
                    f"{g['waiting']}" + where)
        for rid, (status, computed, blocks) in e["state"].items():
            g_status, g_computed, g_blocks = g["state"].get(rid, ["?", -1, []])
            if status == "FINISHED":
                g_computed = computed  # what a finished request's num_computed says is free
            if (status, computed, len(blocks)) != (g_status, g_computed, len(g_blocks)):
                return (f"after step {k} {rid} should have status {status}, num_computed "
                        f"{computed} and {len(blocks)} blocks; got {g_status}, {g_computed} and "
                        f"{len(g_blocks)}" + where)
    return ""


def _budget_message(inp: dict[str, Any], steps: list[dict[str, Any]], where: str) -> str:
    budget, seqs = inp["max_num_batched_tokens"], inp["max_num_seqs"]
    done: set[str] = set()
    for k, rec in enumerate(steps):
        total = sum(n for _, n in rec["scheduled"])
        if total > budget:
            return (f"step {k} scheduled {total} tokens {_pairs(rec['scheduled'])}, over the "
                    f"budget of {budget}: cap each prefill chunk by what is left" + where)
        for rid, n in rec["scheduled"]:
            if n < 1:
                return f"step {k} scheduled {n} tokens for {rid}; leave it out instead" + where
            if rid in done:
                return f"step {k} scheduled {rid}, which had already finished" + where
        if len(rec["scheduled"]) > seqs or len(rec["running"]) > seqs:
            return (f"step {k} ran {max(len(rec['scheduled']), len(rec['running']))} requests at "
                    f"once, over max_num_seqs = {seqs}" + where)
        done.update(rec["finished"])
    return ""


def _blocks_message(inp: dict[str, Any], steps: list[dict[str, Any]], where: str) -> str:
    size = inp["block_size"]
    free = set(range(inp["num_blocks"]))
    done: set[str] = set()
    for k, rec in enumerate(steps):
        for kind, ids in rec["calls"]:
            if kind == "allocate":
                bad = [b for b in ids if b not in free]
                if bad or len(set(ids)) != len(ids):
                    return (f"in step {k} allocate() handed out {ids}, but block "
                            f"{(bad or ids)[0]} was not free" + where)
                free -= set(ids)
            else:
                bad = [b for b in ids if b in free]
                if bad or len(set(ids)) != len(ids):
                    return (f"in step {k} release({ids}) returned block {(bad or ids)[0]}, "
                            "which was already free (released twice?)" + where)
                free |= set(ids)
        done.update(rec["finished"])
        owner: dict[int, str] = {}
        for rid, (_, computed, blocks) in rec["state"].items():
            for b in blocks:
                if b in owner:
                    return (f"after step {k} block {b} is held by {owner[b]} and by {rid}"
                            + where)
                owner[b] = rid
                if b in free:
                    return (f"after step {k} {rid} holds block {b}, which the allocator has "
                            "as free" + where)
            if rid in done and blocks:
                return (f"after step {k} {rid} has finished but still holds blocks {blocks}: "
                        "release them when a request finishes" + where)
            if rid in rec["waiting"] and (blocks or computed):
                return (f"after step {k} {rid} is waiting but holds {len(blocks)} blocks and "
                        f"num_computed = {computed}; a waiting (or preempted) request holds no "
                        "KV" + where)
            if rid in rec["running"] and len(blocks) != -(-computed // size):
                return (f"after step {k} {rid} has {computed} tokens computed, which need "
                        f"ceil({computed}/{size}) = {-(-computed // size)} blocks, but it holds "
                        f"{len(blocks)}: allocate only what the step's tokens need" + where)
            places = (rid in rec["running"]) + (rid in rec["waiting"]) + (rid in done)
            if places != 1:
                return (f"after step {k} {rid} should be in exactly one of running, waiting and "
                        f"finished; it is in {places}" + where)
        leaked = sorted(set(range(inp["num_blocks"])) - free - set(owner))
        if leaked:
            return (f"after step {k} blocks {leaked} were allocated, never released, and no "
                    "request holds them: they leaked (release a victim's blocks before "
                    "dropping them)" + where)
    return ""


def _pool_message(inp: dict[str, Any], steps: list[dict[str, Any]], where: str) -> str:
    """Every allocation the trace shows failing, against a pool the worker counts itself.

    The call log and the request state are written by the driver, in the student's process: a
    forged log can release blocks the allocator never got back, and a forged state can drop
    blocks a finished request still holds, so _blocks_message alone cannot prove nothing
    leaked. What a leak cannot hide is its effect: the allocator runs dry while blocks are
    free. Here the pool is rebuilt from the trace's decisions only (tokens scheduled since each
    request's last preemption give its blocks, rule 3), every block no running request needs
    counts as free, and each failure the trace shows must be a real shortage:
    - a step that preempted must have asked for more blocks than were free;
    - a step that preempted nobody yet left requests waiting, with budget and a seat to spare,
      must have had too few blocks for the head of the queue.
    Both tests are order-free (they bound what any running order or queue head could ask for),
    so a scheduling bug elsewhere is not reported as a leak.
    """
    size, total = inp["block_size"], inp["num_blocks"]
    cap, seats = inp["max_num_batched_tokens"], inp["max_num_seqs"]
    prompt = {r["rid"]: len(r["prompt"]) for r in inp["requests"]}

    def blocks(tokens: int) -> int:
        return -(-tokens // size)

    computed: dict[str, int] = {}  # tokens with KV, per the scheduled tokens
    sampled: dict[str, int] = {}  # tokens streamed so far (kept across preemption)
    running: list[str] = []  # who holds blocks at the start of a step
    waiting: list[str] = []  # arrived, neither running nor finished
    for k, rec in enumerate(steps):
        waiting += [r["rid"] for r in inp["requests"] if r["arrival"] == k]
        free = total - sum(blocks(computed.get(rid, 0)) for rid in running)
        scheduled = dict(rec["scheduled"])
        victims = rec["preempted"]
        kept = [rid for rid in running if rid not in victims]
        asked = 0  # blocks the step's scheduled tokens need (rule 3)
        for rid, n in scheduled.items():
            c = computed.get(rid, 0) if rid in kept else 0  # a victim starts again from 0
            asked += max(0, blocks(c + max(n, 0)) - blocks(c))
        left = cap - sum(scheduled.values())
        if victims:
            # A running request left unscheduled may be the one whose allocation failed, and a
            # victim that was not running may have been admitted first: each could have asked
            # for at most its remaining tokens. (Not capped by the budget: overrunning it is
            # another check's business, not a leak.)
            most = asked
            for rid in running + [rid for rid in victims if rid not in running]:
                if rid not in scheduled or rid in victims:
                    c = computed.get(rid, 0) if rid in running else 0
                    rest = prompt.get(rid, c) + sampled.get(rid, 0) - c
                    most += max(0, blocks(c + rest) - blocks(c))
            if most <= free:
                return (f"step {k} preempted {victims}, but everything the step could ask for "
                        f"by rule 3 ({most} blocks) fitted in the {free} blocks that no running "
                        "request held. An allocation failed with those blocks free: either the "
                        "step asked for more blocks than its tokens need, or blocks leaked "
                        "(released to nobody, or kept by a request that no longer needs them)"
                        + where)
        else:
            admitted = [rid for rid in scheduled if rid not in running]
            queue = [rid for rid in waiting if rid not in scheduled]
            if queue and left > 0 and len(running) + len(admitted) < seats:
                # Admission stopped with budget and a seat left, so the head's allocation
                # failed; whichever request was the head, it needed at most the blocks of its
                # whole sequence (its chunk is never longer).
                most = max(blocks(prompt.get(rid, 0) + sampled.get(rid, 0)) for rid in queue)
                if asked + most <= free:
                    return (f"after step {k} {queue} still waited with {left} tokens of budget "
                            f"and a seat left, although the step's allocations ({asked} blocks "
                            f"by rule 3) plus any one of them ({most} at most) fitted in the "
                            f"{free} blocks that no running request held. An allocation failed "
                            "with those blocks free: either it asked for more blocks than the "
                            "tokens need, or blocks leaked (released to nobody, or kept by a "
                            "request that no longer needs them)" + where)
        # The next step's pool, from this step's decisions.
        for rid in victims:
            computed[rid] = 0
        for rid, n in scheduled.items():
            computed[rid] = computed.get(rid, 0) + n
        for rid, _ in rec["stream"]:
            sampled[rid] = sampled.get(rid, 0) + 1
        done = set(rec["finished"])
        new = [rid for rid in scheduled if rid not in kept]  # admitted (a victim again, too)
        running = [rid for rid in kept + new if rid not in done]
        # Victims go back to the head, earliest admitted first (rule 4).
        back = [rid for rid in victims[::-1] if rid not in running and rid not in done]
        waiting = back + [rid for rid in waiting if rid not in running and rid not in done
                          and rid not in back]
        for rid in rec["finished"]:
            computed.pop(rid, None)
    return ""


def _shadow_message(inp: dict[str, Any], steps: list[dict[str, Any]], where: str) -> str:
    """KV accounting rebuilt from the step outputs alone, compared with num_computed."""
    specs = {r["rid"]: r for r in inp["requests"]}
    shadow: dict[str, int] = {}
    streamed: dict[str, int] = {}
    for k, rec in enumerate(steps):
        for rid in rec["preempted"]:
            shadow[rid] = 0
        for rid, n in rec["scheduled"]:
            shadow[rid] = shadow.get(rid, 0) + n
        for rid, _ in rec["stream"]:
            have = len(specs[rid]["prompt"]) + streamed.get(rid, 0) if rid in specs else -1
            if shadow.get(rid, 0) != have:
                return (f"step {k} sampled a token for {rid} when {shadow.get(rid, 0)} of its "
                        f"{have} tokens had KV (tokens scheduled since its last preemption): "
                        "sample only once the whole sequence is computed" + where)
            streamed[rid] = streamed.get(rid, 0) + 1
        for rid, (_, computed, _) in rec["state"].items():
            if rid in rec["finished"] or any(rid in s["finished"] for s in steps[:k]):
                continue
            if computed != shadow.get(rid, 0):
                return (f"after step {k} {rid}.num_computed is {computed}, but the steps "
                        f"scheduled {shadow.get(rid, 0)} of its tokens since it was last "
                        "admitted (a preemption frees the KV, so num_computed must go back to "
                        "0)" + where)
    return ""


def _policy_message(inp: dict[str, Any], steps: list[dict[str, Any]], where: str) -> str:
    running: list[str] = []
    waiting: list[str] = []
    for k, rec in enumerate(steps):
        waiting = waiting + [r["rid"] for r in inp["requests"] if r["arrival"] == k]
        victims = rec["preempted"]
        tail = running[::-1][:len(victims)]
        if victims != tail:
            return (f"step {k} preempted {victims}; with running = {running} (admission order) "
                    f"the victims should be the most recently admitted first: {tail}" + where)
        admitted = [rid for rid, _ in rec["scheduled"] if rid not in running]
        if victims and admitted:
            return (f"step {k} preempted {victims} and still admitted {admitted}: a step that "
                    "had to preempt must not admit anyone" + where)
        if admitted != waiting[:len(admitted)]:
            return (f"step {k} admitted {admitted}, but the waiting queue was {waiting}: admit "
                    "from the head, in order" + where)
        back = [rid for rid in victims if rid not in rec["running"]][::-1]
        if rec["waiting"][:len(back)] != back:
            return (f"after step {k} the waiting queue is {rec['waiting']}; the requests just "
                    f"preempted belong at its head, earliest admitted first: {back}" + where)
        running, waiting = rec["running"], rec["waiting"]
    return ""


def _calls_text(calls: list[list[Any]]) -> str:
    return ", ".join(f"{kind}->{ids}" if kind == "allocate" else f"release({ids})"
                     for kind, ids in calls) or "none"


def _calls_message(case: Case, gs: list[dict[str, Any]], es: list[dict[str, Any]],
                   where: str) -> str:
    for k in range(min(len(gs), len(es))):
        if gs[k]["calls"] != es[k]["calls"]:
            return (f"step {k}: the reference's allocator calls were {_calls_text(es[k]['calls'])}"
                    f"; yours were {_calls_text(gs[k]['calls'])}. (Free list: first in, first "
                    "out; a request's blocks are released in the order it got them.)" + where)
    return ""


def check(cases: list[Case], got: list[dict[str, Any]], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    """Named checks over all cases; each failure names the smallest case it fails on."""
    return checkkit.judge_each(cases, got, expected, _judge_case, size_key, CHECKS)
