"""Q45: an FP8 KV cache. The scale barely matters for rounding, matters a lot for clipping, and
the damage hides until the context is long.

The scenario: a catalog model served with an E4M3 KV cache on an FP8-capable GPU. The checkpoint
ships no KV scales, so the engine uses 1.0 (vLLM's documented default when no scales are loaded
and `calculate_kv_scales` is off). A calibration pass later finds the largest key magnitude of one
layer, `amax`, above E4M3's range. The parts walk the blurb's argument: what scale 1.0 can store,
what it does to the outlier, why recalibrating does not change the rounding error of the other
keys, what a larger scale costs (underflow), and why key noise that is harmless on a short prompt
eats the retrieval margin of a 128K one (the largest of N Gaussian noises grows like
sigma * sqrt(2 ln N)).

Format figures are not retyped: they are derived from the bit layouts (OCP 8-bit floating point
spec; E4M3FN = 1 sign, 4 exponent bits with bias 7, 3 mantissa bits, only S.1111.111 is NaN, no
infinities). Model and GPU figures come from exercises/catalog.
"""
from __future__ import annotations

import math
import random
from functools import cache
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import (
    NODE_GPUS,
    UNSTATED_WEIGHT_BYTES,
    Claim,
    Fits,
    Holds,
    WithinContext,
)
from exercises.slips import Slips, tolerances
from exercises.spec import Mistake, Quantity

# ----------------------------------------------------------------------------------------------
# The formats, from their bit layouts (OCP "8-bit Floating Point Specification (OFP8)", 2023).

E4M3_MANTISSA_BITS = 3
E4M3_BIAS = 7
# Exponent field 15 is usable for finite values; only mantissa 111 there is NaN, so the largest
# finite value is 1.110b x 2^(15 - 7) = 1.75 x 256.
E4M3_MAX = (1 + 6 / 8) * 2.0 ** (15 - E4M3_BIAS)  # 448
E4M3_MIN_NORMAL = 2.0 ** (1 - E4M3_BIAS)  # 2^-6 = 0.015625
E4M3_MIN_SUBNORMAL = E4M3_MIN_NORMAL / 2**E4M3_MANTISSA_BITS  # 2^-9
# What a careless reader of the bit layout gets if every exponent-15 code were finite.
E4M3_ALL_CODES_MAX = (1 + 7 / 8) * 2.0 ** (15 - E4M3_BIAS)  # 480
# AMD's E4M3FNUZ: bias 8, one NaN code (0x80), so 1.111b x 2^(15 - 8). Older vLLM docs quote
# "±240" for E4M3, which is this variant.
E4M3FNUZ_MAX = (1 + 7 / 8) * 2.0 ** (15 - 8)  # 240
# E5M2 keeps IEEE conventions: exponent 31 is inf/NaN, so 1.11b x 2^(30 - 15).
E5M2_MAX = (1 + 3 / 4) * 2.0 ** (30 - 15)  # 57,344
INT8_MAX = 127
# Round to nearest: at most half a step, and a step is 2^-3 of the binade's lower edge.
ROUND_BOUND = 2.0 ** -(E4M3_MANTISSA_BITS + 1)  # 2^-4 = 6.25 %
# The worst case actually reached: x = 1.0625 (halfway between 1 and 1.125) is off by 1/17.
ROUND_WORST_REACHED = (1 / 16) / (1 + 1 / 16)
BF16_ROUND_BOUND = 2.0 ** -8  # 7 stored mantissa bits
E5M2_ROUND_BOUND = 2.0 ** -3  # 2 stored mantissa bits

# vLLM's on-the-fly scale (`calculate_kv_scales`) maps the first batch's amax to this many, not to
# 448: K_SCALE_CONSTANT defaults to 200 in vllm/envs.py (V_SCALE_CONSTANT 100), leaving headroom.
VLLM_K_SCALE_CONSTANT = 200

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml
NUMBER_PARTS = tuple(TOLERANCE)


