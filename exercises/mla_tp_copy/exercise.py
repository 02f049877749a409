"""Q22: MLA under tensor parallelism, the silent tp-fold copy of the KV cache.

Tensor parallelism splits a GQA cache by KV head. MLA caches one latent row per token that every
query head reads, so each TP rank (running 1/tp of the heads) needs the whole row: every GPU stores
the same cache, and the node holds only one GPU's worth of tokens. The parts measure that on a
DeepSeek-V3 deployment (the KV space per GPU, the node's token capacity, the HBM spent on copies)
and price the fix, data-parallel attention: every GPU keeps all attention weights (the extra GB per
GPU), and each request's latent lives on one GPU only (the new capacity). Then the non-memory costs
(a multi-select) and a recommendation (text).

Capacity convention (research notes facts-q01-q25 §0.3 and Appendix E point 1): HBM is the
marketed size read as 10^9 bytes, times the engine's memory-utilisation fraction. The FP8
checkpoint's size is computed here from the catalog's config: every linear layer in FP8 (1 B) with
one FP32 scale per 128 x 128 block, the embedding, LM head, routers and norm vectors in BF16; the
MTP module is not loaded. That gives 673.15 GB. Under TP engines split it by head except MLA's
down-projections q_a and kv_a (0.92 GB over all layers), which vLLM and SGLang keep whole on every
rank (the catalog's tp_replicates_latent_proj): 85.0 GB per GPU at TP8, not 673.15 / 8 = 84.1.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits, Holds, slips_show
from exercises.slips import Slips, near, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

MODEL = "DeepSeek-V3"
KV_DTYPE_BYTES = 2  # the latent cached in BF16
FP8_BLOCK = 128  # DeepSeek-V3's FP8 checkpoint: one FP32 scale per 128 x 128 weight block
SCALE_BYTES = 4

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# (GPU, GPUs in the deployment = TP degree). DeepSeek-V3's FP8 weights need more than 8 x 80 GB,
# so H100 appears only as a two-node TP16 deployment.
DEPLOYMENTS: tuple[tuple[str, int], ...] = (
    ("H200 SXM", 8),
    ("B200", 8),
    ("H100 SXM", 16),
    ("H200 SXM", 16),
)
# The engine's memory fraction, in steps of 0.01: vLLM's gpu_memory_utilization (0.9 default,
# 0.95 where the batch is memory-bound), SGLang's mem_fraction_static (about 0.8 to 0.88 on
# large-TP deployments).
MEM_UTILS = tuple(round(0.80 + 0.01 * i, 2) for i in range(16))
# Activations, CUDA graphs and workspace per GPU [A]: 3 to 8 GB in steps of 0.5 GB. A whole
# number is kept an int, so the statement shows "5 GB", not "5.0 GB".
RESERVES_GB: tuple[float, ...] = tuple(int(x) if x.is_integer() else x
                                       for x in (3 + 0.5 * i for i in range(11)))

CANONICAL: dict[str, Any] = {
    "gpu": "H200 SXM",
    "tp": 8,
    "mem_util": 0.9,
    "reserve_gb": 5,
}

FIX_COSTS = ["weights", "imbalance", "collectives", "latency"]


# ----------------------------------------------------------------------------------------------
# Weights from the config


def _linear_shapes() -> dict[str, list[tuple[int, int]]]:
    """(out, in) of every FP8 linear layer, per kind: attention per layer, dense MLP per layer,
    one expert."""
    m = model(MODEL)
    assert m.q_lora_rank and m.kv_lora_rank and m.qk_rope_head_dim and m.qk_nope_head_dim
    assert m.v_head_dim and m.ffn and m.moe_ffn
    h, qk = m.hidden, m.qk_nope_head_dim + m.qk_rope_head_dim
    return {
        "attention": [
            (m.q_lora_rank, h),  # q_a
            (m.q_heads * qk, m.q_lora_rank),  # q_b
            (m.kv_lora_rank + m.qk_rope_head_dim, h),  # kv_a (latent + RoPE key)
            (m.q_heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank),  # kv_b
            (h, m.q_heads * m.v_head_dim),  # o
        ],
        "dense": [(m.ffn, h), (m.ffn, h), (h, m.ffn)],
        "expert": [(m.moe_ffn, h), (m.moe_ffn, h), (h, m.moe_ffn)],
    }


def _fp8_bytes(shapes: list[tuple[int, int]]) -> int:
    # 1 byte per weight plus one FP32 scale per (partial) 128 x 128 block.
    return sum(o * i + math.ceil(o / FP8_BLOCK) * math.ceil(i / FP8_BLOCK) * SCALE_BYTES
               for o, i in shapes)


def checkpoint_bytes() -> int:
    """The FP8 checkpoint of the main model (MTP module not loaded): 673,150,582,112 B."""
    m = model(MODEL)
    shapes = _linear_shapes()
    experts = (m.n_routed_experts or 0) + (m.n_shared_experts or 0)
    fp8 = (m.layers * _fp8_bytes(shapes["attention"])
           + m.dense_layers * _fp8_bytes(shapes["dense"])
           + m.moe_layers * experts * _fp8_bytes(shapes["expert"]))
    # Embedding, LM head, routers (and their correction bias) and norm vectors stay in BF16.
    bf16_params = (m.embedding_params + m.moe_layers * m.router_params_per_layer
                   + m.norm_params)
    return fp8 + 2 * bf16_params


def attention_bytes() -> int:
    """All 61 layers' attention projections in FP8 with their scales: 11,416,215,392 B."""
    m = model(MODEL)
    return m.layers * _fp8_bytes(_linear_shapes()["attention"])


