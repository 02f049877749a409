"""Split-KV decode attention (flash-decoding): one query token per head, a long KV cache.

Contract of `split_kv_decode(q, k, v, out, lse, num_splits)`:

    q    (B, Hq, D)      float16 or bfloat16, one query token per head
    k, v (B, Hkv, S, D)  same dtype; Hq = group * Hkv, and query head h reads KV head h // group
                         (heads 0..group-1 share KV head 0, and so on)
    out  (B, Hq, D)      float32, written in place: with kv = h // group,
                         out[b, h] = sum_j softmax_j(q[b, h] . k[b, kv, j] / sqrt(D)) v[b, kv, j]
    lse  (B, Hq)         float32, written in place: the natural log of sum_j exp(q . k_j / sqrt(D)),
                         the log-sum-exp of the scaled scores over all S keys
    num_splits           int >= 1: cut the S keys into this many contiguous ranges and give each
                         range its own program(s). It may exceed what the keys can fill: then some
                         ranges hold no keys at all, and the result must still be exact (no NaN).

S >= 1. D is a power of two between 16 and 256. S is any length, not a multiple of anything.

Two kernels, as FlashAttention's split-KV path does:
1. a split kernel: for its (batch, KV head, split), stream that split's K/V once with an online
   softmax and write, per query head, the partial output normalised within the split (fp32) and
   the split's log-sum-exp, into scratch buffers;
2. a merge kernel: combine the splits exactly with their log-sum-exps into `out` and `lse`.

Rules (checked before anything runs): the wrapper may only allocate (torch.empty and friends),
read shapes and strides, do integer arithmetic and launch your @triton.jit kernels. All math
happens inside the kernels. Imports: torch, triton, triton.language, math.

Triton notes: tl.dot needs every dimension >= 16, so pad small tiles (a GQA group of 4 query heads
-> 16 rows, masked). Scores, sums and the output accumulate in float32. In the CPU preview (the
Triton interpreter), tl.dot on bfloat16 operands is wrong in triton 3.7.1, so the preview uses
float16 only; the GPU run checks bfloat16 too.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _split_kernel(
    q_ptr, k_ptr, v_ptr, o_part_ptr, lse_part_ptr,
    seq_len, blocks_per_split, sm_scale,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    stride_lb, stride_lh, stride_ls,
    GROUP: tl.constexpr, BLOCK_G: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Program (split, kv_head, b): the query heads kv_head*GROUP .. +GROUP-1 against keys
    [split * blocks_per_split * BLOCK_N, min(that + blocks_per_split * BLOCK_N, seq_len)).

    Writes o_part[b, h, split, :] (output normalised within the split) and lse_part[b, h, split]
    for each of those query heads. A split with no keys must write something the merge can give
    weight 0 without producing NaN."""
    # TODO: load the group's queries as a (BLOCK_G, BLOCK_D) tile (rows past GROUP masked),
    # loop over this split's key blocks with a running max, a running sum and an fp32
    # accumulator, then store the partial output and the split's log-sum-exp.
    pass


@triton.jit
def _merge_kernel(
    o_part_ptr, lse_part_ptr, out_ptr, lse_ptr,
    num_splits, num_q_heads,
    stride_ob, stride_oh, stride_os, stride_od,
    stride_lb, stride_lh, stride_ls,
    stride_outb, stride_outh, stride_outd,
    stride_lseb, stride_lseh,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
):
    """Program b * num_q_heads + h: combine the num_splits partial results of query head h of
    batch b into out[b, h, :] and lse[b, h]. BLOCK_S is num_splits rounded up to a power of two."""
    # TODO: the exact merge. Mind splits with no keys, and scores large enough that exp() of a
    # log-sum-exp overflows float32.
    pass


def split_kv_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                    lse: torch.Tensor, num_splits: int) -> None:
    """Decode attention over the whole cache, split `num_splits` ways and merged exactly.

    A working launch layout is set up below; you may change anything (block sizes, grid, extra
    kernel arguments) as long as this function keeps its signature and writes `out` and `lse`."""
    batch, q_heads, head_dim = q.shape
    kv_heads, seq_len = k.shape[1], k.shape[2]
    group = q_heads // kv_heads

    block_n = 64
    # Whole blocks per split; the last split takes what is left, possibly nothing.
    blocks_per_split = triton.cdiv(triton.cdiv(seq_len, block_n), num_splits)

    # Scratch for the partial results: allocated here, filled by the split kernel.
    o_part = torch.empty((batch, q_heads, num_splits, head_dim), dtype=torch.float32,
                         device=q.device)
    lse_part = torch.empty((batch, q_heads, num_splits), dtype=torch.float32, device=q.device)

    block_g = max(16, triton.next_power_of_2(group))
    block_d = max(16, triton.next_power_of_2(head_dim))
    _split_kernel[(num_splits, kv_heads, batch)](
        q, k, v, o_part, lse_part,
        seq_len, blocks_per_split, 1.0 / math.sqrt(head_dim),
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2), k.stride(3),
        v.stride(0), v.stride(1), v.stride(2), v.stride(3),
        o_part.stride(0), o_part.stride(1), o_part.stride(2), o_part.stride(3),
        lse_part.stride(0), lse_part.stride(1), lse_part.stride(2),
        GROUP=group, BLOCK_G=block_g, HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_N=block_n,
    )
    _merge_kernel[(batch * q_heads,)](
        o_part, lse_part, out, lse,
        num_splits, q_heads,
        o_part.stride(0), o_part.stride(1), o_part.stride(2), o_part.stride(3),
        lse_part.stride(0), lse_part.stride(1), lse_part.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        lse.stride(0), lse.stride(1),
        HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_S=triton.next_power_of_2(num_splits),
    )
