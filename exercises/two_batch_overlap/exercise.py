"""Q26: two-batch overlap for MoE expert parallelism, its gain, and where it stops paying.

Per MoE layer and per GPU, decode compute is modelled as C(b) = C0 + c*b and the dispatch+combine
all-to-all as M(b) = M0 + m*b for b tokens, with delta extra launch/sync cost per micro-batch.
One batch: T1(B) = C(B) + M(B). Two micro-batches of B/2, each computing while the other
communicates, in steady state across layers: T2(B) = 2*max(C(B/2), M(B/2)) + 2*delta. When the
micro-batches are compute-bound, T2 < T1 exactly when B > (C0 - M0 + 2*delta)/m.

C0 and c come from the catalog (DeepSeek-V3's FP8 attention and local-expert weights, its MLA
latent, the GPU's HBM bandwidth), rounded as the statement shows them; M0 and m are the fitted
all-to-all constants a benchmark would give, and delta the per-micro-batch overhead. All five are
variant keys, and the statement prints them. The shipped default checked against is vLLM's
dbo_decode_token_threshold = 32.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Fits, WithinContext, slips_show
from exercises.slips import Slips, isclose, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

MODEL = "DeepSeek-V3"
GPUS = ("H100 SXM", "H200 SXM", "B200")
EP_DEGREES = (16, 32, 64)
CONTEXTS = (2048, 4096, 8192)
M0_US = (20, 25, 30, 35, 40)
M_US = tuple(round(2.6 + 0.1 * i, 1) for i in range(11))  # 2.6 .. 3.6 µs per token
DELTAS_US = (0, 0, 2, 4, 6)  # zero twice as likely: the blurb's own setting
BIG_BATCHES = (64, 96, 128, 192, 256)
SMALL_BATCHES = (8, 12, 16)
THRESHOLD = 32  # vLLM ParallelConfig.dbo_decode_token_threshold (default)
SHIPPED_PREFILL_THRESHOLD = 512  # vLLM ParallelConfig.dbo_prefill_token_threshold (default)

FORMULA = "(C0 - M0 + 2*delta)/m"


def fixed_compute_us(gpu_name: str, ep: int) -> int:
    """C0: per micro-batch, per MoE layer, every GPU reads its FP8 attention weights and its
    routed experts once (decode is memory-bound), rounded to the µs the statement shows."""
    m = model(MODEL)
    assert m.n_routed_experts is not None
    weight_bytes = m.attn_params_per_layer + m.n_routed_experts // ep * m.expert_params
    return round(weight_bytes / gpu(gpu_name).hbm_bytes_per_s * 1e6)


def per_token_compute_us(gpu_name: str, context: int) -> float:
    """c: each token's attention reads its MLA latent cache for one layer (BF16), rounded to 0.1 µs."""
    kv = model(MODEL).kv_bytes_per_token_per_layer(2) * context
    return round(kv / gpu(gpu_name).hbm_bytes_per_s * 1e6, 1)


def _params(gpu_name: str, ep: int, context: int, m0: float, m_us: float, delta: float,
            b_big: int, b_small: int) -> dict[str, Any]:
    return {
        "gpu": gpu_name,
        "ep": ep,
        "context": context,
        "c0_us": fixed_compute_us(gpu_name, ep),
        "c_us": per_token_compute_us(gpu_name, context),
        "m0_us": m0,
        "m_us": m_us,
        "delta_us": delta,
        "b_big": b_big,
        "b_small": b_small,
        "threshold": THRESHOLD,
    }


# The blurb's setting (facts-q26-q49 §Q26): EP32 on H200, 4K context -> C0 = 112 µs, c = 1.0 µs;
# the fit to DeepEP's EP32 low-latency numbers, M0 = 30 µs and m = 3.1 µs; delta = 0.
CANONICAL: dict[str, Any] = _params("H200 SXM", 32, 4096, 30, 3.1, 0, 128, 16)


# ----------------------------------------------------------------------------------------------
# The model


def compute_us(p: dict[str, Any], b: float) -> float:
    return p["c0_us"] + p["c_us"] * b


def comm_us(p: dict[str, Any], b: float) -> float:
    return p["m0_us"] + p["m_us"] * b


def t1_us(p: dict[str, Any], b: float) -> float:
    """One batch: compute, then wait for the all-to-all; nothing overlaps."""
    return compute_us(p, b) + comm_us(p, b)


