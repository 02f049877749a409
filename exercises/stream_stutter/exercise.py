"""Q35: the first token comes fast, then the stream stutters.

A decode step is built from bytes: each GPU reads its shard of the weights and of every running
sequence's KV cache, at some fraction of peak bandwidth, plus the step's all-reduces. With chunked
prefill, new prompts are cut into chunks of up to K tokens that ride along in the same steps as the
decodes; a step that carries a chunk also pays the chunk's compute. So every running stream sees
two step lengths: the plain decode step, and the much longer mixed step. That is a bimodal
inter-token-latency histogram, with the slow mode's height set by the chunk size and its weight by
the rate at which prompt tokens arrive. TTFT stays good because new prompts start at once.

The parts: the decode step, the mixed step, the share of inter-token gaps that are slow (enough
to own the p99), which cause gives that shape, the one metric that separates it from the other top
suspect (preemption under KV pressure), and the fixes.

Every hardware and model figure comes from exercises/catalog; every assumption is a key of the
variant, printed by the statement.
"""
from __future__ import annotations

import json
import math
import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.deployment import deployment
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits, WithinContext
from exercises.slips import Slips, near, tolerances, unusable
from exercises.spec import Evidence, Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

PRECISION_BYTES: dict[str, int] = {"BF16": 2, "FP8": 1}

# (model, weight precision, tensor-parallel degree): deployments whose weights and a real batch
# of KV fit each GPU in the catalog.
DEPLOYMENTS: tuple[tuple[str, str, int], ...] = (
    ("Llama-3.1-70B", "FP8", 4),
    ("Llama-3.1-70B", "FP8", 2),
    ("Llama-3.1-70B", "BF16", 4),
    ("Llama-3.1-70B", "BF16", 8),
    ("Qwen2.5-72B", "FP8", 4),
    ("Qwen2.5-72B", "BF16", 8),
    ("Llama-3.1-8B", "BF16", 1),
    ("Llama-3.1-8B", "FP8", 1),
    ("Llama-3.1-8B", "BF16", 2),
)
GPUS = ("H100 SXM", "H200 SXM", "B200")
BATCHES = (16, 24, 32, 48, 64, 96, 128)
CONTEXTS = (1000, 1500, 2000, 3000, 4000, 6000)
ETAS = (0.75, 0.8, 0.85)
AR_US = (8.0, 10.0, 12.0, 13.5, 15.0, 18.0)
CHUNKS = (512, 1024, 2048, 4096)
MFUS = (0.4, 0.5, 0.6)
RATES = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
PROMPTS = (1000, 1500, 2000, 3000, 4000)

CAUSE_OPTIONS = ("prefill_chunks", "preemption", "gc", "bandwidth", "proxy")
METRIC_OPTIONS = ("preemptions", "tokens_per_step", "gpu_util", "ttft", "queue", "hbm_util")

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "precision": "FP8",  # weights; the KV cache is BF16
    "gpu": "H100 SXM",
    "tp": 4,
    "batch": 64,  # running sequences
    "context": 3000,  # mean tokens cached per running sequence
    "eta": 0.8,  # achieved share of peak HBM bandwidth [A]
    "ar_us": 13.5,  # one all-reduce at this batch, measured [A]
    "chunk": 2048,  # prefill tokens per mixed step (the token budget left after decodes)
    "mfu": 0.5,  # of the dense rate at the weights' precision, for the chunk's work [A]
    "rate": 2.0,  # new requests per second
    "prompt": 2000,  # mean prompt tokens
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        name, precision, tp = rng.choice(DEPLOYMENTS)
        return {"model": name, "precision": precision, "gpu": rng.choice(GPUS), "tp": tp,
                **choose(rng, {"batch": BATCHES, "context": CONTEXTS, "eta": ETAS, "ar_us": AR_US,
                               "chunk": CHUNKS, "mfu": MFUS, "rate": RATES, "prompt": PROMPTS})}

    return draw_sensible(rng, draw, is_sensible, tries=5000)


