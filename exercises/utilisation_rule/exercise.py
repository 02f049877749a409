"""Q11: where the 70 % utilisation rule comes from.

A replica does one prefill at a time, first come first served, and a request's TTFT is its wait in
the queue plus its own prefill. With Poisson arrivals and exponential service (M/M/1) the time in
system is exponential with rate mu(1 - rho), so a p99 target T gives rho_max = 1 - ln(100) S / T.
Parts 3 and 4 use a heuristic (labelled as such in the statement): the mean time in system from
Pollaczek-Khinchine, and a tail assumed to stay exponential, T99 ~ ln(100) E[T]. Solving gives
rho_max = 2k / (1 + C^2 + 2k) with k = T / (ln(100) S) - 1, which is exact when C^2 = 1.

The mean prefill time S is not typed in: it comes from a deployment in the catalog (model, GPU,
GPU count), an MFU and a mean prompt length, with 2P FLOPs per prompt token and attention ignored.
That choice also makes prefill time proportional to prompt length, so the service-time C^2 equals
the prompt-length C^2, which for a lognormal with shape sigma is e^(sigma^2) - 1.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Fits, WithinContext
from exercises.spec import Mistake, Quantity

LN100 = math.log(100.0)
LN10 = math.log(10.0)

# Deployments a variant may use: (model, GPU, GPUs in the replica). All are multi-GPU tensor-parallel
# replicas (the statement and the tensor-parallel distractor in part 5 rely on that), and each holds
# its BF16 weights with room to spare for KV (70B: 141 GB; 72B: 145 GB; 405B: 812 GB on 1,128 GB).
DEPLOYMENTS: tuple[tuple[str, str, int], ...] = (
    ("Llama-3.1-70B", "H100 SXM", 8),
    ("Llama-3.1-70B", "H200 SXM", 8),
    ("Llama-3.1-70B", "H200 SXM", 4),
    ("Llama-3.1-70B", "A100 SXM 80GB", 8),
    ("Llama-3.1-70B", "B200", 8),
    ("Qwen2.5-72B", "H100 SXM", 8),
    ("Qwen2.5-72B", "H200 SXM", 4),
    ("Llama-3.1-405B", "H200 SXM", 8),
)
MFUS = (0.40, 0.45, 0.50, 0.55, 0.60)
T99_CHOICES = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
RHO_TARGETS = (0.40, 0.45, 0.50, 0.55, 0.60)
SIGMAS = tuple(round(1.0 + 0.05 * i, 2) for i in range(9))  # 1.00 .. 1.40

# Sensible-variant bounds. The M/M/1 ceiling stays in [0.6, 0.9] so the rule is "most of the GPU but
# not all of it"; the C^2 that pulls it to the target stays in [1.5, 10] so the target is below the
# M/M/1 ceiling (C^2 > 1) and the prompt mix it implies is believable (CV up to ~3.2).
RHO_MM1_RANGE = (0.60, 0.90)
C2_TARGET_RANGE = (1.5, 10.0)
RHO_LOGNORMAL_RANGE = (0.30, 0.85)
S_RANGE = (0.05, 0.50)


def prefill_seconds(model_name: str, gpu_name: str, n_gpus: int, mfu: float, tokens: int) -> float:
    """Mean prefill time: 2P FLOPs per prompt token over the replica's dense BF16 rate times MFU."""
    flops = 2.0 * model(model_name).params * tokens
    rate = mfu * n_gpus * gpu(gpu_name).bf16_flops
    return flops / rate


def _params(model_name: str, gpu_name: str, n_gpus: int, mfu: float, tokens: int, t99: float,
            rho_target: float, sigma: float) -> dict[str, Any]:
    # S is shown to 1 ms, and every answer uses the rounded value the student sees.
    s = round(prefill_seconds(model_name, gpu_name, n_gpus, mfu, tokens), 3)
    return {
        "model": model_name,
        "gpu": gpu_name,
        "n_gpus": n_gpus,
        "mfu": mfu,
        "mfu_pct": round(100 * mfu),
        "prompt_tokens": tokens,
        "S": s,
        "T99": t99,
        "rho_target": rho_target,
        "rho_target_pct": round(100 * rho_target),
        "sigma": sigma,
    }


