"""Q19: DeepSeek-V3's multi-token-prediction (MTP) module used as a speculative drafter.

The module is one extra decoder layer trained with the model: at position i it reads the main
model's last hidden state and the embedding of token i+1, and predicts token i+2 through the
shared output head. At inference it drafts one token per step and the target verifies it.

The parts walk the blurb's argument: the wiring and the loss (a multi-select); the price of one
draft step against the target, counted from the catalog's DeepSeek-V3 config by the weights each
step multiplies; the speedup formula; the speedup with the variant's acceptance rate, measured
draft cost and verify overhead (the canonical values give the reported 1.8x); and how much verify
overhead the speedup survives, which is where it goes at large batch.

Every model figure comes from exercises/catalog (model "DeepSeek-V3", including `mtp_layers`);
the reported 85-90 % acceptance and 1.8x are the DeepSeek-V3 report's (arXiv 2412.19437, §5.4.3).
"""
from __future__ import annotations

import random
from typing import Any

from exercises.catalog import model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, HasFeature
from exercises.slips import Slips, near, tolerances
from exercises.spec import Mistake, Quantity

MODEL = "DeepSeek-V3"

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# The blurb's setting. Acceptance 89 % sits inside the report's 85-90 %; a measured draft step of
# 5 % of a target step (a little above its 4.4 % share of multiplied weights, since one small layer
# cannot keep the GPU as busy as 61) and a free second verify token (memory-bound decode) give
# (1 + 0.89) / (1 + 0.05 + 0) = 1.80, the reported 1.8x.
CANONICAL: dict[str, Any] = {
    "accept_pct": 89.0,  # probability the target accepts the drafted token, in % [A: report 85-90]
    "draft_cost_pct": 5.0,  # measured draft step time as % of a plain target step [A]
    "verify_overhead_pct": 0.0,  # extra cost of verifying the second token, % of a step [A]
    "report_lo_pct": 85,  # the report's acceptance range (printed, never varied)
    "report_hi_pct": 90,
    "report_speedup": 1.8,
}

# Variant ranges: acceptance on a half-percent grid from 70 % (a hard domain, or sampling at a
# high temperature) to 95 %; measured draft costs from just above the FLOP share to about twice it;
# verify overheads from free (batch 1) to a tenth of a step (a moderately loaded server).
ACCEPT_GRID = tuple(70.0 + 0.5 * i for i in range(51))
DRAFT_COSTS = (4.5, 5.0, 5.5, 6.0, 7.0, 8.0)
OVERHEADS = tuple(float(x) for x in range(0, 11))


