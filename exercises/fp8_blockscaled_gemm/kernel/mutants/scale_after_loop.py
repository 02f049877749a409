"""Mutant: the FP8 products of every K block are summed first, and the sum is scaled once after the
loop with the LAST K block's scales, as if the scales could be factored out of the sum over K.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

SCALE_BLOCK = 128  # DeepSeek-V3: 1 x 128 activation tiles, 128 x 128 weight blocks


@triton.jit
def _fp8_gemm_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr, M, N, K,
                     stride_am, stride_ak, stride_asm, stride_ask,
                     stride_bn, stride_bk, stride_bsn, stride_bsk,
                     stride_cm, stride_cn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     GROUP_M: tl.constexpr):
    # Walk the output tiles in bands of GROUP_M tile-rows, column by column, so that the B tiles
    # a band needs are still in L2 when its next row of tiles asks for them.
    pid = tl.program_id(0)
    tiles_m = (M + BLOCK_M - 1) // BLOCK_M
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    per_band = GROUP_M * tiles_n
    band = pid // per_band
    first_m = band * GROUP_M
    band_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_band) % band_rows
    pid_n = (pid % per_band) // band_rows

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N

    a_tile = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    # B is (N, K); the MMA wants a (BLOCK_K, BLOCK_N) operand, so index it transposed.
    b_tile = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    a_scales = a_scale_ptr + offs_m * stride_asm  # this tile's rows, K block 0
    b_scales = b_scale_ptr + ((pid_n * BLOCK_N) // BLOCK_K) * stride_bsn  # its weight block row

    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, dtype=tl.float32)
    for kb in range(0, K // BLOCK_K):
        a = tl.load(a_tile, mask=m_ok[:, None], other=0.0)
        b = tl.load(b_tile, mask=n_ok[None, :], other=0.0)
        # One scale block: a fresh FP32 partial from the tensor cores ...
        acc += tl.dot(a, b)  # BUG: no per-block scaling inside the loop
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk

    last = K // BLOCK_K - 1
    sa = tl.load(a_scales + last * stride_ask, mask=m_ok, other=0.0)
    sb = tl.load(b_scales + last * stride_bsk)
    acc = acc * (sa[:, None] * sb)
    c_tile = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def fp8_gemm(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor,
             c: torch.Tensor) -> None:
    """Write dequant(a) @ dequant(b)^T into c (see the module docstring for the layouts).

    K is a multiple of 128; M and N are any size (the last tiles are masked).
    """
    M, K = a.shape
    N = b.shape[0]
    if K % SCALE_BLOCK != 0:
        raise ValueError(f"K = {K} is not a multiple of the {SCALE_BLOCK}-wide scale block")
    # Small M (decode-sized batches) wastes less of a 64-row tile; big M wants 128 x 128 tiles.
    block_m = 64 if M <= 64 else 128
    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, SCALE_BLOCK),)
    _fp8_gemm_kernel[grid](
        a, a_scale, b, b_scale, c, M, N, K,
        a.stride(0), a.stride(1), a_scale.stride(0), a_scale.stride(1),
        b.stride(0), b.stride(1), b_scale.stride(0), b_scale.stride(1),
        c.stride(0), c.stride(1),
        BLOCK_M=block_m, BLOCK_N=SCALE_BLOCK, BLOCK_K=SCALE_BLOCK, GROUP_M=8,
        num_warps=8 if block_m == 128 else 4, num_stages=4,
    )
