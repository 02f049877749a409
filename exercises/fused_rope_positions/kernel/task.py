"""Fused RoPE from integer positions: what the kernel harness runs (trusted; standard library and
torch only, nothing of ours).

The student's file defines `rope_fused(q, positions, theta, out)`: rotate-half (Llama / NeoX)
RoPE of q, shape (T, H, D) in BF16, with the angle of pair i at token t equal to
positions[t] * theta^(-2i/D), written into `out` (same shape, BF16). The angles must be built in
FP32 (or better) from the integer positions, inside the kernel.

The checks are grouped by the bug each group catches:

- "short positions": every position below 256, where BF16 holds every integer exactly. A kernel
  that rounds positions to BF16 passes here, which is the trap: layout, sign and exponent bugs
  fail already.
- "long positions": positions between 50,000 and 131,071, where BF16 spacing is 256 to 512, so
  a position held in BF16 is off by up to 256 and the output is scrambled (errors of the order
  of the values themselves).
- "ragged tail": T not a multiple of any power-of-two block (37, 101 tokens), D 64 or 128,
  positions below 256, so only a kernel that skips or mis-masks the last partial block fails.
- "inputs unchanged": shuffled, repeated positions; the harness also checks q and positions are
  bitwise unchanged after every case (an in-place RoPE fails every case).

Tolerance (`tolerance`): BF16 output, so rtol 1e-2 (one BF16 step is at most 2^-7 relative) and
an atol in units of the case's value scale. FP32 angles are themselves off by up to a few
position x 2^-24 radians (the product's rounding plus a few ulps of inv_freq), ~0.01 to 0.03 rad
at 131,072; the atol grows with the largest position to admit that and nothing near it: a BF16
position error of even one position is a full radian in the fastest pair, and at these
positions BF16 errors are up to 256.
"""
from __future__ import annotations

import math
from typing import Any

ENTRY = "rope_fused"
ARGS = ("q", "positions", "theta", "out")
OUTPUTS = ("out",)

# FP32 angle error per unit of position, in radians, with headroom: the product pos * inv_freq
# is rounded once (half an ulp, 2^-25 relative) and inv_freq carries a few ulps from exp2/log2
# or pow (the GPU's ex2.approx alone is good to about 2^-22.5). Measured in the interpreter: at
# most 1.4 x 2^-24; a worst-case 2-ulp inv_freq error on every pair gives about 4 x 2^-24.
_FP32_PHASE_PER_POSITION = 8 * 2.0**-24
# A phase error d moves an output by d x |pair|; |pair| is a few times the scale (the norm of two
# standard normals passes 3.5 with probability 0.2 %, and the largest ones rarely meet the
# largest d).
_PAIR_NORM = 3.5


def _case(cid: str, label: str, t: int, h: int, d: int, lo: int, hi: int, theta: float,
          pattern: str = "random", pos_dtype: str = "int32", scale: float = 1.0) -> dict[str, Any]:
    """One case: T tokens of H heads of width D; positions drawn in [lo, hi) by `pattern`
    ("random": independent draws; "run": a contiguous run starting at a random point, as in a
    prefill chunk; "shuffled": draws with repeats, in no order)."""
    return {"id": cid, "label": label, "T": t, "H": h, "D": d, "pos_lo": lo, "pos_hi": hi,
            "theta": theta, "pattern": pattern, "pos_dtype": pos_dtype, "scale": scale}


