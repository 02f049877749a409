"""Q27: a block's identity is a hash of its tokens and of every block before it.

One request's life through a vLLM-v1-style prefix cache: prompt A is hashed block by block
(chained), admitted and finished; its freed blocks stay hittable. D (A cut to its full blocks)
hits all but the last full block (the last-token rule makes a block-aligned prompt recompute a
whole block) and caches a duplicate. C (A with one token changed) hits only the blocks before the
change. G takes fresh blocks from the free queue head and evicts cached ones, tails first, and a
final lookup of A shows what survived.

Every number comes from running the reference model in code/reference.py over the variant's
trace; each known mistake is the same trace run through a model with that bug.
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


def _tokens(block_size: int, full_blocks: int, tail: int) -> list[int]:
    """Block i holds 10(i+1)+1, 10(i+1)+2, ... so a token's value shows where it sits."""
    return [10 * (i + 1) + j + 1 for i in range(full_blocks) for j in range(block_size)] + \
        [10 * (full_blocks + 1) + j + 1 for j in range(tail)]


def _variant(block_size: int, full_blocks: int, tail: int, num_blocks: int, changed_block: int,
             new_token: int, g_blocks: int) -> dict[str, Any]:
    a = _tokens(block_size, full_blocks, tail)
    pos = changed_block * block_size  # the first token of the changed block
    c = a[:pos] + [new_token] + a[pos + 1:]
    start = 10 * (full_blocks + 2) + 1  # G's tokens: after every value A uses, so G never hits
    g = list(range(start, start + g_blocks * block_size))
    return {"block_size": block_size, "num_blocks": num_blocks, "A": a, "C": c, "G": g,
            "changed_block": changed_block, "changed_token": a[pos], "new_token": new_token,
            "g_blocks": g_blocks}


# The facts note's trace: B = 4, 8 blocks, A = 14 tokens, token 21 -> 99, G needs 3 blocks.
CANONICAL: dict[str, Any] = _variant(4, 3, 2, 8, 1, 99, 3)


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        B = rng.choice((2, 3, 4, 5, 6, 8))
        k = rng.choice((3, 4, 5))
        return _variant(B, k, rng.randint(1, B - 1), rng.randint(k + 3, k + 6),
                        rng.randint(1, k - 1), rng.choice((77, 88, 99)), rng.randint(2, 5))

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    t = run_trace(p)
    # G fits beside the running C and evicts at least one cached block, and A keeps a hit.
    if t["G"] is None or t["g_evicted"] < 1 or t["a_after"] < p["block_size"]:
        return False
    # Every number part has at least two known mistakes in this variant.
    found = [m.part for m in mistakes(p)]
    return all(found.count(part) >= 2 for part in TOLERANCE)


# ------------------------------------------------------------------ the simulation


def _reference() -> ModuleType:
    return load_file("roofline_chained_block_hash_reference", HERE / "code" / "reference.py")


def _model(p: dict[str, Any], bug: str | None) -> Any:
    """The reference model, or the same model with one known bug."""
    ref = _reference()
    B = p["block_size"]

    class Buggy(ref.PrefixCacheModel):  # type: ignore[name-defined,misc]
        def _hits(self, hashes: list[bytes], n_tokens: int) -> list[int]:
            if bug not in ("no_cap", "unchained_walk"):
                return super()._hits(hashes, n_tokens)
            cap = n_tokens // B if bug == "no_cap" else max(0, (n_tokens - 1) // B)
            hits: list[int] = []
            for h in hashes[:cap]:
                if self.table.get(h):
                    hits.append(next(iter(self.table[h])))
                elif bug == "no_cap":
                    break
            return hits

        def free(self, req_id: str) -> None:
            blocks = self.requests.pop(req_id)
            for b in (blocks if bug == "forward_free" else reversed(blocks)):
                self.ref[b] -= 1
                if self.ref[b] == 0:
                    if bug == "evict_at_free":
                        self._evict(b)
                    self.queue[b] = None

    hash_fn = ref.sha256_fn
    if bug == "unchained_walk":
        # Each block keyed by its own tokens, as if the parent were not part of the hash.
        def hash_fn(parent: bytes, tokens: tuple[int, ...], extra: object) -> bytes:
            return ref.sha256_fn(ref.NONE_HASH, tokens, extra)
    return Buggy(p["num_blocks"], B, hash_fn)


