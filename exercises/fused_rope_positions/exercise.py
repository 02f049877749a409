"""Q15: fusing RoPE saves a little bandwidth; holding positions in BF16 loses a lot of position.

An unfused RoPE kernel reads Q and K back from HBM after the QKV projection and writes them again:
2 (read + write) x (Hq + Hkv) x D x 2 B per token per layer, 20,480 B for Llama-3.1-8B. Summed
over the layers and a 4K prefill that is 2.7 GB, 0.8 ms on an H100, about 0.56 % of a prefill
that runs 142 ms at 50 % MFU: real, small. At batch-1 decode the bytes are nothing; what fusing
removes there is one kernel launch per layer.

The precision trap is large. BF16 keeps 8 significant bits, so integers are exact only up to 256;
in [2^e, 2^(e+1)) its spacing is 2^(e-7) and a position can move by half of that. Position
100,000 becomes 99,840; anywhere in [65,536, 131,072) the error reaches 256 positions. Pair i of a
head turns by position x theta^(-2i/D) radians, so a position error E turns it by E x inv_freq_i
radians too many; every pair where that can pass pi (half a turn) no longer says anything about
position. For Llama 3's base 500,000 and D = 128 that is 22 of the 64 pairs.

The BF16 rounding (round to nearest, ties to even, on 8 significant bits) is implemented here,
never typed in. The kernel part (kernel/) asks for a fused RoPE that builds the angles in FP32
from integer positions; its checks include positions near 100,000, where a BF16 position fails.
"""
from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import draw_sensible
from exercises.feasibility import NODE_GPUS, Claim, Fits, WithinContext, check
from exercises.kernel_tolerance import tolerance_table
from exercises.slips import Slips, nonpositive, tolerances, within
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# Number formats by significant bits (the stored mantissa plus the implicit leading one).
BF16_BITS = 8  # 7 stored + 1: the same 8-bit exponent as FP32, far fewer mantissa bits
FP16_BITS = 11  # 10 stored + 1 (TF32 keeps the same 10)
FP32_BITS = 24  # 23 stored + 1: every integer below 2^24 is exact
FP16_MAX = (2 - 2.0 ** -(FP16_BITS - 1)) * 2.0**15  # the largest finite FP16 value
ORIGINAL_ROPE_BASE = 10_000.0  # the RoPE paper's base, still the default in many configs
RECORD_POSITION = 15_962  # the position candle PR #3520 reports rounded by a BF16 cast
BF16_STORAGE = 2  # bytes per element of Q and K
FP32_STORAGE = 4

# Models with RoPE over the whole head (no partial rotary) and a rope_theta in the catalog.
MODELS = ("Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B", "Mixtral-8x7B", "Gemma-2-9B",
          "Gemma-2-27B")
GPUS = ("A100 SXM 80GB", "H100 SXM", "H200 SXM", "B200")
PREFILLS = (2048, 4096, 8192)
MFU_PCTS = (40, 45, 50, 55, 60)
# What one kernel launch costs a batch-1 decode step when the launches are not captured in a
# CUDA graph: the CPU's launch path plus the idle gap before the tiny kernel runs. A stated
# assumption of the statement (a few microseconds is the usual range).
LAUNCH_US = 4.0
DECODE_WEIGHT_SHARE = 0.8  # of each GPU's HBM the weights may fill when sizing the decode replica

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-8B",
    "gpu": "H100 SXM",
    "prefill": 4096,
    "mfu_pct": 50,
    "position": 100_000,
}


# ----------------------------------------------------------------------------------------------
# Number formats


def round_to_bits(x: int, bits: int, mode: str = "nearest") -> int:
    """The integer x > 0 rounded to `bits` significant bits (a float format's significand).

    "nearest": to the nearest representable value, ties to the one with an even last bit (IEEE
    round-to-nearest-even, what a cast does); "down": towards zero (truncating the bits);
    "up": away from zero.
    """
    if x <= 0:
        raise ValueError(f"a position is a positive integer, got {x}")
    step = spacing(x, bits)
    q, r = divmod(x, step)
    if mode == "down":
        return q * step
    if mode == "up":
        return (q + (r > 0)) * step
    if 2 * r > step or (2 * r == step and q % 2 == 1):
        q += 1
    return q * step


def spacing(x: int, bits: int) -> int:
    """Gap between neighbouring representable values around x (1 while x < 2^bits): x in
    [2^e, 2^(e+1)) has spacing 2^(e - bits + 1)."""
    e = x.bit_length() - 1
    return 1 << max(0, e - bits + 1)


