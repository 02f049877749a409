"""Block-scaled FP8 GEMM (DeepSeek-V3 style). Fill in the kernel's main loop.

Layouts (all row-major):

    a        (M, K)                float8_e4m3fn   activations
    a_scale  (M, K/128)            float32         one scale per row per 128-wide block of K
    b        (N, K)                float8_e4m3fn   weight as stored: (out_features, in_features)
    b_scale  (ceil(N/128), K/128)  float32         one scale per 128 x 128 block of b
    c        (M, N)                bfloat16        output, written in place

    C[m, n] = sum over K blocks kb of
              a_scale[m, kb] * b_scale[n // 128, kb] * sum_{k in block kb} a[m, k] * b[n, k]

K is a multiple of 128; M and N are not (mask the last tiles). Accumulate in FP32 and round to
BF16 only in the store. The wrapper may only allocate, read shapes/strides and launch: no torch
arithmetic.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

SCALE_BLOCK = 128


@triton.jit
def _fp8_gemm_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr, M, N, K,
                     stride_am, stride_ak, stride_asm, stride_ask,
                     stride_bn, stride_bk, stride_bsn, stride_bsk,
                     stride_cm, stride_cn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # One program per (BLOCK_M x BLOCK_N) output tile; BLOCK_N == BLOCK_K == 128, so the tile
    # meets one weight-scale block per step of K.
    pid = tl.program_id(0)
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    pid_m = pid // tiles_n
    pid_n = pid % tiles_n
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = offs_m < M
    n_ok = offs_n < N

    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, dtype=tl.float32)
    # TODO: for each 128-deep block kb of K (offsets along K: kb * BLOCK_K + tl.arange(0, BLOCK_K)):
    #   - load the (BLOCK_M, BLOCK_K) tile of a and a (BLOCK_K, BLOCK_N) view of b (b is (N, K));
    #   - partial = tl.dot(a_tile, b_tile)  (FP8 x FP8 -> FP32);
    #   - load this block's activation scales (one per row) and the tile's weight scale;
    #   - add the partial, scaled by both, into acc.

    c_tile = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def fp8_gemm(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor,
             c: torch.Tensor) -> None:
    """Write dequant(a) @ dequant(b)^T into c (layouts in the module docstring)."""
    M, K = a.shape
    N = b.shape[0]
    block_m = 64
    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, SCALE_BLOCK),)
    _fp8_gemm_kernel[grid](
        a, a_scale, b, b_scale, c, M, N, K,
        a.stride(0), a.stride(1), a_scale.stride(0), a_scale.stride(1),
        b.stride(0), b.stride(1), b_scale.stride(0), b_scale.stride(1),
        c.stride(0), c.stride(1),
        BLOCK_M=block_m, BLOCK_N=SCALE_BLOCK, BLOCK_K=SCALE_BLOCK,
    )
