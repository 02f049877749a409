"""Q06: MLA weight absorption, and the bill it hands to the decode kernel.

DeepSeek-V3 caches one latent c (kv_lora_rank = 512 wide) and one shared RoPE key k^R (64 wide)
per token per layer. Absorption moves the key up-projection into the query (q~ = W_UK^T q^C) and the
value up-projection after the weighted sum, so decode attention runs directly on the cache: each
head does a 576-long dot product for the score and a 512-wide multiply-add for the output, per
cached token. The parts price that: FLOPs per cached token per head (4 d_c + 2 d_r = 2,176, against
640 for the uncompressed 192/128-wide heads), summed over the heads one GPU runs, divided by the
bytes of the cache row every head shares (1,152 B in BF16). With 128 heads that is 241.8 FLOP/B,
next to the GPU's ridge point; a GQA model sits at its group size (8). Then: the regime on the
variant's GPU, and how many query tokens per request per step (1 + speculative drafts) push the
kernel past the ridge.

Model and GPU figures come from exercises/catalog. The FP8 cache layouts (FlashMLA's: 512 FP8
values, one FP32 scale per 128 of them, the 64-wide RoPE key kept in BF16; or the whole 576-wide
row in FP8 under one per-tensor scale, as vLLM and SGLang cache MLA in FP8) are built from the
catalog's widths and those rules, not typed in.

Variants also draw the ceilings the kernel actually reaches on its GPU (a share of the dense BF16
rate and of the HBM bandwidth, FlashMLA-like figures), so the ridge the regime and the crossing
point are measured against is the attainable one. The canonical variant has no such draw: it uses
the datasheet peaks, as the research notes do.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, HasFeature
from exercises.slips import Slips, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

MLA_MODEL = "DeepSeek-V3"  # the only MLA model in the catalog; every variant uses it

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

GPUS = ("H100 SXM", "H200 SXM", "B200")
# Attention tensor-parallel degree: the 128 query heads split over this many GPUs. 1 is
# data-parallel attention (every GPU runs all heads for its own requests), DeepSeek's own decode;
# 16 is plain TP over two 8-GPU nodes.
ATTN_TP = (1, 2, 4, 8, 16)
# "fp8" is FlashMLA's blockwise layout, 656 B per token and layer (`fp8_ds_mla`, which vLLM uses
# for DeepSeek-V3.2's sparse attention: FlashMLASparseBackend shapes its cache (blocks, block size,
# 656));
# "fp8_tensor" is the whole row in FP8 under one per-tensor scale, 576 B (vLLM's and SGLang's FP8
# KV cache for DeepSeek-V3, whose cache row is head_size = 576 one-byte values).
CACHES = ("bf16", "fp8", "fp8_tensor")
# GQA models to compare with: their decode intensity is the group size q_heads / kv_heads
# (2 for the Gemmas, 4 for Llama-3.1-8B and Mixtral, 8 for most, 16 for Llama-3.1-405B).
GQA_MODELS = ("Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B", "Qwen2.5-72B", "Mixtral-8x7B",
              "GPT-OSS-120B", "Qwen3-30B-A3B", "Gemma-2-27B", "Gemma-3-27B")
# Attainable ceilings, in whole per cent of the datasheet peaks: FlashMLA's README reports about
# 660 TFLOP/s (compute-bound) and 3,000 GB/s (memory-bound) on H800, 67 % and 90 % of H100 SXM's
# dense BF16 rate and HBM bandwidth. The tensor-core share stays below the bandwidth share, so the
# attainable ridge sits below the datasheet one.
FLOPS_PCTS = tuple(range(60, 79))  # 60 .. 78 %
HBM_PCTS = tuple(range(80, 93))  # 80 .. 92 %

# FlashMLA's FP8 cache format (README, "FP8 KV cache"): latent in FP8 (1 B), one FP32 scale per
# 128 latent values, RoPE key kept in BF16. The kernel dequantises to BF16 before its matmuls.
FP8_SCALE_GROUP = 128
FP8_SCALE_BYTES = 4

CANONICAL: dict[str, Any] = {
    "gpu": "H100 SXM",  # FlashMLA's analysis is on H800, which has H100 SXM's compute and HBM
    "attn_tp": 1,  # all 128 heads on each GPU, as in DeepSeek's decode deployment
    "cache": "bf16",  # the latent stored in BF16: 576 x 2 = 1,152 B per token per layer
    "gqa_model": "Llama-3.1-70B",
}


# ----------------------------------------------------------------------------------------------
# The arithmetic


def cache_row_bytes(cache: str) -> int:
    """Bytes of one token's cache row in one layer (latent + RoPE key), read once per step."""
    m = model(MLA_MODEL)
    assert m.kv_lora_rank is not None and m.qk_rope_head_dim is not None
    if cache == "bf16":
        return m.kv_bytes_per_token_per_layer(2)  # (512 + 64) x 2 = 1,152
    if cache == "fp8":
        scales = math.ceil(m.kv_lora_rank / FP8_SCALE_GROUP) * FP8_SCALE_BYTES
        return m.kv_lora_rank * 1 + scales + m.qk_rope_head_dim * 2  # 512 + 16 + 128 = 656
    if cache == "fp8_tensor":
        return m.kv_bytes_per_token_per_layer(1)  # (512 + 64) x 1 = 576; the scale is per tensor
    raise ValueError(f"unknown cache format {cache!r}")


