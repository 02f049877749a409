"""Q43: the paging waste bound, and choosing the block size.

A paged KV cache hands out fixed-size blocks of B token slots on demand, one at a time, when a
sequence's last block is full. So every block of a live sequence is full except possibly its last,
which holds at least one token: at most B - 1 empty slots per sequence and N(B - 1) for N live
sequences, whatever their lengths. If lengths are spread evenly modulo B the expected waste is
(B - 1)/2 slots per sequence. The parts grade the bound (a formula), its size in bytes for a real
deployment at a large block size, the expected waste as a share of the stored KV, the prefix-cache
cost of coarse blocks (hits only at whole-block boundaries), and the three-way trade; a text part
carries the argument.

The canonical variant is the facts notes' worked example (facts-q26-q49.md, Q43): 256 sequences
averaging 1,000 tokens, 16- vs 128-token blocks (expected 0.75 % vs 6.35 %, worst 1.5 % vs 12.7 %),
and a 2,000-token shared prefix (2,000 hit at B = 16, 1,920 at B = 128). The notes give no model;
the exercise adds Llama-3.1-70B in BF16 on 8 x H100 to turn token slots into bytes.
"""
from __future__ import annotations

import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import draw_sensible
from exercises.feasibility import UNSTATED_WEIGHT_BYTES, Claim, Fits, WithinContext, check
from exercises.slips import Slips, near, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# Deployments a variant may use: (model, GPU, tensor-parallel degree). All full-attention models
# (GQA or MHA; no sliding window, no MLA), so one token's KV is 2 x layers x KV heads x head dim x
# bytes on every layer, and each holds its BF16 weights with room left for KV.
DEPLOYMENTS: tuple[tuple[str, str, int], ...] = (
    ("Llama-3.1-8B", "H100 SXM", 1),
    ("Llama-3.1-8B", "A100 SXM 80GB", 1),
    ("Llama-2-7B", "A100 SXM 80GB", 1),
    ("Llama-2-7B", "H100 SXM", 2),
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
SEQS = (32, 640)  # live sequences, drawn uniformly in this range
MEAN_LENS = (500, 8000)  # mean length in tokens, drawn in steps of 100 in this range
LARGE_BLOCKS = (64, 128, 256)
KV_DTYPES: dict[str, int] = {"BF16": 2, "FP8": 1}
SMALL_BLOCK = 16  # vLLM's default on CUDA GPUs (vllm/config/cache.py, DEFAULT_BLOCK_SIZE)
MEM_UTIL = 0.9  # share of HBM the engine may use (vLLM's gpu_memory_utilization default)

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "gpu": "H100 SXM",
    "tp": 8,
    "kv_dtype": "BF16",
    "n_seqs": 256,
    "mean_len": 1000,  # tokens
    "block_small": SMALL_BLOCK,
    "block_large": 128,
    "shared_prefix": 2000,  # tokens a new prompt shares with a cached one
}

BOUND = "N*(B-1)"

# The trade-off statements of part 5 that are true for raising the block size.
TRADE = ["waste", "kernel", "prefix"]

# One sentence per line: the key-point matcher cuts answers at line breaks.
MODEL_ANSWER = """\
**The bound.** Blocks are allocated on demand: a sequence gets a new block only when its last one is full and it has one more token to write.
So every block of a sequence except the last is full, and the last holds at least one token (it would not exist otherwise).
The only empty slots are in that last block, at most $B - 1$ of them.
Summed over $N$ live sequences, the waste is at most $N(B - 1)$ slots, whatever the lengths, and the bound is reached when every sequence has just opened a new block.
All blocks are the same size and any free block can serve any sequence, so there is no external fragmentation.
A free block is never too small or in the wrong place.
With lengths spread evenly modulo $B$ the expected waste is half the bound, $(B-1)/2$ per sequence, and as a share of the stored KV it is $(B-1)/(2\\bar L)$, so it shrinks as sequences grow.

**The block size.** Three things move with $B$: (1) that waste, which grows in proportion to $B$; (2) kernel efficiency: bigger blocks mean fewer block-table lookups and longer contiguous reads, and some kernels only accept certain sizes; (3) prefix-cache granularity: a shared prefix is reused only up to its last whole block, and eviction frees memory in $B$-token units.
I would keep {small} (the default) unless a kernel needs larger pages or a profile shows attention paying for the indirection; going to {big} multiplies the waste by {ratio:.1f} (from {pct_small:.2f} % to {pct_big:.2f} % of the stored KV here) and costs up to {big_m1} tokens of reuse on every prefix hit.
The bound also assumes allocation by need: an engine that reserves slots ahead (speculative lookahead, or a whole output's worth at admission) wastes more than this.
"""


# ----------------------------------------------------------------------------------------------
# Variants


def _pool_gb(p: dict[str, Any]) -> float:
    """KV pool of the replica: usable HBM (marketed GB as 10^9 B, times MEM_UTIL) minus weights."""
    g = gpu(p["gpu"])
    return p["tp"] * g.hbm_gb * MEM_UTIL - model(p["model"]).weight_bytes(2) / 1e9