def is_sensible(p: dict[str, Any]) -> bool:
    """Weights and the batch's KV fit each GPU; the chunk step is clearly slower than a decode
    step; enough slow steps to own the p99 but not so many that the server is mostly prefilling."""
    g = gpu(p["gpu"])
    s = solve(p)
    if s["hbm_per_gpu_gb"] > 0.85 * g.hbm_gb:
        return False
    return (
        s["t_mix"].value >= 2.5 * s["t_dec"].value
        and 1.5 <= s["slow_share"].value <= 25
        and s["mixed_busy"] <= 0.5
        and 5 <= s["t_dec"].value <= 60
    )


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    tp, batch, ctx = p["tp"], p["batch"], p["context"]
    wb = PRECISION_BYTES[p["precision"]]

    # -- the decode step, from bytes --------------------------------------------------------------
    weights_gpu = m.params * wb / tp
    kappa = m.kv_bytes_per_token(2)
    kappa_gpu = m.kv_bytes_per_token_per_gpu(tp, 2)
    kv_gpu = batch * ctx * kappa_gpu
    bytes_gpu = weights_gpu + kv_gpu
    bw_eff = g.hbm_bytes_per_s * p["eta"]
    t_mem = bytes_gpu / bw_eff
    allreduces = 2 * m.layers if tp > 1 else 0
    t_comm = allreduces * p["ar_us"] * 1e-6
    t_dec = t_mem + t_comm

    # -- a step that also carries a prefill chunk -------------------------------------------------
    rate_flops = g.fp8_flops if p["precision"] == "FP8" else g.bf16_flops
    assert rate_flops is not None
    chunk_flops_gpu = 2 * m.params * p["chunk"] / tp
    t_chunk = chunk_flops_gpu / (rate_flops * p["mfu"])
    t_mix = t_dec + t_chunk

    # -- how often: prompt tokens arrive at lambda * prompt per second ---------------------------
    prompt_tok_s = p["rate"] * p["prompt"]
    mixed_per_s = prompt_tok_s / p["chunk"]
    mixed_busy = mixed_per_s * t_mix  # share of each second spent in mixed steps
    fast_per_s = (1 - mixed_busy) / t_dec
    share = mixed_per_s / (mixed_per_s + fast_per_s)
    steps_per_s = mixed_per_s + fast_per_s
    mean_itl = 1 / steps_per_s
    # With more than 1 % of gaps slow, the p99 sits in the slow mode.
    p99 = t_mix if share > 0.01 else t_dec

    s: dict[str, Any] = {
        "t_dec": Quantity(t_dec * 1e3, "ms"),
        "t_mix": Quantity(t_mix * 1e3, "ms"),
        "slow_share": Quantity(share * 100, "%"),
        "bimodal_cause": "prefill_chunks",
        "metric": "preemptions",
        # givens
        "params": m.params,
        "layers": m.layers,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "hbm_tbps": g.hbm_tbps,
        "hbm_gb": g.hbm_gb,
        "rate_tflops": rate_flops / 1e12,
        "eta_pct": p["eta"] * 100,
        "mfu_pct": p["mfu"] * 100,
        "weight_bytes": wb,
        "kv_heads_per_gpu": m.kv_heads_per_gpu(tp),
        "tp_text": (f"tensor-parallel across {tp} × {p['gpu']} (TP{tp})" if tp > 1
                    else f"on one {p['gpu']}"),
        "comm_text": (f"two all-reduces per layer, each measured at **{p['ar_us']:g} µs** at "
                      "this batch, one after another" if tp > 1
                      else "none: one GPU has no all-reduces"),
        # intermediates
        "kappa": kappa,
        "kappa_gpu": kappa_gpu,
        "weights_gpu_gb": weights_gpu / 1e9,
        "kv_gpu_gb": kv_gpu / 1e9,
        "bytes_gpu_gb": bytes_gpu / 1e9,
        "hbm_per_gpu_gb": bytes_gpu / 1e9,
        "bw_eff_tbps": bw_eff / 1e12,
        "t_mem_ms": t_mem * 1e3,
        "allreduces": allreduces,
        "t_comm_ms": t_comm * 1e3,
        "chunk_tflop": chunk_flops_gpu / 1e12,
        "t_chunk_ms": t_chunk * 1e3,
        "mix_over_dec": t_mix / t_dec,
        "prompt_tok_s": prompt_tok_s,
        "mixed_per_s": mixed_per_s,
        "mixed_busy": mixed_busy,
        "mixed_busy_pct": mixed_busy * 100,
        "fast_per_s": fast_per_s,
        "steps_per_s": steps_per_s,
        "mean_itl_ms": mean_itl * 1e3,
        "p50_ms": t_dec * 1e3,
        "p99_ms": p99 * 1e3,
        "tok_s_per_stream": steps_per_s,
        "ideal_tok_s": 1 / t_dec,
        # One long reply of 500 tokens: how many stalls it sees on average.
        "stalls_per_500": 500 * share,
    }
    s["fix"] = _model_answer(p, s)
    return s


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"A plain decode step reads the weights and every running sequence's KV from HBM "
        f"({s['bytes_gpu_gb']:.1f} GB per GPU, {s['t_mem_ms']:.1f} ms) plus "
        f"{s['t_comm_ms']:.2f} ms of all-reduces: {s['t_dec'].value:.1f} ms. "
        f"A step that also carries a {p['chunk']:,}-token prefill chunk adds the chunk's compute "
        f"and takes {s['t_mix'].value:.0f} ms, {s['mix_over_dec']:.1f} times as long. "
        "Every running stream sees both step lengths, so the inter-token histogram has two peaks: "
        f"{s['slow_share'].value:.1f} % of steps carry a chunk, more than 1 %, so the p99 "
        f"inter-token gap is the {s['t_mix'].value:.0f} ms chunk step while p50 stays at "
        f"{s['t_dec'].value:.1f} ms. "
        "TTFT still looks good because each new prompt starts at once.\n"
        "To shrink the slow mode: lower the prefill token budget per step (smaller chunks: each "
        "stall is shorter, though there are more of them and TTFT rises a little), or make the "
        "budget SLO-aware so a step never exceeds the inter-token target; give running decodes "
        "priority and cap how many prefills share a step; and at scale, disaggregate prefill "
        "onto its own GPUs so decode steps never carry prompt work. If preemptions are rising "
        "instead, the fix is memory: fewer running sequences, more KV space (FP8 KV, more GPUs), "
        "or admission that reserves room for the outputs."
    )