def run_trace(p: dict[str, Any], bug: str | None = None) -> dict[str, Any]:
    """Play the statement's trace; return every step's result and the part answers."""
    B = p["block_size"]
    a, c, g = p["A"], p["C"], p["G"]
    k = len(a) // B
    m = _model(p, bug)
    out: dict[str, Any] = {}
    out["A"] = m.allocate("A", a)
    m.free("A")
    out["queue_after_A"] = m.free_queue()
    out["D"] = m.allocate("D", a[: k * B])
    out["owners_last"] = m.blocks_for_hash(_reference().request_block_hashes(a, B)[k - 1])
    m.free("D")
    out["queue_after_D"] = m.free_queue()
    out["C"] = m.allocate("C", c)
    out["queue_after_C"] = m.free_queue()
    out["F"] = m.lookup(a[: k * B + 1])
    head = m.free_queue()[: len(g) // B]
    out["g_evicted"] = sum(1 for b in head if m.block_hash[b] is not None)
    out["g_hashes_lost"] = len({m.block_hash[b] for b in head if m.block_hash[b] is not None}
                               - {m.block_hash[b] for b in m.free_queue()[len(g) // B:]}
                               - {m.block_hash[b] for blocks in m.requests.values()
                                  for b in blocks})
    out["a_before_G"] = m.lookup(a)[1]
    out["G"] = m.allocate("G", g)
    out["queue_after_G"] = m.free_queue()
    out["a_after_hits"], out["a_after"] = m.lookup(a)
    out["d_cached"] = out["D"][1] if out["D"] else 0
    out["c_cached"] = out["C"][1] if out["C"] else 0
    return out


# ------------------------------------------------------------------ solve


def _ids(blocks: list[int]) -> str:
    return "[" + ", ".join(str(b) for b in blocks) + "]"


def _chunks(tokens: list[int], B: int) -> str:
    """Tokens grouped by block: `11 12 13 14 | 21 22 23 24 | 41 42`."""
    return " | ".join(" ".join(str(t) for t in tokens[i:i + B]) for i in range(0, len(tokens), B))


def solve(p: dict[str, Any]) -> dict[str, Any]:
    ref = _reference()
    B, N = p["block_size"], p["num_blocks"]
    a, c, g = p["A"], p["C"], p["G"]
    n = len(a)
    k = n // B
    t = run_trace(p)
    ha = [h.hex()[:8] for h in ref.request_block_hashes(a, B)]
    hc = [h.hex()[:8] for h in ref.request_block_hashes(c, B)]
    hl = [h.hex()[:8] for h in ref.request_block_hashes(a, B, "loraA")]
    d_blocks, _ = t["D"]
    c_blocks, _ = t["C"]
    g_blocks = t["G"][0]
    pos = p["changed_block"] * B
    return {
        # Part answers.
        "d_cached": Quantity(t["d_cached"], ""),
        "c_cached": Quantity(t["c_cached"], ""),
        "g_evicted": Quantity(t["g_evicted"], ""),
        "a_after": Quantity(t["a_after"], ""),
        "model": "code/reference.py",
        "why": MODEL_ANSWER,
        # Given in the statement.
        "n_a": n,
        "k": k,
        "tail": n - k * B,
        "kB": k * B,
        "a_md": f"`{_chunks(a, B)}`",
        "c_md": f"`{_chunks(c, B)}`",
        "g_md": f"`{_chunks(g, B)}`",
        "g_tokens": len(g),
        "last_block": N - 1,
        "changed_pos": pos,
        # Worked solution.
        "none8": ref.NONE_HASH.hex()[:8],
        "ha_md": ", ".join(f"`{h}`" for h in ha),
        "hc_md": ", ".join(f"`{h}`" for h in hc),
        "hl_md": ", ".join(f"`{h}`" for h in hl),
        "a_blocks": _ids(t["A"][0]),
        "a_n_blocks": len(t["A"][0]),
        "q_after_a": _ids(t["queue_after_A"]),
        "d_cap": (k * B - 1) // B,
        "d_blocks": _ids(d_blocks),
        "d_new": d_blocks[-1],
        "dup_owners": _ids(t["owners_last"]),
        "q_after_d": _ids(t["queue_after_D"]),
        "c_blocks": _ids(c_blocks),
        "c_new": len(c_blocks) - t["c_cached"] // B,
        "c_hits": t["c_cached"] // B,
        "c_cap": (n - 1) // B,
        "q_after_c": _ids(t["queue_after_C"]),
        "f_tokens": k * B + 1,
        "f_cached": t["F"][1],
        "g_taken": _ids(g_blocks),
        "g_hashes_lost": t["g_hashes_lost"],
        "q_after_g": _ids(t["queue_after_G"]),
        "a_after_hits": _ids(t["a_after_hits"]),
        "a_before_g": t["a_before_G"],
        "a_cap": (n - 1) // B,
    }


MODEL_ANSWER = """\
**Why the cap is n − 1.** Prefill must produce the logits of the last prompt token, so at least
that token has to be computed. Hits are whole blocks and computed tokens must stay block
aligned, so the cap is floor((n − 1)/B) blocks: a prompt that is fully cached and ends exactly on
a block boundary recomputes its whole last block, not one token.

**Why free in reverse.** A chain is only useful from its first block: a lookup walks from block 0
and stops at the first miss. Freeing last block first puts a request's tail nearest the queue
head, so eviction takes tails before heads and never strands a block whose parent is gone. Since
every use of a block also uses its parents, the cached set stays prefix-closed. Eviction is
lazy: a freed block keeps its hash and can still be hit until the queue hands it out again, so a
prompt that comes back soon still finds its blocks.

**Why duplicates.** A running request's block table is append-only (the GPU kernels already hold
the block ids), so when a block is computed again, as D's last full block was because of the cap,
the engine keeps both copies under one hash rather than rewriting the table. The copy costs a
block until it is evicted.

**Why chain the hash.** A block's KV depends on every earlier token, so its key must cover the
whole prefix; putting the parent's hash into each block's hash does that in O(B) work per block,
and one dictionary probe per block finds the longest cached prefix. Extra keys (LoRA, salt)
change the chain from the block where they enter. vLLM trusts the hash (SHA-256 makes a collision
negligible); a weak hash would hand out another prompt's KV.
"""


# ------------------------------------------------------------------ mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    B = p["block_size"]
    sims = {bug: run_trace(p, bug) for bug in
            ("no_cap", "unchained_walk", "forward_free", "evict_at_free")}
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, as_float=True).add

    k, n = s["k"], s["n_a"]
    add("d_cached", k * B,
        f"That hits all {k} blocks. The last token must be computed to get the logits, so at "
        f"most floor(({k * B} − 1)/{B}) = {k - 1} blocks can hit, and the last block is "
        "recomputed.", "no_cap", kind="rounding")
    add("d_cached", k * B - 1,
        "That caps tokens, not blocks. Computed tokens must stay block aligned, so the cap is "
        f"{B}·floor((n − 1)/{B}): the whole last block is recomputed, not just one token.",
        "unaligned_cap", kind="rounding")
    add("d_cached", sims["evict_at_free"]["d_cached"],
        "Freed blocks keep their hashes and stay in the table until the free queue hands them "
        "out again; A's blocks are still hittable.", "evict_at_free", kind="misread_mechanism")
    add("d_cached", s["d_cached"].value / B,
        f"That counts blocks. The part asks for tokens: each hit block is {B} tokens.", "blocks",
        kind="unit_slip")
    add("c_cached", sims["unchained_walk"]["c_cached"],
        "That matches blocks by their own tokens. A's later blocks have the same tokens, but "
        "their KV was computed after a different block, so their chained hashes differ and the "
        "walk stops at the first miss.", "unchained", kind="misread_mechanism")
    add("c_cached", s["c_cached"].value + B,
        f"The changed token sits in block {p['changed_block']}, so that block is new too; only "
        "the blocks before it hit.", "counts_changed_block", kind="misread_mechanism")
    add("c_cached", s["c_cached"].value / B,
        f"That counts blocks. The part asks for tokens: each hit block is {B} tokens.", "blocks",
        kind="unit_slip")
    add("g_evicted", p["g_blocks"],
        "Not every block G takes was cached: A's partial last block was never hashed, so "
        "handing it out evicts nothing.", "counts_uncached", kind="misread_mechanism")
    add("g_evicted", s["g_hashes_lost"],
        "That counts hashes that disappear. D cached a second copy of A's last full block under "
        "the same hash, and each copy G takes is its own eviction.", "hashes_not_blocks",
        kind="misread_mechanism")
    add("g_evicted", sims["forward_free"]["g_evicted"],
        "That is what freeing first block first would give. The blocks go to the queue tail "
        "last block first, so tails sit nearer the head.", "forward_free", kind="misread_mechanism")
    add("g_evicted", sims["evict_at_free"]["g_evicted"],
        "Freed blocks are not evicted when they are freed: they keep their hashes in the "
        "queue until they are popped, and popping a cached one is an eviction.", "evict_at_free",
        kind="misread_mechanism")
    add("a_after", sims["forward_free"]["a_after"],
        "That is the head-first order: freeing first block first sends chain heads to the "
        "front of the queue and strands their tails. Blocks are freed last block first.",
        "forward_free", kind="misread_mechanism")
    add("a_after", s["a_before_g"],
        "That is A's hit before G arrived. G's blocks come from the queue head and some of them "
        "were A's cached blocks.", "ignored_g", kind="misread_mechanism")
    add("a_after", s["a_after"].value / B,
        f"That counts blocks. The part asks for tokens: each hit block is {B} tokens.", "blocks",
        kind="unit_slip")
    add("a_after", B * min(k, (n - 1) // B),
        "That assumes every one of A's full blocks is still cached (up to the cap); G's "
        "allocation evicted some of them.", "nothing_evicted", kind="misread_mechanism")
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    # No model, GPU or context in this story: is_sensible() already keeps the trace coherent.
    return []
