"""Block-scaled FP8 GEMM: what the kernel harness runs (trusted; standard library and torch only,
nothing of ours).

The student's file defines `fp8_gemm(a, a_scale, b, b_scale, c)`:

    a        (M, K)               float8_e4m3fn   activations
    a_scale  (M, K/128)           float32         per row, per 128-wide block of K
    b        (N, K)               float8_e4m3fn   weight, (out_features, in_features)
    b_scale  (ceil(N/128), K/128) float32         per 128 x 128 weight block
    c        (M, N)               bfloat16        output, written in place

    C[m, n] = sum_kb a_scale[m, kb] * b_scale[n // 128, kb] * sum_{k in block kb} a[m, k] b[n, k]

K is always a multiple of 128; M and N are not.

Test inputs. The FP8 codes and the scales are drawn independently: every (row, K block) of A and
every 128 x 128 block of B gets a dequantised spread sigma = 2^U(-1/2, 1/2) and a scale
2^U(-5, 3); the codes are N(0, sigma^2) / scale, rounded to E4M3. So the scales spread over a
factor of 256 (a kernel that applies the wrong block's scale, one scale for the whole tensor, or
no weight scale is off by large factors on most elements), while the dequantised values, and so
the outputs, stay of one size: about sqrt(K) (see `tolerance`).

The checks are grouped by the bug each group catches:

- "aligned shapes": M and N multiples of the tile (in the preview a single 64 x 128 output tile,
  K = 256: two scale blocks). Every scale mistake fails here.
- "several N blocks": N of 256 and more, so tiles meet different weight-scale blocks; a kernel
  that always reads weight-scale block 0 (or indexes it by the M tile) fails here.
- "ragged M/N tail": M and N that leave partial tiles, none a multiple of 128 (100 x 200 and
  48 x 80 in the preview, 77 x 1,000 and 1,000 x 2,112 on the GPU); a kernel whose grid rounds
  down, or that does not mask its last tiles, fails here. N = 200 and 2,112 also leave the last
  weight-scale block partial.
- "long K": K = 1,024 in the preview (eight scale blocks) and 16,384 on the GPU, so a kernel that
  scales once after the loop with the first or last block's scales is far off.
The harness also checks that the inputs are bitwise unchanged and that every output element was
written (outputs start as NaN).
"""
from __future__ import annotations

import math
from typing import Any

ENTRY = "fp8_gemm"
ARGS = ("a", "a_scale", "b", "b_scale", "c")
OUTPUTS = ("c",)

SCALE_BLOCK = 128
E4M3_MAX = 448.0
# log2 ranges of the drawn scales and of the per-block spread of the dequantised values.
SCALE_LOG2 = (-5.0, 3.0)
SIGMA_LOG2 = (-0.5, 0.5)


def _case(cid: str, label: str, m: int, n: int, k: int) -> dict[str, Any]:
    return {"id": cid, "label": label, "M": m, "N": n, "K": k}