def is_sensible(p: dict[str, Any]) -> bool:
    """The checks generate() applies; the tests apply them to every variant too."""
    if check(constraints(p)):  # a story that could not happen: see exercises/feasibility.py
        return False
    s = solve(p)
    big = p["block_large"]
    context = model(p["model"]).max_context
    return (
        # the mean length leaves room for longer sequences within the model's context window
        (context is None or 2 * p["mean_len"] <= context)
        # the live sequences' KV fits in the replica's pool with room to spare
        and s["live_gb"] <= 0.8 * _pool_gb(p)
        # the expected waste at the large block is visible but not absurd
        and 0.5 <= s["expected_pct"].value <= 20.0
        # the shared prefix spans at least one large block and ends inside one, so coarse blocks
        # really lose some reuse; and it is no multiple of 16 either, so the two sizes differ
        and p["shared_prefix"] >= big
        and p["shared_prefix"] % big != 0
    )


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw a deployment and a workload; redraw until the variant is sensible."""
    def draw(rng: random.Random) -> dict[str, Any]:
        name, gpu_name, tp = rng.choice(DEPLOYMENTS)
        p = {
            "model": name,
            "gpu": gpu_name,
            "tp": tp,
            "kv_dtype": rng.choice(tuple(KV_DTYPES)),
            "n_seqs": rng.randint(*SEQS),
            "mean_len": 100 * rng.randint(MEAN_LENS[0] // 100, MEAN_LENS[1] // 100),
            "block_small": SMALL_BLOCK,
            "block_large": rng.choice(LARGE_BLOCKS),
            # a system prompt or document of 300 to 6,000 tokens, to the token
            "shared_prefix": rng.randint(300, 6000),
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
    n, mean, small, big, shared = (p["n_seqs"], p["mean_len"], p["block_small"],
                                   p["block_large"], p["shared_prefix"])
    live_tokens = n * mean

    def worst(b: int) -> int:
        return n * (b - 1)

    def expected(b: int) -> float:
        return n * (b - 1) / 2

    def hit(b: int, tokens: int) -> int:
        return tokens // b * b

    worst_large = worst(big)
    expected_large = expected(big)
    hit_large = hit(big, shared)
    s: dict[str, Any] = {
        # part answers
        "bound": BOUND,
        "worst_gb": Quantity(worst_large * kappa / 1e9, "GB"),
        "expected_pct": Quantity(expected_large / live_tokens * 100, "%"),
        "prefix_hit": Quantity(hit_large, "tokens"),
        "trade": list(TRADE),
        "argument": MODEL_ANSWER.format(
            small=small, big=big, big_m1=big - 1, ratio=(big - 1) / (small - 1),
            pct_small=expected(small) / live_tokens * 100,
            pct_big=expected_large / live_tokens * 100),
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
        "live_tokens": live_tokens,
        "live_gb": live_tokens * kappa / 1e9,
        "block_bytes_large": big * kappa,
        "block_mb_large": big * kappa / 1e6,
        "block_mb_small": small * kappa / 1e6,
        "worst_tokens_large": worst_large,
        "worst_tokens_small": worst(small),
        "worst_pct_large": worst_large / live_tokens * 100,
        "worst_pct_small": worst(small) / live_tokens * 100,
        "worst_gb_small": worst(small) * kappa / 1e9,
        "worst_gib": worst_large * kappa / 2**30,
        "expected_tokens_large": expected_large,
        "expected_tokens_small": expected(small),
        "expected_pct_small": expected(small) / live_tokens * 100,
        "expected_gb_large": expected_large * kappa / 1e9,
        "expected_gb_small": expected(small) * kappa / 1e9,
        "expected_seqs_large": expected_large / mean,  # average sequences that waste would hold
        "waste_ratio": (big - 1) / (small - 1),
        "half_block_large": (big - 1) / 2,
        "half_block_small": (small - 1) / 2,
        "hit_blocks_large": shared // big,
        "hit_small": hit(small, shared),
        "hit_blocks_small": shared // small,
        "lost_large": shared - hit_large,
        "lost_small": shared - hit(small, shared),
        # the last-token rule: a prompt that IS the cached prefix must recompute at least its
        # last token, so at most shared - 1 tokens can hit (vLLM get_computed_blocks)
        "repeat_hit_large": hit(big, shared - 1),
        "repeat_hit_small": hit(small, shared - 1),
        "pool_gb": _pool_gb(p),
    }
    return s


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m = model(p["model"])
    tp, big, small, mean = p["tp"], p["block_large"], p["block_small"], p["mean_len"]
    n, shared = p["n_seqs"], p["shared_prefix"]
    out: list[Mistake] = [
        Mistake("bound", "N*B",
                "A sequence's last block is never empty: it is allocated only when a token needs "
                "it, so it holds at least one. At most B - 1 slots are empty per sequence.",
                "n_times_b", kind="rounding"),
        Mistake("bound", "B-1",
                "That is one sequence. Each of the N live sequences has its own partly filled "
                "last block.", "one_sequence", kind="wrong_scope"),
        Mistake("bound", "N*(B-1)/2",
                "That is the expected waste when lengths are spread evenly modulo B. The bound is "
                "the worst case: every last block holds a single token.", "expected",
                kind="mean_vs_tail"),
        Mistake("bound", "N*B/2",
                "That is about the average, not the worst case, and a last block is never empty: "
                "the bound is B - 1 slots per sequence.", "half_block", kind="mean_vs_tail"),
        Mistake("trade", [*TRADE, "external"],
                "Paging has no external fragmentation at any block size: every block is the same "
                "size, so any free block can serve any sequence.", "external",
                kind="misread_mechanism"),
        Mistake("trade", [*TRADE, "long_context"],
                "The bound is B - 1 slots per sequence whatever its length, so longer sequences "
                "waste a smaller share of their memory, not a larger one.", "long_context",
                kind="misread_mechanism"),
        Mistake("trade", [*TRADE, "table"],
                "Bigger blocks mean fewer blocks per sequence, so the block table shrinks; and it "
                "is tiny next to the KV either way.", "table", kind="misread_mechanism"),
    ]

    add = Slips(s, TOLERANCE, out, merge=near).add

    kappa = s["kappa"]
    worst = s["worst_gb"].value
    add("worst_gb", worst / 2,
        "Half the bound: that is the expected waste, (B - 1)/2 per sequence. The bound is the "
        "worst case, B - 1 per sequence.", "expected", kind="mean_vs_tail")
    add("worst_gb", worst / 2, "Half the reference: you counted K but not V.", "k_only",
        kind="k_without_v")
    add("worst_gb", n * big * kappa / 1e9,
        "You counted B empty slots per sequence. The last block holds at least one token, so at "
        "most B - 1 are empty.", "b_not_b_minus_1", kind="rounding")
    add("worst_gb", s["worst_gb_small"],
        f"That is the bound at {small}-token blocks. The part asks about {big}-token blocks.",
        "small_block", kind="wrong_scope")
    add("worst_gb", worst / tp,
        f"That is one GPU's share (1/{tp} of the KV heads). The part asks for the whole replica.",
        "per_gpu", kind="forgot_tp")
    add("worst_gb", worst * m.q_heads / m.kv_heads,
        f"You used the {m.q_heads} query heads. With grouped-query attention only the "
        f"{m.kv_heads} KV heads are cached.", "q_heads", kind="q_vs_kv_heads")
    add("worst_gb", worst * 2,
        f"Twice the reference: the cache is {p['kv_dtype']}, {s['dtype_bytes']} byte(s) per "
        "element.", "dtype", kind="wrong_precision")

    add("expected_pct", s["worst_pct_large"],
        "That is the worst case, B - 1 empty slots per sequence. On average the last block is "
        "half empty: (B - 1)/2.", "worst", kind="mean_vs_tail")
    add("expected_pct", (big - 1) / (2 * big) * 100,
        "That is how empty the last block is on average, as a share of one block. The part asks "
        "for the waste as a share of all the tokens stored.", "last_block_share",
        kind="wrong_scope")
    add("expected_pct", (big - 1) / 2 / (mean + (big - 1) / 2) * 100,
        "You divided by the slots allocated (stored tokens plus waste). The part measures the "
        "waste against the tokens actually stored.", "per_allocated", kind="inverted")
    add("expected_pct", s["expected_pct_small"],
        f"That is the expected waste at {small}-token blocks. The part asks about {big}.",
        "small_block", kind="wrong_scope")

    add("prefix_hit", shared,
        f"Only full blocks are cached and matched. The last {s['lost_large']} shared tokens sit "
        f"in a block that also holds tokens that differ, so that block misses.", "all_shared",
        kind="rounding")
    add("prefix_hit", -(-shared // big) * big,
        "You rounded up to a whole block. The block holding the first differing token cannot "
        "match, so round down.", "round_up", kind="rounding")
    add("prefix_hit", shared // big,
        f"That is the number of blocks that hit. The part asks for tokens: blocks x {big}.",
        "blocks", kind="unit_slip")
    add("prefix_hit", s["hit_small"],
        f"That is the hit at {small}-token blocks. The part asks about {big}-token blocks.",
        "small_block", kind="wrong_scope")
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    m = model(p["model"])
    kv = p["n_seqs"] * p["mean_len"] * m.kv_bytes_per_token(KV_DTYPES[p["kv_dtype"]])
    return [
        # "the pool has room for all the live sequences"; weights at the least precision (FP8),
        # the statement naming none.
        Fits("weights and the live sequences' KV", p["gpu"], p["tp"],
             m.weight_bytes(UNSTATED_WEIGHT_BYTES) + kv),
        WithinContext(p["model"], p["mean_len"], "a sequence of the mean length"),
        WithinContext(p["model"], p["shared_prefix"] + 1, "the shared prefix and a new token"),
    ]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {"bound": {"N": p["n_seqs"], "B": p["block_large"]}}