def cases(params: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    """Preview shapes stay tiny for the CPU interpreter (at most 7 programs a launch); "gpu" runs
    Llama-3.1-8B-like widths (32 Q + 8 K heads of 128) at 4K tokens; "bench" times a 4K prefill."""
    if mode == "preview":
        return [
            _case("short-d64", "short positions", 64, 4, 64, 0, 200, 10_000.0),
            _case("short-d128", "short positions", 32, 2, 128, 0, 256, 500_000.0, "run",
                  "int64", 3.0),
            _case("long-run-100k", "long positions", 64, 3, 128, 99_900, 100_100, 500_000.0,
                  "run", "int64"),
            _case("long-random-d64", "long positions", 48, 2, 64, 50_000, 131_072, 1_000_000.0,
                  scale=0.5),
            _case("tail-37", "ragged tail", 37, 2, 64, 0, 256, 10_000.0),
            _case("tail-101", "ragged tail", 101, 1, 128, 0, 256, 500_000.0, "run", "int64", 2.0),
            _case("shuffled", "inputs unchanged", 16, 2, 64, 0, 64, 10_000.0, "shuffled"),
        ]
    if mode == "gpu":
        return [
            _case("short-256x40", "short positions", 256, 40, 128, 0, 256, 500_000.0, "run"),
            _case("short-d64", "short positions", 200, 16, 64, 0, 256, 10_000.0),
            _case("long-4k-random", "long positions", 4096, 40, 128, 50_000, 131_072,
                  500_000.0, pos_dtype="int64"),
            _case("long-4k-run", "long positions", 4096, 40, 128, 126_976, 131_072, 500_000.0,
                  "run"),
            _case("tail-4095", "ragged tail", 4095, 40, 128, 0, 256, 500_000.0),
            _case("tail-1001-d64", "ragged tail", 1001, 12, 64, 0, 256, 1_000_000.0, "random",
                  "int64", 2.0),
            _case("shuffled-512", "inputs unchanged", 512, 40, 128, 0, 256, 500_000.0,
                  "shuffled"),
        ]
    if mode == "bench":
        # Llama-3.1-8B: 32 query heads and 8 KV heads of 128, Q and K rotated in one launch.
        return [
            _case("prefill-4k", "bench", 4096, 40, 128, 0, 4096, 500_000.0, "run", "int64"),
            _case("chunk-4k-at-127k", "bench", 4096, 40, 128, 126_976, 131_072, 500_000.0,
                  "run", "int64"),
        ]
    raise ValueError(f"unknown mode {mode!r}")


def _positions(case: dict[str, Any], gen: Any, torch: Any) -> Any:
    t, lo, hi = case["T"], case["pos_lo"], case["pos_hi"]
    if case["pattern"] == "run":
        # A contiguous run that fits in [lo, hi): the positions of one prefill chunk.
        start = lo + int(torch.randint(0, max(1, hi - lo - t + 1), (1,), generator=gen))
        pos = torch.arange(start, start + t, dtype=torch.int64)
    else:  # "random" and "shuffled": independent draws, repeats allowed, unsorted
        pos = torch.randint(lo, hi, (t,), generator=gen, dtype=torch.int64)
    return pos.to(getattr(torch, case["pos_dtype"]))


def make(case: dict[str, Any], seed: int, torch: Any, device: str) -> dict[str, Any]:
    """q ~ scale * N(0, 1) rounded to BF16, positions as the case says, out left empty."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    t, h, d = case["T"], case["H"], case["D"]
    q = (torch.randn(t, h, d, generator=gen) * case["scale"]).to(torch.bfloat16)
    positions = _positions(case, gen, torch)
    return {
        "q": q.to(device),
        "positions": positions.to(device),
        "theta": float(case["theta"]),
        "out": torch.empty(t, h, d, dtype=torch.bfloat16, device=device),
    }


def reference(args: dict[str, Any], case: dict[str, Any], torch: Any) -> dict[str, Any]:
    """RoPE in float64 from the BF16 inputs: out_i = x_i cos a_i - x_{i+D/2} sin a_i and
    out_{i+D/2} = x_{i+D/2} cos a_i + x_i sin a_i, with a_i = pos * theta^(-2i/D)."""
    x = args["q"].detach().to("cpu", torch.float64)
    pos = args["positions"].detach().to("cpu", torch.float64)
    d = x.shape[-1]
    half = d // 2
    inv_freq = float(args["theta"]) ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    angle = pos[:, None] * inv_freq[None, :]
    cos, sin = angle.cos()[:, None, :], angle.sin()[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return {"out": torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)}


def tolerance(case: dict[str, Any], name: str) -> tuple[float, float]:
    """(rtol, atol) for `out`: BF16 rounding (rtol) plus an absolute slack of 1 % of the value
    scale and the FP32 angle error at the case's largest position (see the module docstring):
    0.011 x scale below 256, 0.23 x scale at 131,071, where the interpreter's FP32 kernel needs
    0.03, an FP32 kernel with a 2-ulp inv_freq error on every pair 0.14, and a position off by
    one in pair 0 already costs ~1 x scale (BF16 positions: ~10 x scale)."""
    max_pos = case["pos_hi"] - 1
    phase = _FP32_PHASE_PER_POSITION * max_pos
    return 1e-2, case["scale"] * (1e-2 + _PAIR_NORM * phase)


def roofline(case: dict[str, Any]) -> dict[str, float]:
    """The least HBM traffic: read q and write out once (BF16), read the positions once. FLOPs:
    3 per element for the rotation (two multiplies and an add) and one multiply per (token,
    pair) for the angle; cos and sin are not counted, as roofline tables usually leave them out."""
    t, h, d = case["T"], case["H"], case["D"]
    pos_bytes = 4 if case["pos_dtype"] == "int32" else 8
    return {"bytes": float(2 * t * h * d * 2 + t * pos_bytes),
            "flops": float(3 * t * h * d + t * (d // 2))}


def describe(case: dict[str, Any]) -> str:
    order = {"random": "random", "run": "a contiguous run", "shuffled": "shuffled, repeats"}
    return (f"T={case['T']} tokens, H={case['H']}, D={case['D']}, positions in "
            f"[{case['pos_lo']:,}, {case['pos_hi']:,}) ({order[case['pattern']]}, "
            f"{case['pos_dtype']}), theta {math.floor(case['theta']):,}")
