"""MUTANT: the wrapper computes attention with torch (matmul, softmax, logsumexp) and only uses a
Triton kernel to copy the result into the outputs. Numerically right; the static check must reject
it because the math happens in the host wrapper, not in a kernel.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=ok), mask=ok)


def split_kv_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                    lse: torch.Tensor, num_splits: int) -> None:
    batch, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    scores = torch.matmul(kf, q.float().unsqueeze(-1)).squeeze(-1) / math.sqrt(head_dim)
    res_lse = torch.logsumexp(scores, dim=-1).contiguous()
    res_out = torch.matmul(torch.softmax(scores, dim=-1).unsqueeze(-2), vf).squeeze(-2)
    res_out = res_out.contiguous()
    n_out, n_lse = out.numel(), lse.numel()
    _copy_kernel[(triton.cdiv(n_out, 256),)](res_out, out, n_out, BLOCK=256)
    _copy_kernel[(triton.cdiv(n_lse, 256),)](res_lse, lse, n_lse, BLOCK=256)
