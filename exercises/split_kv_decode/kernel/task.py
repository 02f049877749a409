"""Trusted task description for the split-KV decode kernel (Q14), imported by the kernel harness.

Standard library and the torch module the harness passes in; nothing of ours. Every case is one
decode step: one query token per head, the whole KV cache of `seq_len` keys, `num_splits` ranges.

Check groups (labels) and the bug each one is there to catch:
- "even splits": the merge itself (plain average of split outputs, dividing by the number of
  splits, no 1/sqrt(D) scale, a wrong GQA head mapping fail here already);
- "ragged last split": a last split or block that drops the keys past the last full block;
- "empty split": more splits than the keys can fill, so a split has no keys: its partial output
  must not be NaN and its weight must be exactly 0;
- "large scores": queries scaled so scores reach 100+, where exp(LSE_i) overflows fp32 unless
  the merge subtracts the largest LSE first;
- "batch and groups": batch 2 with 4 query heads per KV head (batch strides, head mapping);
- "long context" (GPU runs only): production shapes, Llama-3.1-8B at 32K.
"""
from __future__ import annotations

import math
from typing import Any

ENTRY = "split_kv_decode"
ARGS = ("q", "k", "v", "out", "lse", "num_splits")
OUTPUTS = ("out", "lse")

_DTYPES = ("float16", "bfloat16")


def _case(cid: str, label: str, *, batch: int = 1, kv_heads: int = 2, group: int = 2,
          seq_len: int, head_dim: int = 64, num_splits: int, dtype: str = "float16",
          q_scale: float = 1.0) -> dict[str, Any]:
    return {
        "id": cid, "label": label, "batch": batch, "q_heads": kv_heads * group,
        "kv_heads": kv_heads, "seq_len": seq_len, "head_dim": head_dim,
        "num_splits": num_splits, "dtype": dtype, "q_scale": q_scale,
    }


def _preview() -> list[dict[str, Any]]:
    # Small enough for the Triton interpreter: at most 16 split programs, 3 key blocks each.
    # FP16 only: triton 3.7.1's interpreter multiplies the raw bit patterns of BF16 operands in
    # tl.dot, so a correct BF16 kernel would fail there; BF16 is checked on the GPU.
    return [
        _case("even-512", "even splits", seq_len=512, num_splits=4),
        _case("even-256-d128", "even splits", seq_len=256, head_dim=128, num_splits=2),
        # 200 and 300 keys are not a multiple of any power-of-two block size: the last block is
        # partial, and with 64-key blocks the last split holds 8 keys.
        _case("ragged-200", "ragged last split", seq_len=200, num_splits=4),
        _case("ragged-300", "ragged last split", seq_len=300, num_splits=3),
        # 6 keys in 8 splits leaves a split empty however the keys are divided; 130 keys in 4
        # splits of whole 64-key blocks leaves the 4th split empty.
        _case("empty-6", "empty split", seq_len=6, num_splits=8),
        _case("empty-130", "empty split", seq_len=130, num_splits=4),
        # Scores of order 100: LSE per split near 150, past fp32's exp limit (88.7).
        _case("large-300", "large scores", seq_len=300, num_splits=3, q_scale=60.0),
        _case("batch-160", "batch and groups", batch=2, group=4, seq_len=160, num_splits=2),
    ]


def _bf16(case: dict[str, Any]) -> dict[str, Any]:
    return {**case, "id": case["id"] + "-bf16", "dtype": "bfloat16"}


def _long(cid: str, label: str, seq_len: int, num_splits: int) -> dict[str, Any]:
    # Llama-3.1-8B, one layer: 32 query heads, 8 KV heads, head_dim 128, BF16. The split counts
    # are FlashAttention-2's heuristic at 132 slots (one CTA per SM on H100/H200) for 8 CTAs,
    # the same rule exercise.py implements (num_splits_heuristic).
    return _case(cid, label, kv_heads=8, group=4, seq_len=seq_len, head_dim=128,
                 num_splits=num_splits, dtype="bfloat16")