def per_head_flops() -> tuple[int, int]:
    """(absorbed, uncompressed) FLOPs per cached token, per head, per query token.

    Absorbed: a (d_c + d_r)-long dot product for the score and a d_c-wide weighted sum for the
    output, 2 FLOPs per multiply-add: 2(d_c + d_r) + 2 d_c = 4 d_c + 2 d_r = 2,176.
    Uncompressed (keys and values expanded per head): 2(d_nope + d_r) + 2 d_v = 640.
    """
    m = model(MLA_MODEL)
    assert m.kv_lora_rank is not None and m.qk_rope_head_dim is not None
    assert m.qk_nope_head_dim is not None and m.v_head_dim is not None
    d_c, d_r = m.kv_lora_rank, m.qk_rope_head_dim
    absorbed = 2 * (d_c + d_r) + 2 * d_c
    plain = 2 * (m.qk_nope_head_dim + d_r) + 2 * m.v_head_dim
    return absorbed, plain


def gqa_intensity(name: str) -> float:
    """FLOP per byte of BF16 cache for GQA decode: each KV head's K and V rows (2 d x 2 B) serve
    g = q_heads / kv_heads query heads, each doing 2d (score) + 2d (output) FLOPs: g exactly."""
    m = model(name)
    assert m.kv_heads is not None and m.head_dim is not None
    g = m.q_heads // m.kv_heads
    flops = g * (2 * m.head_dim + 2 * m.head_dim)
    return flops / (2 * m.head_dim * 2)


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw a GPU, a head split, a cache format, a GQA model and the kernel's attainable share of
    the GPU's peaks until the variant is sensible."""
    return draw_sensible(rng, lambda rng: choose(rng, {
        "gpu": GPUS, "attn_tp": ATTN_TP, "cache": CACHES, "gqa_model": GQA_MODELS,
        "flops_pct": FLOPS_PCTS, "hbm_pct": HBM_PCTS,
    }), is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    """The regime is not a coin toss (5 % clear of each boundary), the crossing point is not on an
    integer (4 % clear), and every number part keeps at least two distinct known mistakes."""
    s = solve(p)
    r = s["ridge_ratio"]
    if abs(r - 1) < 0.05 or abs(r - 0.5) < 0.025:
        return False
    x = s["cross_exact"]
    k = max(1, round(x))
    if abs(x - k) < 0.04 * k:
        return False
    if s["s_cross"].value > 16:  # 16 query tokens per request per step is already far-fetched
        return False
    ms = mistakes(p)
    return all(sum(m.part == part for m in ms) >= 2 for part in TOLERANCE)


def ceilings(p: dict[str, Any]) -> tuple[int, int] | None:
    """(per cent of the BF16 rate, per cent of the HBM bandwidth) the kernel reaches, or None for
    the datasheet peaks (the canonical variant, which has no such keys)."""
    if "flops_pct" not in p:
        return None
    return p["flops_pct"], p["hbm_pct"]


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(MLA_MODEL)
    g = gpu(p["gpu"])
    gq = model(p["gqa_model"])
    assert m.kv_lora_rank is not None and m.qk_rope_head_dim is not None
    assert m.qk_nope_head_dim is not None and m.v_head_dim is not None
    assert gq.kv_heads is not None and gq.head_dim is not None
    tp = p["attn_tp"]
    heads = m.q_heads // tp

    absorbed, plain = per_head_flops()
    layer_flops = heads * absorbed
    row = cache_row_bytes(p["cache"])
    intensity = layer_flops / row
    peak_ridge = g.ridge_bf16
    caps = ceilings(p)
    ridge = peak_ridge if caps is None else peak_ridge * caps[0] / caps[1]
    ridge_ratio = intensity / ridge
    if ridge_ratio >= 1:
        regime = "compute"
    elif ridge_ratio >= 0.5:
        regime = "near_ridge"
    else:
        regime = "memory"
    cross_exact = ridge / intensity
    s_cross = max(1, math.ceil(cross_exact))

    g_size = gq.q_heads // gq.kv_heads
    gqa = gqa_intensity(p["gqa_model"])
    gqa_cross = math.ceil(ridge / gqa)

    # What absorption replaces at decode: re-expanding every cached latent through W_UKV (kv_b_proj)
    # for this GPU's heads each step, then the uncompressed attention.
    expand_flops = 2 * m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
    expand_total = expand_flops + heads * plain

    s: dict[str, Any] = {
        # part answers
        "per_head_formula": "4*d_c + 2*d_r",
        "layer_flops": Quantity(layer_flops, "FLOP"),
        "intensity": Quantity(intensity, "FLOP/B"),
        "gqa_intensity": Quantity(gqa, "FLOP/B"),
        "regime": regime,
        "s_cross": Quantity(s_cross, ""),
        "s_cross_unrounded": max(1.0, cross_exact),  # before the ceil (boundary rule)
        # givens the statement prints
        "layers": m.layers,
        "q_heads": m.q_heads,
        "d_c": m.kv_lora_rank,
        "d_r": m.qk_rope_head_dim,
        "d_nope": m.qk_nope_head_dim,
        "d_v": m.v_head_dim,
        "qk_dim": m.qk_nope_head_dim + m.qk_rope_head_dim,
        "heads_gpu": heads,
        "row_bytes": row,
        "bf16_tflops": g.bf16_dense_tflops,
        "hbm_tbps": g.hbm_tbps,
        "gqa_q_heads": gq.q_heads,
        "gqa_kv_heads": gq.kv_heads,
        "gqa_head_dim": gq.head_dim,
        "cache_label": {"bf16": "BF16", "fp8": "FP8 (FlashMLA layout)",
                        "fp8_tensor": "FP8 (per-tensor scale)"}[p["cache"]],
        "fp8_row_bytes": cache_row_bytes("fp8"),
        "fp8_tensor_row_bytes": cache_row_bytes("fp8_tensor"),
        "bf16_row_bytes": cache_row_bytes("bf16"),
        "fp8_scales": math.ceil(m.kv_lora_rank / FP8_SCALE_GROUP),
        "row_width": m.kv_lora_rank + m.qk_rope_head_dim,
        # intermediates for the solution
        "flops_absorbed": absorbed,
        "flops_plain": plain,
        "flops_ratio": absorbed / plain,
        "score_flops": 2 * (m.kv_lora_rank + m.qk_rope_head_dim),
        "out_flops": 2 * m.kv_lora_rank,
        "layer_flops_plain": heads * plain,
        "expand_flops": expand_flops,
        "expand_mflops": expand_flops / 1e6,
        "expand_total": expand_total,
        "expand_over_absorbed": expand_total / layer_flops,
        "ridge": ridge,
        "peak_ridge": peak_ridge,
        "ridge_ratio": ridge_ratio,
        "ridge_pct": ridge_ratio * 100,
        "intensity_2": 2 * intensity,
        "bf16_per_head": absorbed / cache_row_bytes("bf16"),
        "cross_exact": cross_exact,
        "g_size": g_size,
        "gqa_cross": gqa_cross,
        "gqa_ridge_ratio": gqa / ridge,
        "mla_over_gqa": intensity / gqa,
        "intensity_tp1": m.q_heads * absorbed / row,
        "intensity_tp8": (m.q_heads // 8) * absorbed / row,
        "regime_label": {
            "compute": "compute-bound",
            "near_ridge": "just below the ridge",
            "memory": "memory-bound",
        }[regime],
    }
    # Intensity of the uncompressed form, for the solution's contrast: one head's expanded K and V
    # rows (192 + 128 wide, BF16) are read by that head alone.
    s["plain_intensity"] = plain / ((m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim) * 2)
    s.update(_roofline_text(p, s, caps))
    s.update(_cache_text(p, s))
    s["regime_sentence"] = _regime_sentence(p, s)
    s["prefill_path"] = _model_answer(s)
    return s


def _roofline_text(p: dict[str, Any], s: dict[str, Any],
                   caps: tuple[int, int] | None) -> dict[str, Any]:
    """The statement's and solution's wording of the ridge: datasheet peaks (the canonical
    variant, worded as before) or the kernel's attainable ceilings."""
    tflops, tbps = s["bf16_tflops"], s["hbm_tbps"]
    if caps is None:
        return {
            "gpu_note": "",
            "roofline_rule": (  # wrapped as the statement used to be
                "- **Roofline.** The ridge is the dense BF16 rate divided by the HBM bandwidth. A "
                "kernel is\n  compute-bound when its FLOPs per byte are at or above the ridge. "
                "Peak rates, no efficiency\n  factor."),
            "ridge_word": "ridge",
            "ridge_name": "Ridge",
            "ridge_calc": f"{tflops:g} TFLOP/s / {tbps:g} TB/s",
            "peak_note": "",
            "flops_pct": None,
            "hbm_pct": None,
        }
    fp, hp = caps
    return {
        "gpu_note": (f"; measured on this GPU, the MLA decode kernel reaches at most **{fp} %** of "
                     f"that BF16 rate and **{hp} %** of that bandwidth"),
        "roofline_rule": (
            "- **Roofline.** Use the kernel's attainable ceilings, not the datasheet peaks: the "
            f"ridge is the attainable BF16 rate ({fp} % of peak) divided by the attainable HBM "
            f"bandwidth ({hp} % of peak). A kernel is compute-bound when its FLOPs per byte are at "
            "or above that ridge."),
        "ridge_word": "attainable ridge",
        "ridge_name": "Attainable ridge",
        "ridge_calc": f"({fp} % × {tflops:g} TFLOP/s) / ({hp} % × {tbps:g} TB/s)",
        "peak_note": (
            f" The datasheet ridge, {s['peak_ridge']:.1f} FLOP/B, would overstate what the kernel "
            "can afford: its tensor cores fall further short of their peak than its memory "
            "system does."),
        "flops_pct": fp,
        "hbm_pct": hp,
    }


def _cache_text(p: dict[str, Any], s: dict[str, Any]) -> dict[str, str]:
    """The statement's FP8 convention and the solution's note on the per-tensor row."""
    if p["cache"] == "fp8_tensor":
        rule = (
            "- **FP8 cache** (per-tensor, as vLLM and SGLang cache MLA in FP8): all "
            f"{s['row_width']} values of the row, the latent and the RoPE key, in FP8 under one "
            "scale for the whole cache, so the scale adds no bytes per token. The kernel "
            "dequantises to BF16 and runs its matrix products on BF16 tensor cores.")
        note = (f" This cache is the per-tensor FP8 one: all {s['row_width']} values at 1 byte "
                f"each, {s['fp8_tensor_row_bytes']} B, with its single scale stored once.")
    else:
        rule = (  # wrapped as the statement used to be
            f"- **FP8 cache** (where the variant uses it): FlashMLA's `fp8_ds_mla` layout, the "
            f"{s['d_c']} latent values in FP8, one\n  FP32 scale per {FP8_SCALE_GROUP} of them, and "
            "the RoPE key kept in BF16 (vLLM uses this format for DeepSeek-V3.2's sparse\n  "
            "attention; for DeepSeek-V3 itself its FP8 cache is the per-tensor row). The kernel "
            "dequantises to BF16 and\n  runs its matrix products on BF16 tensor cores.")
        note = ""
    return {"fp8_rule": rule, "fp8_tensor_note": note}


def _regime_sentence(p: dict[str, Any], s: dict[str, Any]) -> str:
    # The short answer's closing clause; a memory-bound variant says why (the head split).
    if s["regime"] == "compute":
        return "past the ridge, a regime GQA decode never reaches."
    if s["regime"] == "near_ridge":
        return ("one extra query token per step would push it past the ridge, a region GQA "
                "decode never gets near.")
    return (f"memory-bound here only because the heads are split over {p['attn_tp']} GPUs; with "
            f"all {s['q_heads']} heads on one GPU the same cache would give "
            f"{s['intensity_tp1']:.0f} FLOP/B, a region GQA decode never gets near.")


def _where(s: dict[str, Any]) -> str:
    # Where the kernel sits, for the model answer. The canonical (near the ridge) keeps its words.
    if s["regime"] == "memory":
        return (f"below the {s['ridge_word']} ({s['ridge']:.0f} FLOP/B) only because the heads "
                f"are split ({s['heads_gpu']} per GPU), still {s['mla_over_gqa']:.0f} times GQA's "
                "intensity.")
    return f"at or past the {s['ridge_word']} ({s['ridge']:.0f} FLOP/B) where GQA never goes."


def _model_answer(s: dict[str, Any]) -> str:
    return (
        "Absorption trades bytes for FLOPs. Per head and cached token the absorbed form costs "
        f"{s['flops_absorbed']:,} FLOPs against {s['flops_plain']:,} for the uncompressed "
        f"{s['qk_dim']}/{s['d_v']}-wide heads, {s['flops_ratio']:.1f} times more, because every "
        f"head now works in the {s['d_c']}-wide latent space. Prefill is compute-bound (every "
        "prompt token attends to every earlier one), so that factor would be paid in full; "
        "instead prefill up-projects each token's latent once (kv_b_proj), a cost amortised over "
        "all the queries that read it, and runs ordinary multi-head attention on 192/128-wide "
        "heads. Decode is the opposite case: one new query per request per step, so re-expanding "
        f"the whole cache every step would cost ~{s['expand_over_absorbed']:.0f} times the "
        "absorbed work; absorption reads the 576-wide row once for all heads. The price is the "
        f"regime: with {s['heads_gpu']} heads per GPU the kernel does {s['intensity'].value:.0f} "
        f"FLOP per byte, against {s['gqa_intensity'].value:.0f} for the GQA model, so it sits "
        f"{_where(s)} Consequences: the "
        "kernel has to be written for tensor-core throughput, not only bandwidth (FlashMLA); "
        "speculative or MTP tokens multiply the FLOPs but not the bytes, so past the ridge they "
        "are no longer free; and splitting the heads with tensor parallelism divides the "
        "intensity by the TP degree while every GPU still stores the whole latent, which is why "
        "DeepSeek runs decode attention data-parallel."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    tp = p["attn_tp"]
    caps = ceilings(p)
    heads = s["heads_gpu"]
    row = s["row_bytes"]
    absorbed, plain = s["flops_absorbed"], s["flops_plain"]
    out: list[Mistake] = [
        Mistake("per_head_formula", "2*(d_c + d_r)",
                "That is the score alone. Each head also forms its output as a weighted sum of "
                "the d_c-wide latents: another 2·d_c FLOPs per cached token.", "score_only",
                kind="miscounted_term"),
        Mistake("per_head_formula", "2*d_c + d_r",
                "Half the reference: a multiply-add is 2 FLOPs, not 1.", "mac_as_one",
                kind="flop_counting"),
        Mistake("per_head_formula", "4*(d_c + d_r)",
                "The output sums only the d_c-wide latents; the RoPE key takes part in the score, "
                "not in the values.", "rope_in_values", kind="miscounted_term"),
        Mistake("per_head_formula", "4*d_c",
                "You left out the RoPE part of the score: the query's RoPE half dots the cached "
                "d_r-wide key, 2·d_r FLOPs.", "no_rope", kind="miscounted_term"),
    ]

    add = Slips(s, TOLERANCE, out, accept_floor=1e-9, merge_floor=1e-9, skip=nonpositive).add

    # -- layer_flops ---------------------------------------------------------------------------
    lf = s["layer_flops"].value
    add("layer_flops", heads * plain,
        f"You used the uncompressed heads ({plain} FLOPs each). Absorbed, each head works in the "
        f"{s['d_c']}-wide latent space: {absorbed:,} FLOPs.", "uncompressed",
        kind="misread_mechanism")
    add("layer_flops", lf / 2, "Half the reference: a multiply-add is 2 FLOPs.", "mac_as_one",
        kind="flop_counting")
    add("layer_flops", absorbed,
        f"That is one head. The part asks for all {heads} heads this GPU runs.", "one_head",
        kind="q_vs_kv_heads")
    if tp > 1:
        add("layer_flops", s["q_heads"] * absorbed,
            f"That is all {s['q_heads']} heads. With the heads split over {tp} GPUs, each runs "
            f"{heads}.", "all_heads", kind="forgot_tp")
    add("layer_flops", heads * 2 * (s["d_c"] + s["d_r"]),
        "You counted the score but not the output: each head also sums the latents weighted by "
        "its probabilities, 2·d_c more FLOPs per cached token.", "score_only",
        kind="miscounted_term")

    # -- intensity ----------------------------------------------------------------------------
    it = s["intensity"].value
    add("intensity", absorbed / row,
        f"That is one head's intensity. All {heads} heads on the GPU read the same cache row, so "
        "its bytes are paid once for all of them.", "per_head", kind="q_vs_kv_heads")
    add("intensity", heads * plain / row,
        f"You used the uncompressed {plain} FLOPs per head; the absorbed kernel does {absorbed:,}.",
        "uncompressed", kind="misread_mechanism")
    add("intensity", it / 2,
        "Half the reference: MLA caches ONE row per token (the latent and the RoPE key), used as "
        "both key and value. There is no separate V to read.", "k_and_v", kind="k_without_v")
    if tp > 1:
        add("intensity", it * tp,
            f"You used all {s['q_heads']} heads; each GPU runs {heads} of them.", "all_heads",
            kind="forgot_tp")
    if p["cache"] == "bf16":
        add("intensity", lf / (s["d_c"] * 2),
            f"The row is {s['d_c']} + {s['d_r']} wide: the RoPE key is cached and read too.",
            "no_rope_bytes", kind="miscounted_term")
        add("intensity", 2.0 * heads,
            "That is the rule of thumb 2·h. The exact count is h times part 1's FLOPs per head "
            "and cached token over the row's bytes, 1.89·h for a BF16 row.", "rule_of_thumb",
            kind="flop_counting")
    elif p["cache"] == "fp8":
        add("intensity", lf / (s["d_c"] + s["d_r"]),
            f"The FP8 row is not {s['d_c'] + s['d_r']} B: the RoPE key stays in BF16 and the "
            f"latent carries FP32 scales, {row} B in all.", "fp8_naive", kind="wrong_precision")
        add("intensity", lf / s["bf16_row_bytes"],
            f"You used the BF16 row ({s['bf16_row_bytes']:,} B); this cache is FP8, {row} B.",
            "bf16_bytes", kind="wrong_precision")
    else:
        add("intensity", lf / s["fp8_row_bytes"],
            f"You used FlashMLA's FP8 layout ({s['fp8_row_bytes']} B, BF16 RoPE key and per-block "
            f"scales). This cache keeps the whole row in FP8 under one per-tensor scale: {row} B.",
            "flashmla_layout", kind="wrong_precision")
        add("intensity", lf / s["bf16_row_bytes"],
            f"You used the BF16 row ({s['bf16_row_bytes']:,} B); this cache is FP8, {row} B.",
            "bf16_bytes", kind="wrong_precision")

    # -- gqa_intensity ------------------------------------------------------------------------
    gi = s["gqa_intensity"].value
    add("gqa_intensity", 1.0,
        f"That is multi-head attention. Here {s['g_size']} query heads share each KV head, so "
        f"every K and V byte read serves {s['g_size']} heads.", "mha", kind="q_vs_kv_heads")
    add("gqa_intensity", 2 * gi,
        "Twice the reference: count K and V bytes (both are read), 2 bytes per element.",
        "k_only", kind="k_without_v")
    add("gqa_intensity", gi / 2, "Half the reference: a multiply-add is 2 FLOPs.", "mac_as_one",
        kind="flop_counting")
    add("gqa_intensity", float(s["gqa_q_heads"]),
        f"You charged all {s['gqa_q_heads']} query heads to one KV head's bytes. Each KV head "
        f"serves only its group of {s['g_size']}.", "all_q_heads", kind="q_vs_kv_heads")

    # -- s_cross ------------------------------------------------------------------------------
    x = s["cross_exact"]
    sc = s["s_cross"].value
    add("s_cross", float(math.floor(x)),
        f"Rounded down: {x:.2f} query tokens only reach the ridge, so the smallest whole number "
        f"at or past it is {sc}.", "floor", kind="rounding")
    add("s_cross", float(max(1, math.ceil(2 * x))),
        "You used the FP8 tensor rate for the ridge. The kernel dequantises to BF16 and runs "
        "its matmuls at the BF16 rate.", "fp8_ridge", kind="wrong_precision")
    add("s_cross", float(max(1, math.ceil(x * absorbed / plain))),
        f"You used the uncompressed {plain} FLOPs per head; absorbed it is {absorbed:,}.",
        "uncompressed", kind="misread_mechanism")
    add("s_cross", float(max(1, math.ceil(x * heads))),
        "You used one head's intensity. The heads share the cache row, so the GPU's intensity "
        "is the per-head one times the heads it runs.", "per_head", kind="q_vs_kv_heads")
    add("s_cross", float(s["gqa_cross"]),
        f"That is where the GQA model would cross ({s['ridge']:.0f} / {gi:g}). The part asks "
        "for the MLA kernel.", "gqa", kind="q_vs_kv_heads")
    if caps is not None:
        add("s_cross", float(max(1, math.ceil(s["peak_ridge"] / it))),
            f"You used the datasheet ridge ({s['peak_ridge']:.0f} FLOP/B). This kernel reaches "
            f"{s['flops_pct']} % of the BF16 rate and {s['hbm_pct']} % of the bandwidth, so its "
            f"ridge is {s['ridge']:.0f} FLOP/B.", "peak_ridge", kind="peak_vs_achievable")

    # -- regime -------------------------------------------------------------------------------
    if caps is None:
        # Part 3's intensity is not printed here (nor its share of the ridge, which gives it).
        explain = (f"Compare part 3's intensity with a ridge of {s['ridge']:.1f} FLOP/B "
                   f"({s['ridge_calc']}).")
    else:
        explain = (f"Compare part 3's intensity with an attainable ridge of {s['ridge']:.1f} "
                   f"FLOP/B = {s['ridge_calc']}.")
    for option in ("compute", "near_ridge", "memory"):
        if option != s["regime"]:
            # Against the attainable ridge, calling it wrong is taking the datasheet ridge.
            kind = "misread_mechanism" if caps is None else "peak_vs_achievable"
            out.append(Mistake("regime", option, explain, f"not_{option}", kind=kind))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [HasFeature("DeepSeek-V3", "mla"),
            HasFeature(p["gqa_model"], "gqa", "the comparison model's grouped-query cache")]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    s = solve(p)
    return {"per_head_formula": {"d_c": s["d_c"], "d_r": s["d_r"]}}