def bf16(x: int) -> int:
    """What a position becomes when cast to BF16 (round to nearest even)."""
    return round_to_bits(x, BF16_BITS)


def binade(x: int) -> tuple[int, int]:
    """[2^e, 2^(e+1)), the power-of-two range x falls in."""
    e = x.bit_length() - 1
    return 1 << e, 1 << (e + 1)


def max_error(x: int, bits: int = BF16_BITS) -> int:
    """The largest |p - round(p)| over the positions p of x's binade: half the spacing (0 where
    every integer is exact)."""
    return spacing(x, bits) // 2


# ----------------------------------------------------------------------------------------------
# RoPE frequencies


def inv_freqs(theta: float, head_dim: int, pairs_exponent: int | None = None) -> list[float]:
    """inv_freq_i = theta^(-2i/D) for the D/2 pairs; `pairs_exponent` replaces the D/2 in
    theta^(-i/(D/2)) to model the slip of dividing by D instead."""
    half = head_dim // 2
    denom = half if pairs_exponent is None else pairs_exponent
    return [theta ** (-i / denom) for i in range(half)]


def scrambled(theta: float, head_dim: int, error: float, threshold: float = math.pi,
              pairs_exponent: int | None = None) -> int:
    """How many pairs a position error of `error` can turn by more than `threshold` radians."""
    return sum(1 for f in inv_freqs(theta, head_dim, pairs_exponent) if f * error > threshold)


