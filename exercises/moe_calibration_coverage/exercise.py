"""Q18: calibrating MoE experts. The router decides who gets data.

A Hessian-based post-training quantizer (GPTQ) fits each linear layer to its own inputs: the
statistics are H = 2 X X^T over the tokens that reach that layer. In a mixture-of-experts layer a
calibration token reaches only the experts the router picks, so each expert's H is built from its
share of the set. The parts count that share for the average expert and for one the router
rarely picks, find the load below which H cannot have full rank (fewer tokens than input
channels), size the calibration set that would cover the rare expert, and ask why GPTQ then does
worse than plain rounding.

The threshold "n >= k_h * d_in tokens" is a stated heuristic (research notes: the crossover is
empirical), with d_in the widest input among the expert's projections: rank(X X^T) <= n, so below
d_in the Hessian is singular whatever the data. Model figures come from exercises/catalog.
"""
from __future__ import annotations

import random
from typing import Any

from exercises.catalog import model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, HasFeature, WithinContext
from exercises.slips import Slips, near, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

MODELS = ("DeepSeek-V3", "Qwen3-30B-A3B", "Mixtral-8x7B", "GPT-OSS-120B", "GPT-OSS-20B")
SAMPLES = (128, 256, 512, 1024)
SEQ_LENS = (512, 1024, 2048, 4096)
SKEWS = (4, 5, 8, 10, 16, 20, 32, 50)
RULE_K = (1.0, 1.5, 2.0)

