"""Q17: fine-grained FP8 scales, the promotion loop that applies them, and what Blackwell changes.

DeepSeek-V3 runs its linear layers in FP8 (E4M3) with one FP32 scale per token per 128 input
channels for the activations and one per 128 x 128 block for the weights. Those scales change
every 128 elements along K, the axis a tensor-core MMA sums over, so one MMA over all of K cannot
apply them: the kernel runs one MMA per 128-deep block and "promotes" each partial into an FP32
accumulator with a multiply-add on the CUDA cores, scaled by that block's two scales.

The parts: why the tensor core cannot apply the scale (choice); the promotion's FLOPs against the
MMA's for one 128-deep block, 2 / 256 = 1/128 (number); what that costs if it is serialised with
the MMA, 1/128 x (FP8 tensor rate / FP32 CUDA-core rate), about 23 % on Hopper (number); the
output element as a formula in the per-block scales and partial sums (expression); the kernel
itself (Triton); and what Blackwell's block-scaled MMA moves into hardware (text).

Variants draw the GPU (Hopper, or Blackwell running a Hopper-style kernel, where the serialised
cost would be ~44 %: the reason promotion moved into the tensor core), one of DeepSeek-V3's FP8
linear layers (shapes from the model config in the catalog) and a token count. The shape sets the
absolute times in the worked solution and the kernel part's benchmark case. GPU rates come from
exercises/catalog/gpus.toml; the FP32 CUDA-core rate is the catalog's `fp32_tflops`.
"""
from __future__ import annotations

import math
import random
from pathlib import Path
from types import ModuleType
from typing import Any

from exercises.catalog import gpu, model
from exercises.feasibility import Claim, Holds
from exercises.kernel_tolerance import load_task, tolerance_table
from exercises.slips import Slips, near, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

MODEL = "DeepSeek-V3"
TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

GPUS = ("H100 SXM", "H200 SXM", "B200", "B200 (GB200 NVL72)")
HOPPER = ("H100 SXM", "H200 SXM")
TOKENS = tuple(range(512, 8192 + 1, 256))  # M: tokens in one GEMM (a prefill chunk, a big batch)

# DeepSeek-V3's recipe (technical report, arXiv 2412.19437, section 3.3.2): scales per 1 x 128
# activation tile and per 128 x 128 weight block; the tensor cores accumulate 128 elements of K
# (4 WGMMAs of K = 32) before each promotion to FP32 on the CUDA cores.
SCALE_BLOCK = 128
WGMMA_K = 32
# DeepGEMM's README (github.com/deepseek-ai/DeepGEMM, 2025-04 update): up to 1,550 TFLOPS on H800,
# whose FP8 tensor cores match H100 SXM's.
DEEPGEMM_TFLOPS = 1550.0
# Blackwell's block-scaled MMA (tcgen05.mma, kind mxf8f6f4 / mxf4nvf4): MX formats share one
# E8M0 scale per 32 elements of K, NVFP4 one E4M3 scale per 16.
MX_BLOCK = 32
NVFP4_BLOCK = 16


def task() -> ModuleType:
    """kernel/task.py, loaded by path (the kernel folder is not a package). The statement quotes
    its preview shapes, tolerance and input spread, so the prose cannot drift from the checks."""
    return load_task(Path(__file__).resolve().parent)


def _checks_text(p: dict[str, Any]) -> str:
    """The preview checks in words: each label with its M x N x K shapes."""
    groups: dict[str, list[str]] = {}
    for case in task().cases(p, "preview"):
        groups.setdefault(case["label"], []).append(
            f"{case['M']:,} × {case['N']:,} × {case['K']:,}")
    return "; ".join(f"{label} ({', '.join(shapes)})" for label, shapes in groups.items())


def layers() -> dict[str, tuple[str, int, int]]:
    """DeepSeek-V3's FP8 GEMMs: key -> (label, N, K), from the model config in the catalog. N is
    the weight's output width, K its input width (the weight is stored N x K)."""
    m = model(MODEL)
    assert m.q_lora_rank is not None and m.kv_lora_rank is not None
    assert m.qk_rope_head_dim is not None and m.qk_nope_head_dim is not None
    assert m.v_head_dim is not None and m.moe_ffn is not None and m.ffn is not None
    return {
        # q_a and kv_a read the same hidden state, so serving engines fuse them into one GEMM.
        "qkv_a": ("fused q_a + kv_a down-projection",
                  m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim, m.hidden),
        "q_b": ("query up-projection (q_b)",
                m.q_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim), m.q_lora_rank),
        "kv_b": ("key/value up-projection (kv_b)",
                 m.q_heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank),
        "o_proj": ("attention output projection", m.hidden, m.q_heads * m.v_head_dim),
        "expert_up": ("routed expert's fused gate + up projection", 2 * m.moe_ffn, m.hidden),
        "expert_down": ("routed expert's down projection", m.hidden, m.moe_ffn),
        "dense_down": ("dense MLP down projection (first 3 layers)", m.hidden, m.ffn),
    }