def e4m3_values() -> list[float]:
    """Every finite non-negative E4M3FN value, decoded from the 7 magnitude bits."""
    out = []
    for exp_field in range(16):
        for mant in range(8):
            if exp_field == 15 and mant == 7:
                continue  # S.1111.111 is NaN
            if exp_field == 0:
                out.append(mant / 8 * E4M3_MIN_NORMAL)  # subnormal: 0.mmm x 2^-6
            else:
                out.append((1 + mant / 8) * 2.0 ** (exp_field - E4M3_BIAS))
    return sorted(out)


def to_e4m3(x: float) -> float:
    """Round x to the nearest E4M3FN value (ties to even), saturating at +-448.

    Saturation is what a KV-cache write does on NVIDIA GPUs (the conversion is called with
    __NV_SATFINITE); a non-saturating cast would turn the outlier into NaN instead.
    """
    if x == 0 or math.isnan(x):
        return x
    sign = -1.0 if x < 0 else 1.0
    a = abs(x)
    if a >= E4M3_MAX:
        return sign * E4M3_MAX
    if a < E4M3_MIN_NORMAL:
        step = E4M3_MIN_SUBNORMAL
    else:
        _, e = math.frexp(a)  # a = f * 2^e with 0.5 <= f < 1, so the binade starts at 2^(e-1)
        step = 2.0 ** (e - 1 - E4M3_MANTISSA_BITS)
    q = round(a / step) * step  # Python's round() is round-half-to-even
    return sign * min(q, E4M3_MAX)


def stored(x: float, scale: float) -> float:
    """What the cache gives back for x: quantise x / scale, multiply the scale back."""
    return to_e4m3(x / scale) * scale


@cache
def expected_max(n: int) -> float:
    """E[max of n independent standard normals], by the midpoint rule on n*phi(x)*Phi(x)^(n-1).

    Only for the solution's remark that sqrt(2 ln N) overestimates the mean but grows at the
    same rate; cached because n takes a handful of values.
    """
    h, total = 2e-3, 0.0
    x = -8.0 + h / 2
    while x < 10.0:
        phi = math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
        big_phi = 0.5 * (1 + math.erf(x / math.sqrt(2)))
        total += x * n * phi * big_phi ** (n - 1) * h
        x += h
    return total


def noise_ceiling(sigma: float, n: int) -> float:
    """The estimate sigma * sqrt(2 ln N) of the largest of N independent N(0, sigma^2) noises
    (an upper bound on its mean that is tight to leading order as N grows)."""
    return sigma * math.sqrt(2 * math.log(n))


# ----------------------------------------------------------------------------------------------
# Variants

