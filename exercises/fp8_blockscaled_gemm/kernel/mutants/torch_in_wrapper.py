"""Mutant: the wrapper dequantises both operands with torch and calls torch.matmul; a Triton
kernel only copies the product into `c`. Numerically right; the static check must reject it
(torch compute in the wrapper)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def fp8_gemm(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor,
             c: torch.Tensor) -> None:
    n = b.shape[0]
    a_deq = a.to(torch.float32) * a_scale.repeat_interleave(128, dim=1)
    b_full = b_scale.repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)
    b_deq = b.to(torch.float32) * b_full
    product = torch.matmul(a_deq, b_deq.t()).to(c.dtype).contiguous()
    total = product.numel()
    _copy_kernel[(triton.cdiv(total, 1024),)](product, c, total, BLOCK=1024)