def with_shape(p: dict[str, Any]) -> dict[str, Any]:
    """Adds the layer's N and K to the parameters: kernel/task.py reads them for its benchmark
    case and cannot import the catalog."""
    _, n, k = layers()[p["layer"]]
    return {**p, "n": n, "k": k}


# The expert down projection of a 4,096-token batch on H100: the shape the research notes and
# DeepGEMM's tables use, and the GPU whose rates give the quoted 23 %.
CANONICAL: dict[str, Any] = with_shape({"gpu": "H100 SXM", "layer": "expert_down", "m": 4096})


def generate(rng: random.Random) -> dict[str, Any]:
    return with_shape({"gpu": rng.choice(GPUS), "layer": rng.choice(sorted(layers())),
                       "m": rng.choice(TOKENS)})


# ----------------------------------------------------------------------------------------------
# The reference

OPTIONS = ("inside_sum", "fp8_range", "no_scales_at_all", "bandwidth", "accumulator_bits")


def solve(p: dict[str, Any]) -> dict[str, Any]:
    g = gpu(p["gpu"])
    assert g.fp8_dense_tflops is not None and g.fp32_tflops is not None
    label, n, k = layers()[p["layer"]]
    m = p["m"]
    kb = k // SCALE_BLOCK
    nb = math.ceil(n / SCALE_BLOCK)

    mma_flops_block = 2 * SCALE_BLOCK  # per output element per K block: 128 multiply-adds
    promo_flops_block = 2  # one FMA: acc += partial * (sa * sb)
    ratio = promo_flops_block / mma_flops_block
    rate_ratio = g.fp8_dense_tflops / g.fp32_tflops
    overhead = ratio * rate_ratio

    gemm_flops = 2 * m * n * k
    promo_flops = promo_flops_block * m * n * kb
    mma_us = gemm_flops / (g.fp8_dense_tflops * 1e12) * 1e6
    promo_us = promo_flops / (g.fp32_tflops * 1e12) * 1e6
    gemm_bytes = m * k + n * k + 4 * (m * kb + nb * kb) + 2 * m * n
    hopper = p["gpu"] in HOPPER

    s: dict[str, Any] = {
        # part answers
        "why_k": "inside_sum",
        "promotion_ratio": Quantity(100 * ratio, "%"),
        "serial_overhead": Quantity(100 * overhead, "%"),
        "block_formula": "sa1*sb1*P1 + sa2*sb2*P2",
        "kernel": "kernel/reference.py",
        # givens
        "layer_label": label,
        "m": m,
        "n": n,
        "k": k,
        "kb": kb,
        "nb": nb,
        "scale_block": SCALE_BLOCK,
        "wgmma_k": WGMMA_K,
        "wgmmas_per_block": SCALE_BLOCK // WGMMA_K,
        "hidden": model(MODEL).hidden,
        "fp8_tflops": g.fp8_dense_tflops,
        "fp8_sparse_tflops": 2 * g.fp8_dense_tflops,
        "bf16_tflops": g.bf16_dense_tflops,
        "fp32_tflops": g.fp32_tflops,
        "hbm_tbps": g.hbm_tbps,
        # intermediates
        "mma_flops_block": mma_flops_block,
        "promo_flops_block": promo_flops_block,
        "ratio_denominator": round(1 / ratio),
        "rate_ratio": rate_ratio,
        "overhead_pct": 100 * overhead,
        "gemm_tflop": gemm_flops / 1e12,
        "gemm_gflop": gemm_flops / 1e9,
        "promo_gflop": promo_flops / 1e9,
        "mma_us": mma_us,
        "promo_us": promo_us,
        "serial_us": mma_us + promo_us,
        "gemm_mb": gemm_bytes / 1e6,
        "hbm_us": gemm_bytes / (g.hbm_tbps * 1e12) * 1e6,
        "intensity": gemm_flops / gemm_bytes,
        "ridge_fp8": g.fp8_dense_tflops * 1e12 / (g.hbm_tbps * 1e12),
        "deepgemm_tflops": DEEPGEMM_TFLOPS,
        # DeepGEMM's figure was measured on H800, whose FP8 tensor rate is H100 SXM's.
        "deepgemm_pct": 100 * DEEPGEMM_TFLOPS / _hopper_fp8_tflops(),
        "deepgemm_us": gemm_flops / (DEEPGEMM_TFLOPS * 1e12) * 1e6,
        "hopper_rate_ratio": _hopper_rate_ratio(),
        "hopper_overhead_pct": 100 * ratio * _hopper_rate_ratio(),
        "mx_block": MX_BLOCK,
        "nvfp4_block": NVFP4_BLOCK,
        "mx_per_block": SCALE_BLOCK // MX_BLOCK,
        "two_block_k": 2 * SCALE_BLOCK,
        "block_last": SCALE_BLOCK - 1,
        "two_block_last": 2 * SCALE_BLOCK - 1,
        "preview_checks": _checks_text(p),
        "tol_rtol": task().tolerance({"K": 1}, "c")[0],
        "tol_atol": task().tolerance({"K": 1}, "c")[1],
        "scale_spread": 2 ** (task().SCALE_LOG2[1] - task().SCALE_LOG2[0]),
        "a_scale_shape": f"({m:,}, {kb})",
        "b_scale_shape": f"({nb}, {kb})",
        "ragged_n": n % SCALE_BLOCK != 0,
    }
    s["b200_overhead_pct"] = 100 * ratio * _rate_ratio("B200")
    s["regime_note"] = _regime_note(p, s)
    s.update(_gpu_text(p, s, hopper))
    s["blackwell"] = _model_answer(s)
    # The kernel's tolerances as the harness applies them (kernel/task.py), for the statement.
    s["tolerance_table"] = tolerance_table(Path(__file__).resolve().parent, p)
    return s