def crossing(theta: float, head_dim: int, error: float, threshold: float = math.pi) -> float:
    """The real-valued pair index where inv_freq_i x error = threshold (how close the count is to
    changing: the variants keep it away from an integer)."""
    return (head_dim / 2) * math.log(error / threshold) / math.log(theta)


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw a model, a GPU, a prefill length, an MFU and a long-context position until the
    variant is sensible."""
    def draw(rng: random.Random) -> dict[str, Any]:
        name = rng.choice(MODELS)
        m = model(name)
        assert m.max_context is not None
        window = m.sliding_window or m.max_context
        prefills = [n for n in PREFILLS if n <= min(window, m.max_context // 2)]
        p = {
            "model": name,
            "gpu": rng.choice(GPUS),
            "prefill": rng.choice(prefills),
            "mfu_pct": rng.choice(MFU_PCTS),
            # A position in the upper part of the context window, where long-context requests live.
            "position": rng.randrange(m.max_context // 4, m.max_context),
        }
        return p

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    """The position really moves (and not by exactly the range's worst case), the reference pair
    count is not on an edge, and every number part keeps two mistakes."""
    if check(constraints(p)):  # a story that could not happen: see exercises/feasibility.py
        return False
    m = model(p["model"])
    pos = p["position"]
    err = abs(pos - bf16(pos))
    if err == 0 or err == max_error(pos):
        return False
    assert m.rope_theta is not None and m.head_dim is not None
    # No pair's worst turn within 0.5 % of pi: a student's rounding of pi or of inv_freq must not
    # decide the count.
    worst = max_error(pos)
    if any(abs(f * worst / math.pi - 1) < 0.005 for f in inv_freqs(m.rope_theta, m.head_dim)):
        return False
    # ... nor the crossing index, which the count is the ceiling of, within 0.5 % of a whole
    # number (the tolerance policy's boundary rule: logs rounded along the way move it).
    c = crossing(m.rope_theta, m.head_dim, worst)
    if 0 < c < m.head_dim // 2 and min(c - math.floor(c), math.ceil(c) - c) < 0.005 * c:
        return False
    ms = mistakes(p)
    return all(sum(x.part == part for x in ms) >= 2 for part in TOLERANCE)


# ----------------------------------------------------------------------------------------------
# The reference


def prefill_flops(name: str, n: int) -> float:
    """2 FLOPs per active weight per token plus causal attention, 2 L (Hq D) n^2: QK^T and PV
    are 2 n^2 Hq D each in full, half of that under the causal mask. Sliding-window models only
    get prompts that fit their window, so every layer sees the whole prompt."""
    m = model(name)
    return 2 * m.active_params * n + 2 * m.layers * m.q_dim * n * n


def decode_gpus(name: str, gpu_name: str) -> int:
    """The fewest GPUs, a power of two, whose HBM holds the model's BF16 weights with 20 % left
    for the KV cache and activations."""
    need = model(name).params * BF16_STORAGE / (DECODE_WEIGHT_SHARE * gpu(gpu_name).hbm_bytes)
    return 1 << max(0, math.ceil(math.log2(need)))


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    assert m.kv_heads is not None and m.head_dim is not None and m.rope_theta is not None
    hq, hkv, d, layers = m.q_heads, m.kv_heads, m.head_dim, m.layers
    n, mfu = p["prefill"], p["mfu_pct"] / 100
    pos = p["position"]

    # -- part 1: the bytes an unfused RoPE moves --------------------------------------------------
    q_bytes = hq * d * BF16_STORAGE
    k_bytes = hkv * d * BF16_STORAGE
    rope_bytes = 2 * (q_bytes + k_bytes)  # read Q and K, write them back
    # -- part 2: against the prefill --------------------------------------------------------------
    prefill_bytes = rope_bytes * layers * n
    rope_s = prefill_bytes / g.hbm_bytes_per_s
    flops = prefill_flops(p["model"], n)
    linear_flops = 2 * m.active_params * n
    attn_flops = flops - linear_flops
    compute_s = flops / (mfu * g.bf16_flops)
    saving_pct = 100 * rope_s / compute_s
    # -- part 3: the position in BF16 -------------------------------------------------------------
    pos_bf16 = bf16(pos)
    lo, hi = binade(pos)
    step = spacing(pos, BF16_BITS)
    worst = max_error(pos)
    # -- part 4: pairs scrambled ------------------------------------------------------------------
    half = d // 2
    freqs = inv_freqs(m.rope_theta, d)
    count = scrambled(m.rope_theta, d, worst)
    last = count - 1  # the slowest pair still scrambled (pairs 0 .. count-1)
    # -- decode: why fusing still pays ------------------------------------------------------------
    # Batch-1 decode on the fewest GPUs (a power of two) whose HBM holds the BF16 weights with a
    # fifth to spare; every GPU runs every layer's RoPE on its share of the heads.
    tp = decode_gpus(p["model"], p["gpu"])
    decode_rope_bytes = rope_bytes * layers  # one token, every layer, all GPUs together
    decode_rope_us = decode_rope_bytes / tp / g.hbm_bytes_per_s * 1e6
    decode_step_ms = m.active_params * BF16_STORAGE / tp / g.hbm_bytes_per_s * 1e3
    launches_us = layers * LAUNCH_US

    s: dict[str, Any] = {
        # part answers
        "rope_bytes": Quantity(rope_bytes, "B"),
        "saving_pct": Quantity(saving_pct, "%"),
        "bf16_position": Quantity(pos_bf16, ""),
        "scrambled_pairs": Quantity(count, ""),
        # The count is ceil(crossing), clamped to the pairs there are (policy: boundary rule).
        "scrambled_pairs_unrounded": min(max(crossing(m.rope_theta, d, worst), 0.0), half),
        "kernel": "kernel/reference.py",
        "culprit": "bf16_angles",
        # givens the statement prints
        "layers": layers,
        "q_heads": hq,
        "kv_heads": hkv,
        "head_dim": d,
        "pairs": half,
        "rope_theta": m.rope_theta,
        "max_context": m.max_context,
        "active_params": m.active_params,
        "active_b": m.active_params / 1e9,
        "moe_note": (f" ({m.active_params / 1e9:.2f} B active of {m.params / 1e9:.1f} B: "
                     "count the active weights)") if m.is_moe else "",
        "params_word": "active parameters" if m.is_moe else "parameters",
        "param_word": "active parameter" if m.is_moe else "parameter",
        "q_dim": m.q_dim,
        "bf16_tflops": g.bf16_dense_tflops,
        "hbm_tbps": g.hbm_tbps,
        "bf16_bits": BF16_BITS,
        "bf16_stored_bits": BF16_BITS - 1,
        "fp16_bits": FP16_BITS,
        "fp32_bits": FP32_BITS,
        "bf16_exact_limit": 1 << BF16_BITS,
        "fp32_exact_limit": 1 << FP32_BITS,
        "launch_us": LAUNCH_US,
        "scaling_note": (" Ignore Llama 3.1's RoPE scaling: it stretches only slow pairs, whose "
                         "angles change too little per position to matter here."
                         if p["model"].startswith("Llama-3.1") else ""),
        # intermediates for the solution
        "q_bytes": q_bytes,
        "k_bytes": k_bytes,
        "q_elems": hq * d,
        "k_elems": hkv * d,
        "rope_bytes_all_layers": rope_bytes * layers,
        "prefill_bytes": prefill_bytes,
        "prefill_gb": prefill_bytes / 1e9,
        "rope_ms": rope_s * 1e3,
        "flops": flops,
        "tflops_total": flops / 1e12,
        "linear_tflops": linear_flops / 1e12,
        "attn_tflops": attn_flops / 1e12,
        "attn_share_pct": 100 * attn_flops / flops,
        "compute_ms": compute_s * 1e3,
        "eff_tflops": mfu * g.bf16_dense_tflops,
        "pos_bf16": pos_bf16,
        "pos_error": pos - pos_bf16,
        "pos_abs_error": abs(pos - pos_bf16),
        "binade_lo": lo,
        "binade_hi": hi,
        "binade_exp": lo.bit_length() - 1,
        "binade_exp_next": lo.bit_length(),
        "binade_span": hi - lo,
        "pos_round": pos_bf16 // step,
        "error_direction": "lower" if pos_bf16 < pos else "higher",
        "spacing": step,
        "spacing_exp": step.bit_length() - 1,
        "max_error": worst,
        "distinct_in_binade": (hi - lo) // step + 1,
        "pos_quot": pos / step,
        "pos_floor": pos // step,
        "crossing": crossing(m.rope_theta, d, worst),
        "last_pair": last,
        "last_pair_turn": freqs[last] * worst,
        "next_pair_turn": freqs[count] * worst if count < half else 0.0,
        "last_pair_wavelength": 2 * math.pi / freqs[last],
        "pair0_turn": freqs[0] * worst,
        "pair0_turns": freqs[0] * worst / (2 * math.pi),
        "actual_count": scrambled(m.rope_theta, d, abs(pos - pos_bf16)),
        "fp32_phase_rad": pos * 2.0 ** -FP32_BITS,
        # Pair 0 turns by one radian per position, so that is how many times smaller FP32's
        # rounding is than the smallest BF16 position error.
        "fp32_margin": 1 / (pos * 2.0 ** -FP32_BITS),
        # The public record's examples, computed rather than quoted: candle PR #3520's position
        # and Llama 3's base (TransformerEngine issue #1245).
        "record_pos": RECORD_POSITION,
        "record_pos_bf16": bf16(RECORD_POSITION),
        "llama3_theta": model("Llama-3.1-8B").rope_theta,
        "decode_rope_bytes": decode_rope_bytes,
        "decode_rope_us": decode_rope_us,
        "decode_step_ms": decode_step_ms,
        "launches_us": launches_us,
        "decode_tp": tp,
        "launches_pct": 100 * launches_us / (decode_step_ms * 1e3),
        "decode_bytes_pct": 100 * decode_rope_us / (decode_step_ms * 1e3),
    }
    s["decode_why"] = _model_answer(p, s)
    # The kernel's tolerances as the harness applies them (kernel/task.py), for the statement.
    s["tolerance_table"] = tolerance_table(Path(__file__).resolve().parent, p)
    return s


def _replica(s: dict[str, Any]) -> str:
    # Where the weights need more than one GPU, say so: each GPU streams its share of them.
    if s["decode_tp"] == 1:
        return " (one GPU streaming the weights)"
    return f" (the weights split over {s['decode_tp']} GPUs)"


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"The scrambling comes from one tensor in the wrong dtype: the position ids (or inv_freq, "
        f"or their product) held in BF16. BF16 keeps {s['bf16_bits']} significant bits, so "
        f"position {p['position']:,} is read as {s['pos_bf16']:,}, and anywhere in "
        f"[{s['binade_lo']:,}, {s['binade_hi']:,}) a token can be off by {s['max_error']}: "
        f"{s['scrambled_pairs'].value} of the {s['pairs']} frequency pairs then turn by more "
        "than half a circle and carry no positional information. The fix is to build the angles "
        f"in FP32 from integer positions (exact up to 2^{s['fp32_bits']}), take cos and sin in "
        "FP32, and cast "
        "only cos/sin or the rotated output to BF16; that costs a few significant digits, not "
        "positions. Fusing still pays at decode, but not for bytes: at batch 1 the unfused RoPE "
        f"moves {s['decode_rope_bytes']:,} B per token, {s['decode_rope_us']:.2f} µs of a "
        f"{s['decode_step_ms']:.1f} ms step{_replica(s)}. What it costs is {s['layers']} extra "
        f"kernel launches per step on every GPU, one per layer: at about {s['launch_us']:g} µs "
        f"each that is {s['launches_us']:.0f} µs, {s['launches_pct']:.1f} % of the step, plus a "
        "round trip of Q and K through memory between kernels. Folding RoPE into the QKV-projection "
        "epilogue or the attention kernel removes both; CUDA graphs shrink the launch cost "
        "but not the extra kernel."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def _from_larger(a: float, b: float, rel: float) -> bool:
    """Symmetric: two slips within the tolerance of the larger would be one answer."""
    return within(min(a, b), max(a, b), rel)


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m = model(p["model"])
    assert m.rope_theta is not None
    hq, hkv, d, layers = s["q_heads"], s["kv_heads"], s["head_dim"], s["layers"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge=_from_larger, accept_floor=1e-9, merge_floor=1e-9,
                skip=nonpositive).add

    # -- rope_bytes -------------------------------------------------------------------------------
    rb = s["rope_bytes"].value
    add("rope_bytes", 2 * s["q_bytes"],
        f"That is Q alone. K is rotated too: {hkv} KV heads of {d}.", "q_only", kind="k_without_v")
    add("rope_bytes", rb / 2,
        "Half the reference: an unfused RoPE reads Q and K from HBM and writes them back, both.",
        "read_only", kind="miscounted_term")
    add("rope_bytes", rb * FP32_STORAGE / BF16_STORAGE,
        "You used 4 bytes per element. Q and K come out of the projection in BF16, 2 bytes.",
        "fp32", kind="wrong_precision")
    add("rope_bytes", 2 * (hq + 2 * hkv) * d * BF16_STORAGE,
        "V is not rotated: RoPE touches Q and K only.", "with_v", kind="k_without_v")
    add("rope_bytes", rb * layers,
        f"That is all {layers} layers. The part asks for one layer.", "all_layers",
        kind="one_layer")
    add("rope_bytes", 2 * 2 * hq * d * BF16_STORAGE,
        f"You gave K as many heads as Q. With GQA there are {hkv} KV heads, not {hq}.", "mha",
        kind="q_vs_kv_heads")

    # -- saving_pct -------------------------------------------------------------------------------
    sp = s["saving_pct"].value
    mfu = p["mfu_pct"] / 100
    add("saving_pct", sp / layers,
        f"You counted one layer's RoPE traffic against the whole prefill: multiply by the "
        f"{layers} layers.", "one_layer", kind="one_layer")
    add("saving_pct", sp / 2,
        "Half the reference: count both the read and the write of Q and K.", "read_only",
        kind="miscounted_term")
    add("saving_pct", sp * 2,
        "Twice the reference: Q and K are BF16 (2 bytes), and the FLOP rate is the DENSE BF16 "
        "one.", "fp32_or_sparse", kind="wrong_precision")
    add("saving_pct", sp * mfu,
        f"You timed the prefill at the peak rate. It runs at {p['mfu_pct']} % MFU, so it takes "
        "longer and the RoPE share is smaller.", "peak_rate", kind="peak_vs_achievable")
    add("saving_pct", sp * hq / (hq + hkv),
        "You left K out: RoPE rotates Q and K.", "q_only", kind="k_without_v")
    add("saving_pct", 100 * s["rope_ms"] / (s["linear_tflops"] * 1e12 / (
        mfu * s["bf16_tflops"] * 1e12) * 1e3),
        "You left attention out of the prefill FLOPs; the causal score and value products add "
        f"{s['attn_tflops']:.1f} TFLOP.", "no_attention", kind="miscounted_term")

    # -- bf16_position ----------------------------------------------------------------------------
    pos = p["position"]
    add("bf16_position", pos,
        f"BF16 cannot hold {pos:,}: with {BF16_BITS} significant bits, integers are exact only up "
        f"to {1 << BF16_BITS}.", "exact", kind="wrong_precision")
    add("bf16_position", round_to_bits(pos, BF16_BITS, "down"),
        "You truncated. A cast rounds to the NEAREST representable value (ties to even).",
        "truncated", kind="rounding")
    add("bf16_position", round_to_bits(pos, BF16_BITS, "up"),
        "You rounded up. A cast rounds to the NEAREST representable value (ties to even).",
        "rounded_up", kind="rounding")
    add("bf16_position", round_to_bits(pos, BF16_BITS + 1),
        f"That keeps {BF16_BITS + 1} significant bits. BF16 stores {BF16_BITS - 1} mantissa bits "
        f"plus the implicit leading one: {BF16_BITS}.", "nine_bits", kind="wrong_precision")
    add("bf16_position", round_to_bits(pos, BF16_BITS - 1),
        f"That keeps {BF16_BITS - 1} significant bits: the {BF16_BITS - 1} stored mantissa bits "
        "also get the implicit leading one.", "seven_bits", kind="wrong_precision")
    add("bf16_position", round_to_bits(pos, FP16_BITS),
        f"That is {FP16_BITS} significant bits (FP16 or TF32). BF16 keeps {BF16_BITS}.",
        "fp16_bits", kind="wrong_precision")

    # -- scrambled_pairs --------------------------------------------------------------------------
    cnt = s["scrambled_pairs"].value
    theta, worst = m.rope_theta, s["max_error"]
    add("scrambled_pairs", scrambled(theta, d, s["pos_abs_error"]),
        f"You used this position's own error ({s['pos_abs_error']}). The part asks for the worst "
        f"error in its range, half the spacing: {worst}.", "own_error", kind="wrong_scope")
    add("scrambled_pairs", scrambled(theta, d, s["spacing"]),
        f"The error is at most half the spacing ({worst}), not the spacing itself: a cast "
        "rounds to the nearest value.", "full_spacing", kind="rounding")
    add("scrambled_pairs", scrambled(theta, d, worst, 2 * math.pi),
        "A pair is lost once its angle can be off by more than pi: past half a turn the "
        "rotation can land anywhere on the circle.", "two_pi", kind="misread_mechanism")
    add("scrambled_pairs", scrambled(theta, d, worst, pairs_exponent=d),
        f"The exponent is -2i/D = -i/{d // 2}: the {d // 2} pairs share the range, not {d} of "
        "them.", "exponent_over_d", kind="misread_mechanism")
    add("scrambled_pairs", s["pairs"] - cnt,
        "That counts the pairs that survive, not the scrambled ones.", "complement",
        kind="inverted")
    add("scrambled_pairs", 2 * cnt,
        f"Count pairs, not dimensions: a head of {d} has {d // 2} pairs.", "dimensions",
        kind="misread_mechanism")
    if theta != ORIGINAL_ROPE_BASE:
        add("scrambled_pairs", scrambled(ORIGINAL_ROPE_BASE, d, worst),
            f"You used the original RoPE base, {ORIGINAL_ROPE_BASE:,.0f}. This model's "
            f"rope_theta is {theta:,.0f}.", "base_10000", kind="misread_mechanism")

    # -- culprit ----------------------------------------------------------------------------------
    out.append(Mistake(
        "culprit", "bf16_cossin",
        f"BF16 cos/sin values are off by at most 2^-{BF16_BITS} of their size: a mild, bounded "
        "error that cannot move a token by hundreds of positions. The angle inputs can.",
        "cos_sin", kind="wrong_precision"))
    out.append(Mistake(
        "culprit", "bf16_qk",
        "Q and K are BF16 in every production engine and attention works fine; the rotation "
        "itself is done in FP32 registers. The damage is in the angle, not the vectors.", "qk",
        kind="wrong_precision"))
    out.append(Mistake(
        "culprit", "fp32_angles",
        f"FP32 is exact for integer positions up to 2^{FP32_BITS}; its angles are off by about "
        f"{s['fp32_phase_rad']:.3f} rad here, against a BF16 position error of {worst} "
        "positions. FP64 is not needed.", "fp64", kind="wrong_precision"))
    out.append(Mistake(
        "culprit", "fp16_positions",
        f"FP16 would be worse for long contexts: exact only up to {1 << FP16_BITS:,} and "
        f"infinite past {FP16_MAX:,.0f}. The fix is FP32 angles from integer positions.",
        "fp16", kind="wrong_precision"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    m = model(p["model"])
    # "in BF16 on H100 GPUs": no count, so at most one node.
    return [
        Fits("BF16 weights and the prefill's KV", p["gpu"], NODE_GPUS,
             m.weight_bytes(2) + m.kv_bytes_for_tokens(p["prefill"])),
        WithinContext(p["model"], p["prefill"], "the profiled prefill"),
        WithinContext(p["model"], p["position"] + 1, "the long-context token's position"),
    ]
