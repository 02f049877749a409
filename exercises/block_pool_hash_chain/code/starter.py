"""A block pool whose prefix cache cannot hand out the wrong KV, whatever the hash does.

Implement BlockPool. The grader calls it exactly as documented here, with SHA-256 and with
deliberately weak hash functions (one that makes every block collide); every rule it checks is
written in these docstrings. Standard library only.

Vocabulary. `B` is the block size in tokens. Block i of a prompt holds tokens[i*B:(i+1)*B]; it is
*full* when it has B tokens. Only full blocks are hashed and cached; a partial last block gets a
block like any other but is never cached.
"""
from __future__ import annotations

import hashlib
import struct  # noqa: F401  (you will want struct.pack for the token bytes)
from collections.abc import Callable, Sequence

HashFn = Callable[[bytes, tuple[int, ...], object], bytes]

# The parent hash of block 0.
NONE_HASH: bytes = hashlib.sha256(b"seed").digest()


def sha256_fn(parent: bytes, tokens: tuple[int, ...], extra: object) -> bytes:
    """SHA-256 over: `parent`, then each token as a 4-byte little-endian signed int, then
    repr(extra) encoded as UTF-8. Returns the 32-byte digest."""
    raise NotImplementedError


class BlockPool:
    """KV blocks 0 .. num_blocks-1 with a prefix cache keyed by chained block hashes.

    Rules:
      * HASHES. h_0 = hash_fn(NONE_HASH, tuple(block 0), extra), h_i = hash_fn(h_{i-1},
        tuple(block i), extra), for full blocks only. The same `extra` (a tenant or LoRA key, or
        None) goes into every block's hash.
      * THE TABLE maps a hash to the blocks cached under it, in the order they were cached. Two
        blocks may share a hash: a duplicate (equal content) or a collision (different content).
      * VERIFIED LOOKUP. The hash only nominates candidates. Walk the prompt's full blocks from
        block 0, at most floor((n - 1) / B) of them (n = len(tokens); the last token must be
        computed for its logits, and hits are whole blocks). At block i, accept the FIRST
        candidate under h_i (in caching order) whose cached tokens equal block i, whose extra
        equals `extra`, and whose parent is the block accepted at i - 1 IN THE SAME INCARNATION
        (for i = 0: no parent). Stop at the first block with no accepted candidate. An
        incarnation is one tenure of a block's contents: a block gets a new one each time the
        free queue hands it out as a new block. (Its id alone is not enough: see the statement.)
        One way to name an incarnation: (block id, a counter bumped each time the block is popped
        as a new block); since eviction removes a block's entry, every entry in the table belongs
        to its block's current incarnation.
      * THE FREE QUEUE holds every block with reference count 0, head first; initially
        [0, 1, ..., num_blocks-1]. A freed block keeps its cache entry and can still be hit until
        the queue hands it out.
      * ALLOCATE needs ceil(n / B) blocks: the verified hits, then new ones. If (new blocks
        needed) + (hit blocks whose count is 0) > len(free queue), return None and change
        nothing. Otherwise take every hit first (count += 1; out of the free queue if it was
        there), then pop each new block from the HEAD of the free queue. If a popped block is
        cached, evict it: out of the table, its cached contents forgotten. Each new block starts
        a new incarnation with count 1. Then cache every new FULL block i under h_i (after any
        block already there), recording its tokens, `extra` and its parent: the incarnation of
        the request's block i - 1 (none for block 0). Duplicates are kept, never merged.
      * FREE walks the request's blocks last to first (tail_first=True, the default) or first
        to last (tail_first=False); each block's count drops by 1, and a block reaching 0 is
        appended to the TAIL of the free queue.
    """

    def __init__(self, num_blocks: int, block_size: int, hash_fn: HashFn = sha256_fn) -> None:
        raise NotImplementedError

    def block_hashes(self, tokens: Sequence[int], extra: object = None) -> list[bytes]:
        """h_0, h_1, ... for the full blocks of `tokens` (len(tokens) // B entries)."""
        raise NotImplementedError

    def lookup(self, tokens: Sequence[int], extra: object = None) -> list[int]:
        """The verified hit chain (block ids). Pure: changes no count, queue or table."""
        raise NotImplementedError

    def allocate(self, req_id: str, tokens: Sequence[int],
                 extra: object = None) -> tuple[list[int], int] | None:
        """Admit a prompt (at least one token): return (its block ids in order, hits first; the
        cached token count, B x hits), or None when the pool cannot supply the blocks. The grader
        never reuses the id of a running request."""
        raise NotImplementedError

    def free(self, req_id: str, tail_first: bool = True) -> None:
        """The request finished: release its blocks (see FREE). The grader only frees running
        requests."""
        raise NotImplementedError

    def num_free(self) -> int:
        """How many blocks are in the free queue."""
        raise NotImplementedError

    def free_order(self) -> list[int]:
        """The free queue, head (next block handed out) first."""
        raise NotImplementedError