def _rate_ratio(name: str) -> float:
    """FP8 dense tensor rate over FP32 CUDA-core rate."""
    g = gpu(name)
    assert g.fp8_dense_tflops is not None and g.fp32_tflops is not None
    return g.fp8_dense_tflops / g.fp32_tflops


def _hopper_fp8_tflops() -> float:
    rate = gpu("H100 SXM").fp8_dense_tflops
    assert rate is not None
    return rate


def _hopper_rate_ratio() -> float:
    return _rate_ratio("H100 SXM")


def _regime_note(p: dict[str, Any], s: dict[str, Any]) -> str:
    """Whether the MMA time is what this GEMM actually pays (compute-bound) or HBM is slower."""
    if s["intensity"] < s["ridge_fp8"]:
        return (f"This shape is memory-bound on {p['gpu']}: at {s['intensity']:,.0f} FLOP/B it "
                f"sits below the FP8 ridge ({s['ridge_fp8']:,.0f} FLOP/B), so reading its "
                f"{s['gemm_mb']:,.0f} MB from HBM ({s['hbm_us']:,.1f} µs) takes longer than the "
                "MMAs at peak: HBM, not the tensor cores, sets this GEMM's time, and a serialised "
                "promotion would partly hide behind the memory traffic. At compute-bound shapes "
                "it would come on top in full.")
    return (f"This shape is compute-bound on {p['gpu']} ({s['intensity']:,.0f} FLOP/B against a "
            f"ridge of {s['ridge_fp8']:,.0f}), so the MMA time is what the kernel pays and the "
            "promotion's share would come on top in full.")


def _gpu_text(p: dict[str, Any], s: dict[str, Any], hopper: bool) -> dict[str, str]:
    """Wording that depends on whether the variant's GPU is Hopper or Blackwell."""
    if hopper:
        return {
            "gpu_setting": (f"You run it on **{p['gpu']}** (Hopper), where the scales are applied "
                            "in software, in the GEMM's main loop."),
            "overhead_setting": f"on {p['gpu']}",
            "overhead_note": (
                f"That is the figure behind the design of Hopper FP8 GEMMs: at "
                f"{s['overhead_pct']:.0f} % the promotion cannot simply be paid in series."),
        }
    return {
        "gpu_setting": (
            f"The team is deciding how to run it on **{p['gpu']}** (Blackwell). The first plan is "
            "to port the Hopper kernel as it is: tensor-core MMAs per 128-deep block, scales "
            "applied by CUDA-core multiply-adds in the main loop."),
        "overhead_setting": f"for the Hopper-style kernel ported to {p['gpu']}",
        "overhead_note": (
            f"On Hopper the same arithmetic gives {s['hopper_overhead_pct']:.0f} %: Blackwell's "
            "tensor cores grew much faster than its CUDA cores, so software promotion would cost "
            "about twice as much there. That is why Blackwell applies block scales inside the MMA "
            "(last part)."),
    }