MODELS = ("Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B")
GPUS = ("H100 SXM", "H200 SXM", "B200")  # FP8 tensor cores; the A100 has none
AMAXES = (520, 560, 600, 640, 700, 760, 800, 900, 1000, 1100, 1200, 1400, 1600)
SIGMAS = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4)
EVAL_LENGTHS = (1000, 2000, 4000)
DEPLOY_LENGTHS = (32768, 65536, 131072)

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "gpu": "H100 SXM",
    "amax": 1000,  # largest key magnitude the calibration pass saw in one layer [A]
    "sigma": 0.3,  # std of the key-quantisation noise on each attention logit, in logits [A]
    "n_eval": 1000,  # tokens in the short-prompt eval that looked lossless
    "n_dep": 131072,  # deployed context: 128K = 131,072 tokens
}


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw a variant; every combination in the lists is sensible (tested), so no rejection."""
    return draw_sensible(rng, lambda rng: choose(rng, {
        "model": MODELS, "gpu": GPUS, "amax": AMAXES, "sigma": SIGMAS,
        "n_eval": EVAL_LENGTHS, "n_dep": DEPLOY_LENGTHS,
    }), is_sensible, tries=100)


def is_sensible(p: dict[str, Any]) -> bool:
    m = model(p["model"])
    g = gpu(p["gpu"])
    return (
        g.fp8_dense_tflops is not None
        and (m.max_context is None or p["n_dep"] <= m.max_context)
        # the outlier is clipped, and clearly more than a rounding error
        and p["amax"] > E4M3_MAX * (1 + 2 * ROUND_BOUND)
        # the deployed context is much longer than the eval
        and p["n_dep"] >= 8 * p["n_eval"]
    )


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    amax, sigma, n_eval, n_dep = p["amax"], p["sigma"], p["n_eval"], p["n_dep"]

    # -- what FP8 buys -----------------------------------------------------------------------
    kv_bf16 = m.kv_bytes_per_token(2)
    kv_fp8 = m.kv_bytes_per_token(1)
    req_bf16_gb = kv_bf16 * n_dep / 1e9
    req_fp8_gb = kv_fp8 * n_dep / 1e9

    # -- clipping at scale 1.0 -----------------------------------------------------------------
    clip_stored = stored(amax, 1.0)
    clip_err = (amax - clip_stored) / amax

    # -- the recalibrated scale ----------------------------------------------------------------
    scale = amax / E4M3_MAX
    floor_1 = E4M3_MIN_NORMAL  # below this, scale 1.0 stores keys as subnormals
    floor_s = E4M3_MIN_NORMAL * scale
    zero_1 = E4M3_MIN_SUBNORMAL / 2  # half the smallest subnormal: rounds to zero at or below
    zero_s = zero_1 * scale
    # Worst case for a small (subnormal) key: half a subnormal step, 2^-10 x scale.
    small_key = 0.004
    small_bound_1 = E4M3_MIN_SUBNORMAL / 2 / small_key
    small_bound_s = E4M3_MIN_SUBNORMAL / 2 * scale / small_key
    vllm_scale = amax / VLLM_K_SCALE_CONSTANT
    vllm_headroom = E4M3_MAX / VLLM_K_SCALE_CONSTANT

    # A few keys through both scales, for the solution's table.
    # Small, typical and large keys, one between 448 and amax, and amax itself.
    samples = [small_key, 0.3, 5.3, 100.0, float(round((E4M3_MAX + amax) / 2)), float(amax)]
    rows = []
    for x in samples:
        a, b = stored(x, 1.0), stored(x, scale)
        rows.append((x, a, 100 * (a - x) / x, b, 100 * (b - x) / x))
    table = "\n".join(
        f"| {x:g} | {a:.4g} | {ea:+.1f} % | {b:.4g} | {eb:+.1f} % |" for x, a, ea, b, eb in rows
    )

    # -- long context ------------------------------------------------------------------------
    c_eval = noise_ceiling(sigma, n_eval)
    c_dep = noise_ceiling(sigma, n_dep)
    rise = c_dep - c_eval

    s: dict[str, Any] = {
        # part answers
        "clip_threshold": Quantity(E4M3_MAX, ""),
        "clip_error": Quantity(100 * clip_err, "%"),
        "round_bound": Quantity(100 * ROUND_BOUND, "%"),
        "scale_effect": list(SCALE_EFFECT),
        "ceiling_formula": CEILING_FORMULA,
        "ceiling_rise": Quantity(rise, ""),
        # givens the statement prints
        "layers": m.layers,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "kv_bf16": kv_bf16,
        "kv_fp8": kv_fp8,
        "kv_bf16_kib": kv_bf16 / 1024,
        "kv_fp8_kib": kv_fp8 / 1024,
        "req_bf16_gb": req_bf16_gb,
        "req_fp8_gb": req_fp8_gb,
        "fp8_tflops": g.fp8_dense_tflops,
        "n_dep_k": n_dep // 1024,
        # intermediates for the solution
        "e4m3_max": E4M3_MAX,
        "e4m3_all_codes_max": E4M3_ALL_CODES_MAX,
        "e4m3fnuz_max": E4M3FNUZ_MAX,
        "e5m2_max": E5M2_MAX,
        "min_normal": E4M3_MIN_NORMAL,
        "min_subnormal": E4M3_MIN_SUBNORMAL,
        "normal_range_ratio": E4M3_MAX / E4M3_MIN_NORMAL,
        "normal_range_log2": math.log2(E4M3_MAX / E4M3_MIN_NORMAL),
        "clip_stored": clip_stored,
        "clip_error_pct": 100 * clip_err,
        "clip_lost": amax - clip_stored,
        "round_bound_pct": 100 * ROUND_BOUND,
        "round_reached_pct": 100 * ROUND_WORST_REACHED,
        "bf16_bound_pct": 100 * BF16_ROUND_BOUND,
        "scale": scale,
        "floor_1": floor_1,
        "floor_s": floor_s,
        "zero_1": zero_1,
        "zero_s": zero_s,
        "small_bound_1_pct": 100 * small_bound_1,
        "small_bound_s_pct": 100 * small_bound_s,
        "vllm_k_constant": VLLM_K_SCALE_CONSTANT,
        "vllm_scale": vllm_scale,
        "vllm_headroom": vllm_headroom,
        "sample_table": table,
        "root_eval": math.sqrt(2 * math.log(n_eval)),
        "root_dep": math.sqrt(2 * math.log(n_dep)),
        "ln_eval": math.log(n_eval),
        "ln_dep": math.log(n_dep),
        "ceiling_eval": c_eval,
        "ceiling_dep": c_dep,
        "ceiling_rise_value": rise,
        "distractor_ratio": n_dep / n_eval,
        "exact_eval": expected_max(n_eval),
        "exact_dep": expected_max(n_dep),
        "exact_rise": sigma * (expected_max(n_dep) - expected_max(n_eval)),
    }
    s["why_long"] = _model_answer(p, s)
    return s


SCALE_EFFECT = ("same_rounding", "outlier_fixed", "small_underflow")

CEILING_FORMULA = "sigma*sqrt(2*ln(N))"

def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        "**Rounding.** E4M3 is floating point: the step between neighbours is proportional to the "
        "value (three mantissa bits, so a step is 1/8 of the binade's lower edge), and round to "
        "nearest is off by at most 2^-4 = 6.25 % of the value anywhere in the normal range. "
        "Dividing by a scale only moves a key to another binade, where the relative step is the "
        "same. For the bulk of the keys any reasonable scale gives the same error, which is why a "
        "short eval with scale 1.0 looks clean.\n\n"
        "**Clipping.** Above 448 × scale there is no step at all: the conversion saturates and the "
        f"error is whatever the excess was ({p['amax']:,} becomes {s['clip_stored']:g}, "
        f"{s['clip_error_pct']:.0f} % low). That error is systematic, not noise, and it lands on "
        "the largest keys, the outlier channels and special tokens that decide where attention "
        "goes. A scale that is too large has the opposite, milder cost: small keys fall into the "
        "subnormal range and, below about 2^-10 × scale, to zero. So the scale must cover the real "
        "amax with headroom (calibrated on representative long inputs, per head where the backend "
        "supports it) rather than be left at 1.0.\n\n"
        "**Why long contexts.** Key errors put noise on every attention logit. Finding one needle "
        "means its logit must beat the largest of N noisy distractors, and that maximum grows like "
        f"σ·sqrt(2 ln N): with σ = {p['sigma']:g} the ceiling rises from {s['ceiling_eval']:.2f} "
        f"at {p['n_eval']:,} tokens to {s['ceiling_dep']:.2f} at {p['n_dep']:,}, "
        f"{s['ceiling_rise_value']:.2f} logits of margin gone with the same keys and the same "
        "noise, and the many extra distractors also take more of the softmax mass. Value errors "
        "average out over many tokens; key errors move attention to the wrong token. The failure "
        "shows up as long-context retrieval misses, so the gate before shipping is a needle or "
        "RULER-style eval at the deployed length, FP8 against BF16, plus per-layer amax and clip "
        "counts."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    amax, sigma, n_eval, n_dep = p["amax"], p["sigma"], p["n_eval"], p["n_dep"]
    out: list[Mistake] = []

    # A value the grader accepts is not a mistake, and one inside another mistake's band
    # would make the feedback a coin toss: skip both (drop) for this variant.
    add = Slips(s, TOLERANCE, out, accept=_close, merge_floor=1e-9, drop=True).add

    add("clip_threshold", E4M3FNUZ_MAX,
        "240 is the largest value of E4M3FNUZ, the AMD variant (bias 8); older vLLM docs quote "
        "±240 for E4M3. NVIDIA's E4M3FN reaches 1.75 × 2^8 = 448.", "fnuz", kind="wrong_precision")
    add("clip_threshold", E4M3_ALL_CODES_MAX,
        "1.875 × 2^8 = 480 would need the code S.1111.111, which E4M3FN reserves for NaN. The "
        "largest finite value is 1.75 × 2^8 = 448.", "nan_code", kind="wrong_precision")
    add("clip_threshold", E5M2_MAX,
        "57,344 is the largest E5M2 value (5 exponent bits). The KV cache here is E4M3.", "e5m2",
        kind="wrong_precision")
    add("clip_threshold", INT8_MAX,
        "127 is the INT8 limit. E4M3 is a floating-point format: its largest finite value is "
        "1.75 × 2^8 = 448.", "int8", kind="wrong_precision")

    add("clip_error", 100 * ROUND_BOUND,
        "That is the rounding bound, which only holds inside the range. "
        f"{amax:,} is above the largest finite E4M3 value (part 1), so it is clipped, not "
        f"rounded: the error is ({amax:,} − that largest value) / {amax:,}.",
        "rounding_bound", kind="wrong_precision")
    add("clip_error", 100 * (amax - E4M3_MAX) / E4M3_MAX,
        "You divided the loss by the stored value, the clip threshold of part 1. The relative "
        f"error is measured against the true value: divide by {amax:,}.", "wrong_denominator",
        kind="inverted")
    add("clip_error", 100 * (amax - E4M3FNUZ_MAX) / amax,
        "You clipped at 240, the E4M3FNUZ (AMD) limit (bias 8). This cache is E4M3FN (bias 7), "
        "which saturates higher: at its largest finite value, part 1.", "fnuz",
        kind="wrong_precision")
    add("clip_error", 100 * E4M3_MAX / amax,
        f"That is the fraction of the key that survives (the clip threshold over {amax:,}). The "
        "error is the part that is lost: one minus it.", "kept_fraction", kind="inverted")

    add("round_bound", 100 * 2 * ROUND_BOUND,
        "12.5 % is a whole step (2^-3). Round to nearest is off by at most half a step, 2^-4. "
        "(12.5 % is also E5M2's bound, with its 2 mantissa bits.)", "whole_step",
        kind="wrong_precision")
    add("round_bound", 100 * ROUND_BOUND / 2,
        "3.125 % = 2^-5 would need 4 stored mantissa bits. E4M3 stores 3 (the leading 1 is "
        "implicit), so the bound is 2^-4.", "four_bits", kind="wrong_precision")
    add("round_bound", 100 * BF16_ROUND_BOUND,
        "0.39 % = 2^-8 is BF16's bound (7 mantissa bits). E4M3 has 3: 2^-4 = 6.25 %.", "bf16",
        kind="wrong_precision")

    rise = s["ceiling_rise"].value
    add("ceiling_rise", sigma * (math.sqrt(math.log(n_dep)) - math.sqrt(math.log(n_eval))),
        "You dropped the 2: the estimate is σ·sqrt(2 ln N), not σ·sqrt(ln N).", "no_two",
        kind="mean_vs_tail")
    add("ceiling_rise",
        sigma * (math.sqrt(2 * math.log10(n_dep)) - math.sqrt(2 * math.log10(n_eval))),
        "You used log10. The Gaussian tail gives the natural log: σ·sqrt(2 ln N).", "log10",
        kind="mean_vs_tail")
    add("ceiling_rise", s["ceiling_dep"],
        f"That is the whole ceiling at {n_dep:,} tokens. The question asks how much higher it is "
        f"than at {n_eval:,}: subtract σ·sqrt(2 ln {n_eval:,}).", "no_subtraction",
        kind="wrong_scope")
    add("ceiling_rise", sigma * math.sqrt(2 * math.log(n_dep / n_eval)),
        "You took σ·sqrt(2 ln(N_dep / N_eval)). The square root does not split over a ratio: "
        "compute each ceiling, then subtract.", "ratio_inside", kind="mean_vs_tail")
    add("ceiling_rise", rise / sigma,
        f"That is in units of σ. Multiply by σ = {sigma:g} logits.", "no_sigma", kind="unit_slip")

    out += [
        Mistake("ceiling_formula", "sigma*sqrt(ln(N))",
                "Missing the 2: P(noise > t) ≈ exp(−t²/2σ²), and setting N times that to 1 gives "
                "t = σ·sqrt(2 ln N).", "no_two", kind="mean_vs_tail"),
        Mistake("ceiling_formula", "sigma*sqrt(N)",
                "sqrt(N) is how a SUM of N noises grows. The MAXIMUM grows much more slowly, like "
                "σ·sqrt(2 ln N).", "sqrt_n", kind="mean_vs_tail"),
        Mistake("ceiling_formula", "sigma*ln(N)",
                "The maximum grows like the square root of ln N, not ln N itself: "
                "σ·sqrt(2 ln N).", "ln_n", kind="mean_vs_tail"),
        Mistake("ceiling_formula", "sqrt(2*ln(N))",
                "That is in units of σ; the ceiling in logits is σ·sqrt(2 ln N).", "no_sigma",
                kind="unit_slip"),
    ]
    out += [
        Mistake("scale_effect", [*SCALE_EFFECT, "finer_grid"],
                "The grid is not finer. Dividing by a scale above 1 shifts keys to lower binades, "
                "where the step relative to the value is the same 2^-3; in absolute terms each "
                "key's step is about the same as before.", "finer_grid", kind="wrong_precision"),
        Mistake("scale_effect", ["same_rounding", "outlier_fixed"],
                "A larger scale has a price: keys below 2^-6 × scale become subnormals and lose "
                "relative precision, and the smallest round to zero.", "no_underflow",
                kind="wrong_precision"),
        Mistake("scale_effect", [*SCALE_EFFECT, "future_safe"],
                "The scale covers the amax of the calibration data only. Longer or different "
                "inputs can exceed it (vLLM's on-the-fly scale is computed once, from the first "
                "batch), which is why engines leave headroom.", "future_safe", kind="mean_vs_tail"),
        Mistake("scale_effect", [*SCALE_EFFECT, "int8_same"],
                "INT8 is the opposite case: its step is the same absolute size for every value, "
                "so the scale sets the precision of every key, not only the largest.", "int8",
                kind="wrong_precision"),
    ]
    return out


def _close(a: float, b: float, rel: float) -> bool:
    """Relative to `b`; unlike slips.within, a zero tolerance still forgives float noise."""
    if rel == 0:
        return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0)
    return abs(a - b) <= rel * abs(b)


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    m = model(p["model"])
    # "on H100 GPUs": no count and no weight precision, so one node and the least precision.
    return [
        Fits("weights and one deployed-context request's FP8 KV", p["gpu"], NODE_GPUS,
             m.weight_bytes(UNSTATED_WEIGHT_BYTES) + m.kv_bytes_for_tokens(p["n_dep"], 1)),
        WithinContext(p["model"], p["n_dep"], "the deployed context"),
        Holds(p["n_eval"] < p["n_dep"], "the eval prompts are shorter than the deployed context"),
        Holds(gpu(p["gpu"]).fp8_dense_tflops is not None, f"{p['gpu']} has FP8 tensor cores"),
    ]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {"ceiling_formula": {"sigma": p["sigma"], "N": p["n_dep"]}}