# The blurb's setting: 0.2 s of prefill and a 3 s p99 give 0.693; C^2 = 3.51 brings it to 50 %.
# A 5,600-token mean prompt on Llama-3.1-70B, 8 x H100 at 50 % MFU is 0.1997 s, shown as 0.200 s.
CANONICAL: dict[str, Any] = _params("Llama-3.1-70B", "H100 SXM", 8, 0.50, 5600, 3.0, 0.50, 1.2)


# --- the formulas -------------------------------------------------------------------------------

def rho_mm1(s: float, t99: float, ln_q: float = LN100) -> float:
    """M/M/1: P(T > t) = exp(-(1 - rho) t / S); setting it to 1 % at t = T99 gives this."""
    return 1.0 - ln_q * s / t99


def k_of(s: float, t99: float, ln_q: float = LN100) -> float:
    """The mean queue wait the target allows, in units of S: E[T] may be T99/ln(100), and
    E[T] = S + E[W], so E[W]/S may be T99/(ln(100) S) - 1."""
    return t99 / (ln_q * s) - 1.0


def rho_heuristic(k: float, c2: float) -> float:
    """Solve ln(100) S (1 + rho (1 + C^2) / (2 (1 - rho))) = T99 for rho."""
    return 2.0 * k / (1.0 + c2 + 2.0 * k)


def c2_for(k: float, rho: float) -> float:
    """The service-time C^2 at which the heuristic ceiling falls to rho."""
    return 2.0 * k * (1.0 - rho) / rho - 1.0


def rho_wait_only(s: float, t99: float) -> float:
    """The slip of bounding the queue wait W instead of the time in system: P(W > t) =
    rho exp(-(1 - rho) t / S) = 1 %. Solved by bisection (the left side falls as rho falls)."""
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if mid * math.exp(-(1.0 - mid) * t99 / s) > 0.01:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


def lognormal_c2(sigma: float) -> float:
    return math.exp(sigma * sigma) - 1.0


# --- variants -----------------------------------------------------------------------------------

