"""Q34: a TTFT regression, tokenized prompts and cache-counter deltas.

A release did two things at once: it put a per-request line into the system prompt at token
`insert_at`, and it scaled the service out to several replicas behind a round-robin balancer.
TTFT went up and the obvious story is "routing split the cache". The parts: how many prompt tokens
two consecutive requests can still share (block-aligned, last token recomputed); the hit rate the
template change predicts; the hit rate the counters actually show (sum the deltas over replicas,
handle a restart, do not average rates); which diagnosis the evidence supports; the routing
follow-up on a multi-turn workload, where routing really does matter; the boundary check as code;
and how to test the diagnosis.
"""
from __future__ import annotations

import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Fits, WithinContext
from exercises.slips import Slips, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

HITS = "vllm:prefix_cache_hits_total"
QUERIES = "vllm:prefix_cache_queries_total"

# Llama-3 chat-template ids at the start of every prompt: <|begin_of_text|>, <|start_header_id|>,
# "system", <|end_header_id|>, "\n\n" (from the Llama-3 tokenizer's special tokens).
HEADER = (128000, 128006, 9125, 128007, 271)

MODELS: dict[str, tuple[int, ...]] = {"Llama-3.1-8B": (1,), "Llama-3.1-70B": (4, 8)}
GPUS = ("H100 SXM", "H200 SXM", "B200")

# The facts note's example: Llama-3.1-8B, 16-token blocks, a 1,200-token system prompt and
# 300-token user part, 1,000 requests; the template break at token 40 leaves 32 reusable tokens
# (2.1 %) instead of 1,200 (80 %). Multi-turn: 6,000-token turns, 16 new tokens, four replicas:
# sticky 99.7 %, random about 40 %. The counters (four replicas, one restarted mid-window, one
# that only answered health probes) are this exercise's.
_CANONICAL_BASE: dict[str, Any] = {
    "model": "Llama-3.1-8B",
    "gpu": "H100 SXM",
    "tp": 1,
    "mfu": 0.5,  # prefill model-FLOPs utilisation [A]
    "block": 16,
    "system": 1200,
    "user": 300,
    "insert_at": 40,
    "requests": [400, 350, 250],  # per serving replica in the window
    "restarted_after": 100,  # the last serving replica restarted after this many of its requests
    "probes": 200,  # health probes answered by the probe-only replica
    "probe_len": 64,
    "turn_prompt": 6000,
    "new_tokens": 16,
    "turn_replicas": 4,
    "seed": 34,
}


def with_evidence(p: dict[str, Any]) -> dict[str, Any]:
    """The variant plus what the statement shows: the two prompts' first token ids and the
    per-replica counter snapshots (all derived from the other keys, stored so the statement, the
    code part's public examples and the answers read the same numbers)."""
    a, b = _prompt_ids(p)
    before, after = _counters(p)
    return {**p, "prompt_a": a, "prompt_b": b, "before": before, "after": after}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        name = rng.choice(tuple(MODELS))
        n_serving = rng.choice((2, 3, 4, 5))
        p = {
            "model": name,
            "gpu": rng.choice(GPUS),
            "tp": rng.choice(MODELS[name]),
            "mfu": rng.choice((0.4, 0.5, 0.6)),
            "block": rng.choice((16, 32)),
            "system": rng.choice((800, 1000, 1200, 1600, 2000, 2400)),
            "user": rng.choice((200, 300, 400, 600)),
            "insert_at": rng.choice((12, 24, 40, 57, 70, 100, 150)),
            "requests": [rng.randrange(15, 60) * 10 for _ in range(n_serving)],
            "restarted_after": 0,
            "probes": rng.choice((100, 200, 300)),
            "probe_len": rng.choice((32, 48, 64)),
            "turn_prompt": rng.choice((3000, 4000, 6000, 8000)),
            "new_tokens": rng.choice((16, 24, 40)),
            "turn_replicas": rng.choice((2, 3, 4, 6, 8)),
            "seed": rng.randrange(10_000),
        }
        p["restarted_after"] = p["requests"][-1] * rng.choice((2, 4, 6)) // 10
        p = with_evidence(p)
        return p

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    s = solve(p)
    return (
        p["block"] <= p["insert_at"] < p["system"]
        and p["restarted_after"] < p["requests"][-1]
        # The routing follow-up is a real split, and random routing leaves a real gap.
        and s["routing_pct"] < 0.8 * s["sticky_pct"]
        # The mean of per-replica rates is far off (the probe replica's weight is the lesson),
        # and the counters agree with the template prediction to within a point.
        and s["mean_of_rates_pct"] > 1.5 * s["observed_pct"]
        and abs(s["observed_pct"] - s["predicted_pct"]) < 1.0
    )


