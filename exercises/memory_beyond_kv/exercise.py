"""Q44: the other few gigabytes: memory beyond the weights and the KV cache.

A vLLM deployment (one model on `tp` GPUs, tensor parallel) reports its start-up ledger: weights,
the profile run's activation peak, memory allocated outside PyTorch, and an estimate of the CUDA
graphs' memory. The parts size the two largest tensors of the profile run from first principles
(the fused gate+up output of one MLP over the step's tokens, and the sampler's FP32 logits), close
the ledger to the KV pool, price the "other" memory in KV tokens, sort what vLLM measures from what
it estimates or never sees, and ask where an OOM comes from when the sum looks fine.

Conventions (stated in the statement): GPU memory is the total the driver reports (the catalog's
hbm_driver_total_mib, shown to 0.01 GB), which is what vLLM multiplies by gpu_memory_utilization
(the Q44 notes use 80 GiB, see the tests); the build
estimates CUDA-graph memory and subtracts it (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1).
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import model
from exercises.deployment import deployment
from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Fits
from exercises.slips import Slips, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

KV_DTYPE_BYTES = 2  # BF16 KV cache
ACT_BYTES = 2  # BF16 activations
LOGIT_BYTES = 4  # vLLM's sampler casts the logits to FP32 (Sampler.forward)
# Bytes per (request, vocabulary entry) the dummy sampler pass plausibly holds at its peak: the
# BF16 logits (2), their FP32 copy (4), a sort for top-k/top-p (4 for values, 8 for int64 indices),
# softmax probabilities and their cumulative sum (4 + 4). A rough figure, used only to make the
# variants' "measured" activation peaks plausible and in the solution's commentary.
SAMPLER_BYTES_PER_ENTRY = 2 + 4 + 4 + 8 + 4 + 4

# Dense GQA/MHA models only: the fused gate+up tensor of part 1 is a dense MLP's (an MoE layer's
# intermediate is shaped differently). (model, GPU, tp, bytes per weight); all fit with room for KV.
DEPLOYMENTS: tuple[tuple[str, str, int, int], ...] = (
    ("Llama-3.1-8B", "H100 SXM", 1, 2),
    ("Llama-3.1-8B", "A100 SXM 80GB", 1, 2),
    ("Llama-3.1-8B", "H200 SXM", 1, 2),
    ("Llama-3.1-8B", "B200", 1, 2),
    ("Llama-2-7B", "H100 SXM", 1, 2),
    ("Llama-2-7B", "A100 SXM 80GB", 1, 2),
    ("Llama-3.1-70B", "H100 SXM", 4, 2),
    ("Llama-3.1-70B", "H100 SXM", 8, 2),
    ("Llama-3.1-70B", "H100 SXM", 2, 1),
    ("Llama-3.1-70B", "H200 SXM", 2, 2),
    ("Llama-3.1-70B", "H200 SXM", 4, 2),
    ("Llama-3.1-70B", "B200", 2, 2),
    ("Llama-3.1-70B", "A100 SXM 80GB", 8, 2),
    ("Qwen2.5-72B", "H100 SXM", 4, 2),
    ("Qwen2.5-72B", "H100 SXM", 8, 2),
    ("Qwen2.5-72B", "H200 SXM", 4, 2),
    ("Llama-3.1-405B", "H100 SXM", 8, 1),
    ("Llama-3.1-405B", "H200 SXM", 8, 1),
    ("Llama-3.1-405B", "B200", 8, 1),
)
UTILS = (0.85, 0.9, 0.92, 0.95)
BATCHED_TOKENS = (2048, 4096, 8192, 16384)  # --max-num-batched-tokens
MAX_SEQS = (128, 256, 512, 1024)  # --max-num-seqs
NONTORCH_GB = (0.5, 1.0, 1.5)
GRAPHS_GB = (0.25, 0.5, 0.75, 1.0)

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-8B",
    "gpu": "H100 SXM",
    "tp": 1,
    "weight_bytes": 2,
    "util": 0.9,
    "max_batched": 8192,  # vLLM's API-server default on a >= 70 GiB GPU that is not an A100
    "max_seqs": 1024,  # likewise
    "act_gb": 4.0,  # the profile run's activation peak [A, research notes Q44]
    "nontorch_gb": 1.0,  # [A, research notes Q44]
    "graphs_gb": 0.5,  # the CUDA-graph estimate [A, research notes Q44]
}


# ----------------------------------------------------------------------------------------------
# Pieces of the ledger (pure arithmetic; the tests replay the research notes' ledger with them)


def mlp_peak_bytes(tokens: int, ffn: int, tp: int) -> float:
    """Output of the fused gate+up projection: tokens x (2 x ffn / tp) elements of 2 bytes."""
    return tokens * 2 * ffn / tp * ACT_BYTES


def logits_bytes(rows: int, vocab: int) -> float:
    """The sampler's FP32 logits: one row per request, the full vocabulary on every GPU."""
    return rows * vocab * LOGIT_BYTES


