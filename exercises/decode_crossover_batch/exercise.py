"""Q02: the batch where decode turns compute-bound, and why it equals the ridge point.

A decode step multiplies every weight matrix by a batch of B token vectors. Each weight is read
once (b_w bytes) and takes part in one multiply-add, 2 FLOPs, per token: 2B FLOPs per b_w bytes.
With BF16 weights (b_w = 2) the arithmetic intensity in FLOP/byte is exactly B, so the batch at
which the step leaves the memory-bound regime is numerically the GPU's ridge point F/BW. That is
the coincidence the question is after. The parts ask for the ridge, the crossover batch, why the
two agree, how another precision moves the crossover (weight bytes and math rate both count), and
what per-sequence KV traffic does to it: the intensity levels off at (2P + 4Lnd_q)/(nκ), which at
ordinary contexts sits below the ridge, so the step never becomes compute-bound at all.

Every hardware and model figure comes from exercises/catalog; every assumption is a key of the
variant, printed by the statement.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Fits, WithinContext, check, slips_show
from exercises.slips import Slips, near, tolerances, unusable
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# The alternative precisions of part 4: (bytes per weight, math precision). W8A16 and W4A16
# dequantize to BF16 and run BF16 tensor cores; W8A8-FP8 and W4A8-FP8 run FP8 tensor cores.
SCHEMES: dict[str, tuple[float, str]] = {
    "W8A16": (1.0, "BF16"),
    "W4A16": (0.5, "BF16"),
    "W8A8-FP8": (1.0, "FP8"),
    "W4A8-FP8": (0.5, "FP8"),
}
SCHEME_TEXT: dict[str, str] = {
    "W8A16": "8-bit weights (1 byte each), dequantized on the fly, math in BF16",
    "W4A16": "4-bit weights (half a byte each), dequantized on the fly, math in BF16",
    "W8A8-FP8": "FP8 weights (1 byte each) and FP8 activations, math on the FP8 tensor cores",
    "W4A8-FP8": "4-bit weights (half a byte each) and FP8 activations, math on the FP8 tensor "
                "cores",
}

GPUS = ("A100 SXM 80GB", "H100 SXM", "H200 SXM", "B200")
MODELS = ("Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B", "Qwen2.5-72B", "Llama-2-7B")
CONTEXTS = (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 16384, 32768)

# Options of the choice parts, as in exercise.toml.
WHY_OPTIONS = ("cancel", "design", "tiles", "kv", "this_gpu")
VERDICT_OPTIONS = ("never", "later", "same", "earlier")

CANONICAL: dict[str, Any] = {
    "gpu": "H100 SXM",
    "model": "Llama-3.1-70B",
    "scheme": "W4A16",
    "context": 4096,  # tokens cached per sequence in part 5
    # GPUs the weights are split over (tensor parallel): 141 GB of BF16 weights need two 80 GB
    # H100s. Every answer is a per-GPU ratio, which the split leaves unchanged.
    "tp": 2,
}
TPS = (1, 2, 4, 8)  # one GPU up to one HGX node
WEIGHT_SHARE = 0.9  # the BF16 weights may take at most this share of the GPUs' HBM


def min_tp(model_name: str, gpu_name: str) -> int | None:
    """The fewest GPUs of one node whose HBM holds the BF16 weights with room to spare."""
    need = model(model_name).weight_bytes(2)
    return next((t for t in TPS if need <= WEIGHT_SHARE * t * gpu(gpu_name).hbm_bytes), None)


# ----------------------------------------------------------------------------------------------
# Variants



def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any] | None:
        g = rng.choice(GPUS)
        schemes = [k for k, (_, math_) in SCHEMES.items()
                   if math_ == "BF16" or gpu(g).fp8_dense_tflops is not None]
        name = rng.choice(MODELS)
        tp = min_tp(name, g)
        if tp is None:  # e.g. Llama-3.1-405B in BF16 needs more than eight A100s or H100s
            return None
        p = {"gpu": g, "model": name, "scheme": rng.choice(schemes),
             "context": rng.choice(CONTEXTS), "tp": tp}
        return p

    return draw_sensible(rng, draw, is_sensible, tries=2000)


def is_sensible(p: dict[str, Any]) -> bool:
    """FP8 math needs FP8 tensor cores, and the context verdict is not a rounding question: the
    limiting intensity is at least 10 % away from the ridge."""
    if check(constraints(p)):  # a story that could not happen: see exercises/feasibility.py
        return False
    _, math_prec = SCHEMES[p["scheme"]]
    if math_prec == "FP8" and gpu(p["gpu"]).fp8_dense_tflops is None:
        return False
    s = solve(p)
    return (abs(math.log(s["context_limit"].value / s["ridge"].value)) >= math.log(1.1)
            # every listed slip is told apart, typed to three figures (graders.policy)
            and slips_show(s, mistakes(p), {"context_limit": TOLERANCE["context_limit"]}))


# ----------------------------------------------------------------------------------------------
# The reference


def crossover_batch(flops: float, bw: float, bytes_per_weight: float) -> float:
    """Weight GEMMs at batch B: 2B FLOPs per weight over `bytes_per_weight` bytes. Setting that
    intensity equal to the ridge flops / bw gives B* = (flops / bw) * bytes_per_weight / 2."""
    return flops / bw * bytes_per_weight / 2


def context_limit(params: float, layers: int, q_dim: int, kappa: float, n: int) -> float:
    """Intensity of a decode step as the batch grows without bound, each sequence holding n
    cached tokens: per token 2P (weights) + 4 L n d_q (QK^T and PV) FLOPs over n * kappa bytes of
    its own KV (the weights' bytes are shared by the batch and vanish in the limit)."""
    return (2 * params + 4 * layers * n * q_dim) / (n * kappa)


def solve(p: dict[str, Any]) -> dict[str, Any]:
    g = gpu(p["gpu"])
    m = model(p["model"])
    n = p["context"]
    bw = g.hbm_bytes_per_s
    f16 = g.bf16_flops
    f8 = g.fp8_flops

    ridge = f16 / bw
    crossover = crossover_batch(f16, bw, 2.0)

    wb, math_prec = SCHEMES[p["scheme"]]
    f_alt = f16 if math_prec == "BF16" else f8
    assert f_alt is not None
    alt = crossover_batch(f_alt, bw, wb)
    ridge_alt = f_alt / bw

    kappa = m.kv_bytes_per_token(2)
    lin_flops = 2 * m.params
    attn_flops = 4 * m.layers * n * m.q_dim
    limit = context_limit(m.params, m.layers, m.q_dim, kappa, n)
    never = limit <= ridge
    # Where the step does cross: B (2P + A) / (2P + B n kappa) = ridge, with A the attention FLOPs.
    if never:
        b_context = math.inf
    else:
        b_context = ridge * 2 * m.params / (lin_flops + attn_flops - ridge * n * kappa)

    s: dict[str, Any] = {
        "ridge": Quantity(ridge, "FLOP/B"),
        "crossover": Quantity(crossover, "token"),
        "why_equal": "cancel",
        "alt_crossover": Quantity(alt, "token"),
        "context_limit": Quantity(limit, "FLOP/B"),
        "context_verdict": "never" if never else "later",
        # givens
        "bf16_tflops": g.bf16_dense_tflops,
        "fp8_tflops_text": (f"{g.fp8_dense_tflops:g} TFLOP/s" if g.fp8_dense_tflops
                            else "none (no FP8 tensor cores)"),
        "hbm_tbps": g.hbm_tbps,
        "params": m.params,
        "params_b": m.params / 1e9,
        "layers": m.layers,
        "q_heads": m.q_heads,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "q_dim": m.q_dim,
        "scheme_text": SCHEME_TEXT[p["scheme"]],
        # intermediates
        "bw_tbps": bw / 1e12,
        "crossover_whole": math.ceil(crossover),
        "weight_bytes": wb,
        "math_prec": math_prec,
        "alt_tflops": f_alt / 1e12,
        "ridge_alt": ridge_alt,
        "alt_ratio": alt / crossover,
        "kappa": kappa,
        "lin_gflop": lin_flops / 1e9,
        "attn_gflop": attn_flops / 1e9,
        "kv_mb": n * kappa / 1e6,
        "attn_share_pct": attn_flops / (lin_flops + attn_flops) * 100,
        "limit_over_ridge": limit / ridge,
        "b_context": b_context,
        "b_context_text": ("no batch, however large, makes the step compute-bound" if never
                           else f"the step crosses only at about {b_context:,.0f} sequences, "
                           f"{b_context / crossover:.1f}× the batch of part 2"),
        "other_ridges_text": "; ".join(
            f"{name}: {gpu(name).ridge_bf16:.0f}" for name in GPUS if name != p["gpu"]),
        "context_word": "below" if never else "above",
        # Context at which the limit meets the ridge: (2P + 4 L n d_q) = ridge n kappa.
        "n_star": (2 * m.params / (ridge * kappa - 4 * m.layers * m.q_dim)
                   if ridge * kappa > 4 * m.layers * m.q_dim else math.inf),
    }
    return s


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    g = gpu(p["gpu"])
    m = model(p["model"])
    n = p["context"]
    bw = g.hbm_bytes_per_s
    f16 = g.bf16_flops
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, accept=near, merge=near, merge_floor=1e-9, skip=unusable).add

    ridge = s["ridge"].value
    add("ridge", 2 * ridge,
        "Twice the reference: that is the sparse BF16 rate (datasheets print it), or the FP8 "
        "rate. The ridge for BF16 work uses the dense BF16 rate.", "sparse",
        kind="peak_vs_achievable")
    add("ridge", bw / f16,
        "Upside down: the ridge is FLOP/s over bytes/s, FLOPs per byte.", "inverted",
        kind="inverted")
    add("ridge", f16 / (g.hbm_gb * 1e9),
        f"You divided by the HBM capacity ({g.hbm_gb:g} GB). The ridge uses the bandwidth, "
        f"{g.hbm_tbps:g} TB/s.", "capacity", kind="misread_mechanism")

    add("crossover", 2 * ridge,
        "Twice the reference: a multiply-add is 2 FLOPs per weight per token, not 1 (or you used "
        "the sparse rate).", "one_flop", kind="flop_counting")
    add("crossover", ridge / 2,
        "Half the reference: a BF16 weight is 2 bytes, so each byte of weight serves B FLOPs, "
        "not 2B.", "one_byte", kind="wrong_precision")
    add("crossover", ridge * m.layers,
        "The layer count cancels: every layer has the same FLOPs-per-byte ratio.", "layers",
        kind="one_layer")

    wb, math_prec = SCHEMES[p["scheme"]]
    alt = s["alt_crossover"].value
    f8 = g.fp8_flops
    add("alt_crossover", s["crossover"].value,
        f"That is the BF16 crossover. {p['scheme']} changes the bytes per weight to {wb:g}"
        + (" and the math rate to FP8" if math_prec == "FP8" else "")
        + ": redo the division.", "unchanged", kind="wrong_precision")
    if math_prec == "FP8":
        add("alt_crossover", crossover_batch(f16, bw, wb),
            "You kept the BF16 math rate. This scheme runs on the FP8 tensor cores, twice as "
            "fast, which doubles the ridge.", "bf16_rate", kind="wrong_precision")
        assert f8 is not None
        add("alt_crossover", crossover_batch(f8, bw, 2.0),
            f"You kept 2 bytes per weight. {p['scheme']} stores {wb:g} byte(s).", "bf16_bytes",
            kind="wrong_precision")
    else:
        add("alt_crossover", crossover_batch(f8 or 2 * f16, bw, wb),
            "Weight-only quantization dequantizes to BF16 before the multiply: the math runs at "
            "the BF16 rate, not the FP8 rate.", "fp8_rate", kind="wrong_precision")
        add("alt_crossover", crossover_batch(f16, bw, 2 * wb),
            f"You doubled the bytes per weight. {p['scheme']} stores {wb:g} byte(s) per weight.",
            "bytes", kind="wrong_precision")
    add("alt_crossover", alt * 4 if wb == 0.5 else alt / 2,
        "Fewer bytes per weight lower the crossover: the same FLOPs come from fewer bytes, so "
        "the step runs out of bandwidth headroom sooner. Check the direction.", "direction",
        kind="inverted")

    kappa = s["kappa"]
    limit = s["context_limit"].value
    add("context_limit", 2 * m.params / (n * kappa),
        f"You left out attention. At {n:,} tokens each token's QK^T and PV add "
        f"4·L·n·d_q = {s['attn_gflop']:.2f} GFLOP to the {s['lin_gflop']:.1f} GFLOP of the "
        "weights.", "no_attention", kind="miscounted_term")
    add("context_limit", limit * 2,
        "Twice the reference: the cache holds K and V, both read every step.", "k_only",
        kind="k_without_v")
    add("context_limit", (2 * m.params + 2 * m.layers * n * m.q_dim) / (n * kappa),
        "Attention at decode is 4·L·n·d_q FLOPs per token: 2·n·d_q for QK^T and 2·n·d_q for PV "
        "in each layer. You counted half.", "half_attention", kind="flop_counting")
    add("context_limit", limit * m.layers,
        "You used one layer's KV per token. Every layer caches its own K and V: "
        f"κ = 2·{m.layers}·{m.kv_heads}·{m.head_dim}·2 B.", "one_layer", kind="one_layer")

    out.append(Mistake(
        "why_equal", "this_gpu",
        "It holds on every GPU: the batch B and the intensity 2B FLOPs / 2 bytes are the same "
        "number whatever F and BW are. Only the value of the ridge changes.", "this_gpu",
        kind="misread_mechanism"))
    out.append(Mistake(
        "why_equal", "kv",
        "The KV cache is left out of part 2 on purpose, and it works against the coincidence: "
        "its bytes grow with the batch and do not batch.", "kv", kind="miscounted_term"))
    wrong_verdict = "later" if s["context_verdict"] == "never" else "never"
    out.append(Mistake(
        "context_verdict", wrong_verdict,
        "Compare the limit the intensity approaches (part 5) with the ridge point (part 1). "
        + ("Below the ridge, no batch is large enough." if s["context_verdict"] == "never"
           else f"Above it, a large enough batch crosses ({s['b_context']:,.0f} sequences)."),
        "wrong_verdict", kind="misread_mechanism"))
    out.append(Mistake(
        "context_verdict", "earlier",
        "Attention adds FLOPs, but each sequence's KV adds bytes that do not batch, and "
        "those win: the intensity at any batch is lower than without context.", "earlier",
        kind="misread_mechanism"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    m = model(p["model"])
    return [
        Fits("BF16 weights (parts 1, 2 and 5)", p["gpu"], p["tp"], m.weight_bytes(2)),
        WithinContext(p["model"], p["context"], "each sequence's cached context"),
    ]
