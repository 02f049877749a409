"""Q40: two prompts with the same tokens in block 3 share block 3 only if blocks 0-2 match too.

The scenario is a block pool with chained hashes. Prompt A is cached and freed (last block
first, so its blocks stay hittable); prompt C shares A's first s blocks and has A's last full
block's tokens at the same position but a different block before it, so it hits only the s
shared blocks. A new request W takes fresh blocks from the free queue head and evicts the tail
of A's chain first, so a repeat of A still hits its head. A second, tiny scenario is the facts
note's crafted regression: with a hash under which every block collides and a first-block-first
free, a block's id alone cannot tell its parent's old contents from its new ones.

Every number comes from the reference pool in code/reference.py; each known mistake is the same
trace through a pool with that bug.
"""
from __future__ import annotations

import random
from pathlib import Path
from types import ModuleType
from typing import Any

from exercises.drawing import draw_sensible
from exercises.feasibility import Claim
from exercises.file_module import load_file
from exercises.slips import Slips, tolerances
from exercises.spec import Mistake, Quantity

HERE = Path(__file__).resolve().parent

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

A_CHUNKS = "PQRSTU"  # A's full blocks
B_CHUNKS = "XYZ"  # C's own blocks between the shared head and the repeated block
W_CHUNKS = "KLMNO"  # W's blocks
CHUNK_ID = {c: i + 1 for i, c in enumerate(A_CHUNKS + B_CHUNKS + W_CHUNKS)}


def _chunk(name: str, size: int) -> list[int]:
    """A chunk's tokens: 1000·(its number) + 1 .. + size, distinct for every chunk."""
    return [1000 * CHUNK_ID[name] + i for i in range(1, size + 1)]


def _variant(block: int, k: int, tail: int, shared: int, num_blocks: int, w_blocks: int,
             reg_block: int) -> dict[str, Any]:
    a_names = list(A_CHUNKS[:k])
    b_names = a_names[:shared] + list(B_CHUNKS[: k - 1 - shared]) + [a_names[k - 1]]
    w_names = list(W_CHUNKS[:w_blocks])
    tail_tokens = [9000 + i for i in range(1, tail + 1)]
    return {
        "block_size": block, "num_blocks": num_blocks, "k": k, "tail": tail, "shared": shared,
        "w_blocks": w_blocks, "a_names": "".join(a_names), "b_names": "".join(b_names),
        "w_names": "".join(w_names),
        "A": [t for c in a_names for t in _chunk(c, block)] + tail_tokens,
        "B": [t for c in b_names for t in _chunk(c, block)] + tail_tokens,
        "W": [t for c in w_names for t in _chunk(c, block)],
        # The crafted regression, with blocks of reg_block tokens.
        "reg_block": reg_block,
    }


# The blurb's setting: B = 16, A = P Q R S + 4 tokens, C = P Q X S + 4 tokens (the same 16
# tokens in block 3), 8 blocks, W needs 2; the regression as in the facts note (blocks of 2).
CANONICAL: dict[str, Any] = _variant(16, 4, 4, 2, 8, 2, 2)


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        k = rng.choice((4, 5, 6))
        return _variant(rng.choice((16, 32)), k, rng.randint(1, 9), rng.randint(1, k - 2),
                        rng.randint(k + 4, k + 9), rng.randint(1, 4), rng.choice((2, 3, 4)))

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    t = run_trace(p)
    B = p["block_size"]
    # C and W both fit; W evicts part of A's chain but a repeat of A still hits its first block.
    if t["B"] is None or t["W"] is None or not B <= t["a_after_w"] < t["a_before_w"]:
        return False
    found = [m.part for m in mistakes(p)]
    return all(found.count(part) >= 2 for part in TOLERANCE)


# ------------------------------------------------------------------ the simulation


def _reference() -> ModuleType:
    return load_file("roofline_block_pool_hash_chain_reference", HERE / "code" / "reference.py")


