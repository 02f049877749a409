"""Fused RoPE from integer positions (Triton).

Write `rope_fused(q, positions, theta, out)`:

    q          (T, H, D) torch.bfloat16, contiguous. H heads per token; Q and K heads may be
               stacked along H (they get the same rotation). D is a power of two (64 or 128).
    positions  (T,) torch.int32 or torch.int64: the absolute position of each token. Not sorted,
               may repeat, up to 131,071.
    theta      Python float, the RoPE base (rope_theta), e.g. 500000.0.
    out        (T, H, D) torch.bfloat16, same layout as q: write the result here.

Rotate-half (Llama / GPT-NeoX) layout: pair i (0 <= i < D/2) is (x[i], x[i + D/2]) and turns by
the angle a_i = positions[t] * theta ** (-2 * i / D):

    out[i]       = x[i] * cos(a_i) - x[i + D/2] * sin(a_i)
    out[i + D/2] = x[i + D/2] * cos(a_i) + x[i] * sin(a_i)

Rules:
- Compute the angles inside the kernel, from the integer positions, in FP32. Round to BF16 only
  what you store. Positions beyond 256 must come out right: the grader checks positions around
  100,000, where one position step is a full radian in pair 0.
- Do not modify q or positions.
- The wrapper may only allocate and look at shapes and strides (torch.empty..., .shape,
  .stride(), .contiguous(), triton.cdiv, math.*); all arithmetic happens in @triton.jit code.
- T is any positive number of tokens: mask the last, partial block.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(q_ptr, pos_ptr, out_ptr, T, H, stride_qt, stride_qh, stride_ot, stride_oh,
                 log2_theta, HALF: tl.constexpr, BLOCK_T: tl.constexpr):
    """One program per BLOCK_T tokens: build their angles once (BLOCK_T x HALF, FP32), then
    rotate all H heads of those tokens with them."""
    # Suggested steps:
    #   offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T); offs_i = tl.arange(0, HALF)
    #   1. load the positions of these tokens (masked: offs_t < T) and convert them to FP32;
    #   2. inv_freq for the HALF pairs, the angles (BLOCK_T, HALF), their cos and sin, in FP32;
    #   3. for h in range(0, H): load x[:, h, :HALF] and x[:, h, HALF:], rotate, store to out.
    pass


def rope_fused(q: torch.Tensor, positions: torch.Tensor, theta: float, out: torch.Tensor) -> None:
    T, H, D = q.shape
    block_t = 16
    grid = (triton.cdiv(T, block_t),)
    _rope_kernel[grid](q, positions, out, T, H, q.stride(0), q.stride(1), out.stride(0),
                       out.stride(1), math.log2(theta), HALF=D // 2, BLOCK_T=block_t)
