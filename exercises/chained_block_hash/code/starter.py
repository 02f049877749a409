"""Chained block hashes and a prefix-cache lookup model (vLLM v1 style).

Implement the functions and the class below. The grader calls them exactly as documented here;
every rule it checks is written in these docstrings. Standard library only.

Vocabulary. `B` is the block size in tokens. Block i of a prompt holds tokens[i*B:(i+1)*B]; it is
*full* when it has B tokens. Only full blocks are hashed and cached; a partial last block gets a
block like any other but is never cached.
"""
from __future__ import annotations

import hashlib
import struct  # noqa: F401  (you will want struct.pack for the token bytes)
from collections.abc import Callable, Sequence

BlockHash = bytes
HashFn = Callable[[bytes, tuple[int, ...], object], bytes]

# The parent hash used for block 0 (vLLM draws one at random per process; ours is fixed so that
# your hashes match the grader's).
NONE_HASH: BlockHash = hashlib.sha256(b"seed").digest()


def sha256_fn(parent: bytes, tokens: tuple[int, ...], extra: object) -> bytes:
    """SHA-256 over: `parent`, then each token as a 4-byte little-endian signed int, then
    repr(extra) encoded as UTF-8. Returns the 32-byte digest."""
    raise NotImplementedError


def hash_block_tokens(parent: BlockHash | None, tokens: Sequence[int], extra: object = None,
                      hash_fn: HashFn = sha256_fn) -> BlockHash:
    """The hash of one block: hash_fn(parent, tuple(tokens), extra), where a `parent` of None
    (block 0) is replaced by NONE_HASH."""
    raise NotImplementedError


def request_block_hashes(tokens: Sequence[int], block_size: int, extra: object = None,
                         hash_fn: HashFn = sha256_fn) -> list[BlockHash]:
    """The chained hashes of every FULL block of `tokens`, in order: h_0 has parent None, h_i has
    parent h_{i-1}. The same `extra` goes into every block's hash. A partial last block gets no
    hash, so the list has len(tokens) // block_size entries."""
    raise NotImplementedError


class PrefixCacheModel:
    """A pool of KV blocks numbered 0 .. num_blocks-1, with a prefix cache keyed by block hash.

    State you need:
      * a reference count per block (how many running requests hold it);
      * per block, the hash it is cached under, or none;
      * the cache table: hash -> the blocks cached under that hash, in the order they were cached
        (two blocks can hold the same hash: see allocate);
      * the FREE QUEUE: every block with reference count 0, head first. Initially it is
        [0, 1, ..., num_blocks-1] (no block is reserved). The head is the next block handed out.

    Rules:
      * LOOKUP. Hash the request's full blocks (request_block_hashes with this model's block size
        and hash function). Walk the hashes from block 0; block i hits if some block is cached
        under h_i, and the hit is the EARLIEST-cached such block. Stop at the first miss. Take at
        most floor((n - 1) / B) hits, n = len(tokens): the last prompt token must be computed to
        get the next token's logits, and hits are whole blocks. Cached tokens = B * hits.
      * A freed block keeps its hash and stays in the table: it can still be hit until the free
        queue hands it out.
      * ALLOCATE needs ceil(n / B) blocks: the hits, then new ones. A hit on a block whose count
        is 0 takes it out of the free queue. If (new blocks needed) + (hit blocks whose count is
        0) > len(free queue), return None and change nothing. Otherwise: first take every hit
        (count += 1, removed from the free queue if it was there), then pop each new block from
        the HEAD of the free queue. If a popped block is cached, evict it: remove it from the
        table (and drop the hash's entry if no block is left under it) and clear its hash. Set
        each new block's count to 1. Finally cache every new block that is full: block i gets
        h_i and is added to the table under h_i, after any block already there. (A duplicate is
        kept: vLLM never rewrites a running request's block table to share an equal block.)
      * FREE walks the request's blocks from LAST to FIRST: count -= 1, and a block whose count
        reaches 0 is appended to the TAIL of the free queue (still cached, still hittable).
    """

    def __init__(self, num_blocks: int, block_size: int, hash_fn: HashFn = sha256_fn) -> None:
        raise NotImplementedError

    def lookup(self, tokens: Sequence[int], extra: object = None) -> tuple[list[int], int]:
        """(hit block ids in order, cached token count). Pure: changes no count, queue or table."""
        raise NotImplementedError

    def allocate(self, req_id: str, tokens: Sequence[int],
                 extra: object = None) -> tuple[list[int], int] | None:
        """Admit a request (prompt `tokens`, at least one token): return (its block ids in order,
        hits first; cached token count), or None when the pool cannot supply the blocks. The
        grader never reuses the id of a request that is still running."""
        raise NotImplementedError

    def free(self, req_id: str) -> None:
        """The request finished: release its blocks, last block first. The grader only frees
        running requests."""
        raise NotImplementedError

    def free_queue(self) -> list[int]:
        """The free queue, head (next block handed out) first."""
        raise NotImplementedError

    def blocks_for_hash(self, h: BlockHash) -> list[int]:
        """The blocks cached under `h`, earliest-cached first ([] if none)."""
        raise NotImplementedError