def replicated_bytes() -> int:
    """What every tensor-parallel rank holds whole: MLA's down-projections q_a (hidden ->
    q_lora_rank) and kv_a (hidden -> kv_lora_rank + rope) of all layers, FP8 with their scales,
    923,700,064 B. vLLM and SGLang build them as ReplicatedLinear (catalog:
    tp_replicates_latent_proj); 0 for a model whose engines split them."""
    m = model(MODEL)
    if not m.tp_replicates_latent_proj:
        return 0
    q_a, _, kv_a, _, _ = _linear_shapes()["attention"]
    assert q_a[0] * q_a[1] + kv_a[0] * kv_a[1] == m.latent_proj_params_per_layer
    return m.layers * _fp8_bytes([q_a, kv_a])


def weights_per_gpu_bytes(tp: int) -> float:
    """The checkpoint on one GPU at TP `tp`: everything split `tp` ways except the replicated
    down-projections (DeepSeek-V3 at TP8: 84.95e9 B)."""
    whole = replicated_bytes()
    return (checkpoint_bytes() - whole) / tp + whole


# ----------------------------------------------------------------------------------------------
# Variants



def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        g, tp = rng.choice(DEPLOYMENTS)
        return {"gpu": g, "tp": tp, **choose(rng, {"mem_util": MEM_UTILS, "reserve_gb": RESERVES_GB})}

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    """Both layouts leave a real KV pool (at least 5 GB per GPU) and DP attention wins."""
    s = solve(p)
    if s["kv_space"].value < 10 or s["dp_kv_gb"] < 5:
        return False
    if s["gain"] < 2:
        return False
    ms = mistakes(p)
    # every listed slip of kv_space is told apart, typed to three figures (graders.policy)
    return (all(sum(m.part == part for m in ms) >= 2 for part in TOLERANCE)
            and slips_show(s, ms, {"kv_space": TOLERANCE["kv_space"]}))


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(MODEL)
    g = gpu(p["gpu"])
    tp, util, reserve = p["tp"], p["mem_util"], p["reserve_gb"]
    assert m.kv_lora_rank is not None and m.qk_rope_head_dim is not None

    # Displayed figures, rounded as the statement shows them; the answers use these.
    ckpt_gb = round(checkpoint_bytes() / 1e9)
    w_gpu = round(weights_per_gpu_bytes(tp) / 1e9, 1)
    attn_gb = round(attention_bytes() / 1e9, 2)
    repl_gb = round(replicated_bytes() / 1e9, 2)  # q_a + kv_a: already whole on every GPU

    kappa = m.kv_bytes_per_token(KV_DTYPE_BYTES)  # 70,272 B: the full latent, every layer
    kappa_gpu = m.kv_bytes_per_token_per_gpu(tp, KV_DTYPE_BYTES)  # the same: MLA does not split
    assert kappa_gpu == kappa

    usable = g.hbm_gb * util
    kv_gb = usable - w_gpu - reserve
    tokens_gpu = kv_gb * 1e9 / kappa
    tp_tokens = tokens_gpu  # every GPU holds the same tokens: the deployment holds one GPU's worth
    node_kv_gb = tp * kv_gb
    waste_gb = (tp - 1) * kv_gb
    waste_pct = (tp - 1) / tp * 100

    # All attention weights instead of 1/tp of the split ones; q_a and kv_a were already whole.
    dp_extra = (attn_gb - repl_gb) * (tp - 1) / tp
    dp_w_gpu = w_gpu + dp_extra
    dp_kv_gb = kv_gb - dp_extra
    dp_tokens_gpu = dp_kv_gb * 1e9 / kappa
    dp_tokens = tp * dp_tokens_gpu
    gain = dp_tokens / tp_tokens

    # If the latent could be split like GQA heads (it cannot): the ceiling DP attention approaches.
    ideal_tokens = tp * tokens_gpu
    # FP8 latent as vLLM and SGLang cache DeepSeek-V3 (kv_cache_dtype fp8): all 512 + 64 values
    # in FP8 with one per-tensor scale, 576 B per layer. (FlashMLA's 656-B fp8_ds_mla row, block
    # scales and a BF16 RoPE key, is DeepSeek-V3.2's format.) More tokens, still replicated.
    fp8_row = (m.kv_lora_rank + m.qk_rope_head_dim) * 1
    fp8_kappa = fp8_row * m.layers
    fp8_tp_tokens = kv_gb * 1e9 / fp8_kappa

    s: dict[str, Any] = {
        "kv_space": Quantity(kv_gb, "GB"),
        "tp_tokens": Quantity(tp_tokens, "token"),
        "waste": Quantity(waste_gb, "GB"),
        "dp_extra": Quantity(dp_extra, "GB"),
        "dp_tokens": Quantity(dp_tokens, "token"),
        "fix_costs": list(FIX_COSTS),
        # givens the statement prints
        "layers": m.layers,
        "q_heads": m.q_heads,
        "d_c": m.kv_lora_rank,
        "d_r": m.qk_rope_head_dim,
        "hbm_gb": g.hbm_gb,
        "mem_util_pct": util * 100,
        "ckpt_gb": ckpt_gb,
        "w_gpu": w_gpu,
        "naive_w_gpu": round(checkpoint_bytes() / tp / 1e9, 1),
        "attn_gb": attn_gb,
        "repl_gb": repl_gb,
        "split_attn_gb": round(attn_gb - repl_gb, 2),
        "attn_params_b": m.layers * m.attn_params_per_layer / 1e9,
        "params_b": m.params / 1e9,
        "heads_gpu": m.q_heads // tp,
        # intermediates for the solution
        "usable_gb": round(usable, 2),  # exact: HBM is whole GB, the setting has 2 decimals
        "kappa": kappa,
        "kappa_layer": m.kv_bytes_per_token_per_layer(KV_DTYPE_BYTES),
        "tokens_gpu": tokens_gpu,
        "tp_ktokens": tp_tokens / 1e3,
        "node_kv_gb": node_kv_gb,
        "waste_pct": waste_pct,
        "unique_pct": 100 / tp,
        "dp_w_gpu": dp_w_gpu,
        "dp_kv_gb": dp_kv_gb,
        "dp_tokens_gpu": dp_tokens_gpu,
        "dp_ktokens_gpu": dp_tokens_gpu / 1e3,
        "dp_mtokens": dp_tokens / 1e6,
        "gain": gain,
        "ideal_mtokens": ideal_tokens / 1e6,
        "fp8_row": fp8_row,
        # FlashMLA's fp8_ds_mla row (V3.2): 512 FP8 + 4 FP32 block scales + 64 BF16 RoPE = 656 B.
        "fp8_ds_mla_row": (m.kv_lora_rank + math.ceil(m.kv_lora_rank / FP8_BLOCK) * SCALE_BYTES
                           + m.qk_rope_head_dim * 2),
        "fp8_kappa": fp8_kappa,
        "fp8_ktokens": fp8_tp_tokens / 1e3,
        "fp8_gain": fp8_tp_tokens / tp_tokens,
        "seq_128k_gb": 131072 * kappa / 1e9,
        "seqs_128k_tp": tp_tokens / 131072,
        "seqs_128k_dp": dp_tokens / 131072,
        # Llama-3.1-70B at the same TP for contrast: its 8 KV heads split while tp <= 8.
        "llama_kappa": model("Llama-3.1-70B").kv_bytes_per_token(2),
        "llama_kappa_gpu": model("Llama-3.1-70B").kv_bytes_per_token_per_gpu(tp, 2),
        "llama_kv_heads": model("Llama-3.1-70B").kv_heads,
        "llama_heads_gpu": model("Llama-3.1-70B").kv_heads_per_gpu(tp),
    }
    s["llama_dup"] = s["llama_kappa_gpu"] * tp / s["llama_kappa"]
    s["llama_dup_text"] = "once" if s["llama_dup"] == 1 else f"{s['llama_dup']:g} times"
    # What the engine itself computes: vLLM multiplies the total the driver reports (H200:
    # 143,156 MiB = 150.1e9 B) by gpu_memory_utilization and logs it. Shown in the solution only.
    if g.hbm_driver_total_mib is not None:
        driver = g.hbm_driver_total_bytes
        r_kv = driver / 1e9 * util - w_gpu - reserve
        s["reported_note"] = (
            f"A real engine sizes its pool from the total the driver reports, "
            f"{g.hbm_driver_total_mib:,.0f} MiB ({driver / 1e9:.1f} GB; vLLM multiplies it by "
            f"gpu_memory_utilization and its start-up log prints it). From that total the KV "
            f"space is {r_kv:.1f} GB per GPU, {r_kv / kv_gb - 1:.0%} more, for "
            f"{driver / g.hbm_bytes - 1:.1%} more memory: {r_kv * 1e9 / kappa / 1e3:,.0f} K tokens "
            f"under TP and {tp * (r_kv - dp_extra) * 1e9 / kappa / 1e6:.2f} M with data-parallel "
            f"attention."
        )
        s["reported_kv_gb"] = r_kv
    else:
        s["reported_note"] = (
            "A real engine sizes its pool from the total the driver reports, a few per cent more "
            "than the marketed figure. The weights do not grow with it, so the KV space, and "
            "every capacity below, would grow by several times that percentage."
        )
        s["reported_kv_gb"] = None
    s["recommend"] = _model_answer(p, s)
    return s


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"Switch to data-parallel attention for this deployment. Under TP{p['tp']} every GPU "
        f"stores the whole latent, so the {p['tp']} GPUs hold one GPU's worth of cache: "
        f"{s['tp_ktokens']:,.0f} K tokens, with {s['waste_pct']:.1f} % of the KV memory "
        f"({s['waste'].value:.0f} GB) spent on copies. DP attention costs "
        f"{s['dp_extra'].value:.2f} GB of replicated attention weights per GPU and lifts the "
        f"capacity to {s['dp_mtokens']:.2f} M tokens, {s['gain']:.1f}x. That matters whenever "
        "the batch is limited by KV memory (long contexts, many concurrent sessions). The other "
        "costs: requests must be balanced across ranks by KV load and context length, the MoE "
        "layers need a gather/dispatch and scatter/combine around attention and all ranks step "
        "together, and one request's attention runs on a single GPU, so at low load or for a "
        "latency-critical single stream TP attention is faster. Alternatives: a small attention-"
        "TP group inside DP, decode context parallelism (shard the latent by token position), or "
        "an FP8 latent. Llama-3.1-70B never had the problem: GQA splits K and V by KV head, so at "
        "TP8 each GPU stores 1 of 8 heads and no byte twice; a GQA model duplicates only when TP "
        "exceeds its KV-head count."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    tp, util, reserve = p["tp"], p["mem_util"], p["reserve_gb"]
    hbm, w_gpu, kappa = s["hbm_gb"], s["w_gpu"], s["kappa"]
    kv = s["kv_space"].value
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out,
                merge=near, accept_floor=1e-9, merge_floor=1e-9, skip=nonpositive).add

    # -- kv_space -----------------------------------------------------------------------------
    no_util = hbm - w_gpu - reserve
    add("kv_space", no_util,
        f"You used all {hbm:g} GB. The engine may use only {s['mem_util_pct']:.0f} % of it "
        "(gpu_memory_utilization).", "no_util", kind="peak_vs_achievable")
    add("kv_space", hbm * util - w_gpu,
        f"You forgot the {reserve:g} GB per GPU kept for activations and CUDA graphs.", "no_reserve",
        kind="miscounted_term")
    if s["reported_kv_gb"] is not None:
        reported = (f"That sizes the pool from the memory the GPU reports (the driver's total, "
                    f"which an engine's log prints, or nvidia-smi's). This exercise reads the "
                    f"marketed {hbm:g} GB as {hbm:g} × 10^9 B (see the capacity convention).")
        add("kv_space", s["reported_kv_gb"], reported, "reported", kind="peak_vs_achievable")
        add("tp_tokens", s["reported_kv_gb"] * 1e9 / kappa, reported, "reported",
            kind="peak_vs_achievable")
    add("kv_space", (hbm - w_gpu) * util - reserve,
        "The utilisation fraction applies to the whole HBM, not to what is left after the "
        "weights.", "util_after_weights", kind="peak_vs_achievable")
    add("kv_space", hbm * util - s["naive_w_gpu"] - reserve,
        f"That splits the whole checkpoint {tp} ways ({s['ckpt_gb']} / {tp}). The engines keep "
        f"MLA's down-projections whole on every GPU; the statement's {w_gpu} GB per GPU counts "
        "them.", "split_latent_proj", kind="forgot_tp")

    # -- tp_tokens ----------------------------------------------------------------------------
    tt = s["tp_tokens"].value
    add("tp_tokens", tt * tp,
        f"That assumes TP splits the cache {tp} ways, as it splits GQA heads. MLA has one latent "
        "per token that every head reads, so every GPU stores all of it: the deployment holds "
        "one GPU's worth of tokens.", "split_like_gqa", kind="q_vs_kv_heads")
    add("tp_tokens", tt / 2,
        "Half the reference: MLA caches one latent row per token per layer, not a K and a V.",
        "k_and_v", kind="k_without_v")
    add("tp_tokens", tt * 2,
        "Twice the reference: the latent is cached in BF16, 2 bytes per element.", "fp8",
        kind="wrong_precision")
    add("tp_tokens", no_util * 1e9 / kappa,
        f"You used all {hbm:g} GB; the engine may use {s['mem_util_pct']:.0f} % of it.",
        "no_util", kind="peak_vs_achievable")
    add("tp_tokens", kv * 1e9 / (s["d_c"] * s["layers"] * 2),
        f"The RoPE key ({s['d_r']} wide) is cached next to the latent: "
        f"({s['d_c']} + {s['d_r']}) × 2 B per layer.", "no_rope", kind="miscounted_term")

    # -- waste --------------------------------------------------------------------------------
    add("waste", tp * kv,
        f"That is all the KV memory on the {tp} GPUs. One copy is needed; the other {tp - 1} "
        "are the waste.", "all_copies", kind="wrong_scope")
    add("waste", kv, f"That is one GPU's KV space. {tp - 1} GPUs hold a copy of it.", "one_gpu",
        kind="forgot_tp")
    add("waste", s["waste_pct"],
        f"{s['waste_pct']:.1f} is the percentage. The part asks for the bytes, in GB.", "percent",
        kind="unit_slip")

    # -- dp_extra -----------------------------------------------------------------------------
    dx = s["dp_extra"].value
    add("dp_extra", s["attn_gb"],
        f"Each GPU already held 1/{tp} of the attention weights under TP; only the other "
        f"{tp - 1}/{tp} are new.", "whole_attention", kind="forgot_tp")
    add("dp_extra", s["attn_gb"] * (tp - 1) / tp,
        f"Under TP every GPU already held the down-projections q_a and kv_a whole "
        f"({s['repl_gb']} GB): only the {s['split_attn_gb']} GB that TP split gain the other "
        f"{tp - 1}/{tp}.", "split_latent_proj", kind="forgot_tp")
    add("dp_extra", 2 * dx,
        "Twice the reference: the attention weights are FP8 (1 byte each), not BF16.", "bf16",
        kind="wrong_precision")
    add("dp_extra", s["attn_gb"] / tp,
        f"That is a 1/{tp} share of the attention weights. Data-parallel attention adds what each "
        f"GPU did not hold: the other {tp - 1}/{tp} of the split part.", "one_share",
        kind="forgot_tp")
    add("dp_extra", (tp - 1) * w_gpu,
        "DP attention replicates the attention projections only. The routed experts stay "
        "spread over the GPUs (expert parallelism), so the rest of the weights do not move.",
        "whole_model", kind="forgot_tp")

    # -- dp_tokens ----------------------------------------------------------------------------
    dt = s["dp_tokens"].value
    add("dp_tokens", tp * tt,
        f"You forgot the replicated attention weights: each GPU loses {dx:.2f} GB of KV space.",
        "no_weight_cost", kind="miscounted_term")
    add("dp_tokens", s["dp_tokens_gpu"],
        f"That is one GPU. Under DP attention each of the {tp} GPUs holds different requests, so "
        "their capacities add up.", "one_gpu", kind="forgot_tp")
    add("dp_tokens", tp * (kv - s["attn_gb"]) * 1e9 / kappa,
        f"You charged the whole {s['attn_gb']:.2f} GB of attention weights; each GPU already held "
        f"1/{tp} of them.", "whole_attention", kind="forgot_tp")
    add("dp_tokens", tp * (kv - s["attn_gb"] * (tp - 1) / tp) * 1e9 / kappa,
        f"You charged {tp - 1}/{tp} of all {s['attn_gb']:.2f} GB of attention weights. The "
        f"down-projections ({s['repl_gb']} GB) were already whole on every GPU under TP.",
        "split_latent_proj", kind="forgot_tp")
    add("dp_tokens", tt,
        "That is the TP capacity. With data-parallel attention each GPU stores only its own "
        "requests' latents, so the GPUs stop holding copies.", "no_change", kind="forgot_tp")
    add("dp_tokens", dt / 2,
        "Half the reference: one latent row per token per layer, not a K and a V.", "k_and_v",
        kind="k_without_v")

    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    s = solve(p)
    return [
        Fits("the FP8 checkpoint inside the memory setting", p["gpu"], p["tp"],
             s["ckpt_gb"] * 1e9, usable=p["mem_util"]),
        Holds(s["dp_kv_gb"] > 0, "the data-parallel layout leaves a KV pool"),
    ]