def _model_answer(s: dict[str, Any]) -> str:
    return (
        "Blackwell's tcgen05 MMA has block-scaled forms: the MMA takes the scale factors as "
        "operands and applies them to each block of K inside the tensor core, before the "
        f"products are summed. For the MX formats (MXFP8/MXFP6/MXFP4) a block is {s['mx_block']} "
        f"elements of K with one E8M0 (power-of-two) scale; NVFP4 uses blocks of "
        f"{s['nvfp4_block']} with E4M3 scales. So the CUDA-core promotion FMA and its register "
        "traffic disappear from the main loop; no warpgroup ping-pong is needed to hide it, "
        "which matters because on B200 the FP8-to-FP32 rate ratio makes serialised promotion "
        "cost about twice Hopper's share. The accumulators live in tensor memory (TMEM) instead "
        "of registers, the scales are staged into TMEM beside them, and one thread issues the "
        "asynchronous MMA. DeepSeek-V3's recipe fits after a conversion: a 128-wide scale block "
        f"is {s['mx_per_block']} MX blocks sharing one scale, and the FP32 scales must become "
        "powers of two (UE8M0), which is the format DeepGEMM's SM100 path asks for, packed four "
        "to an int32. DeepSeek-V3.1's model card says it was trained with UE8M0 scales to stay "
        "compatible with these microscaling formats."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    out: list[Mistake] = [
        Mistake("why_k", "fp8_range",
                "The scales are kept in FP32, so their format is not the obstacle: per-row or "
                "per-column FP32 scales are applied easily, after the MMA. The problem is where "
                "along the sum these scales change.", "fp8_range", kind="wrong_precision"),
        Mistake("why_k", "no_scales_at_all",
                "Scales that are constant along K (per tensor, per row of A, per column of B) "
                "factor out of the sum over K and are applied once to the finished result, in "
                "the epilogue. Only scales that change along K force work inside the main loop.",
                "no_scales_at_all", kind="misread_mechanism"),
        Mistake("why_k", "bandwidth",
                f"The scales are tiny: one FP32 value per {SCALE_BLOCK} FP8 values is about "
                f"{100 * 4 / SCALE_BLOCK:.0f} % more bytes. "
                "The obstacle is arithmetic, not bandwidth: the MMA sums over K and has no place "
                "for a factor that changes inside that sum.", "bandwidth",
                kind="misread_mechanism"),
        Mistake("why_k", "accumulator_bits",
                "That limited accumulator precision is real, and it is a second reason to promote "
                "partial sums every 128 elements, but it does not explain why the scale cannot "
                "be applied inside the MMA: the instruction sums over K and takes no factor that "
                "varies along it.", "accumulator_bits", kind="wrong_precision"),
        # -- block_formula ---------------------------------------------------------------------
        Mistake("block_formula", "sa2*sb2*(P1 + P2)",
                "That scales the whole sum with the last block's scales, as a kernel that "
                "factors the scales out of the loop would. Each block's partial needs its own "
                "scales.", "last_block", kind="misread_mechanism"),
        Mistake("block_formula", "sa1*sb1*(P1 + P2)",
                "That scales the whole sum with the first block's scales. Each block's partial "
                "needs its own scales.", "first_block", kind="misread_mechanism"),
        Mistake("block_formula", "(sa1*sb1 + sa2*sb2)*(P1 + P2)",
                "Multiplying the summed scales by the summed partials adds cross terms "
                "(sa1·sb1·P2 and sa2·sb2·P1). Each partial meets only its own block's scales.",
                "sums_multiplied", kind="misread_mechanism"),
        Mistake("block_formula", "sa1*P1 + sa2*P2",
                "The weight scales are missing: each 128 x 128 weight block has its own scale "
                "too.", "no_weight_scale", kind="miscounted_term"),
        Mistake("block_formula", "sa1*sb2*P1 + sa2*sb1*P2",
                "The weight scales are paired with the wrong K blocks: sb1 belongs to the first "
                "128 elements of K, with sa1 and P1.", "swapped_weight_scales",
                kind="misread_mechanism"),
        Mistake("block_formula", "(sa1 + sa2)*(sb1 + sb2)*(P1 + P2)/4",
                "Averaging the scales treats them as one per-tensor scale. They change along K, "
                "so each partial needs its own pair.", "averaged", kind="mean_vs_tail"),
    ]

    add = Slips(s, TOLERANCE, out,
                merge=near, accept_floor=1e-9, merge_floor=1e-9, skip=nonpositive).add

    # -- promotion_ratio (per cent) ------------------------------------------------------------
    r = s["promotion_ratio"].value
    add("promotion_ratio", r / 2,
        "Half the reference: the promotion is a fused multiply-add, 2 FLOPs per element, just as "
        "each of the MMA's multiply-adds is 2.", "fma_as_one", kind="flop_counting")
    add("promotion_ratio", r * 2,
        f"Twice the reference: the MMA does {SCALE_BLOCK} multiply-adds per output element per "
        f"block, {s['mma_flops_block']} FLOPs, against the promotion's 2.", "mma_as_macs",
        kind="flop_counting")
    add("promotion_ratio", r * 1.5,
        "You counted the scale product sa·sb as a third FLOP per element. It is formed once per "
        "row of the tile (sa depends on the row, sb on the block), not per element, so the "
        "promotion is one FMA per element.", "scale_product_per_element", kind="flop_counting")
    add("promotion_ratio", r * SCALE_BLOCK / WGMMA_K,
        f"That promotes after every WGMMA (K = {WGMMA_K}). The scales are constant over a whole "
        f"{SCALE_BLOCK}-deep block, so the kernel promotes once per {s['wgmmas_per_block']} "
        "WGMMAs.", "per_wgmma", kind="misread_mechanism")
    add("promotion_ratio", 100 / s["wgmmas_per_block"],
        "That counts instructions, not FLOPs: one promotion per 4 WGMMAs. Each WGMMA does "
        "thousands of multiply-adds per warpgroup; count FLOPs per output element.",
        "instructions", kind="flop_counting")

    # -- serial_overhead (per cent) ------------------------------------------------------------
    o = s["serial_overhead"].value
    add("serial_overhead", 2 * o,
        f"You used the sparse FP8 rate ({s['fp8_sparse_tflops']:,g} TFLOP/s). A dense GEMM runs "
        f"at the dense rate, {s['fp8_tflops']:,g}.", "sparse_rate", kind="peak_vs_achievable")
    add("serial_overhead", r * s["bf16_tflops"] / s["fp32_tflops"],
        f"You used the BF16 tensor rate ({s['bf16_tflops']:,g} TFLOP/s). The MMAs here are "
        f"FP8: {s['fp8_tflops']:,g} TFLOP/s dense.", "bf16_rate", kind="wrong_precision")
    add("serial_overhead", r,
        "That is the FLOP ratio alone. The promotion runs on the CUDA cores, which are "
        f"{s['rate_ratio']:.1f}× slower than the FP8 tensor cores, so its share of the time is "
        "that much larger than its share of the FLOPs.", "flops_not_time", kind="wrong_scope")
    add("serial_overhead", 100 * s["rate_ratio"],
        "That is the rate ratio alone: it would be the cost if the promotion did as many FLOPs "
        f"as the MMA. It does 1/{s['ratio_denominator']} of them.", "rate_only", kind="wrong_scope")
    add("serial_overhead", r * DEEPGEMM_TFLOPS / s["fp32_tflops"],
        f"You used DeepGEMM's achieved {DEEPGEMM_TFLOPS:,.0f} TFLOP/s. The question compares "
        "peak rates.", "achieved_rate", kind="peak_vs_achievable")
    add("serial_overhead", 100 * (1 / s["rate_ratio"]) / s["ratio_denominator"],
        "The rate ratio is upside down: the CUDA cores are the slow side, so the promotion's "
        "time share is larger than its FLOP share, not smaller.", "inverted", kind="inverted")
    if p["gpu"] not in HOPPER:
        add("serial_overhead", s["hopper_overhead_pct"],
            f"That is Hopper's ratio. On {p['gpu']} the FP8 tensor rate is "
            f"{s['fp8_tflops']:,.0f} TFLOP/s and the FP32 rate {s['fp32_tflops']:g}.",
            "hopper_rates", kind="wrong_precision")

    # -- why_k is a choice: every other option is listed above ---------------------------------
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [Holds(gpu(p["gpu"]).fp8_dense_tflops is not None, f"{p['gpu']} has FP8 tensor cores")]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    # No variant parameter sets them: typical magnitudes. An E4M3 scale is amax / 448
    # (activations about 10, weights about 0.5); a 128-long partial sum of E4M3 products is
    # thousands.
    return {"block_formula": {"sa1": 0.02, "sa2": 0.05, "sb1": 0.001, "sb2": 0.004,
                              "P1": 3000.0, "P2": 1200.0}}