# ----------------------------------------------------------------------------------------------
# The prompts shown in the statement


def _prompt_ids(p: dict[str, Any]) -> tuple[list[int], list[int]]:
    """The first insert_at + 8 token ids of two consecutive prompts after the release."""
    rng = random.Random(p["seed"])
    body = [rng.randrange(1000, 100_000) for _ in range(p["insert_at"] - len(HEADER))]
    shared = [*HEADER, *body]
    a = shared + [rng.randrange(1000, 100_000) for _ in range(8)]
    b = shared + [rng.randrange(1000, 100_000) for _ in range(8)]
    # The two trace ids differ from their first token on.
    while b[p["insert_at"]] == a[p["insert_at"]]:
        b[p["insert_at"]] += 1
    return a, b


# ----------------------------------------------------------------------------------------------
# The counters


def _counters(p: dict[str, Any]) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """Per-replica snapshots before and after the window.

    Serving replicas query prompt + user tokens and hit `reusable` tokens per request; the last
    serving replica restarted after `restarted_after` of its requests, so its after-snapshot counts
    only the rest, and its first request after the restart found an empty cache. The last replica
    answered only health probes: one fixed probe_len-token prompt, every probe a repeat.
    """
    s_len = p["system"] + p["user"]
    r = _reusable(p)
    probe_hit = p["block"] * ((p["probe_len"] - 1) // p["block"])
    rng = random.Random(p["seed"] + 1)
    before, after = [], []
    n = len(p["requests"])
    for i, reqs in enumerate(p["requests"]):
        # Cumulative totals from before the release, when about 80 % of tokens hit.
        q0 = float(rng.randrange(40, 90) * 1_000_000)
        h0 = float(round(q0 * _healthy(p) / s_len / 1000) * 1000)
        if i == n - 1:
            served = reqs - p["restarted_after"]
            q1 = float(served * s_len)
            h1 = float((served - 1) * r)
        else:
            q1 = q0 + reqs * s_len
            h1 = h0 + reqs * r
        before.append({HITS: h0, QUERIES: q0})
        after.append({HITS: h1, QUERIES: q1})
    q0 = float(rng.randrange(1, 9) * 100_000)
    h0 = q0 * probe_hit / p["probe_len"]
    before.append({HITS: h0, QUERIES: q0})
    after.append({HITS: h0 + p["probes"] * probe_hit, QUERIES: q0 + p["probes"] * p["probe_len"]})
    return before, after


def _healthy(p: dict[str, Any]) -> int:
    """Reusable tokens per request before the release: the whole system prompt, in blocks."""
    return p["block"] * (p["system"] // p["block"])


def _reusable(p: dict[str, Any]) -> int:
    return p["block"] * (p["insert_at"] // p["block"])


def _delta(b: dict[str, float], a: dict[str, float], name: str) -> float:
    d = a[name] - b[name]
    return a[name] if d < 0 else d


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    b = p["block"]
    prompt_len = p["system"] + p["user"]
    reusable = _reusable(p)
    healthy = _healthy(p)
    predicted = reusable / prompt_len
    healthy_rate = healthy / prompt_len

    before, after = p["before"], p["after"]
    dh = [_delta(x, y, HITS) for x, y in zip(before, after, strict=True)]
    dq = [_delta(x, y, QUERIES) for x, y in zip(before, after, strict=True)]
    observed = sum(dh) / sum(dq)
    rates = [h / q for h, q in zip(dh, dq, strict=True)]
    mean_of_rates = sum(rates) / len(rates)
    raw_h = [y[HITS] - x[HITS] for x, y in zip(before, after, strict=True)]
    raw_q = [y[QUERIES] - x[QUERIES] for x, y in zip(before, after, strict=True)]
    negative_kept = sum(raw_h) / sum(raw_q)
    restarted = len(p["requests"]) - 1
    dropped = (sum(dh) - dh[restarted]) / (sum(dq) - dq[restarted])
    cumulative = sum(y[HITS] for y in after) / sum(y[QUERIES] for y in after)
    user_only = (sum(dh) - dh[-1]) / (sum(dq) - dq[-1])

    # Multi-turn routing follow-up (lower-bound model: only the replica that served the previous
    # turn holds this conversation's history).
    k = p["turn_replicas"]
    turn = p["turn_prompt"]
    sticky = b * (min(turn - p["new_tokens"], turn - 1) // b)
    other = healthy  # any replica holds the shared system prompt
    random_reuse = other + (sticky - other) / k
    routing_rate = random_reuse / turn
    sticky_rate = sticky / turn

    # What the regression costs in prefill compute, per request.
    flops_rate = g.bf16_flops * p["tp"] * p["mfu"]
    prefill_new = prompt_len - reusable
    prefill_old = prompt_len - healthy
    ms_new = 2 * m.params * prefill_new / flops_rate * 1e3
    ms_old = 2 * m.params * prefill_old / flops_rate * 1e3

    a_ids, b_ids = p["prompt_a"], p["prompt_b"]
    n_rep = len(before)
    names = [f"r{i}" for i in range(n_rep)]
    rows = ["| replica | role | hits before | hits after | queries before | queries after |",
            "|---|---|---|---|---|---|"]
    for i in range(n_rep):
        role = ("health probes only" if i == n_rep - 1 else
                "restarted in the window" if i == restarted else "serving")
        rows.append(f"| {names[i]} | {role} | {before[i][HITS]:,.0f} | {after[i][HITS]:,.0f} | "
                    f"{before[i][QUERIES]:,.0f} | {after[i][QUERIES]:,.0f} |")
    drows = ["| replica | Δhits | Δqueries | rate |", "|---|---|---|---|"]
    for i in range(n_rep):
        drows.append(f"| {names[i]} | {dh[i]:,.0f} | {dq[i]:,.0f} | {rates[i] * 100:.2f} % |")

    out = {
        # Part answers.
        "reusable": Quantity(reusable, ""),
        "predicted_rate": Quantity(predicted * 100, "%"),
        "observed_rate": Quantity(observed * 100, "%"),
        "diagnosis": "template_break",
        "routing_rate": Quantity(routing_rate * 100, "%"),
        "boundary_check": "code/reference.py",
        "follow_up": "",
        # Givens.
        "prompt_len": prompt_len,
        "prompt_a": _ids(a_ids),
        "prompt_b": _ids(b_ids),
        "shown": len(a_ids),
        "n_requests": sum(p["requests"]),
        "n_replicas": n_rep,
        "n_serving": n_rep - 1,
        "restarted_name": names[restarted],
        "probe_name": names[-1],
        "counter_table": "\n".join(rows),
        "hits_name": HITS,
        "queries_name": QUERIES,
        "system_blocks": p["system"] / b,
        # Intermediates.
        "healthy": healthy,
        "healthy_rate_pct": healthy_rate * 100,
        "lcp": p["insert_at"],
        "lcp_last": p["insert_at"] - 1,
        "blocks_shared": reusable // b,
        "predicted_pct": predicted * 100,
        "delta_table": "\n".join(drows),
        "sum_dh": sum(dh),
        "sum_dq": sum(dq),
        "observed_pct": observed * 100,
        "mean_of_rates_pct": mean_of_rates * 100,
        "mean_of_rates": mean_of_rates,
        "negative_kept_pct": negative_kept * 100,
        "dropped_pct": dropped * 100,
        "cumulative_pct": cumulative * 100,
        "user_only_pct": user_only * 100,
        "restart_served": p["requests"][-1] - p["restarted_after"],
        "probe_hit": b * ((p["probe_len"] - 1) // b),
        "sticky": sticky,
        "sticky_rate": sticky_rate,
        "sticky_pct": sticky_rate * 100,
        "random_reuse": random_reuse,
        "routing_pct": routing_rate * 100,
        "split_all_pct": sticky / k / turn * 100,
        "system_only_pct": other / turn * 100,
        "turn_history": turn - p["system"] - p["new_tokens"],
        "prefill_new": prefill_new,
        "prefill_old": prefill_old,
        "ms_new": ms_new,
        "ms_old": ms_old,
        "params_b": m.params / 1e9,
        "tflops": g.bf16_dense_tflops,
        "mfu_pct": p["mfu"] * 100,
    }
    out["follow_up"] = _model_answer(p, out)
    return out


def _ids(ids: list[int]) -> str:
    """Token ids in rows of ten, each row labelled with the index of its first id."""
    rows = [f"{i:>4}: " + " ".join(f"{t:>6}" for t in ids[i:i + 10])
            for i in range(0, len(ids), 10)]
    return "\n".join(rows) + "\n   …"


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"**What the evidence says.** Consecutive prompts share their first {p['insert_at']} "
        f"token ids, so only {s['blocks_shared']} block(s) of {p['block']} tokens can be reused: "
        f"the template change predicts {s['predicted_pct']:.1f} % hits, and the counters, summed "
        f"over replicas with the restart handled, show {s['observed_pct']:.1f} %. Routing alone "
        "cannot explain it for this traffic: every replica caches the shared system prompt after "
        f"its first request, so round-robin over {s['n_serving']} replicas still predicts about "
        f"{s['healthy_rate_pct']:.0f} %. Eviction would show up as a hit rate that falls with "
        "load and cache usage, not as a clean cut at a fixed token.\n\n"
        "**How to confirm.** Run the boundary check on the tokenized prompts of a few "
        "consecutive requests (token ids, not text: a template edit can also change how the text "
        "around it tokenizes), move the per-request line after the shared prefix (into the user "
        "turn or the end of the prompt), and re-check on a canary: the predicted hit rate should "
        f"return to about {s['healthy_rate_pct']:.0f} % and TTFT with it. Compute the observed "
        "rate as the ratio of summed counter deltas; the mean of per-replica rates lets a replica "
        "that only answers health probes dominate, and a restarted replica's negative deltas can "
        "make the fleet look healthy.\n\n"
        "**The routing follow-up.** Routing matters when the reusable prefix is "
        "conversation-specific. For the multi-turn product, sticky routing (the conversation id "
        f"hashed to a replica) predicts {s['sticky_pct']:.1f} % and random routing over "
        f"{p['turn_replicas']} replicas about {s['routing_pct']:.0f} %. Test it directly: pin a "
        "sample of conversations to one replica (or run a canary with sticky routing), compare "
        "hit rate and TTFT with the random group under the same load, and check that the "
        "measured rates match the two predictions. If sticky routing does not raise the hit "
        "rate, routing was not the cause."
    )




# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    b = p["block"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge_floor=1e-9, skip=nonpositive).add

    lcp = p["insert_at"]
    add("reusable", lcp,
        f"The prompts share {lcp} tokens, but the cache reuses whole blocks of {b}: round down "
        f"to {s['reusable'].value:.0f}.", "not_aligned", kind="rounding")
    add("reusable", b * -(-lcp // b),
        f"Rounded up: the block that holds token {lcp} differs between the two prompts, so it "
        "cannot be reused.", "rounded_up", kind="rounding")
    add("reusable", s["healthy"],
        "That is what was reusable before the release. The new line sits inside the system "
        f"prompt, at token {lcp}: every block after it differs between requests.", "whole_system",
        kind="wrong_scope")

    plen = s["prompt_len"]
    add("predicted_rate", lcp / plen * 100,
        "You used the shared tokens, not whole blocks: round down to the block size first.",
        "not_aligned", kind="rounding")
    add("predicted_rate", b * -(-lcp // b) / plen * 100,
        f"Rounded up to a whole block: the block holding token {lcp} differs, so it misses.",
        "rounded_up", kind="rounding")
    add("predicted_rate", s["healthy_rate_pct"],
        "That is the hit rate before the release, when the whole system prompt was shared.",
        "healthy", kind="wrong_scope")
    add("predicted_rate", s["healthy_rate_pct"] / len(p["requests"]),
        "That splits the cache across replicas, but the question is what the template change "
        "predicts; and a prefix every request shares is cached on every replica anyway.",
        "routing_split", kind="misread_mechanism")

    add("observed_rate", s["mean_of_rates_pct"],
        f"That is the mean of the per-replica rates. {s['probe_name']} answered only health "
        "probes: tiny traffic, a high rate, and the mean gives it the same weight as the busy "
        "replicas. Sum the hits and the queries over replicas, then divide.", "mean_of_rates",
        kind="mean_vs_tail")
    add("observed_rate", s["negative_kept_pct"],
        f"{s['restarted_name']} restarted: its counters went down, and a negative delta is not "
        "traffic. After a reset, the delta is the value after the restart.", "negative_delta",
        kind="misread_mechanism")
    add("observed_rate", s["dropped_pct"],
        f"You left {s['restarted_name']} out. Its counters after the restart still count "
        f"{s['restart_served']} requests of the window: use the post-restart values as its delta.",
        "dropped_restart", kind="miscounted_term")
    add("observed_rate", s["cumulative_pct"],
        "That divides the totals since each process started, dominated by the weeks before the "
        "release. Take the window's deltas.", "cumulative", kind="misread_mechanism")

    k = p["turn_replicas"]
    add("routing_rate", s["split_all_pct"],
        f"You split the whole prefix {k} ways, but every replica holds the shared system prompt; "
        "only the conversation's own history is split.", "split_everything",
        kind="misread_mechanism")
    add("routing_rate", s["sticky_pct"],
        "That is sticky routing, where the previous turn's replica always gets the next turn.",
        "sticky", kind="misread_mechanism")
    add("routing_rate", s["system_only_pct"],
        f"That counts only the system prompt. With probability 1/{k} the turn lands on the "
        "replica that served the previous one and reuses the history too.", "system_only",
        kind="miscounted_term")

    out += [
        Mistake("diagnosis", "routing",
                "Routing cannot explain this drop: every replica caches the shared system prompt "
                f"after its first request, so round-robin still predicts about "
                f"{s['healthy_rate_pct']:.0f} %. The fleet rate of part 3 is far below that, "
                "and matches what the template change predicts in part 2.", "routing",
                kind="misread_mechanism"),
        Mistake("diagnosis", "eviction",
                "Eviction would make the hit rate fall with load and cache pressure; here it "
                "matches, to a fraction of a point, what the blocks the tokenized prompts share "
                "(part 1) allow.", "eviction", kind="misread_mechanism"),
        Mistake("diagnosis", "not_cache",
                "The counters, summed over the replicas for the window (part 3), show a rate far "
                f"below the {s['healthy_rate_pct']:.0f} % before the release. If you got about "
                f"{s['negative_kept_pct']:.0f} %, a restarted replica's negative deltas went "
                "into the sum.", "not_cache", kind="misread_mechanism"),
        Mistake("diagnosis", "both",
                "Routing adds nothing measurable for single-turn traffic with a shared system "
                "prompt; the template break alone predicts the observed rate.", "both",
                kind="misread_mechanism"),
    ]
    return out


CANONICAL: dict[str, Any] = with_evidence(_CANONICAL_BASE)


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    m = model(p["model"])
    return [
        Fits("BF16 weights and one long turn's KV", p["gpu"], p["tp"],
             m.weight_bytes(2) + m.kv_bytes_for_tokens(p["turn_prompt"] + p["new_tokens"])),
        WithinContext(p["model"], p["turn_prompt"] + p["new_tokens"], "the long turn"),
        WithinContext(p["model"], p["system"] + p["user"], "a single-turn prompt"),
    ]
