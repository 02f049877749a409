"""Q05: stranded prefix blocks, and the eviction order that prevents them.

A prefix-cache lookup compares blocks from the first one on and stops at the first miss, because
a block's identity (and its KV) depends on every token before it. Evict block i of a cached chain of
N blocks and the N - 1 - i blocks after it stay resident but can never be hit: (N - 1 - i) S bytes
for blocks of S bytes. In a tree (one system prompt under many conversations) evicting a node
strands its whole subtree, so evicting the last block of a shared system prompt strands every
session's own history beneath it. Evicting only leaves (blocks no other cached block extends)
keeps the cached set prefix-closed; LRU does that when every use of a block also refreshes its
ancestors and ties go to the deepest block. The failure in practice: a finished request's blocks
all get the same timestamp, and freeing them head-first puts block 0 first in line (vLLM frees
tail-first for exactly this reason; SGLang evicts from a heap of leaves).

The canonical variant is the facts notes' example (facts-q01-q25.md, Q05): Llama-3.1-70B, BF16,
16-token blocks: 5,242,880 B per block (655,360 B per GPU at TP8), a 32K-token conversation of
2,048 blocks, and evicting block 0 strands 2,047 blocks = 10.73 GB. The tree part is our addition.
"""
from __future__ import annotations

import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import draw_sensible
from exercises.feasibility import UNSTATED_WEIGHT_BYTES, Claim, Fits, WithinContext
from exercises.slips import Slips, near, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# Deployments a variant may use: (model, GPU, tensor-parallel degree). Full-attention models only
# (GQA or MHA; no sliding window, no MLA): every layer caches every token, so a block's bytes are
# tokens x 2 x layers x KV heads x head dim x dtype bytes, split evenly over tp <= KV heads GPUs.
DEPLOYMENTS: tuple[tuple[str, str, int], ...] = (
    ("Llama-3.1-8B", "H100 SXM", 1),
    ("Llama-3.1-8B", "H100 SXM", 2),
    ("Mixtral-8x7B", "H100 SXM", 2),
    ("Mixtral-8x7B", "H200 SXM", 1),
    ("Qwen3-30B-A3B", "H100 SXM", 2),
    ("Qwen3-30B-A3B", "H200 SXM", 1),
    ("Llama-3.1-70B", "H100 SXM", 8),
    ("Llama-3.1-70B", "H200 SXM", 4),
    ("Llama-3.1-70B", "B200", 4),
    ("Qwen2.5-72B", "H100 SXM", 8),
    ("Qwen2.5-72B", "H200 SXM", 4),
    ("Llama-3.1-405B", "H200 SXM", 8),
    ("Llama-3.1-405B", "B200", 8),
)
KV_DTYPES: dict[str, int] = {"BF16": 2, "FP8": 1}
BLOCKS = (16, 32)
CONV_K = (4, 8, 16, 24, 32)  # conversation lengths in K = 1,024 tokens
SYS_TOKENS = (512, 4096)  # shared system prompt, a multiple of 256 in this range
SESSIONS = (8, 64)
SESSION_TOKENS = (1000, 12000)  # each session's own cached history, beyond the system prompt
NEXT_TURN = 512  # tokens of headroom a next turn needs inside the context window
MEM_UTIL = 0.9  # share of HBM the engine may use (vLLM's gpu_memory_utilization default)

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "gpu": "H100 SXM",
    "tp": 8,
    "kv_dtype": "BF16",
    "block": 16,
    "conv_tokens": 32 * 1024,  # the facts' "32K-token conversation" = 2,048 blocks of 16
    "evict_index": 0,
    "sys_tokens": 2048,  # [A] the tree part: a 2,048-token system prompt ...
    "sessions": 20,  # ... under 20 sessions ...
    "session_tokens": 4000,  # ... each with 4,000 tokens of its own history
}

FORMULA = "(N-1-i)*S"
SAFE = ["leaves_only", "lru_deepest"]


# ----------------------------------------------------------------------------------------------
# Variants


def _pool_gb(p: dict[str, Any]) -> float:
    """KV pool of the replica: usable HBM (marketed GB as 10^9 B, times MEM_UTIL) minus weights."""
    return p["tp"] * gpu(p["gpu"]).hbm_gb * MEM_UTIL - model(p["model"]).weight_bytes(2) / 1e9


