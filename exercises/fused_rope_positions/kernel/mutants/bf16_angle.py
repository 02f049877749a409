"""Mutant: the angle pos * inv_freq is rounded to BF16 before cos/sin (angle product in BF16).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(q_ptr, pos_ptr, out_ptr, T, H, stride_qt, stride_qh, stride_ot, stride_oh,
                 log2_theta, HALF: tl.constexpr, BLOCK_T: tl.constexpr):
    pid = tl.program_id(0)
    offs_t = pid * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_i = tl.arange(0, HALF)
    t_mask = offs_t < T
    # Integer -> FP32 directly: every position below 2^24 is exact in FP32.
    pos = tl.load(pos_ptr + offs_t, mask=t_mask, other=0).to(tl.float32)
    # inv_freq_i = theta^(-2i/D) = 2^(-(i/HALF) * log2(theta)), in FP32.
    inv_freq = tl.exp2(-(offs_i.to(tl.float32) / HALF) * log2_theta)
    angle = (pos[:, None] * inv_freq[None, :]).to(tl.bfloat16).to(tl.float32)
    cos = tl.cos(angle)
    sin = tl.sin(angle)
    mask = t_mask[:, None]
    for h in range(0, H):
        q_row = q_ptr + offs_t[:, None] * stride_qt + h * stride_qh + offs_i[None, :]
        x1 = tl.load(q_row, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(q_row + HALF, mask=mask, other=0.0).to(tl.float32)
        o_row = out_ptr + offs_t[:, None] * stride_ot + h * stride_oh + offs_i[None, :]
        # Rotate each (x_i, x_{i+D/2}) pair by +angle_i; round to BF16 only here.
        tl.store(o_row, (x1 * cos - x2 * sin).to(out_ptr.dtype.element_ty), mask=mask)
        tl.store(o_row + HALF, (x2 * cos + x1 * sin).to(out_ptr.dtype.element_ty), mask=mask)


def rope_fused(q: torch.Tensor, positions: torch.Tensor, theta: float, out: torch.Tensor) -> None:
    """Write RoPE(q) into `out`.

    q, out: (T, H, D) BF16, contiguous in the last axis; D a power of two (64, 128, 256).
    positions: (T,) int32 or int64, the absolute position of each token.
    theta: the RoPE base (rope_theta), e.g. 500000.0.
    """
    T, H, D = q.shape
    half = D // 2
    # Small token blocks keep many programs in flight on a GPU; each still reuses its cos/sin
    # for all H heads.
    block_t = 16
    grid = (triton.cdiv(T, block_t),)
    _rope_kernel[grid](q, positions, out, T, H, q.stride(0), q.stride(1), out.stride(0),
                       out.stride(1), math.log2(theta), HALF=half, BLOCK_T=block_t)