def generate(rng: random.Random) -> dict[str, Any]:
    return draw_sensible(rng, lambda rng: {**CANONICAL, **choose(rng, {
        "accept_pct": ACCEPT_GRID, "draft_cost_pct": DRAFT_COSTS, "verify_overhead_pct": OVERHEADS,
    })}, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    """MTP clearly pays (at least 1.3x), so the 'where does it go' part starts from a real gain."""
    s = solve(p)
    return s["speedup"].value >= 1.3 and s["max_overhead"].value > 0


# ----------------------------------------------------------------------------------------------
# The draft step, priced from the config


def draft_weights() -> dict[str, int]:
    """Weights one MTP draft step multiplies per token, by component (DeepSeek-V3: 1.615 B)."""
    m = model(MODEL)
    assert m.mtp_layers == 1 and m.experts_per_token and m.n_shared_experts is not None
    return {
        # eh_proj maps the concatenated [norm(h_i); norm(emb(t_i+1))], 2 x hidden, back to hidden.
        "eh_proj": 2 * m.hidden * m.hidden,
        "attention": m.attn_params_per_layer,
        # One MoE layer: the token visits its routed experts and the shared one, plus the router.
        "experts": (m.experts_per_token + m.n_shared_experts) * m.expert_params,
        "router": m.router_params_per_layer,
        # The output head is shared with the main model but still multiplied every draft step.
        "head": m.vocab * m.hidden,
    }


def _sum(parts: dict[str, int]) -> int:
    return sum(parts.values())


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(MODEL)
    w = draft_weights()
    draft = _sum(w)
    # The target: every active weight except the input-embedding lookup (which multiplies
    # nothing). Norm vectors are in both counts and are a rounding error (1 M of 36.6 B).
    target_active = m.active_params
    target = target_active - m.input_embedding_params
    c_flop = draft / target
    c_flop_headline = draft / target_active  # Appendix E: the 37.6 B headline as denominator
    all_experts = draft - w["experts"] + (m.n_routed_experts + m.n_shared_experts) * m.expert_params

    acc = p["accept_pct"] / 100
    c = p["draft_cost_pct"] / 100
    e = p["verify_overhead_pct"] / 100
    tokens = 1 + acc  # the verified draft, if accepted, plus the token the target always emits
    cost = 1 + c + e
    speedup = tokens / cost
    e_max = acc - c  # (1 + p) / (1 + c + e) = 1  <=>  e = p - c
    # Fully compute-bound: two tokens per request cost twice one (e = 1).
    s_compute_bound = tokens / (2 + c)
    # With the draft and verification "free", the ceiling.
    s_free = tokens

    return {
        # part answers
        "wiring": ["inputs", "shared", "joint_loss"],
        "draft_cost": Quantity(c_flop * 100, "%"),
        "formula": "(1 + p)/(1 + c + e)",
        "speedup": Quantity(speedup, ""),
        "max_overhead": Quantity(e_max * 100, "%"),
        "why": MODEL_ANSWER,
        # givens the statement prints (from the catalog)
        "layers": m.layers,
        "hidden": m.hidden,
        "two_hidden": 2 * m.hidden,
        "q_heads": m.q_heads,
        "vocab": m.vocab,
        "n_routed": m.n_routed_experts,
        "n_shared": m.n_shared_experts,
        "top_k": m.experts_per_token,
        "moe_ffn": m.moe_ffn,
        "mtp_layers": m.mtp_layers,
        "moe_layers": m.moe_layers,
        "dense_layers": m.dense_layers,
        "q_lora_rank": m.q_lora_rank,
        "kv_lora_rank": m.kv_lora_rank,
        "active_b": target_active / 1e9,
        "total_b": m.params / 1e9,
        "attn_m": w["attention"] / 1e6,
        "expert_m": m.expert_params / 1e6,
        # intermediates for the solution
        "eh_proj_m": w["eh_proj"] / 1e6,
        "experts_m": w["experts"] / 1e6,
        "router_m": w["router"] / 1e6,
        "head_m": w["head"] / 1e6,
        "draft_b": draft / 1e9,
        "draft_body_b": (draft - w["head"]) / 1e9,
        "embed_b": m.input_embedding_params / 1e9,
        "target_b": target / 1e9,
        "c_flop_pct": c_flop * 100,
        "c_headline_pct": c_flop_headline * 100,
        "all_experts_b": all_experts / 1e9,
        # Unique weights of the module (all experts; shared embedding and head excluded): DeepSeek's
        # README_WEIGHTS rounds this to 11.5 B.
        "mtp_unique_b": (all_experts - w["head"]) / 1e9,
        "one_layer_pct": 100 / m.layers,
        "kv_extra_pct": 100 * m.mtp_layers / m.layers,
        "acc": acc,
        "c": c,
        "e": e,
        "tokens": tokens,
        "cost": cost,
        "speedup_free": s_free,
        "speedup_flop_c": tokens / (1 + c_flop + e),
        "speedup_lo": (1 + p["report_lo_pct"] / 100) / (1 + c + e),
        "speedup_hi": (1 + p["report_hi_pct"] / 100) / (1 + c + e),
        "speedup_compute_bound": s_compute_bound,
        "e_max": e_max,
        "e_max_pct": e_max * 100,
        "speedup_x": speedup,
        "tokens_k2": 1 + acc + acc**2,
    }


MODEL_ANSWER = """\
The drafter is trained with the target for the whole of pre-training (an extra cross-entropy
term on token i+2, weighted by λ), and it reads the target's own last hidden state plus the true
next token, so it guesses what the target is about to say: 85–90 % of its drafts are accepted.
It is free in the sense that there is no second model to train, align or keep in sync, its
weights ship in the checkpoint and the embedding and output head are shared. It is not free to
run: about 11.5 B more parameters in HBM, one more MLA layer of KV cache per token, and a draft step of
about 4–5 % of a target step on every step. The 1.8× also assumes verifying the second token
costs almost nothing, which is true while decode is memory-bound; at large batch the verify pass
becomes compute-bound, the overhead climbs and the speedup falls toward (and below) 1, which is
why engines cut speculation by batch size. Chaining the one module for more drafts feeds it its
own guesses, so later positions are accepted less often and the gain grows slowly.
"""


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m = model(MODEL)
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge=near).add

    target = s["target_b"]
    add("draft_cost", s["all_experts_b"] / target * 100,
        f"You counted all {m.n_routed_experts} routed experts. A token visits only "
        f"{m.experts_per_token} of them plus the shared one; the others hold memory but do no work "
        "for this token.", "all_experts", kind="misread_mechanism")
    add("draft_cost", s["draft_body_b"] / target * 100,
        "You left out the output head. Sharing it with the main model saves memory, not work: "
        f"every draft step still multiplies the {s['head_m']:,.0f} M-weight head to get logits "
        "over the vocabulary, and it is more than half of the step.", "no_head",
        kind="miscounted_term")
    add("draft_cost", s["one_layer_pct"],
        f"1/{m.layers} prices the draft as one layer of the target. The draft step also runs the "
        "projection and the full output head, which a target layer does not.", "one_layer",
        kind="one_layer")
    add("draft_cost", (s["draft_b"] + s["embed_b"]) / s["active_b"] * 100,
        "You counted the embedding lookup as work on the draft side. A lookup reads one row and "
        "multiplies nothing, so it costs (almost) nothing on either side.", "embedding",
        kind="miscounted_term")
    add("draft_cost", s["draft_b"] / s["total_b"] * 100,
        f"You divided by all {s['total_b']:.0f} B parameters. A decode step only multiplies the "
        "active ones.", "total_params", kind="misread_mechanism")

    ref = s["speedup"].value
    acc, c, e = s["acc"], s["c"], s["e"]
    add("speedup", (1 + acc) / (1 + e),
        "You treated the drafter as free to run. It is free to train (it ships with the model), "
        f"but every step still pays the draft: {p['draft_cost_pct']:g} % of a target step.",
        "free_draft", kind="misread_mechanism")
    add("speedup", acc / (1 + c + e),
        "Tokens per step are 1 + p, not p: the verify pass always yields one token of its own "
        "(the correction, or the next token after an accepted draft).", "no_bonus",
        kind="miscounted_term")
    add("speedup", 1 / ref,
        "That is upside down: speedup is tokens per step divided by the cost of the step.",
        "inverted", kind="inverted")
    add("speedup", (1 + acc) / (1 + c),
        f"You left out the verify overhead: the statement gives {p['verify_overhead_pct']:g} % "
        "for the second token.", "no_overhead", kind="miscounted_term")
    add("speedup", (1 + acc + acc**2) / (1 + c + e),
        "1 + p + p² assumes two chained drafts per step. DeepSeek-V3 has one MTP module: one "
        "draft per step.", "two_drafts", kind="misread_mechanism")

    e_ref = s["max_overhead"].value
    add("max_overhead", acc * 100,
        "You forgot the draft step: speculation pays while part 3's speedup stays above 1, and "
        "the draft's cost c counts against it as well as the overhead e.",
        "no_draft", kind="miscounted_term")
    add("max_overhead", (s["tokens"] / (1 + c) - 1) * 100,
        "You scaled the whole step, draft included, by (1 + e). The overhead is added to the "
        "verify pass only: set part 3's speedup equal to 1 and solve for e.", "multiplicative",
        kind="misread_mechanism")
    add("max_overhead", (1 - acc) * 100,
        "1 − p is the rejection rate, not the overhead the speedup can absorb. Set the speedup "
        "of part 3 equal to 1 and solve for e.", "reject_rate", kind="inverted")
    add("max_overhead", e_ref / 2,
        "Half the reference. Set part 3's speedup equal to 1 and solve for e directly.", "half",
        kind="misread_mechanism")

    out.append(Mistake(
        "wiring", ["inputs", "shared", "joint_loss", "parallel_head"],
        "The MTP module is sequential, not a parallel head: it reads the embedding of token i+1 "
        "next to h_i, which keeps the causal chain that Medusa-style heads give up.",
        "parallel_head", kind="misread_mechanism"))
    out.append(Mistake(
        "wiring", ["inputs", "shared"],
        "It is trained jointly with the main model for the whole of pre-training (λ = 0.3, then "
        "0.1), not bolted on afterwards; that is why its drafts are accepted so often.",
        "missed_loss", kind="misread_mechanism"))
    out.append(Mistake(
        "wiring", ["inputs", "shared", "joint_loss", "distilled"],
        "It was not distilled after the fact: the MTP loss is part of pre-training from the start.",
        "distilled", kind="misread_mechanism"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [HasFeature("DeepSeek-V3", "mtp", "the checkpoint's MTP drafter")]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    s = solve(p)
    return {"formula": {"p": s["acc"], "c": s["c"], "e": s["e"]}}