# ----------------------------------------------------------------------------------------------
# Evidence: ten seconds of steps as a running stream sees them

SCATTER = 0.05  # measured steps spread this far (relative) either side of the model's step times


def _scatter(n: int) -> list[float]:
    """n relative offsets at evenly spaced quantiles of a triangular spread over +-SCATTER, both
    ends included (one step alone sits at the top end): a peak at the model's time."""
    if n == 1:
        return [SCATTER]
    out = []
    for i in range(n):
        q = i / (n - 1)
        out.append(SCATTER * (math.sqrt(2 * q) - 1) if q < 0.5
                   else SCATTER * (1 - math.sqrt(2 * (1 - q))))
    return out


def evidence(p: dict[str, Any]) -> dict[str, Evidence]:
    """The inter-token gaps one running stream saw over ten seconds, built from the variant:
    decode steps of t_dec, and a mixed step of t_mix wherever a chunk fell due, each scattered
    by up to SCATTER the way measured steps are. Deterministic: chunks are spread evenly at the
    variant's rate and the scatter is a fixed spread in an order seeded by the variant, so the
    file matches the parts' numbers. The scatter keeps the two step times out of the plot's
    landmarks (first, last, largest, smallest gap: exercises/evidence_leaks.py): they are the
    centres of the histogram's two peaks, for the student to check parts 1 and 2 against."""
    s = solve(p)
    t_dec, t_mix = s["t_dec"].value, s["t_mix"].value
    period_ms = 1e3 / s["mixed_per_s"]  # one mixed step every so many ms
    mixed: list[bool] = []
    clock, next_chunk = 0.0, period_ms / 2
    while clock < 10_000 and len(mixed) < 5000:
        mixed.append(clock >= next_chunk)
        if mixed[-1]:
            next_chunk += period_ms
        clock += t_mix if mixed[-1] else t_dec
    rng = random.Random(f"stream_stutter itl {json.dumps(p, sort_keys=True)}")
    offsets: dict[bool, list[float]] = {}
    for kind in (False, True):
        offsets[kind] = _scatter(sum(1 for m in mixed if m == kind))
        rng.shuffle(offsets[kind])
        # The first and the last gap sit at the ends of their spread, never at the centre.
        ends = [i for i in (0, len(mixed) - 1) if mixed[i] == kind]
        for j, i in enumerate(ends[:len(offsets[kind])]):
            rank = sum(1 for m in mixed[:i] if m == kind)
            want = offsets[kind].index(max(offsets[kind]) if j == 0 else min(offsets[kind]))
            offsets[kind][rank], offsets[kind][want] = offsets[kind][want], offsets[kind][rank]
    points: list[list[float]] = []
    clock = 0.0
    seen = {False: 0, True: 0}
    for kind in mixed:
        gap = (t_mix if kind else t_dec) * (1 + offsets[kind][seen[kind]])
        seen[kind] += 1
        clock += gap
        points.append([round(clock, 2), round(gap, 2)])
    return {
        "itl": Evidence(
            title="Inter-token gaps of one stream",
            filename="itl_trace.json",
            kind="series",
            data={"x": {"label": "time since the stream started", "unit": "ms"},
                  "series": [{"label": "gap before this token", "unit": "ms",
                              "points": points}],
                  "histogram": ["ms"]},
            caption="Each point is one token of one running stream: when it arrived and how long "
                    "after the previous one.",
        )
    }


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m, g, tp = deployment(p)
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, accept=near, merge=near, merge_floor=1e-9, skip=unusable).add

    t_mem, t_comm = s["t_mem_ms"], s["t_comm_ms"]
    bw_eff = g.hbm_bytes_per_s * p["eta"]
    add("t_dec", t_mem,
        f"You left out communication: {s['allreduces']} all-reduces at {p['ar_us']:g} µs add "
        f"{t_comm:.2f} ms to every step.", "no_comm", kind="miscounted_term")
    add("t_dec", s["weights_gpu_gb"] * 1e9 / bw_eff * 1e3 + t_comm,
        f"You read only the weights. Each step also reads every running sequence's KV: "
        f"{s['kv_gpu_gb']:.2f} GB per GPU here.", "no_kv", kind="miscounted_term")
    add("t_dec", t_mem * p["eta"] + t_comm,
        f"You used the peak bandwidth. The statement says the step achieves "
        f"{s['eta_pct']:.0f} % of it.", "peak_bw", kind="peak_vs_achievable")
    add("t_dec", (s["weights_gpu_gb"] + s["kv_gpu_gb"] * tp) * 1e9 / bw_eff * 1e3 + t_comm,
        f"You gave every GPU the whole KV cache. Under TP{tp} each GPU holds "
        f"{s['kv_heads_per_gpu']} of the {m.kv_heads} KV heads, so 1/{tp} of every token's KV.",
        "kv_not_split", kind="forgot_tp")
    if tp > 1:
        add("t_dec", t_mem + t_comm / 2,
            "One all-reduce per layer is too few: one follows attention and one follows the MLP.",
            "one_ar_per_layer", kind="miscounted_term")
    other_wb = 2 if p["precision"] == "FP8" else 1
    add("t_dec", (m.params * other_wb / tp + s["kv_gpu_gb"] * 1e9) / bw_eff * 1e3 + t_comm,
        f"You sized the weights at {other_wb} byte(s) per parameter. They are "
        f"{p['precision']}: {s['weight_bytes']} byte(s) each (the KV cache stays BF16).",
        "wrong_precision", kind="wrong_precision")

    t_chunk = s["t_chunk_ms"]
    t_dec = s["t_dec"].value
    add("t_mix", t_chunk,
        "That is the chunk alone. The same step still does the decodes for the running batch: "
        "add the decode step to it.", "chunk_only", kind="miscounted_term")
    add("t_mix", t_dec + t_chunk * tp,
        f"The chunk's work is split across the {tp} GPUs too: divide its FLOPs by {tp}.",
        "chunk_not_split", kind="forgot_tp")
    add("t_mix", t_dec + t_chunk * p["mfu"],
        f"You ran the chunk at 100 % of peak. The statement gives {s['mfu_pct']:.0f} % MFU.",
        "no_mfu", kind="peak_vs_achievable")
    other_rate = g.bf16_flops if p["precision"] == "FP8" else (g.fp8_flops or g.bf16_flops * 2)
    add("t_mix", t_dec + 2 * m.params * p["chunk"] / tp / (other_rate * p["mfu"]) * 1e3,
        "You used the wrong tensor rate: the chunk runs at the rate of the weights' precision "
        f"({p['precision']}).", "wrong_rate", kind="wrong_precision")

    mixed = s["mixed_per_s"]
    add("slow_share", mixed * s["t_mix"].value / 1e3 * 100,
        "That is the share of TIME spent in mixed steps. The question counts gaps (one per step "
        "per stream), and fast steps are many more per second.", "time_share", kind="mean_vs_tail")
    add("slow_share", mixed / (1e3 / t_dec) * 100,
        "You counted fast steps as if the whole second were decode. Mixed steps take their "
        "time out of the second first.", "no_subtraction", kind="miscounted_term")
    add("slow_share", p["rate"] / (p["rate"] + s["fast_per_s"]) * 100,
        "You counted one mixed step per request. A prompt of "
        f"{p['prompt']:,} tokens spreads over prompt/chunk = {p['prompt'] / p['chunk']:.2f} "
        "chunks: count prompt tokens per second over the chunk size.", "per_request",
        kind="wrong_scope")

    out.append(Mistake(
        "bimodal_cause", "preemption",
        "Preemption hurts a few victims badly (their stream stops for the whole recompute), "
        "which is a long thin tail, not a second peak every stream shares.", "preemption",
        kind="mean_vs_tail"))
    out.append(Mistake(
        "bimodal_cause", "bandwidth",
        "Too many bytes per step slows every step alike: the whole histogram shifts right and "
        "stays one peak.", "bandwidth", kind="misread_mechanism"))
    out.append(Mistake(
        "metric", "tokens_per_step",
        "Tokens per step confirms that slow steps carry prefill-sized work, but a preempted "
        "request is recomputed with a prefill too, so both causes put large token counts in the "
        "slow steps. The preemption counter is zero under pure interference and climbs under KV "
        "pressure.", "tokens_per_step", kind="misread_mechanism"))
    out.append(Mistake(
        "metric", "ttft",
        "TTFT is good in both cases (that is the symptom); it cannot tell them apart.", "ttft",
        kind="misread_mechanism"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    s = solve(p)
    return [
        Fits("weights and the batch's KV, per GPU", p["gpu"], 1, s["hbm_per_gpu_gb"] * 1e9),
        WithinContext(p["model"], p["context"], "a running sequence's context"),
        WithinContext(p["model"], p["prompt"], "a new prompt"),
    ]