def t2_us(p: dict[str, Any], b: float) -> float:
    """Two micro-batches of b/2: the longer of the two stages runs twice, plus the overhead."""
    half = b / 2
    return 2 * max(compute_us(p, half), comm_us(p, half)) + 2 * p["delta_us"]


def crossover_exact(p: dict[str, Any], delta: float | None = None) -> float:
    d = p["delta_us"] if delta is None else delta
    return (p["c0_us"] - p["m0_us"] + 2 * d) / p["m_us"]


# ----------------------------------------------------------------------------------------------
# Variants



def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        p = _params(rng.choice(GPUS), rng.choice(EP_DEGREES), rng.choice(CONTEXTS),
                    rng.choice(M0_US), rng.choice(M_US), rng.choice(DELTAS_US),
                    rng.choice(BIG_BATCHES), rng.choice(SMALL_BATCHES))
        return p

    return draw_sensible(rng, draw, is_sensible, tries=10_000,
                         message="no sensible variant found; the ranges above are inconsistent")


def is_sensible(p: dict[str, Any]) -> bool:
    b_star = crossover_exact(p)
    half_t = p["threshold"] / 2
    return (
        10 <= b_star <= p["threshold"] - 1
        # not within a hair of a whole number, so "the smallest B that wins" is unambiguous
        # (and by 0.5 %: the tolerance policy's boundary rule)
        and abs(b_star - round(b_star)) > max(0.05, 0.005 * b_star)
        # the formula's regime: compute-bound micro-batches at the crossover and at the threshold
        and compute_us(p, b_star / 2) >= comm_us(p, b_star / 2)
        and compute_us(p, half_t) >= comm_us(p, half_t)
        # the small batch loses, the big one wins clearly
        and p["b_small"] < b_star - 1 and p["b_big"] >= b_star + 16
        and t1_us(p, p["b_big"]) / t2_us(p, p["b_big"]) >= 1.1
        and _delta_budget(p) > p["delta_us"] + 1
        # the stages balance (the best speedup) at a batch an engine would run
        and p["m_us"] - p["c_us"] >= 0.5
        and 2 * (p["c0_us"] - p["m0_us"]) / (p["m_us"] - p["c_us"]) <= 512
        # ... and past it the speedup falls again (T1/T2 decreasing in the comm-bound regime)
        and (p["c_us"] + p["m_us"]) * (2 * p["m0_us"] + 2 * p["delta_us"])
        < p["m_us"] * (p["c0_us"] + p["m0_us"])
        # every listed slip is told apart, typed to three figures (graders.policy)
        and slips_show(solve(p), mistakes(p), {"speedup_big": TOLERANCE["speedup_big"]})
    )


# ----------------------------------------------------------------------------------------------
# The reference