def cases(params: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    """Preview: for the reference, seven programs of at most 128 x 128 and 22 steps of K in all
    (under a second in the interpreter). "gpu": square and DeepSeek-V3 shapes with ragged edges.
    "bench": the variant's layer at its token count, plus two fixed DeepSeek-V3 GEMMs."""
    if mode == "preview":
        return [
            _case("aligned-64x128x256", "aligned shapes", 64, 128, 256),
            _case("nblocks-128x256x256", "several N blocks", 128, 256, 256),
            _case("tail-100x200x384", "ragged M/N tail", 100, 200, 384),
            _case("tail-48x80x256", "ragged M/N tail", 48, 80, 256),
            _case("longk-64x128x1024", "long K", 64, 128, 1024),
        ]
    if mode == "gpu":
        return [
            _case("aligned-1024", "aligned shapes", 1024, 1024, 1024),
            _case("nblocks-2048x4096x1024", "several N blocks", 2048, 4096, 1024),
            _case("nblocks-256x7168x2048", "several N blocks", 256, 7168, 2048),
            _case("tail-1000x2112x7168", "ragged M/N tail", 1000, 2112, 7168),
            _case("tail-77x1000x512", "ragged M/N tail", 77, 1000, 512),
            _case("longk-512x1024x16384", "long K", 512, 1024, 16384),
        ]
    if mode == "bench":
        variant = _case("variant", "bench", int(params.get("m", 4096)),
                        int(params.get("n", 7168)), int(params.get("k", 2048)))
        fixed = [
            _case("moe-down-4096x7168x2048", "bench", 4096, 7168, 2048),
            _case("qkv-a-4096x2112x7168", "bench", 4096, 2112, 7168),
        ]
        shape = (variant["M"], variant["N"], variant["K"])
        return [variant] + [c for c in fixed if (c["M"], c["N"], c["K"]) != shape]
    raise ValueError(f"unknown mode {mode!r}")


def describe(case: dict[str, Any]) -> str:
    m, n, k = case["M"], case["N"], case["K"]
    return (f"M={m:,}, N={n:,}, K={k:,} ({k // SCALE_BLOCK} scale blocks along K, "
            f"{math.ceil(n / SCALE_BLOCK)} along N)")


def _quantise(rows: int, k: int, rows_per_scale: int, gen: Any, torch: Any) -> tuple[Any, Any]:
    """Codes (rows, k) in E4M3 and float32 scales (ceil(rows / rows_per_scale), k / 128).

    Each scale block gets a spread sigma and a scale s drawn independently (module docstring);
    its codes are N(0, sigma^2) / s, clamped to the E4M3 range and rounded to E4M3. Built in
    float32, in place and by broadcasting over the 128-wide K blocks, so that a benchmark shape
    (8,192 x 18,432) needs about 5 bytes per element at its peak."""
    kb = k // SCALE_BLOCK
    groups = math.ceil(rows / rows_per_scale)

    def log_uniform(lo_hi: tuple[float, float]) -> Any:
        lo, hi = lo_hi
        u = torch.rand(groups, kb, generator=gen, dtype=torch.float64)
        return torch.exp2(lo + (hi - lo) * u)

    scale = log_uniform(SCALE_LOG2).to(torch.float32)
    sigma = log_uniform(SIGMA_LOG2)
    # One factor sigma / s per (row, K block): repeat the block rows, then broadcast along K.
    factor = (sigma / scale.to(torch.float64)).to(torch.float32)
    factor = factor.repeat_interleave(rows_per_scale, dim=0)[:rows]
    values = torch.randn(rows, k, generator=gen, dtype=torch.float32)
    values.view(rows, kb, SCALE_BLOCK).mul_(factor[:, :, None])
    return values.clamp_(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), scale


def make(case: dict[str, Any], seed: int, torch: Any, device: str) -> dict[str, Any]:
    """A and B as E4M3 codes with their scales (see `_quantise`), C left empty."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    m, n, k = case["M"], case["N"], case["K"]
    a, a_scale = _quantise(m, k, 1, gen, torch)
    b, b_scale = _quantise(n, k, SCALE_BLOCK, gen, torch)
    return {
        "a": a.to(device),
        "a_scale": a_scale.to(device),
        "b": b.to(device),
        "b_scale": b_scale.to(device),
        "c": torch.empty(m, n, dtype=torch.bfloat16, device=device),
    }


def reference(args: dict[str, Any], case: dict[str, Any], torch: Any) -> dict[str, Any]:
    """Dequantise both operands in float64 (each code times its block's scale) and multiply."""
    a = args["a"].detach().to("cpu").to(torch.float64)
    b = args["b"].detach().to("cpu").to(torch.float64)
    sa = args["a_scale"].detach().to("cpu", torch.float64)
    sb = args["b_scale"].detach().to("cpu", torch.float64)
    m, k = a.shape
    n = b.shape[0]
    kb = k // SCALE_BLOCK
    a.view(m, kb, SCALE_BLOCK).mul_(sa[:, :, None])
    b.view(n, kb, SCALE_BLOCK).mul_(sb.repeat_interleave(SCALE_BLOCK, dim=0)[:n, :, None])
    return {"c": a @ b.T}


def tolerance(case: dict[str, Any], name: str) -> tuple[float, float]:
    """(rtol, atol) for `c`, a BF16 output.

    rtol 1e-2: BF16 keeps 8 significant bits, so rounding the output costs at most 2^-9 relative.
    atol 5e-3 * sqrt(K): outputs are sums of K products of O(1) dequantised values, about
    sqrt(K) * sigma_a * sigma_b in size with sigma_a * sigma_b in [1/2, 2]. The slack covers
    elements that cancel to near zero, where FP32 accumulation and the FP8 tensor core's reduced
    internal precision (a few 1e-4 of a 128-deep block's partial sum) are all that is left. A
    wrong scale moves an element by up to a factor of 256, and a dropped block by about
    sqrt(128) * sigma_a * sigma_b: far outside either term."""
    return 1e-2, 5e-3 * math.sqrt(case["K"])


def roofline(case: dict[str, Any]) -> dict[str, float]:
    """Least HBM traffic: A and B once (1 byte per element), both scale tensors once (4 bytes),
    C written once in BF16. FLOPs: 2 M N K for the MMA (the promotion's 2 M N K/128 is left out,
    as GEMM roofline tables do)."""
    m, n, k = case["M"], case["N"], case["K"]
    kb = k // SCALE_BLOCK
    scales = 4 * (m * kb + math.ceil(n / SCALE_BLOCK) * kb)
    return {"bytes": float(m * k + n * k + scales + 2 * m * n), "flops": float(2 * m * n * k)}
