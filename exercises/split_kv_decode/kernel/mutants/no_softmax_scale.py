"""MUTANT: the scores are q . k without the 1/sqrt(D) softmax scale.
"""
from __future__ import annotations

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
    split = tl.program_id(0)
    kv_head = tl.program_id(1)
    b = tl.program_id(2)

    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, BLOCK_D)
    n = tl.arange(0, BLOCK_N)
    g_ok = g < GROUP
    d_ok = d < HEAD_DIM
    # Query heads kv_head*GROUP .. kv_head*GROUP + GROUP-1 share this K/V head.
    q_head = kv_head * GROUP + g

    q = tl.load(q_ptr + b * stride_qb + q_head[:, None] * stride_qh + d[None, :] * stride_qd,
                mask=g_ok[:, None] & d_ok[None, :], other=0.0)
    k_base = k_ptr + b * stride_kb + kv_head * stride_kh
    v_base = v_ptr + b * stride_vb + kv_head * stride_vh

    start = split * blocks_per_split * BLOCK_N
    end = tl.minimum(start + blocks_per_split * BLOCK_N, seq_len)

    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    # Every block the loop visits holds at least one real key (start < end), so the running max
    # becomes finite on the first step and exp(m_old - m_new) never sees -inf - (-inf).
    for s0 in range(start, end, BLOCK_N):
        keys = s0 + n
        key_ok = keys < end
        kv_mask = key_ok[:, None] & d_ok[None, :]
        k = tl.load(k_base + keys[:, None] * stride_ks + d[None, :] * stride_kd,
                    mask=kv_mask, other=0.0)
        scores = tl.dot(q, tl.trans(k)) * sm_scale  # (BLOCK_G, BLOCK_N), fp32 accumulate
        scores = tl.where(key_ok[None, :], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + keys[:, None] * stride_vs + d[None, :] * stride_vd,
                    mask=kv_mask, other=0.0)
        # P in the input dtype for the tensor-core product, as FlashAttention does; the running
        # sums stay in fp32.
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    # An empty split (its range starts past the last key) leaves l_i == 0: write output 0 and
    # LSE -inf, so the merge gives it weight exp(-inf) = 0 instead of 0 * NaN.
    has_keys = l_i > 0.0
    safe_l = tl.where(has_keys, l_i, 1.0)
    o = acc / safe_l[:, None]
    lse = tl.where(has_keys, m_i + tl.log(safe_l), float("-inf"))

    o_ptrs = (o_part_ptr + b * stride_ob + q_head[:, None] * stride_oh + split * stride_os
              + d[None, :] * stride_od)
    tl.store(o_ptrs, o, mask=g_ok[:, None] & d_ok[None, :])
    tl.store(lse_part_ptr + b * stride_lb + q_head * stride_lh + split * stride_ls, lse,
             mask=g_ok)


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
    pid = tl.program_id(0)
    b = pid // num_q_heads
    h = pid % num_q_heads

    s = tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
    s_ok = s < num_splits
    d_ok = d < HEAD_DIM

    lse_i = tl.load(lse_part_ptr + b * stride_lb + h * stride_lh + s * stride_ls,
                    mask=s_ok, other=float("-inf"))
    # At least one split holds keys (seq_len >= 1), so the max is finite and its weight is 1.
    m = tl.max(lse_i, axis=0)
    w = tl.exp(lse_i - m)
    total = tl.sum(w, axis=0)

    o_i = tl.load(o_part_ptr + b * stride_ob + h * stride_oh + s[:, None] * stride_os
                  + d[None, :] * stride_od, mask=s_ok[:, None] & d_ok[None, :], other=0.0)
    o = tl.sum(o_i * w[:, None], axis=0) / total

    tl.store(out_ptr + b * stride_outb + h * stride_outh + d * stride_outd, o, mask=d_ok)
    tl.store(lse_ptr + b * stride_lseb + h * stride_lseh, m + tl.log(total))


def split_kv_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                    lse: torch.Tensor, num_splits: int) -> None:
    """out[b, h] = softmax(q[b, h] . K^T / sqrt(D)) V over all keys of KV head h // group;
    lse[b, h] = natural log of the softmax denominator. See starter.py for the full contract."""
    batch, q_heads, head_dim = q.shape
    kv_heads, seq_len = k.shape[1], k.shape[2]
    group = q_heads // kv_heads

    block_n = 64
    # FlashAttention's layout: whole KV blocks per split, the last split takes what is left
    # (possibly nothing when num_splits exceeds the number of blocks).
    blocks_per_split = triton.cdiv(triton.cdiv(seq_len, block_n), num_splits)

    o_part = torch.empty((batch, q_heads, num_splits, head_dim), dtype=torch.float32,
                         device=q.device)
    lse_part = torch.empty((batch, q_heads, num_splits), dtype=torch.float32, device=q.device)

    block_g = max(16, triton.next_power_of_2(group))  # tl.dot needs 16+ rows
    block_d = max(16, triton.next_power_of_2(head_dim))
    _split_kernel[(num_splits, kv_heads, batch)](
        q, k, v, o_part, lse_part,
        seq_len, blocks_per_split, 1.0,  # BUG: no 1/sqrt(D)
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2), k.stride(3),
        v.stride(0), v.stride(1), v.stride(2), v.stride(3),
        o_part.stride(0), o_part.stride(1), o_part.stride(2), o_part.stride(3),
        lse_part.stride(0), lse_part.stride(1), lse_part.stride(2),
        GROUP=group, BLOCK_G=block_g, HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_N=block_n,
        num_warps=4,
    )
    _merge_kernel[(batch * q_heads,)](
        o_part, lse_part, out, lse,
        num_splits, q_heads,
        o_part.stride(0), o_part.stride(1), o_part.stride(2), o_part.stride(3),
        lse_part.stride(0), lse_part.stride(1), lse_part.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        lse.stride(0), lse.stride(1),
        HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_S=triton.next_power_of_2(num_splits),
        num_warps=4,
    )