def kv_pool_bytes(hbm_bytes: float, util: float, weights_gpu: float, act: float, nontorch: float,
                  graphs: float) -> float:
    """vLLM: requested (util x total) minus weights, activation peak, non-torch and graphs."""
    return util * hbm_bytes - weights_gpu - act - nontorch - graphs


def profiled_activation_gb(m_name: str, tp: int, max_batched: int, max_seqs: int) -> float:
    """A plausible 'measured' activation peak for a generated variant: the larger of the forward
    pass (gate+up and SiLU outputs plus a few hidden-sized tensors) and the sampler pass, plus
    10 %, rounded up to 0.5 GB. Not a vLLM formula: the statement presents it as a measurement."""
    m = model(m_name)
    forward = max_batched * (3 * m.ffn / tp + 4 * m.hidden) * ACT_BYTES
    sampler = max_seqs * m.vocab * SAMPLER_BYTES_PER_ENTRY
    return math.ceil(max(forward, sampler) * 1.1 / 0.5e9) * 0.5


# ----------------------------------------------------------------------------------------------
# Variants


def _weights_gb(p: dict[str, Any]) -> float:
    # Shown to 0.01 GB; the answers use the shown figure.
    return round(model(p["model"]).weight_bytes(p["weight_bytes"]) / 1e9, 2)


def is_sensible(p: dict[str, Any]) -> bool:
    m = model(p["model"])
    if m.ffn is None or m.is_moe or m.kv_heads % p["tp"]:
        return False
    s = solve(p)
    return (
        s["kv_pool"].value >= 5
        # the measured peak really contains the two tensors the parts compute
        and p["act_gb"] >= s["mlp_peak"].value + s["logits"].value
        and p["max_seqs"] <= p["max_batched"]  # vLLM caps max_num_seqs at the token budget
    )


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        name, gpu_name, tp, wbytes = rng.choice(DEPLOYMENTS)
        batched = rng.choice(BATCHED_TOKENS)
        seqs = rng.choice(MAX_SEQS)
        p = {
            "model": name,
            "gpu": gpu_name,
            "tp": tp,
            "weight_bytes": wbytes,
            "util": rng.choice(UTILS),
            "max_batched": batched,
            "max_seqs": seqs,
            "act_gb": profiled_activation_gb(name, tp, batched, seqs),
            "nontorch_gb": rng.choice(NONTORCH_GB),
            "graphs_gb": rng.choice(GRAPHS_GB),
        }
        return p

    return draw_sensible(rng, draw, is_sensible)


# ----------------------------------------------------------------------------------------------
# The reference