def _pool(num_blocks: int, block: int, bug: str | None, hash_fn: Any = None) -> Any:
    ref = _reference()

    class Buggy(ref.BlockPool):  # type: ignore[name-defined,misc]
        def free(self, req_id: str, tail_first: bool = True) -> None:
            blocks = self.requests.pop(req_id)
            forward = bug == "forward_free" or not tail_first
            for b in (blocks if forward else reversed(blocks)):
                self.ref[b] -= 1
                if self.ref[b] == 0:
                    if bug == "evict_at_free":
                        self._evict(b)
                    self.queue[b] = None

        def _hits(self, tokens: Any, extra: object, hashes: list[bytes]) -> list[int]:
            if bug != "token_match":
                return list(super()._hits(tokens, extra, hashes))
            # Each block matched on its own tokens, ignoring what came before it.
            B = self.block_size
            hits = []
            for i in range(max(0, (len(tokens) - 1) // B)):
                block = tuple(tokens[i * B:(i + 1) * B])
                match = [b for b, m in enumerate(self.meta) if m is not None and m[1] == block]
                if match:
                    hits.append(match[0])
            return hits

    return Buggy(num_blocks, block) if hash_fn is None else Buggy(num_blocks, block, hash_fn)


def run_trace(p: dict[str, Any], bug: str | None = None) -> dict[str, Any]:
    pool = _pool(p["num_blocks"], p["block_size"], bug)
    out: dict[str, Any] = {}
    out["A"] = pool.allocate("A", p["A"])
    pool.free("A")
    out["queue_after_A"] = pool.free_order()
    out["B"] = pool.allocate("B", p["B"])
    out["shared_tokens"] = out["B"][1] if out["B"] else 0
    out["queue_after_B"] = pool.free_order()
    out["a_before_w"] = len(pool.lookup(p["A"])) * p["block_size"]
    out["W"] = pool.allocate("W", p["W"])
    out["queue_after_W"] = pool.free_order()
    out["a_after_hits"] = pool.lookup(p["A"])
    out["a_after_w"] = len(out["a_after_hits"]) * p["block_size"]
    return out


def regression(p: dict[str, Any], bug: str | None = None) -> dict[str, Any]:
    """The facts note's regression, scaled to blocks of reg_block tokens, every block colliding."""
    b = p["reg_block"]
    a, x, r = [1] * b + [2] * b + [9], [8] * b, [8] * b + [2] * b + [7]
    ref = _reference()

    def const(parent: bytes, tokens: tuple[int, ...], extra: object) -> bytes:
        return bytes(32)

    if bug == "id_only":
        pool = ref.BlockPool(3, b, const)
        pool.gen = _Zero()  # every incarnation looks the same: the parent is its id alone
    else:
        pool = _pool(3, b, bug, const)
    pool.allocate("A", a)
    pool.free("A", tail_first=False)
    pool.allocate("X", x)
    hits = pool.lookup(r)
    return {"a": a, "x": x, "r": r, "hits": hits, "cached": len(hits) * b}


class _Zero(list):  # type: ignore[type-arg]
    """A generation list that never changes (the id-only bug)."""

    def __getitem__(self, i: Any) -> int:
        return 0

    def __setitem__(self, i: Any, value: Any) -> None:
        pass


# ------------------------------------------------------------------ solve


def _names(names: str) -> str:
    return " ".join(names)


def solve(p: dict[str, Any]) -> dict[str, Any]:
    B, k, s = p["block_size"], p["k"], p["shared"]
    t = run_trace(p)
    reg = regression(p)
    ref = _reference()
    ha = [h.hex()[:8] for h in ref.BlockPool(1, B).block_hashes(p["A"])]
    hb = [h.hex()[:8] for h in ref.BlockPool(1, B).block_hashes(p["B"])]
    b_blocks = t["B"][0]
    return {
        # Part answers.
        "shared_tokens": Quantity(t["shared_tokens"], ""),
        "a_after_w": Quantity(t["a_after_w"], ""),
        "regression_hit": Quantity(reg["cached"], ""),
        "parent_identity": ["id_gen", "prefix"],
        "pool": "code/reference.py",
        "proof": MODEL_ANSWER,
        # Given in the statement.
        "a_md": f"`{_names(p['a_names'])}` + {p['tail']} tokens",
        "b_md": f"`{_names(p['b_names'])}` + the same {p['tail']} tokens",
        "w_md": f"`{_names(p['w_names'])}`",
        "n_a": len(p["A"]),
        "last": k - 1,
        "same_chunk": p["a_names"][k - 1],
        "b_diff_chunk": p["b_names"][k - 2],
        "a_diff_chunk": p["a_names"][k - 2],
        "last_block_id": p["num_blocks"] - 1,
        "reg_a": str(reg["a"]), "reg_x": str(reg["x"]), "reg_r": str(reg["r"]),
        "reg_n": len(reg["r"]),
        # Worked solution.
        "ha_md": ", ".join(f"`{h}`" for h in ha),
        "hb_md": ", ".join(f"`{h}`" for h in hb),
        "a_blocks": str(t["A"][0]),
        "q_after_a": str(t["queue_after_A"]),
        "b_blocks": str(b_blocks),
        "b_hits": s,
        "b_new": len(b_blocks) - s,
        "q_after_b": str(t["queue_after_B"]),
        "w_taken": str(t["W"][0]),
        "q_after_w": str(t["queue_after_W"]),
        "a_before_w": t["a_before_w"],
        "a_after_hits": str(t["a_after_hits"]),
        "a_after_blocks": len(t["a_after_hits"]),
        "a_cap": (len(p["A"]) - 1) // B,
        "token_match": run_trace(p, "token_match")["shared_tokens"],
        "fwd_after_w": run_trace(p, "forward_free")["a_after_w"],
        "fwd_q_after_a": str(run_trace(p, "forward_free")["queue_after_A"]),
        "reg_hits": str(reg["hits"]),
        "reg_id_only": regression(p, "id_only")["cached"],
    }


MODEL_ANSWER = """\
**The invariant.** Every cached block records its tokens, its extra key and the incarnation of
its parent: the parent's block id and its generation, a counter that changes every time the
block is handed out as a new block. A lookup accepts a candidate at position i only if its
tokens and extra equal the request's block i and its parent is exactly the incarnation it
accepted at position i − 1 (no parent at position 0).

**Induction.** Claim: the block accepted at position i holds KV computed from exactly the
request's tokens 0 .. (i+1)·B − 1 with the same extra. Position 0: the candidate was computed
with no parent, from tokens equal to the request's block 0. Step: the block accepted at i − 1
holds the right prefix (hypothesis); that incarnation still exists, because any reuse would
have changed its generation; the candidate at i was computed on top of that very incarnation,
from tokens equal to block i, so it holds KV of the prefix through block i. The hash only picks
which candidates to check, so a collision costs a comparison or a hit, never correctness.

**Why the id alone is not enough.** With last-block-first frees a child always reaches the free
queue before its parent, so a parent is never reused while its child is cached, and an id would
do. But that leans correctness on an eviction policy: free first block first (as the
regression does), reuse the parent, and a child whose parent id matches hands out KV computed
after different tokens. Checking the parent's hash fails for the same reason whenever hashes
collide.

**Freed but hittable, tails first.** Freed blocks keep their cache entries and wait in the free
queue until a new block is needed, so a returning prompt hits for free. Freeing last block first
puts chain tails nearest the queue head, so eviction trims chains from the end and never strands
a block behind a missing parent; a lookup can only hit from block 0 forward.
"""


# ------------------------------------------------------------------ mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    B = p["block_size"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, as_float=True).add

    same = s["same_chunk"]
    add("shared_tokens", s["token_match"],
        f"That shares block {s['last']} ({same}) because its tokens match. Its KV was computed "
        f"after {s['b_diff_chunk']} in C but after {s['a_diff_chunk']} in A, so the keys and "
        "values differ; the chained hash (and the parent check) stop the match at the first "
        "different block.", "token_match", kind="misread_mechanism")
    add("shared_tokens", s["shared_tokens"].value + B,
        f"One block too many: block {p['shared']} differs, and the walk stops at the first "
        "miss.", "off_by_one", kind="rounding")
    add("shared_tokens", s["shared_tokens"].value / B,
        f"That counts blocks. The part asks for tokens: each block is {B} tokens.", "blocks",
        kind="unit_slip")
    add("shared_tokens", run_trace(p, "evict_at_free")["shared_tokens"],
        "A's freed blocks are still cached: a freed block keeps its entry until the free queue "
        "hands it out again.", "evict_at_free", kind="misread_mechanism")
    add("a_after_w", s["fwd_after_w"],
        "That is what a first-block-first free gives: A's head reaches the queue head first and "
        "is evicted, stranding the rest. The pool frees last block first, so W takes A's tail.",
        "forward_free", kind="misread_mechanism")
    add("a_after_w", s["a_before_w"],
        "That is A's hit before W. W's blocks come from the free queue head, and some of them "
        "were A's cached blocks.", "ignored_w", kind="misread_mechanism")
    add("a_after_w", s["a_after_w"].value / B,
        f"That counts blocks. The part asks for tokens: each block is {B} tokens.", "blocks",
        kind="unit_slip")
    add("a_after_w", run_trace(p, "evict_at_free")["a_after_w"],
        "Freed blocks stay cached until they are popped; only W's pops evict.", "evict_at_free",
        kind="misread_mechanism")
    b2 = p["reg_block"]
    add("regression_hit", s["reg_id_only"],
        "That accepts block 1 because its recorded parent id is block 0. But block 0 was "
        "reused by X after A freed it: block 1's KV was computed after A's first block, not "
        "after X's. The parent's generation changed; the id did not.", "id_only",
        kind="misread_mechanism")
    add("regression_hit", 0,
        f"Block 0 verifies: X's block 0 holds exactly {s['reg_x']} with no parent, and a "
        "collision only means more candidates to check, not a miss.", "collision_is_miss",
        kind="misread_mechanism")
    add("regression_hit", 2 * b2 + 1,
        f"At most floor(({s['reg_n']} − 1)/{b2}) whole blocks can hit, and cached tokens are "
        "whole blocks.", "all_tokens", kind="rounding")
    choice = [
        Mistake("parent_identity", ["parent_hash"],
                "A parent's hash is exactly what a collision fakes: two different parents with "
                "the same hash both pass.", "parent_hash", kind="misread_mechanism"),
        Mistake("parent_identity", ["parent_id"],
                "The id alone fails once a parent is reused while its child is still cached, "
                "which a first-block-first free allows (the regression).", "parent_id",
                kind="misread_mechanism"),
        Mistake("parent_identity", ["sha256_only"],
                "SHA-256 makes a collision negligible, not impossible, and the pool must also be "
                "correct under the weak hashes the grader uses.", "sha256_only",
                kind="misread_mechanism"),
    ]
    return out + choice


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    # No model, GPU or context in this story: is_sensible() already keeps the trace coherent.
    return []