CANONICAL: dict[str, Any] = {
    "model": "DeepSeek-V3",
    "samples": 128,  # calibration sequences: the common GPTQ setting [A]
    "seq_len": 2048,  # tokens per calibration sequence
    "skew": 10,  # the rare expert is routed this many times less often than average [A]
    "rule_k": 1.0,  # heuristic: GPTQ needs at least rule_k x d_in tokens per expert [A]
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    """A sensible variant: the rare expert is short of the threshold, and the threshold sits
    within reach of an ordinary calibration set (not a thousand times the mean)."""
    return draw_sensible(rng, lambda rng: {**CANONICAL, **choose(rng, {
        "model": MODELS, "samples": SAMPLES, "seq_len": SEQ_LENS, "skew": SKEWS, "rule_k": RULE_K,
    })}, is_sensible, tries=2000)


def is_sensible(p: dict[str, Any]) -> bool:
    """The checks generate() applies; the tests apply them to every variant too."""
    s = solve(p)
    threshold = s["load_threshold"].value
    return (
        threshold * p["skew"] >= 1.25  # the rare expert is clearly below the threshold ...
        and threshold <= 2.0  # ... while the average expert is near it or above
        and s["rare_tokens"].value >= 16  # the rare expert sees some tokens, just too few
    )


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    assert m.n_routed_experts and m.experts_per_token and m.moe_ffn
    e, k = m.n_routed_experts, m.experts_per_token
    n_tokens = p["samples"] * p["seq_len"]

    # Every token reaches every MoE layer's router and picks k of the E routed experts, so an
    # average expert of a layer sees N k / E tokens (GPTQ calibrates layer by layer, each layer
    # seeing the whole set).
    mean = n_tokens * k / e
    rare = mean / p["skew"]

    # The widest input among the expert's projections: gate and up read the hidden state, down
    # reads the expert's intermediate activations. Its Hessian is d_in x d_in with rank <= tokens.
    d_gate_up, d_down = m.hidden, m.moe_ffn
    d_bind = max(d_gate_up, d_down)
    d_other = min(d_gate_up, d_down)
    bind_name = "gate/up" if d_gate_up >= d_down else "down"
    need = p["rule_k"] * d_bind
    threshold = need / mean  # as a multiple of the average load

    # Calibration tokens so that the rare expert gets `need`: need = N' k / (E skew).
    tokens_needed = need * p["skew"] * e / k
    samples_needed = tokens_needed / p["seq_len"]

    shared = m.n_shared_experts or 0
    s: dict[str, Any] = {
        # part answers
        "mean_tokens": Quantity(mean, ""),
        "rare_tokens": Quantity(rare, ""),
        "load_threshold": Quantity(threshold, ""),
        "tokens_needed": Quantity(tokens_needed, ""),
        "why_worse": "rank",
        # givens the statement prints
        "experts": e,
        "top_k": k,
        "hidden": m.hidden,
        "moe_ffn": m.moe_ffn,
        "moe_layers": m.moe_layers,
        "layers": m.layers,
        "shared_experts": shared,
        "shared_text": (f"{shared} shared expert{'s' if shared > 1 else ''} that every token "
                        "also uses" if shared else "no shared expert"),
        # intermediates for the solution
        "n_tokens": n_tokens,
        "d_bind": d_bind,
        "d_other": d_other,
        "bind_name": bind_name,
        "other_name": "down" if bind_name == "gate/up" else "gate/up",
        "need": need,
        "rare_rank_pct": min(rare, d_bind) / d_bind * 100,
        "rare_missing": max(0.0, d_bind - rare),
        "mean_over_need": mean / need,
        "samples_needed": samples_needed,
        "set_multiple": tokens_needed / n_tokens,
        "rare_share_pct": k / e / p["skew"] * 100,
        "mean_share_pct": k / e * 100,
        "threshold_share_pct": need / n_tokens * 100,
        "hessian_entries_m": d_bind * d_bind / 1e6,
        "shared_note": (
            (f"The {shared} shared experts see" if shared > 1 else "The shared expert sees")
            + f" every token ({n_tokens:,}), so it is never short of data; the routed experts "
            "are the problem."
            if shared else "This model has no shared expert: every expert is routed."
        ),
    }
    s["recipe"] = _model_answer(p, s)
    return s


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"1. Count before quantizing: hook every router and record tokens per expert per layer "
        f"on the calibration set; the mean ({s['mean_tokens'].value:,.0f}) hides experts that "
        f"see a tenth of it. 2. Feed every expert: during calibration, send each token through "
        "all experts to collect statistics (llm-compressor's MoE calibration modules do this) "
        "while the layer's output keeps the real routing, and weight the extra tokens by "
        "router probability, since tokens routed to other experts are off its distribution. "
        f"3. Gate each expert on its count: below {p['rule_k']:g} × d_in "
        f"({s['need']:,.0f} tokens) use round-to-nearest, or keep the expert at higher "
        "precision, or fit only per-channel scales; dampening makes H invertible but does not "
        "add the missing directions. 4. Build the set for coverage, not size alone: mix the "
        "domains the product serves (code, maths, languages, tool calls) and size it for the "
        f"rarest expert that matters ({s['tokens_needed'].value:,.0f} tokens for one routed "
        f"{p['skew']}× below average). 5. Keep the router, shared experts and attention at "
        "higher precision, and evaluate per domain rather than on average perplexity."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    e, k = s["experts"], s["top_k"]
    n = s["n_tokens"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, accept=near, merge=near, accept_floor=1e-9, merge_floor=1e-9).add

    mean = s["mean_tokens"].value
    add("mean_tokens", n / e,
        f"You gave each token one expert. Each token picks {k} of the {e}, so the set supplies "
        f"{k} × {n:,} expert-token pairs.", "no_top_k", kind="miscounted_term")
    add("mean_tokens", mean / s["moe_layers"],
        f"You spread the tokens over the {s['moe_layers']} MoE layers. Every token passes through "
        "every layer; the count is per expert of one layer.", "per_layers", kind="one_layer")
    add("mean_tokens", float(n),
        "That is every calibration token: what a shared expert (or a dense MLP) sees. A routed "
        f"expert sees only the tokens that pick it, {k} in {e} on average.", "all_tokens",
        kind="misread_mechanism")

    add("rare_tokens", mean * p["skew"],
        f"The rare expert gets {p['skew']} times FEWER tokens than average, not more.",
        "inverted", kind="inverted")
    add("rare_tokens", n / e / p["skew"],
        f"You gave each token one expert; each picks {k}.", "no_top_k", kind="miscounted_term")
    add("rare_tokens", mean,
        "That is the average expert. The part asks about the one the router rarely picks.",
        "mean", kind="mean_vs_tail")

    thr = s["load_threshold"].value
    add("load_threshold", p["rule_k"] * s["d_other"] / mean,
        f"You used the {s['other_name']} projection's input width ({s['d_other']:,}). The "
        f"binding one is the widest: {s['bind_name']} reads {s['d_bind']:,} channels.",
        "narrow_projection", kind="misread_mechanism")
    add("load_threshold", 1 / thr,
        "That is the average load over the threshold, upside down: the part asks at what "
        "multiple of the average load an expert drops below the token threshold.", "inverted",
        kind="inverted")
    add("load_threshold", s["need"] / n,
        "That is the threshold as a share of all calibration tokens. The part asks for it as a "
        "multiple of the average expert's load: divide by the tokens of part 1, not by the "
        "whole set.", "share_of_set", kind="unit_slip")
    add("load_threshold", s["d_bind"] / mean,
        f"You left out the rule's factor: the threshold is {p['rule_k']:g} × d_in tokens.",
        "no_rule_k", kind="miscounted_term")

    need = s["tokens_needed"].value
    add("tokens_needed", need / p["skew"],
        f"That covers the average expert. The rare one gets {p['skew']} times fewer tokens, so "
        f"the set must be {p['skew']} times larger.", "no_skew", kind="mean_vs_tail")
    add("tokens_needed", need * k,
        f"You gave each token one expert; each picks {k}, so the set can be {k} times smaller.",
        "no_top_k", kind="miscounted_term")
    add("tokens_needed", p["rule_k"] * s["d_other"] * p["skew"] * e / k,
        f"You sized it for the {s['other_name']} projection ({s['d_other']:,} inputs). The "
        f"widest input, {s['bind_name']} with {s['d_bind']:,}, sets the need.",
        "narrow_projection", kind="misread_mechanism")
    add("tokens_needed", s["need"] * p["skew"],
        f"You dropped the routing share: a token reaches a given expert {k} times in {e}.",
        "no_routing", kind="miscounted_term")

    out.append(Mistake(
        "why_worse", "damping",
        "Dampening adds a small multiple of H's own mean diagonal: it makes H invertible, it does "
        "not grow as tokens shrink, and it cannot supply the input directions no token showed.",
        "damping", kind="misread_mechanism"))
    out.append(Mistake(
        "why_worse", "memory",
        f"H for a {s['d_bind']:,}-wide input is {s['hessian_entries_m']:.0f} million entries "
        "whatever the token count; memory does not depend on how many tokens the expert saw.",
        "memory", kind="misread_mechanism"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [HasFeature(p["model"], "moe"),
            WithinContext(p["model"], p["seq_len"], "a calibration sequence")]