def is_sensible(p: dict[str, Any]) -> bool:
    """The checks generate() applies; the tests apply them to every variant too."""
    s = solve(p)
    context = model(p["model"]).max_context
    return (
        # the conversation and every session fit in the model's context window, with room for
        # the next turn (Llama-2-7B's 4K window is too short for this scenario, so it is not used)
        (context is None or max(p["conv_tokens"], p["sys_tokens"] + p["session_tokens"])
         + NEXT_TURN <= context)
        # everything the scenario caches fits in the pool with room for running requests
        and s["cached_gb"] <= 0.7 * _pool_gb(p)
        # the damage is worth talking about: at least a gigabyte stranded in the tree
        and s["tree_stranded_gb"].value >= 1.0
        and s["stranded_blocks"] >= 1
        and p["sys_tokens"] % p["block"] == 0
    )


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw a deployment and a cache content; redraw until the variant is sensible."""
    def draw(rng: random.Random) -> dict[str, Any]:
        name, gpu_name, tp = rng.choice(DEPLOYMENTS)
        block = rng.choice(BLOCKS)
        conv = rng.choice(CONV_K) * 1024
        n_blocks = conv // block
        # Mostly the head block (the realistic failure); sometimes a block further in.
        evict = 0 if rng.random() < 0.4 else rng.randint(1, n_blocks // 2)
        p = {
            "model": name,
            "gpu": gpu_name,
            "tp": tp,
            "kv_dtype": rng.choice(tuple(KV_DTYPES)),
            "block": block,
            "conv_tokens": conv,
            "evict_index": evict,
            "sys_tokens": 256 * rng.randint(SYS_TOKENS[0] // 256, SYS_TOKENS[1] // 256),
            "sessions": rng.randint(*SESSIONS),
            "session_tokens": 10 * rng.randint(SESSION_TOKENS[0] // 10, SESSION_TOKENS[1] // 10),
        }
        return p

    return draw_sensible(rng, draw, is_sensible, tries=10_000,
                         message="no sensible variant in 10,000 draws; the ranges above are inconsistent")


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    dtype_bytes = KV_DTYPES[p["kv_dtype"]]
    kappa = m.kv_bytes_per_token(dtype_bytes)  # whole model, all GPUs together
    block, tp = p["block"], p["tp"]
    blk = block * kappa
    n_blocks = p["conv_tokens"] // block
    i = p["evict_index"]
    stranded_blocks = n_blocks - 1 - i
    sys_blocks = p["sys_tokens"] // block
    own_blocks = p["session_tokens"] // block  # only full blocks are cached
    tree_blocks = p["sessions"] * own_blocks
    cached_blocks = n_blocks + sys_blocks + tree_blocks
    s: dict[str, Any] = {
        # part answers
        "block_bytes": Quantity(blk, "B"),
        "stranded_formula": FORMULA,
        "stranded_gb": Quantity(stranded_blocks * blk / 1e9, "GB"),
        "tree_stranded_gb": Quantity(tree_blocks * blk / 1e9, "GB"),
        "safe_order": list(SAFE),
        # givens the statement prints
        "layers": m.layers,
        "kv_heads": m.kv_heads,
        "q_heads": m.q_heads,
        "head_dim": m.head_dim,
        "attn_desc": ("grouped-query attention" if m.kv_heads < m.q_heads
                      else "multi-head attention: one KV head per query head"),
        "heads_trap": (f"Grouped-query attention caches {m.kv_heads} KV heads, not {m.q_heads}"
                       if m.kv_heads < m.q_heads else
                       f"Multi-head attention caches all {m.kv_heads} heads: every query head "
                       "has its own K and V"),
        "dtype_bytes": dtype_bytes,
        # intermediates for the solution
        "kappa": kappa,
        "block_mb": blk / 1e6,
        "block_mib": blk / 2**20,
        "block_bytes_per_gpu": blk // tp,
        "n_blocks": n_blocks,
        "last_index": n_blocks - 1,
        "conv_gb": n_blocks * blk / 1e9,
        "stranded_blocks": stranded_blocks,
        "stranded_gib": stranded_blocks * blk / 2**30,
        "stranded_gb_per_gpu": stranded_blocks * blk / tp / 1e9,
        "kept_blocks": i,
        "sys_blocks": sys_blocks,
        "last_sys_index": sys_blocks - 1,
        "own_blocks": own_blocks,
        "own_leftover": p["session_tokens"] - own_blocks * block,
        "tree_blocks": tree_blocks,
        "tree_gib": tree_blocks * blk / 2**30,
        "session_gb": own_blocks * blk / 1e9,
        "cached_blocks": cached_blocks,
        "cached_gb": cached_blocks * blk / 1e9,
        "pool_gb": _pool_gb(p),
    }
    i, last = p["evict_index"], n_blocks - 1
    s["kept_phrase"] = (
        f"Nothing comes before block 0, so all {stranded_blocks:,} blocks after it "
        f"(1 to {last:,}) are stranded"
        if i == 0 else
        f"Blocks 0 to {i - 1:,} ({i:,} of them) still hit; the {stranded_blocks:,} blocks after "
        f"it ({i + 1:,} to {last:,}) are stranded"
    )
    left = s["own_leftover"]
    s["leftover_phrase"] = (
        f"{p['session_tokens']:,} is a whole number of blocks, so all of it is cached"
        if left == 0 else
        f"the last {left} tokens sat in a partial block and were never cached"
    )
    s["why"] = _model_answer(p, s)
    return s


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        "A lookup walks the new prompt block by block from the first and stops at the first "
        "block it cannot find. It has to: a block's KV depends on every token before it, so its "
        "key is its own tokens plus its parent's key, and a block can only be used if its whole "
        "prefix is cached too. So evicting block i of an N-block chain leaves the N − 1 − i "
        "blocks behind it resident but unreachable, (N − 1 − i)·S bytes "
        f"({s['stranded_gb'].value:.2f} GB here); in a tree it strands the evicted node's whole "
        f"subtree ({s['tree_stranded_gb'].value:.1f} GB for the system prompt's last block). They "
        "hold memory until they are evicted themselves, and the next turn recomputes them. The "
        "safe rule is an invariant: the cached set stays prefix-closed, every cached block's "
        "parent cached too. Evicting only leaves (blocks nothing cached extends) keeps it. LRU "
        "keeps it if every use of a block also refreshes all its ancestors (prefix matching "
        "does that naturally) and ties go to the deepest block: then no parent is ever older than "
        "its child, so by induction the LRU victim is always a leaf. Plain LRU fails because a "
        "finished request's blocks share one timestamp, and freeing them head-first puts block "
        "0 at the front of the queue. vLLM frees a request's blocks tail-first so the tail is "
        "evicted first; SGLang's radix cache keeps a heap of evictable leaves and pushes a "
        "parent once its last child is gone. Blocks in use by a running request are never "
        "candidates."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m = model(p["model"])
    tp, block = p["tp"], p["block"]
    i, n_blocks = p["evict_index"], s["n_blocks"]
    blk = s["block_bytes"].value
    out: list[Mistake] = [
        Mistake("stranded_formula", "(N-i)*S",
                "That counts the evicted block too. It is gone from memory; the stranded blocks "
                "are the N − 1 − i after it.", "counts_evicted", kind="miscounted_term"),
        Mistake("stranded_formula", "i*S",
                "Those are the blocks before the evicted one, and they still hit: a lookup walks "
                "from block 0 and stops at the gap. It is the blocks after it that are lost.",
                "wrong_side", kind="inverted"),
        Mistake("stranded_formula", "(N-1)*S",
                "That is only right when block 0 is evicted. In general the blocks after index i "
                "are stranded: N − 1 − i of them.", "head_only", kind="misread_mechanism"),
        Mistake("stranded_formula", "N*S",
                "That is the whole chain. The blocks before the evicted one still hit, and the "
                "evicted block is freed.", "whole_chain", kind="wrong_scope"),
        Mistake("safe_order", [*SAFE, "lru_head_first"],
                "Plain LRU with head-first freeing is the failure itself: all of a finished "
                "request's blocks share one timestamp, so the head block, freed first, is "
                "evicted first and strands the rest.", "lru_head_first", kind="misread_mechanism"),
        Mistake("safe_order", ["lru_head_first"],
                "Plain LRU with head-first freeing is the failure itself: all of a finished "
                "request's blocks share one timestamp, so the head block, freed first, is "
                "evicted first and strands the rest.", "only_lru_head_first",
                kind="misread_mechanism"),
        Mistake("safe_order", [*SAFE, "fifo"],
                "FIFO evicts the oldest block first, and a parent is always cached before its "
                "children, so FIFO strands whole chains by design.", "fifo",
                kind="misread_mechanism"),
        Mistake("safe_order", [*SAFE, "longest_chain"],
                "Taking the head of the longest chain is exactly the worst case: it frees one "
                "block and strands all the rest.", "longest_chain", kind="misread_mechanism"),
    ]

    add = Slips(s, TOLERANCE, out, merge=near, skip=nonpositive).add

    def per_part(part: str, ref: float) -> None:
        """Slips shared by the three byte-size parts."""
        add(part, ref / 2, "Half the reference: you counted K but not V. Each layer caches both.",
            "k_only", kind="k_without_v")
        add(part, ref / tp,
            f"That is one GPU's share (1/{tp} of the KV heads at TP{tp}). The part asks for the "
            "whole replica.", "per_gpu", kind="forgot_tp")
        add(part, ref * m.q_heads / m.kv_heads,
            f"You used the {m.q_heads} query heads. With grouped-query attention only the "
            f"{m.kv_heads} KV heads are cached.", "q_heads", kind="q_vs_kv_heads")
        add(part, ref / m.layers,
            f"That is one layer. Every one of the {m.layers} layers keeps its own K and V.",
            "one_layer", kind="one_layer")
        add(part, ref * 2 if p["kv_dtype"] == "BF16" else ref / 2,
            f"The cache is {p['kv_dtype']}: {s['dtype_bytes']} byte(s) per element.", "dtype",
            kind="wrong_precision")

    per_part("block_bytes", blk)
    add("block_bytes", s["kappa"],
        f"That is one token. A block holds {block} tokens.", "one_token", kind="unit_slip")

    ref = s["stranded_gb"].value
    per_part("stranded_gb", ref)
    add("stranded_gb", i * blk / 1e9,
        "Those are the blocks before the evicted one, and they still hit. The stranded ones are "
        "after it.", "wrong_side", kind="inverted")
    add("stranded_gb", n_blocks * blk / 1e9,
        "That is the whole conversation. The evicted block is freed, and the blocks before it "
        "still hit.", "whole_chain", kind="wrong_scope")

    ref = s["tree_stranded_gb"].value
    per_part("tree_stranded_gb", ref)
    add("tree_stranded_gb", s["own_blocks"] * blk / 1e9,
        f"That is one session. The system prompt's last block is the parent of all "
        f"{p['sessions']} sessions' histories, so all of them are stranded.", "one_session",
        kind="wrong_scope")
    add("tree_stranded_gb", p["sessions"] * -(-p["session_tokens"] // block) * blk / 1e9,
        f"Only full blocks are cached: each session's last {s['own_leftover']} tokens were never "
        "in the cache, so they cannot be stranded.", "partial_blocks", kind="rounding")
    add("tree_stranded_gb", (s["tree_blocks"] + s["sys_blocks"]) * blk / 1e9,
        "The system prompt's earlier blocks still hit: a lookup walks from block 0 and only "
        "stops at the evicted one. Count only what hangs below it.", "with_system",
        kind="miscounted_term")
    add("tree_stranded_gb", (s["sys_blocks"] - 1) * blk / 1e9,
        "Those are the system prompt's blocks before the evicted one; they still hit. What is "
        "stranded is everything that hangs below the evicted block: every session's history.",
        "system_only", kind="miscounted_term")
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    m = model(p["model"])
    cached = p["conv_tokens"] + p["sys_tokens"] + p["sessions"] * p["session_tokens"]
    return [
        Fits("weights and everything cached", p["gpu"], p["tp"],
             m.weight_bytes(UNSTATED_WEIGHT_BYTES)
             + cached * m.kv_bytes_per_token(KV_DTYPES[p["kv_dtype"]])),
        # The next turn starts with the whole conversation and adds to it.
        WithinContext(p["model"], p["conv_tokens"] + 1, "the conversation's next turn"),
        WithinContext(p["model"], p["sys_tokens"] + p["session_tokens"], "a session"),
    ]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    s = solve(p)
    return {"stranded_formula": {"N": s["n_blocks"], "i": p["evict_index"],
                                 "S": s["block_mb"] * 1e6}}