MEASURED = ["weights", "forward_peak", "sampler", "non_torch"]


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m, g, tp = deployment(p)

    mlp = mlp_peak_bytes(p["max_batched"], m.ffn, tp)
    logits = logits_bytes(p["max_seqs"], m.vocab)
    weights_gb = _weights_gb(p)
    weights_gpu_gb = weights_gb / tp
    # vLLM multiplies the total the driver reports (torch.cuda.mem_get_info), not the marketed
    # size: an "80 GB" H100 gives 85.03e9 B. Shown to 0.01 GB; the answers use the shown value.
    total_gb = round(g.hbm_driver_total_bytes / 1e9, 2)
    requested_gb = p["util"] * total_gb
    pool_gb = kv_pool_bytes(total_gb * 1e9, p["util"], weights_gpu_gb * 1e9, p["act_gb"] * 1e9,
                            p["nontorch_gb"] * 1e9, p["graphs_gb"] * 1e9) / 1e9
    other_gb = p["act_gb"] + p["nontorch_gb"] + p["graphs_gb"]
    kv_gpu = m.kv_bytes_per_token_per_gpu(tp, KV_DTYPE_BYTES)
    other_tokens = other_gb * 1e9 / kv_gpu
    pool_tokens = pool_gb * 1e9 / kv_gpu

    # What the profile never saw: prompt logprobs for a whole prefill chunk (FP32 logits for every
    # token of the step), and the sampler's working set at max_num_seqs rows (rough).
    prompt_logprobs = logits_bytes(p["max_batched"], m.vocab)
    sampler_est = p["max_seqs"] * m.vocab * SAMPLER_BYTES_PER_ENTRY

    single = tp == 1
    s: dict[str, Any] = {
        # part answers
        "mlp_peak": Quantity(mlp / 1e9, "GB"),
        "logits": Quantity(logits / 1e9, "GB"),
        "kv_pool": Quantity(pool_gb, "GB"),
        "other_tokens": Quantity(other_tokens, "token"),
        "measured": list(MEASURED),
        # givens the statement prints
        "layers": m.layers,
        "hidden": m.hidden,
        "ffn": m.ffn,
        "vocab": m.vocab,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "attention": m.attention.upper(),
        "weights_gb": weights_gb,
        "weight_dtype": "FP8" if p["weight_bytes"] == 1 else "BF16",
        "hbm_gb": g.hbm_gb,
        "total_gb": total_gb,
        "total_gib": total_gb * 1e9 / 2**30,
        "total_mib": g.hbm_driver_total_mib,
        "util_pct": p["util"] * 100,
        "setup": (f"one {p['gpu']}" if single else
                  f"{tp} × {p['gpu']}, tensor parallel across all of them (TP{tp})"),
        "weights_note": ("All the weights sit on the one GPU." if single else
                         f"Weights are split evenly over the {tp} GPUs."),
        # intermediates for the solution
        "spread_note": ("With one GPU there is nothing to share: the tokens are simply the pool's."
                        if single else
                        f"Every token lives on all {tp} GPUs at once, each holding its share, so "
                        "the tokens are counted once for the whole deployment, not once per GPU."),
        "ffn_gpu": m.ffn // tp if m.ffn % tp == 0 else m.ffn / tp,
        "mlp_mb": mlp / 1e6,
        "logits_mb": logits / 1e6,
        "two_tensors_gb": (mlp + logits) / 1e9,
        "two_tensors_pct": (mlp + logits) / (p["act_gb"] * 1e9) * 100,
        "sampler_est_gb": sampler_est / 1e9,
        "sampler_bytes_per_entry": SAMPLER_BYTES_PER_ENTRY,
        "weights_gpu_gb": weights_gpu_gb,
        "requested_gb": requested_gb,
        "outside_gb": total_gb - requested_gb,
        "other_gb": other_gb,
        "other_pct_of_pool": other_gb / pool_gb * 100,
        "kv_gpu": kv_gpu,
        "kv_gpu_kib": kv_gpu / 1024,
        "pool_tokens": pool_tokens,
        "prompt_logprobs_gb": prompt_logprobs / 1e9,
        "weights_plus_kv_gb": weights_gpu_gb + pool_gb,
    }
    s["oom"] = _model_answer(p, s)
    return s


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        "First, which memory the ledger never covered. gpu_memory_utilization is a share of the "
        f"GPU's total memory, so the {s['outside_gb']:.1f} GB above it must hold the CUDA context, "
        "communicator buffers set up before the profile, CUDA graphs in builds that do not budget "
        "them, and any other process on the GPU (a second engine, a monitoring agent); another "
        "tenant there is the classic 'numbers add up, still OOM'. Second, peaks the profile run "
        "never produced: it measured one dummy step and one dummy sampler pass, so prompt logprobs "
        f"over a {p['max_batched']:,}-token chunk ({s['prompt_logprobs_gb']:.1f} GB of FP32 "
        "logits), n > 1 or beam search, structured-output masks, larger images, LoRA adapters or a "
        "draft model loaded later all come on top. Third, things that grow with time: "
        "communicators created lazily (expert load balancing, data-parallel sync), allocator "
        "fragmentation over hours of varied shapes, leaks. Fourth, one rank can need more than the "
        "others while every rank gets the same block count. I would find the phase (start-up, graph "
        "capture, first odd request, hours later) and the rank from the logs and nvidia-smi, then "
        "fix the cause: lower the utilisation or pin kv_cache_memory_bytes, cap max_num_seqs or "
        "the batch token budget, turn the graph estimate on, set expandable segments against "
        "fragmentation, and keep other processes off the GPU."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m, g, tp = deployment(p)
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, skip=nonpositive).add

    # -- mlp_peak ------------------------------------------------------------------------------------
    mlp = s["mlp_peak"].value
    add("mlp_peak", mlp / 2,
        "Half the reference: gate and up are one fused matmul, so its output is 2 × ffn wide.",
        "gate_only", kind="miscounted_term")
    add("mlp_peak", mlp * tp,
        f"That is the whole MLP. The gate+up projection is column-parallel: each of the {tp} GPUs "
        f"computes ffn/{tp} of it.", "no_tp", kind="forgot_tp")
    add("mlp_peak", mlp * 2, "Twice the reference: activations are BF16, 2 bytes each.", "fp32",
        kind="wrong_precision")
    add("mlp_peak", p["max_batched"] * 2 * m.hidden / tp * ACT_BYTES / 1e9,
        f"You used the hidden size ({m.hidden:,}); the gate+up output is ffn = {m.ffn:,} wide "
        "per half.", "hidden", kind="misread_mechanism")
    add("mlp_peak", p["max_seqs"] * 2 * m.ffn / tp * ACT_BYTES / 1e9,
        f"The forward pass of the profile run processes max_num_batched_tokens = "
        f"{p['max_batched']:,} tokens, not max_num_seqs = {p['max_seqs']:,}.", "seqs_not_tokens",
        kind="wrong_scope")

    # -- logits ----------------------------------------------------------------------------------------
    lg = s["logits"].value
    add("logits", lg / 2,
        "Half the reference: the sampler casts the logits to FP32 (4 bytes), not BF16.", "bf16",
        kind="wrong_precision")
    add("logits", lg / tp,
        f"The LM head is split over the {tp} GPUs, but its output is gathered: every GPU ends up "
        "with logits over the whole vocabulary.", "split_vocab", kind="forgot_tp")
    add("logits", p["max_batched"] * m.vocab * LOGIT_BYTES / 1e9,
        f"One row per request ({p['max_seqs']:,}), not per token: the sampler sees each request's "
        f"last position only. Logits for all {p['max_batched']:,} tokens are what prompt logprobs "
        "need, and that is not in the profile.", "rows_per_token", kind="wrong_scope")
    add("logits", p["max_seqs"] * m.hidden * LOGIT_BYTES / 1e9,
        f"Logits are vocabulary-wide ({m.vocab:,}), not hidden-size wide.", "hidden",
        kind="misread_mechanism")

    # -- kv_pool --------------------------------------------------------------------------------------
    pool = s["kv_pool"].value
    w, req = s["weights_gpu_gb"], s["requested_gb"]
    act, nt, gr = p["act_gb"], p["nontorch_gb"], p["graphs_gb"]
    total = s["total_gb"]
    add("kv_pool", total - w - act - nt - gr,
        f"You used all {total:.2f} GB; the engine works inside "
        f"{p['util']} × {total:.2f} = {req:.1f} GB.", "no_util", kind="peak_vs_achievable")
    add("kv_pool", p["util"] * g.hbm_gb - w - act - nt - gr,
        f"You started from the marketed {g.hbm_gb:.0f} GB. vLLM multiplies the total the driver "
        f"reports, {total:.2f} GB.", "marketed", kind="peak_vs_achievable")
    add("kv_pool", pool + gr,
        "This build estimates the CUDA graphs' memory and subtracts it before sizing the pool.",
        "no_graphs", kind="miscounted_term")
    add("kv_pool", req - w,
        f"Weights and KV are not all: the activation peak, non-torch memory and graphs "
        f"({s['other_gb']:.2f} GB) come off first.", "weights_only", kind="miscounted_term")
    add("kv_pool", req - w - s["mlp_peak"].value - s["logits"].value - nt - gr,
        "You subtracted your two tensors instead of the measured activation peak. The profile run "
        "measures the whole peak, which is larger: sort buffers, softmax, attention workspace, "
        "the residual stream.", "estimate_not_measured", kind="misread_mechanism")
    add("kv_pool", p["util"] * (total - w) - act - nt - gr,
        "gpu_memory_utilization multiplies the total memory first; it is not a share of what the "
        "weights leave.", "util_after_weights", kind="peak_vs_achievable")
    add("kv_pool", req - s["weights_gb"] - act - nt - gr,
        f"Each GPU holds 1/{tp} of the weights.", "weights_not_split", kind="forgot_tp")

    # -- other_tokens --------------------------------------------------------------------------------
    kv_gpu = s["kv_gpu"]
    add("other_tokens", (act + nt) * 1e9 / kv_gpu,
        "You left out the CUDA graphs: in this build they are inside the budget too.", "no_graphs",
        kind="miscounted_term")
    add("other_tokens", act * 1e9 / kv_gpu,
        "Only the activation peak: add the non-torch memory and the CUDA-graph estimate.",
        "act_only", kind="miscounted_term")
    add("other_tokens", s["other_gb"] * 1e9 / m.kv_bytes_per_token(KV_DTYPE_BYTES),
        f"You divided one GPU's memory by the whole model's KV per token; a GPU holds only "
        f"{kv_gpu:,} B of each token.", "whole_model_kv", kind="forgot_tp")
    add("other_tokens", (s["other_gb"] + s["outside_gb"]) * 1e9 / kv_gpu,
        f"The {s['outside_gb']:.1f} GB above the utilisation line was never going to be KV; "
        "count only what is inside the budget.", "outside_counted", kind="miscounted_term")
    add("other_tokens", s["other_gb"] * 1e9 / kv_gpu * tp,
        f"Every token lives on all {tp} GPUs at once, so per-GPU memory buys tokens for the "
        "whole deployment once, not once per GPU.", "summed_gpus", kind="forgot_tp")

    # -- measured -------------------------------------------------------------------------------------
    out += [
        Mistake("measured", [*MEASURED, "cuda_graphs"],
                "The CUDA graphs are estimated, not measured: newer builds capture a few graphs on "
                "a throwaway cache and extrapolate; older ones captured them after sizing the pool "
                "and did not budget them at all.", "graphs_measured", kind="misread_mechanism"),
        Mistake("measured", [*MEASURED, "logprobs"],
                "Prompt logprobs are not in the profile: it samples one row per request, while "
                "prompt logprobs need logits for every prompt token of a step.", "logprobs",
                kind="misread_mechanism"),
    ]
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [Fits("weights inside gpu_memory_utilization", p["gpu"], p["tp"],
                 _weights_gb(p) * 1e9, usable=p["util"])]