def _sensible(p: dict[str, Any]) -> bool:
    s, t99 = p["S"], p["T99"]
    if not S_RANGE[0] <= s <= S_RANGE[1]:
        return False
    if not RHO_MM1_RANGE[0] <= rho_mm1(s, t99) <= RHO_MM1_RANGE[1]:
        return False
    k = k_of(s, t99)
    if not C2_TARGET_RANGE[0] <= c2_for(k, p["rho_target"]) <= C2_TARGET_RANGE[1]:
        return False
    return RHO_LOGNORMAL_RANGE[0] <= rho_heuristic(k, lognormal_c2(p["sigma"])) \
        <= RHO_LOGNORMAL_RANGE[1]


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw a deployment and workload; redraw until every answer is in its sensible range."""
    def draw(rng: random.Random) -> dict[str, Any]:
        model_name, gpu_name, n_gpus = rng.choice(DEPLOYMENTS)
        mfu = rng.choice(MFUS)
        # Mean prompts from 1K to 16K tokens, in steps of 100, the span chat and RAG traffic covers.
        tokens = 100 * rng.randint(10, 160)
        p = _params(model_name, gpu_name, n_gpus, mfu, tokens, rng.choice(T99_CHOICES),
                    rng.choice(RHO_TARGETS), rng.choice(SIGMAS))
        return p

    return draw_sensible(rng, draw, _sensible, tries=10_000,
                         message="no sensible variant found; the ranges above are inconsistent")


# --- answers ------------------------------------------------------------------------------------

BREAKS = ["batching", "two_phase", "memory", "state"]

FORMULA = "1 - ln(100)*S/T"

# One sentence per line: the key-point matcher cuts answers at line breaks.
MODEL_ANSWER = """\
No.
70 % is what one formula gives for one ratio of prefill time to p99 target, with exponential service times.
The ceiling is $1 - \\ln(100)\\,S/T_{99}$ for that queue and drops further as the prompt mix spreads, so it has to be recomputed per model, per prompt mix and per SLO.
The utilisation in it is the prefill server's busy fraction $\\lambda S$, not the GPU-utilisation gauge (which reads near 100 % whenever a kernel is running).
An LLM engine is not that queue (batching, memory admission, unknown decode lengths), so I would use the formula as the first guess, then load-test: step the offered rate, plot p99 TTFT against it, and set the cap a margin below the knee.
In production I would scale and shed on the measured signal (queue wait or p99 TTFT), and raise the ceiling by cutting variance: chunked prefill or a separate pool for long prompts.
"""


def solve(p: dict[str, Any]) -> dict[str, Any]:
    s, t99, rho_t, sigma = p["S"], p["T99"], p["rho_target"], p["sigma"]
    rho_max = rho_mm1(s, t99)
    k = k_of(s, t99)
    c2_target = c2_for(k, rho_t)
    c2_ln = lognormal_c2(sigma)
    rho_ln = rho_heuristic(k, c2_ln)
    m = model(p["model"])
    g = gpu(p["gpu"])
    return {
        "formula": FORMULA,
        "rho_max": Quantity(rho_max, ""),
        "c2_for_target": Quantity(c2_target, ""),
        "rho_lognormal": Quantity(rho_ln, ""),
        "breaks": list(BREAKS),
        "cap_in_practice": MODEL_ANSWER,
        # Intermediates for the statement's derivation of S and for the worked solution.
        "params_b": m.params / 1e9,
        "prefill_flops": 2.0 * m.params * p["prompt_tokens"],
        "gpu_tflops": g.bf16_flops / 1e12,
        "effective_tflops": p["mfu"] * p["n_gpus"] * g.bf16_flops / 1e12,
        "S_exact": prefill_seconds(p["model"], p["gpu"], p["n_gpus"], p["mfu"],
                                   p["prompt_tokens"]),
        "ln100": LN100,
        "ln100_S": LN100 * s,
        "idle": 1.0 - rho_max,
        "rho_max_pct": 100 * rho_max,
        "lam_max": rho_max / s,
        # p99 grows like 1/(1 - rho): halve the idle fraction and the p99 doubles.
        "rho_half_idle": (1.0 + rho_max) / 2,
        "t99_half_idle": 2 * t99,
        "rho_double_s": rho_mm1(2 * s, t99),
        "mean_sojourn": s / (1.0 - rho_max),
        "k": k,
        "two_k": 2 * k,
        "cv_target": math.sqrt(c2_target),
        "c2_table_0": rho_heuristic(k, 0.0),
        "c2_table_1": rho_heuristic(k, 1.0),
        "c2_table_2": rho_heuristic(k, 2.0),
        "c2_table_3": rho_heuristic(k, 3.0),
        "c2_lognormal": c2_ln,
        "cv_lognormal": math.sqrt(c2_ln),
        "sigma_sq": sigma * sigma,
        "rho_lognormal_pct": 100 * rho_ln,
        "lam_lognormal": rho_ln / s,
        # The heuristic pins E[T] at T99/ln(100) whatever C^2 is; only the rho that gets there moves.
        "mean_budget": t99 / LN100,
        "traffic_loss_pct": 100 * (1 - rho_ln / rho_max),
    }


# --- known mistakes -----------------------------------------------------------------------------

# The kind of each number slip `_keep_distinct` may keep, by its name (exercises.mistake_kinds).
_NUMBER_KINDS = {
    "p90": "mean_vs_tail",
    "mean": "mean_vs_tail",
    "idle": "inverted",
    "log10": "mean_vs_tail",
    "wait_only": "miscounted_term",
    "cv": "mean_vs_tail",
    "k_without_minus_one": "miscounted_term",
    "one_plus_c2": "miscounted_term",
    "ignored_variance": "mean_vs_tail",
    "sigma_sq": "mean_vs_tail",
    "no_minus_one": "mean_vs_tail",
}


def _keep_distinct(part: str, reference: float, tolerance: float,
                   candidates: list[tuple[float, str, str]]) -> list[Mistake]:
    """Keep a candidate only if it is more than twice the tolerance from the reference and from
    every mistake already kept: an answer inside the reference's band is graded correct anyway, and
    two mistakes inside one band would make the feedback a coin toss."""
    kept: list[Mistake] = []
    for value, name, feedback in candidates:
        values = [reference] + [m.answer for m in kept]
        if all(abs(value - v) > 2 * tolerance * abs(v) for v in values):
            kept.append(Mistake(part, value, feedback, name, _NUMBER_KINDS[name]))
    return kept


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s, t99, rho_t, sigma = p["S"], p["T99"], p["rho_target"], p["sigma"]
    k = k_of(s, t99)
    c2_ln = lognormal_c2(sigma)
    out = [
        Mistake("formula", "1 - ln(10)*S/T",
                "ln(10) is the p90 factor: P(T > t) = 0.10 gives t = ln(10) S/(1 - rho). A 1 % "
                "tail needs ln(100).", "p90", kind="mean_vs_tail"),
        Mistake("formula", "1 - S/T",
                "That keeps the mean time in system, S/(1 - rho), under the target. The target is "
                "on the p99, which for an exponential is ln(100) = 4.6 times the mean.", "mean",
                kind="mean_vs_tail"),
        Mistake("formula", "1 - 2*S/T",
                "log10(100) = 2 is the wrong logarithm: inverting exp(-x) = 0.01 needs the natural "
                "log, ln(100) = 4.61.", "log10", kind="mean_vs_tail"),
        Mistake("formula", "ln(100)*S/T",
                "That is the idle fraction 1 - rho_max; the ceiling is one minus it.", "idle",
                kind="inverted"),
        Mistake("formula", "1 - ln(100)*T/S",
                "S and T are swapped: the ceiling must fall as the prefill time S grows.", "swap",
                kind="inverted"),
    ]
    out += [
        Mistake("breaks", [*BREAKS, "variance"],
                "Varying service times are not a break: that is exactly what the M/G/1 heuristic "
                "models with C^2 in parts 3 and 4.", "variance_is_textbook", kind="mean_vs_tail"),
        Mistake("breaks", [*BREAKS, "tensor_parallel"],
                "Tensor parallelism splits every request across all the GPUs, so the replica is "
                "still one (faster) server, not one server per GPU.", "tp_is_one_server",
                kind="forgot_tp"),
    ]
    out += _keep_distinct("rho_max", rho_mm1(s, t99), 0.01, [
        (rho_mm1(s, t99, LN10), "p90",
         "You used ln(10), which sets the p90. The p99 needs ln(100) = 4.61."),
        (1.0 - s / t99, "mean",
         "You kept the mean time in system S/(1 - rho) under the target; the target is on the p99, "
         "ln(100) = 4.6 times the mean for an exponential."),
        (LN100 * s / t99, "idle",
         "That is the idle fraction 1 - rho_max; the ceiling is one minus it."),
        (1.0 - 2.0 * s / t99, "log10",
         "log10(100) = 2 is the wrong logarithm; the exponential tail needs ln(100) = 4.61."),
        (rho_wait_only(s, t99), "wait_only",
         "You bounded the queue wait alone (P(W > t) = rho exp(-(1 - rho) t/S)). TTFT includes the "
         "request's own prefill, so bound the time in system."),
    ])
    out += _keep_distinct("c2_for_target", c2_for(k, rho_t), 0.05, [
        (math.sqrt(c2_for(k, rho_t)), "cv",
         "That is the coefficient of variation C; the question asks for its square, C^2."),
        (c2_for(k + 1.0, rho_t), "k_without_minus_one",
         "You dropped the 1 in k = T/(ln(100) S) - 1. It is the request's own prefill: "
         "E[T] = S (1 + ...), and only the rest is queue wait."),
        (c2_for(k, rho_t) + 1.0, "one_plus_c2",
         "You solved for 1 + C^2 (or dropped the 1 in (1 + C^2)/2); subtract 1."),
        (c2_for(k_of(s, t99, LN10), rho_t), "p90",
         "You used ln(10), the p90 factor. The p99 needs ln(100) = 4.61."),
    ])
    out += _keep_distinct("rho_lognormal", rho_heuristic(k, c2_ln), 0.02, [
        (rho_heuristic(k, 1.0), "ignored_variance",
         "That is the M/M/1 ceiling (C^2 = 1). Put the lognormal's C^2 = e^(sigma^2) - 1 into the "
         "heuristic."),
        (rho_heuristic(k, sigma * sigma), "sigma_sq",
         "You used sigma^2 as C^2. sigma is the spread of the log of the length; for a lognormal "
         "C^2 = e^(sigma^2) - 1."),
        (rho_heuristic(k, c2_ln + 1.0), "no_minus_one",
         "You used e^(sigma^2) as C^2; the lognormal's C^2 is e^(sigma^2) - 1."),
        (rho_heuristic(k, math.sqrt(c2_ln)), "cv",
         "You put C (the CV) where the formula wants C^2."),
    ])
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [
        Fits("BF16 weights on the replica", p["gpu"], p["n_gpus"],
             model(p["model"]).weight_bytes(2)),
        WithinContext(p["model"], p["prompt_tokens"], "the mean prompt"),
    ]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {"formula": {"S": p["S"], "T": p["T99"]}}