def _delta_budget(p: dict[str, Any]) -> float:
    """The overhead per micro-batch at which the crossover lands exactly on the threshold."""
    return (p["threshold"] * p["m_us"] - p["c0_us"] + p["m0_us"]) / 2


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(MODEL)
    g = gpu(p["gpu"])
    layers = m.moe_layers
    big, small = p["b_big"], p["b_small"]
    b_star = crossover_exact(p)
    crossover = math.floor(b_star) + 1  # the smallest whole B with B > B*
    budget = _delta_budget(p)

    # Where the two stages balance, C(B/2) = M(B/2): the best speedup. Every variant has m > c
    # (is_sensible), so the balance point exists.
    b_bal = 2 * (p["c0_us"] - p["m0_us"]) / (p["m_us"] - p["c_us"])
    s_bal = t1_us(p, b_bal) / t2_us(p, b_bal)

    def regime(b: float) -> str:
        return "compute" if compute_us(p, b / 2) >= comm_us(p, b / 2) else "communication"

    assert m.n_routed_experts is not None
    local_experts = m.n_routed_experts // p["ep"]
    attn_mb = m.attn_params_per_layer / 1e6
    experts_mb = local_experts * m.expert_params / 1e6
    shared_us = m.expert_params / g.hbm_bytes_per_s * 1e6

    s: dict[str, Any] = {
        "speedup_big": Quantity(t1_us(p, big) / t2_us(p, big), ""),
        "speedup_small": Quantity(t1_us(p, small) / t2_us(p, small), ""),
        "crossover_formula": FORMULA,
        "crossover": Quantity(crossover, ""),
        "crossover_unrounded": b_star,  # floor + 1 of this (policy: boundary rule)
        "delta_budget": Quantity(budget, "us"),
        "small_batch": ["weights", "latency_floor", "tiles"],
        # givens the statement prints
        "moe_layers": layers,
        "local_experts": local_experts,
        "attn_mb": attn_mb,
        "experts_mb": experts_mb,
        "expert_mb": m.expert_params / 1e6,
        "hbm_tbps": g.hbm_tbps,
        "kv_layer_bytes": m.kv_bytes_per_token_per_layer(2),
        # intermediates for the solution
        "c_big_half": compute_us(p, big / 2),
        "m_big_half": comm_us(p, big / 2),
        "t1_big": t1_us(p, big),
        "t2_big": t2_us(p, big),
        "regime_big": regime(big),
        "c_small_half": compute_us(p, small / 2),
        "m_small_half": comm_us(p, small / 2),
        "t1_small": t1_us(p, small),
        "t2_small": t2_us(p, small),
        "regime_small": regime(small),
        "t1_big_ms": t1_us(p, big) * layers / 1e3,
        "t2_big_ms": t2_us(p, big) * layers / 1e3,
        "t1_small_ms": t1_us(p, small) * layers / 1e3,
        "t2_small_ms": t2_us(p, small) * layers / 1e3,
        "b_star": b_star,
        "b_star_0": crossover_exact(p, 0),
        "b_star_10": crossover_exact(p, 10),
        "b_star_20": crossover_exact(p, 20),
        "c_star_half": compute_us(p, b_star / 2),
        "m_star_half": comm_us(p, b_star / 2),
        "t_cross": t1_us(p, crossover),
        "t2_cross": t2_us(p, crossover),
        "b_bal": b_bal,
        "s_bal": s_bal,
        "budget_step_us": budget * layers,
        "c_thr_half": compute_us(p, p["threshold"] / 2),
        "m_thr_half": comm_us(p, p["threshold"] / 2),
        "shared_us": shared_us,
        "b_star_shared": (p["c0_us"] + shared_us - p["m0_us"] + 2 * p["delta_us"]) / p["m_us"],
        "prefill_threshold": SHIPPED_PREFILL_THRESHOLD,
        "threshold_half": p["threshold"] // 2,
    }
    return s


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out,
                accept=isclose, merge=isclose, merge_floor=1e-9, skip=nonpositive).add

    for part, b in (("speedup_big", p["b_big"]), ("speedup_small", p["b_small"])):
        t1, half = t1_us(p, b), b / 2
        worst = max(compute_us(p, half), comm_us(p, half))
        add(part, t1 / (worst + 2 * p["delta_us"]),
            "You counted the slower stage once. With two micro-batches it runs twice per layer: "
            "T2 = 2 · max(C(B/2), M(B/2)).", "max_once", kind="miscounted_term")
        add(part, t1 / max(compute_us(p, b), comm_us(p, b)),
            "You overlapped the whole batch's compute with its own all-to-all. Within one batch "
            "every layer waits for its all-to-all; overlap needs a second micro-batch.",
            "full_batch_max", kind="misread_mechanism")
        add(part, t1 / (t1 + p["c0_us"] + p["m0_us"] + 2 * p["delta_us"]),
            "You added the two stages instead of overlapping them. T2 takes the max of the "
            "stages, twice, not their sum.", "sum_not_max", kind="misread_mechanism")
        add(part, t1 / (2 * max(p["c0_us"] / 2 + p["c_us"] * half, p["m0_us"] / 2
                                + p["m_us"] * half) + 2 * p["delta_us"]),
            "You halved the fixed costs along with the batch. C0 and M0 are paid in full by "
            "each micro-batch: the weights are read again, the all-to-all has its own latency.",
            "halved_fixed", kind="misread_mechanism")
        if p["delta_us"]:
            add(part, t1 / (t2_us(p, b) - 2 * p["delta_us"]),
                f"You left out δ = {p['delta_us']} µs per micro-batch.", "no_delta",
                kind="miscounted_term")
        add(part, t2_us(p, b) / t1,
            "Upside down: the speedup is T1 / T2, one batch's time over the overlapped time.",
            "inverted", kind="inverted")

    formulas = {
        "(C0 - M0)/m": ("You left out δ. Each micro-batch pays it once, so splitting pays 2δ more.",
                        "no_delta", "miscounted_term"),
        "(C0 - M0 + delta)/m": ("You counted δ once. Each of the two micro-batches pays it: 2δ.",
                                "delta_once", "miscounted_term"),
        "(C0 - M0 + 2*delta)/c": ("You divided by c, the compute slope. Both schedules pay c·B, so "
                                  "it cancels; the saving grows with the communication slope m.",
                                  "slope_c", "misread_mechanism"),
        "(M0 - C0 + 2*delta)/c": ("That is the crossover for communication-bound micro-batches. The "
                                  "part assumes compute-bound ones, C(B/2) ≥ M(B/2).",
                                  "other_regime", "wrong_scope"),
        "(C0 + M0 + 2*delta)/m": ("You added M0. Splitting hides a whole communication stage, so "
                                  "the fixed penalty is C0 − M0, not C0 + M0.", "plus_m0",
                                  "miscounted_term"),
    }
    for formula, (feedback, name, kind) in formulas.items():
        out.append(Mistake("crossover_formula", formula, feedback, name, kind))

    b_star = s["b_star"]
    add("crossover", math.floor(b_star),
        f"Rounded down: at B = {math.floor(b_star)} splitting still loses (B* = {b_star:.2f}). "
        "The smallest batch that wins is the next whole number.", "floor", kind="rounding")
    add("crossover", math.floor((p["c0_us"] - p["m0_us"] + 2 * p["delta_us"]) / p["c_us"]) + 1,
        "You divided by c, the compute slope. Splitting keeps the compute slope (both sides pay "
        "c·B) and saves the communication slope: divide by m.", "slope_c", kind="misread_mechanism")
    add("crossover", math.floor((p["c0_us"] + p["m0_us"] + 2 * p["delta_us"]) / p["m_us"]) + 1,
        "You added M0. Splitting pays the extra fixed compute C0 but also overlaps an M0, so the "
        "penalty is C0 − M0.", "plus_m0", kind="miscounted_term")
    add("crossover", math.floor(p["c0_us"] / p["m_us"]) + 1,
        "You left out M0: the one batch pays it too, so the split only costs C0 − M0 extra.",
        "no_m0", kind="miscounted_term")
    if p["delta_us"]:
        add("crossover", math.floor(crossover_exact(p, 0)) + 1,
            f"You left out δ = {p['delta_us']} µs, paid once per micro-batch (2δ in all).",
            "no_delta", kind="miscounted_term")
        add("crossover", math.floor((p["c0_us"] - p["m0_us"] + p["delta_us"]) / p["m_us"]) + 1,
            "You counted δ once. Each of the two micro-batches pays it: 2δ.", "delta_once",
            kind="miscounted_term")
    add("crossover", p["threshold"],
        "That is vLLM's default threshold, not this model's crossover. Solve T1(B) = T2(B) "
        "with the constants given.", "threshold", kind="misread_mechanism")

    budget = s["delta_budget"].value
    add("delta_budget", 2 * budget,
        "Twice the reference: both micro-batches pay δ, so the penalty is 2δ. Halve it.",
        "not_halved", kind="miscounted_term")
    add("delta_budget", (2 * p["threshold"] * p["m_us"] - p["c0_us"] + p["m0_us"]) / 2,
        f"You put each micro-batch at {p['threshold']} tokens. The threshold counts the whole "
        f"batch: {p['threshold']} tokens split into two of {p['threshold'] // 2}.", "per_microbatch",
        kind="wrong_scope")
    add("delta_budget", budget * s["moe_layers"],
        f"That is per decode step ({s['moe_layers']} layers). δ in the model is per layer, per "
        "micro-batch.", "per_step", kind="wrong_scope")
    if p["delta_us"]:
        add("delta_budget", budget - p["delta_us"],
            f"That is the headroom above the δ = {p['delta_us']} µs already assumed. The part asks "
            "for the δ itself.", "headroom", kind="wrong_scope")

    out.append(Mistake(
        "small_batch", ["weights", "latency_floor", "tiles", "more_bytes"],
        "The two micro-batches send the same bytes in total as one batch: only the fixed latency "
        "of each all-to-all is paid twice.", "more_bytes", kind="misread_mechanism"))
    out.append(Mistake(
        "small_batch", ["kv_double", "nic_split", "more_bytes"],
        "None of those happen. The costs that double are the fixed ones: weights read once per "
        "micro-batch, each all-to-all's latency floor, and GEMM tiles padded for few tokens.",
        "wrong_costs", kind="misread_mechanism"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [
        Fits("DeepSeek-V3 FP8 weights over the EP group", p["gpu"], p["ep"],
             model("DeepSeek-V3").weight_bytes(1)),
        WithinContext("DeepSeek-V3", p["context"], "a request's context"),
    ]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {"crossover_formula": {"C0": p["c0_us"], "c": p["c_us"], "M0": p["m0_us"],
                                  "m": p["m_us"], "delta": p["delta_us"]}}
