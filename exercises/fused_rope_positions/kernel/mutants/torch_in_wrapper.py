"""Mutant: the rotation is computed with torch ops in the wrapper and a Triton kernel only copies
the result into `out`. Numerically right; the static check must reject it (torch compute in the
wrapper)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def rope_fused(q: torch.Tensor, positions: torch.Tensor, theta: float, out: torch.Tensor) -> None:
    T, H, D = q.shape
    half = D // 2
    inv_freq = theta ** (-torch.arange(half, dtype=torch.float32, device=q.device) * 2 / D)
    angle = positions.to(torch.float32)[:, None] * inv_freq[None, :]
    cos, sin = angle.cos()[:, None, :], angle.sin()[:, None, :]
    x1, x2 = q[..., :half].float(), q[..., half:].float()
    rotated = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(out.dtype)
    n = rotated.numel()
    _copy_kernel[(triton.cdiv(n, 1024),)](rotated, out, n, BLOCK=1024)
