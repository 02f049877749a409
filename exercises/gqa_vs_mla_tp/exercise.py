"""Q49: GQA vs MLA KV per token, once tensor parallelism is applied.

Per token, over the whole model, MLA looks far smaller: DeepSeek-V3 caches (512 + 64) x 61 x 2 =
70,272 B against Llama-3.1-70B's 2 x 80 x 8 x 128 x 2 = 327,680 B. Under tensor parallelism the
GQA cache splits by KV head (40,960 B per GPU at TP8), while MLA's latent is read by every head and
so sits whole on every GPU (70,272 B per GPU). Add the weights each model leaves on a GPU and the
"reassuring" model holds fewer long sessions. The parts: both per-token figures, both per-GPU
figures, the MLA deployment's whole-session capacity, which deployment holds the workload, and
what to do about it.

Memory conventions are the ones mla_tp_copy (Q22) uses, so the two exercises agree: HBM is the
marketed size read as 10^9 bytes, times the engine's memory-utilisation fraction, minus a fixed
reserve per GPU, minus the weights. DeepSeek-V3 runs its FP8 checkpoint (673.15 GB without the MTP
module), split TP ways except MLA's down-projections q_a and kv_a (0.92 GB), which vLLM and SGLang
keep whole on every rank: 85.0 GB per GPU at TP8. The GQA model runs BF16 weights. Both caches
are BF16. "32K tokens" means 32,768. The canonical reserve is 4 GB (Q22 uses 5 GB): with 5 GB the
DeepSeek-V3 deployment holds 16.02 sessions, too close to 16 for a whole-session count.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Fits, WithinContext, check
from exercises.slips import Slips, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

MLA_MODEL = "DeepSeek-V3"
KV_BYTES = 2  # BF16 caches on both sides
FP8_BLOCK = 128  # DeepSeek-V3's FP8 checkpoint: one FP32 scale per 128 x 128 block
SCALE_BYTES = 4

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# (GPU, TP degree) for both deployments, and the GQA models that make sense there.
DEPLOYMENTS: dict[tuple[str, int], tuple[str, ...]] = {
    ("H200 SXM", 8): ("Llama-3.1-70B", "Qwen2.5-72B", "Llama-3.1-405B", "Mixtral-8x7B",
                      "Qwen3-30B-A3B"),
    ("B200", 8): ("Llama-3.1-70B", "Qwen2.5-72B", "Llama-3.1-405B", "Mixtral-8x7B",
                  "Qwen3-30B-A3B"),
    # DeepSeek-V3's FP8 weights need more than 8 x 80 GB: on H100 both run TP16 over two nodes.
    ("H100 SXM", 16): ("Llama-3.1-70B", "Qwen2.5-72B", "Llama-3.1-405B"),
}
CONTEXTS_K = (8, 16, 32, 64, 128)  # tokens per session, in units of 1,024
SESSIONS = (4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
MEM_UTILS = (0.85, 0.88, 0.9, 0.92)
RESERVES_GB = (3, 4, 5, 6)

CANONICAL: dict[str, Any] = {
    "gqa_model": "Llama-3.1-70B",
    "gpu": "H200 SXM",
    "tp": 8,
    "mem_util": 0.9,
    "reserve_gb": 4,
    "context_k": 32,
    "sessions": 32,
}

FITS = {  # (GQA holds them, MLA holds them) -> option id
    (True, True): "both",
    (True, False): "gqa_only",
    (False, True): "mla_only",
    (False, False): "neither",
}


# ----------------------------------------------------------------------------------------------
# DeepSeek-V3's FP8 checkpoint, from the config (the same rule as mla_tp_copy)


def _fp8_bytes(shapes: list[tuple[int, int]]) -> int:
    return sum(o * i + math.ceil(o / FP8_BLOCK) * math.ceil(i / FP8_BLOCK) * SCALE_BYTES
               for o, i in shapes)


def _mla_attention_shapes() -> list[tuple[int, int]]:
    m = model(MLA_MODEL)
    assert m.q_lora_rank and m.kv_lora_rank and m.qk_rope_head_dim and m.qk_nope_head_dim
    assert m.v_head_dim
    h, qk = m.hidden, m.qk_nope_head_dim + m.qk_rope_head_dim
    return [(m.q_lora_rank, h), (m.q_heads * qk, m.q_lora_rank),
            (m.kv_lora_rank + m.qk_rope_head_dim, h),
            (m.q_heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank),
            (h, m.q_heads * m.v_head_dim)]


def mla_attention_bytes() -> int:
    """All layers' attention projections in FP8 with their scales (11.42 GB): what data-parallel
    attention replicates on every GPU."""
    return model(MLA_MODEL).layers * _fp8_bytes(_mla_attention_shapes())


def mla_replicated_bytes() -> int:
    """MLA's down-projections q_a and kv_a of all layers, FP8 with their scales (0.92 GB): vLLM
    and SGLang keep them whole on every tensor-parallel rank (catalog: tp_replicates_latent_proj)."""
    m = model(MLA_MODEL)
    if not m.tp_replicates_latent_proj:
        return 0
    q_a, _, kv_a, _, _ = _mla_attention_shapes()
    assert q_a[0] * q_a[1] + kv_a[0] * kv_a[1] == m.latent_proj_params_per_layer
    return m.layers * _fp8_bytes([q_a, kv_a])


def mla_weights_per_gpu_bytes(tp: int) -> float:
    """The FP8 checkpoint on one GPU at TP `tp`: split `tp` ways but for the replicated
    down-projections (84.95e9 B at TP8, not 673.15e9 / 8 = 84.14e9)."""
    whole = mla_replicated_bytes()
    return (mla_checkpoint_bytes() - whole) / tp + whole


def mla_checkpoint_bytes() -> int:
    """FP8 linear layers with FP32 block scales; BF16 embedding, head, routers, norms: 673.15 GB."""
    m = model(MLA_MODEL)
    assert m.q_lora_rank and m.kv_lora_rank and m.qk_rope_head_dim and m.qk_nope_head_dim
    assert m.v_head_dim and m.ffn and m.moe_ffn
    h = m.hidden
    attention = _mla_attention_shapes()
    dense = [(m.ffn, h), (m.ffn, h), (h, m.ffn)]
    expert = [(m.moe_ffn, h), (m.moe_ffn, h), (h, m.moe_ffn)]
    experts = (m.n_routed_experts or 0) + (m.n_shared_experts or 0)
    fp8 = (m.layers * _fp8_bytes(attention) + m.dense_layers * _fp8_bytes(dense)
           + m.moe_layers * experts * _fp8_bytes(expert))
    bf16 = m.embedding_params + m.moe_layers * m.router_params_per_layer + m.norm_params
    return fp8 + 2 * bf16


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw a deployment and a workload, then a session count that gives a chosen verdict.

    The verdict is drawn first (the blurb's case, "only the GQA model holds it", most often) so the
    choice part is not dominated by whichever verdict the raw ranges happen to favour."""
    def draw(rng: random.Random) -> dict[str, Any] | None:
        (g, tp), names = rng.choice(list(DEPLOYMENTS.items()))
        p = {
            "gqa_model": rng.choice(names),
            "gpu": g,
            "tp": tp,
            "mem_util": rng.choice(MEM_UTILS),
            "reserve_gb": rng.choice(RESERVES_GB),
            "context_k": rng.choice(CONTEXTS_K),
            "sessions": SESSIONS[0],
        }
        caps = solve(p)
        want = rng.choices(["gqa_only", "both", "neither", "mla_only"], [4, 2, 2, 2])[0]
        options = [n for n in SESSIONS
                   if FITS[(n <= caps["gqa_cap"], n <= caps["mla_cap"])] == want]
        if not options:
            return None
        p["sessions"] = rng.choice(options)
        return p

    return draw_sensible(rng, draw, is_sensible, tries=2000)