def cases(params: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    if mode == "preview":
        return _preview()
    if mode == "gpu":
        small = _preview()
        return small + [_bf16(c) for c in small] + [
            _long("llama8b-32k", "long context", 32768, 14),
            # A ragged long context and more splits than the heuristic picks.
            _case("mha-5000", "long context", batch=2, kv_heads=16, group=1, seq_len=5000,
                  head_dim=128, num_splits=7, dtype="bfloat16"),
        ]
    if mode == "bench":
        return [
            _long("llama8b-8k", "bench", 8192, 16),
            _long("llama8b-32k", "bench", 32768, 14),
            _long("llama8b-128k", "bench", 131072, 14),
        ]
    raise ValueError(f"unknown mode {mode!r}")


def make(case: dict[str, Any], seed: int, torch: Any, device: str) -> dict[str, Any]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    b, hq, hkv = case["batch"], case["q_heads"], case["kv_heads"]
    s, d = case["seq_len"], case["head_dim"]
    dtype = getattr(torch, case["dtype"])

    def uniform(lo: float, hi: float) -> float:
        return lo + (hi - lo) * float(torch.rand((), generator=gen))

    # Random scales and an offset on V, so a constant, an input copy or an unweighted mean of V
    # cannot pass.
    q_mult = case["q_scale"] * uniform(0.75, 1.25)
    v_scale, v_offset = uniform(0.5, 2.0), uniform(-1.0, 1.0)
    q = torch.randn((b, hq, d), generator=gen) * q_mult
    k = torch.randn((b, hkv, s, d), generator=gen)
    v = torch.randn((b, hkv, s, d), generator=gen) * v_scale + v_offset
    return {
        "q": q.to(dtype).to(device),
        "k": k.to(dtype).to(device),
        "v": v.to(dtype).to(device),
        "out": torch.empty((b, hq, d), dtype=torch.float32, device=device),
        "lse": torch.empty((b, hq), dtype=torch.float32, device=device),
        "num_splits": case["num_splits"],
    }


def reference(args: dict[str, Any], case: dict[str, Any], torch: Any) -> dict[str, Any]:
    """Plain softmax attention in float64 over the whole cache, from the same rounded inputs."""
    b, hq, hkv = case["batch"], case["q_heads"], case["kv_heads"]
    d = case["head_dim"]
    g = hq // hkv
    q = args["q"].detach().to("cpu", torch.float64).reshape(b, hkv, g, d)
    k = args["k"].detach().to("cpu", torch.float64)
    v = args["v"].detach().to("cpu", torch.float64)
    scores = torch.einsum("bkgd,bksd->bkgs", q, k) / math.sqrt(d)
    lse = torch.logsumexp(scores, dim=-1)
    p = torch.exp(scores - lse[..., None])
    out = torch.einsum("bkgs,bksd->bkgd", p, v)
    return {"out": out.reshape(b, hq, d), "lse": lse.reshape(b, hq)}


def tolerance(case: dict[str, Any], name: str) -> tuple[float, float]:
    if name == "out":
        # P is rounded to the input dtype before the P.V product (FlashAttention does the same):
        # bf16 keeps 8 bits, so allow about 1 % of |V|'s scale. Every merge bug is off by 10 %+.
        return (1e-2, 1e-2) if case["dtype"] == "bfloat16" else (2e-3, 2e-3)
    if name == "lse":
        # fp32 scores and sums: tiny error. A log2/ln slip or a missing scale is off by units.
        return (1e-4, 1e-3)
    raise KeyError(name)


def roofline(case: dict[str, Any]) -> dict[str, int]:
    """Bytes: K and V once, Q once, the fp32 output and LSE once. The split scratch is not
    counted: it is the kernel's own overhead, a few hundred KB against a KV read of 100+ MB."""
    b, hq, hkv = case["batch"], case["q_heads"], case["kv_heads"]
    s, d = case["seq_len"], case["head_dim"]
    es = 2 if case["dtype"] in _DTYPES else 4
    kv = 2 * b * hkv * s * d * es
    qb = b * hq * d * es
    ob = b * hq * d * 4 + b * hq * 4
    return {"bytes": kv + qb + ob, "flops": 4 * b * hq * s * d}


def describe(case: dict[str, Any]) -> str:
    g = case["q_heads"] // case["kv_heads"]
    return (f"batch {case['batch']}, {case['q_heads']} query heads over {case['kv_heads']} KV "
            f"heads (group {g}), {case['seq_len']:,} keys, head_dim {case['head_dim']}, "
            f"{case['num_splits']} splits, {case['dtype']}"
            + (f", queries scaled x{case['q_scale']:g}" if case["q_scale"] != 1.0 else ""))