def is_sensible(p: dict[str, Any]) -> bool:
    """Both pools are real, the MLA deployment holds at least one session, the fit verdicts are
    at least 10 % clear of the workload, and the whole-session count does not sit on an integer."""
    if check(constraints(p)):  # a story that could not happen: see exercises/feasibility.py
        return False
    s = solve(p)
    if s["mla_budget"] < 5 or s["gqa_budget"] < 5:
        return False
    cap_m, cap_g, n = s["mla_cap"], s["gqa_cap"], p["sessions"]
    if cap_m < 1 or cap_m > 200:
        return False
    if abs(n - cap_m) < 0.1 * n or abs(n - cap_g) < 0.1 * n:
        return False
    # Clear of a whole number by 0.02 and by 0.5 % (the tolerance policy's boundary rule).
    frac = cap_m - math.floor(cap_m)
    if min(frac, 1 - frac) < max(0.02, 0.005 * cap_m):
        return False
    ms = mistakes(p)
    return all(sum(m.part == part for m in ms) >= 2 for part in TOLERANCE)


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    mla = model(MLA_MODEL)
    gq = model(p["gqa_model"])
    g = gpu(p["gpu"])
    tp, util, reserve = p["tp"], p["mem_util"], p["reserve_gb"]
    assert mla.kv_lora_rank is not None and mla.qk_rope_head_dim is not None
    assert gq.kv_heads is not None and gq.head_dim is not None
    context = p["context_k"] * 1024

    gqa_token = gq.kv_bytes_per_token(KV_BYTES)
    mla_token = mla.kv_bytes_per_token(KV_BYTES)
    gqa_gpu = gq.kv_bytes_per_token_per_gpu(tp, KV_BYTES)
    mla_gpu = mla.kv_bytes_per_token_per_gpu(tp, KV_BYTES)
    heads_gpu = gq.kv_heads_per_gpu(tp)

    # Budgets, displayed to 0.1 GB and used as displayed.
    usable = g.hbm_gb * util
    mla_w = round(mla_weights_per_gpu_bytes(tp) / 1e9, 1)
    gqa_w = round(gq.weight_bytes(2) / tp / 1e9, 1)
    mla_budget = round(usable - mla_w - reserve, 1)
    gqa_budget = round(usable - gqa_w - reserve, 1)

    session_mla = context * mla_gpu  # bytes one session takes on EVERY GPU
    session_gqa = context * gqa_gpu
    mla_cap = mla_budget * 1e9 / session_mla
    gqa_cap = gqa_budget * 1e9 / session_gqa
    n = p["sessions"]
    fits = FITS[(n <= gqa_cap, n <= mla_cap)]

    s: dict[str, Any] = {
        "gqa_token": Quantity(gqa_token, "B"),
        "mla_token": Quantity(mla_token, "B"),
        "gqa_gpu": Quantity(gqa_gpu, "B"),
        "mla_gpu": Quantity(mla_gpu, "B"),
        "mla_sessions": Quantity(math.floor(mla_cap), ""),
        "mla_sessions_unrounded": mla_cap,  # before the floor (policy: boundary rule)
        "which_fits": fits,
        # givens the statement prints
        "gqa_layers": gq.layers,
        "gqa_q_heads": gq.q_heads,
        "gqa_kv_heads": gq.kv_heads,
        "gqa_head_dim": gq.head_dim,
        "mla_layers": mla.layers,
        "mla_q_heads": mla.q_heads,
        "d_c": mla.kv_lora_rank,
        "d_r": mla.qk_rope_head_dim,
        "hbm_gb": g.hbm_gb,
        "mem_util_pct": util * 100,
        "usable_gb": usable,
        "mla_w": mla_w,
        "gqa_w": gqa_w,
        "mla_budget": mla_budget,
        "gqa_budget": gqa_budget,
        "context": context,
        # intermediates for the solution
        "token_ratio": gqa_token / mla_token,
        "gpu_ratio": mla_gpu / gqa_gpu,
        "heads_gpu": heads_gpu,
        "replicated": tp > gq.kv_heads,
        "copies": tp // gq.kv_heads if tp > gq.kv_heads else 1,
        "gqa_naive_gpu": gqa_token / tp,
        "mla_naive_gpu": mla_token / tp,
        "mla_layer": mla.kv_bytes_per_token_per_layer(KV_BYTES),
        "gqa_layer": gq.kv_bytes_per_token_per_layer(KV_BYTES),
        "session_mla_gb": session_mla / 1e9,
        "session_gqa_gb": session_gqa / 1e9,
        "session_mla_gib": session_mla / 2**30,
        "session_gqa_gib": session_gqa / 2**30,
        "req128_mla_gib": 131072 * mla_gpu / 2**30,
        "req128_gqa_gib": 131072 * gqa_gpu / 2**30,
        "mla_cap": mla_cap,
        "gqa_cap": gqa_cap,
        "gqa_sessions": math.floor(gqa_cap),
        "need_mla_gb": n * session_mla / 1e9,
        "need_gqa_gb": n * session_gqa / 1e9,
        "naive_mla_cap": mla_budget * 1e9 / (context * mla_token / tp),
        "naive_mla_sessions": math.floor(mla_budget * 1e9 / (context * mla_token / tp)),
        # The fixes, priced: DP attention's replicated weights (the split part of attention;
        # q_a and kv_a were whole on every GPU already); the FP8 row vLLM and SGLang cache
        # DeepSeek-V3 in (all 512 + 64 values FP8, one per-tensor scale) against the BF16 row.
        # FlashMLA's 656-B fp8_ds_mla row is DeepSeek-V3.2's format, not this model's.
        "dp_extra_gb": (round(mla_attention_bytes() / 1e9, 2)
                        - round(mla_replicated_bytes() / 1e9, 2)) * (tp - 1) / tp,
        "fp8_row": (mla.kv_lora_rank + mla.qk_rope_head_dim) * 1,
        "fp8_ds_mla_row": (mla.kv_lora_rank
                           + math.ceil(mla.kv_lora_rank / FP8_BLOCK) * SCALE_BYTES
                           + mla.qk_rope_head_dim * 2),
        "naive_mla_w": round(mla_checkpoint_bytes() / tp / 1e9, 1),
        "mla_fits": n <= mla_cap,
        "gqa_fits": n <= gqa_cap,
        "fits_label": {
            "both": "both deployments hold them",
            "gqa_only": f"only {p['gqa_model']} holds them",
            "mla_only": f"only {MLA_MODEL} holds them",
            "neither": "neither deployment holds them",
        }[fits],
    }
    s["fp8_gain"] = s["mla_layer"] / s["fp8_row"]
    if mla_budget < gqa_budget:
        s["budget_sentence"] = (
            f"{MLA_MODEL}'s weights also leave it the smaller KV budget ({mla_budget:.1f} GB "
            f"against {gqa_budget:.1f} GB per GPU)")
    else:
        s["budget_sentence"] = (
            f"Here {p['gqa_model']}'s weights leave it the smaller KV budget ({gqa_budget:.1f} GB "
            f"against {mla_budget:.1f} GB per GPU), which is all that keeps MLA ahead")
    if s["replicated"]:
        s["gqa_split_text"] = (
            f"TP{tp} is more than the {gq.kv_heads} KV heads, so the heads cannot be split "
            f"further: each GPU keeps one whole KV head, and each head is stored on "
            f"{s['copies']} GPUs. The per-GPU figure is 1/{gq.kv_heads} of the model's, not "
            f"1/{tp}: past the KV-head count, more GPUs stop shrinking the GQA cache per GPU.")
    else:
        s["gqa_split_text"] = (
            f"Each GPU holds {heads_gpu} of the {gq.kv_heads} KV heads, so exactly 1/{tp} of "
            "the cache, and no byte is stored twice.")
    s["mla_verdict"] = "fits" if s["mla_fits"] else "does not fit"
    s["gqa_verdict"] = "fits" if s["gqa_fits"] else "does not fit"
    s["fix"] = _model_answer(p, s)
    return s


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"The per-token figure compares models, not GPUs. {MLA_MODEL} caches "
        f"{s['token_ratio']:.2f}× less per token than {p['gqa_model']}, but tensor parallelism "
        f"divides the GQA cache by KV head ({s['gqa_gpu'].value:,.0f} B per GPU) and cannot "
        f"divide MLA's latent, which every head reads ({s['mla_gpu'].value:,.0f} B on every GPU). "
        f"Per GPU, MLA is {s['gpu_ratio']:.2f}× GQA, and its weights leave "
        f"{s['mla_budget']:.1f} GB for KV against {s['gqa_budget']:.1f} GB: "
        f"{s['mla_sessions'].value} sessions of {p['context_k']}K against {s['gqa_sessions']}. "
        "Fixes: run MLA's attention data-parallel (each GPU holds only its own requests' latents, "
        f"at the price of replicating the attention weights, {s['dp_extra_gb']:.1f} GB more per "
        "GPU). Other levers: shard the latent by token position across the TP ranks (decode "
        f"context parallelism), or cache the latent in FP8 ({s['fp8_gain']:.2f}× more tokens, "
        "still copied on every GPU). Size capacity per GPU, after "
        "weights, from the engine's reported token capacity; per-token bytes alone mislead."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    gq = model(p["gqa_model"])
    assert gq.kv_heads is not None
    tp = p["tp"]
    g_tok, m_tok = s["gqa_token"].value, s["mla_token"].value
    g_gpu, m_gpu = s["gqa_gpu"].value, s["mla_gpu"].value
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, accept_floor=1e-9, merge_floor=1e-9, skip=nonpositive).add

    # -- gqa_token ----------------------------------------------------------------------------
    add("gqa_token", g_tok / 2, "Half the reference: every layer caches K and V.", "k_only",
        kind="k_without_v")
    add("gqa_token", g_tok * gq.q_heads / gq.kv_heads,
        f"You used the {gq.q_heads} query heads; only the {gq.kv_heads} KV heads are cached.",
        "q_heads", kind="q_vs_kv_heads")
    add("gqa_token", s["gqa_layer"],
        f"That is one layer. All {gq.layers} layers keep their own K and V.", "one_layer",
        kind="one_layer")
    add("gqa_token", g_tok * 2, "Twice the reference: the cache is BF16, 2 bytes per element.",
        "fp32", kind="wrong_precision")

    # -- mla_token ----------------------------------------------------------------------------
    add("mla_token", m_tok * 2,
        "Twice the reference: MLA caches one latent row per token per layer, used as both key "
        "and value. There is no separate V.", "k_and_v", kind="k_without_v")
    add("mla_token", s["d_c"] * s["mla_layers"] * KV_BYTES,
        f"You left out the {s['d_r']}-wide RoPE key, which is cached next to the latent.",
        "no_rope", kind="miscounted_term")
    add("mla_token", s["mla_layer"],
        f"That is one layer. All {s['mla_layers']} layers keep their own latent.", "one_layer",
        kind="one_layer")
    add("mla_token", m_tok / 2, "Half the reference: the latent is BF16, 2 bytes per element.",
        "fp8", kind="wrong_precision")

    # -- gqa_gpu ------------------------------------------------------------------------------
    if s["replicated"]:
        add("gqa_gpu", g_tok / tp,
            f"TP{tp} is more than the {gq.kv_heads} KV heads, so heads cannot be split further: "
            f"each GPU keeps one whole head (vLLM: max(1, heads / TP)), and each head is stored "
            f"on {s['copies']} GPUs.", "split_past_heads", kind="q_vs_kv_heads")
    add("gqa_gpu", g_tok,
        f"That is the whole model. TP{tp} gives each GPU {s['heads_gpu']} of the "
        f"{gq.kv_heads} KV heads, and it stores only those.", "not_split", kind="forgot_tp")
    add("gqa_gpu", g_gpu / 2, "Half the reference: each GPU caches K and V for its heads.",
        "k_only", kind="k_without_v")
    add("gqa_gpu", g_gpu / gq.layers,
        f"That is one layer. The GPU holds its heads in all {gq.layers} layers.", "one_layer",
        kind="one_layer")
    add("gqa_gpu", g_gpu * 2, "Twice the reference: the cache is BF16, 2 bytes per element.",
        "fp32", kind="wrong_precision")

    # -- mla_gpu ------------------------------------------------------------------------------
    add("mla_gpu", m_tok / tp,
        f"MLA has no KV heads to split. Each GPU runs some of the query heads, and every head "
        f"reads the whole latent, so all {m_tok:,.0f} B sit on every GPU.", "split_like_gqa",
        kind="q_vs_kv_heads")
    add("mla_gpu", m_gpu * 2,
        "Twice the reference: one latent row per token per layer, not a K and a V.", "k_and_v",
        kind="k_without_v")
    add("mla_gpu", s["mla_layer"],
        f"That is one layer; the GPU holds the latent of all {s['mla_layers']} layers.",
        "one_layer", kind="one_layer")
    add("mla_gpu", m_gpu / 2, "Half the reference: the latent is BF16, 2 bytes per element.",
        "fp8", kind="wrong_precision")

    # -- mla_sessions -------------------------------------------------------------------------
    cap = s["mla_cap"]
    add("mla_sessions", float(math.floor(s["naive_mla_cap"])),
        f"That splits the latent {tp} ways. Every GPU holds the whole latent of every session, "
        "so one GPU's budget sets the count.", "split_like_gqa", kind="q_vs_kv_heads")
    add("mla_sessions", float(round(cap)),
        f"You rounded {cap:.2f} up. A session that does not fit whole cannot be admitted.",
        "rounded_up", kind="rounding")
    add("mla_sessions", float(math.floor(cap / 2)),
        "Half the reference: one latent row per token per layer, not a K and a V.", "k_and_v",
        kind="k_without_v")
    add("mla_sessions", float(math.floor(cap * p["context_k"] * 1024 / (p["context_k"] * 1000))),
        f"A {p['context_k']}K session is {p['context_k'] * 1024:,} tokens, not "
        f"{p['context_k'] * 1000:,}.", "k_as_1000", kind="unit_slip")
    add("mla_sessions", float(math.floor(s["mla_budget"] * 1e9 / (s["context"] * g_gpu))),
        f"You used the GQA model's per-GPU bytes; {MLA_MODEL} stores {m_gpu:,.0f} B per token on "
        "every GPU.", "gqa_bytes", kind="q_vs_kv_heads")

    # -- which_fits ---------------------------------------------------------------------------
    explain = (f"{p['sessions']} sessions of {s['context']:,} tokens need "
               f"{s['need_mla_gb']:.1f} GB per GPU on {MLA_MODEL} (budget "
               f"{s['mla_budget']:.1f} GB, {s['mla_verdict']}) and {s['need_gqa_gb']:.1f} GB per "
               f"GPU on {p['gqa_model']} (budget {s['gqa_budget']:.1f} GB, {s['gqa_verdict']}).")
    for option in ("both", "gqa_only", "mla_only", "neither"):
        if option != s["which_fits"]:
            # A wrong verdict comes from splitting the two caches alike under TP.
            out.append(Mistake("which_fits", option, explain, f"not_{option}",
                               kind="q_vs_kv_heads"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    tokens = p["context_k"] * 1024
    return [
        Fits(f"{p['gqa_model']} BF16 weights inside the memory setting", p["gpu"], p["tp"],
             model(p["gqa_model"]).weight_bytes(2), usable=p["mem_util"]),
        Fits("DeepSeek-V3 FP8 weights inside the memory setting", p["gpu"], p["tp"],
             model("DeepSeek-V3").weight_bytes(1), usable=p["mem_util"]),
        # Whether the sessions fit is the question, so only the names are checked.
        Fits("the sessions' KV", p["gpu"], p["tp"], 0.0, asked=True),
        WithinContext(p["gqa_model"], tokens, "a session's context"),
        WithinContext("DeepSeek-V3", tokens, "a session's context"),
    ]
