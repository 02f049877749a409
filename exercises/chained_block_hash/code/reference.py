"""Reference: vLLM-style chained block hashes and a prefix-cache lookup model (Q27).

A block's identity is a hash of (parent block's hash, the block's token ids, extra keys), so equal
hashes mean equal prefixes. Only full blocks are hashed and cached. A finished request's blocks
keep their hashes and go to the tail of a free queue (last block first); they stay hittable until
the queue hands them out again, at which point they are evicted. Standard library only.
"""
from __future__ import annotations

import hashlib
import struct
from collections import OrderedDict
from collections.abc import Callable, Sequence

BlockHash = bytes
HashFn = Callable[[bytes, tuple[int, ...], object], bytes]

# The parent hash of block 0. vLLM draws it at random per process (or derives it from
# PYTHONHASHSEED); a fixed value lets every student's hashes match the grader's.
NONE_HASH: BlockHash = hashlib.sha256(b"seed").digest()


def sha256_fn(parent: bytes, tokens: tuple[int, ...], extra: object) -> bytes:
    """SHA-256 of parent ‖ each token as a little-endian int32 ‖ repr(extra) in UTF-8."""
    h = hashlib.sha256(parent)
    h.update(struct.pack(f"<{len(tokens)}i", *tokens))
    h.update(repr(extra).encode("utf-8"))
    return h.digest()


def hash_block_tokens(parent: BlockHash | None, tokens: Sequence[int], extra: object = None,
                      hash_fn: HashFn = sha256_fn) -> BlockHash:
    """The hash of one block: hash_fn(parent or NONE_HASH, tuple(tokens), extra)."""
    return hash_fn(NONE_HASH if parent is None else parent, tuple(tokens), extra)


def request_block_hashes(tokens: Sequence[int], block_size: int, extra: object = None,
                         hash_fn: HashFn = sha256_fn) -> list[BlockHash]:
    """Chained hashes of the full blocks of `tokens`; a partial last block gets none."""
    out: list[BlockHash] = []
    parent: BlockHash | None = None
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = hash_block_tokens(parent, tokens[start:start + block_size], extra, hash_fn)
        out.append(parent)
    return out


class PrefixCacheModel:
    """A pool of `num_blocks` KV blocks with a hash-keyed prefix cache (see the starter)."""

    def __init__(self, num_blocks: int, block_size: int, hash_fn: HashFn = sha256_fn) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.hash_fn = hash_fn
        self.ref = [0] * num_blocks
        self.block_hash: list[BlockHash | None] = [None] * num_blocks
        # hash -> blocks cached under it, in caching order (a dict keeps insertion order).
        self.table: dict[BlockHash, dict[int, None]] = {}
        # The free queue, head first. An OrderedDict gives O(1) pop at the head, append at the
        # tail and removal from the middle (when a hit takes a freed block back).
        self.queue: OrderedDict[int, None] = OrderedDict((b, None) for b in range(num_blocks))
        self.requests: dict[str, list[int]] = {}

    def _hits(self, hashes: list[BlockHash], n_tokens: int) -> list[int]:
        # At most floor((n - 1) / B) blocks: the last prompt token must be computed to get logits,
        # and hits are whole blocks, so a fully cached block-aligned prompt recomputes a block.
        cap = max(0, (n_tokens - 1) // self.block_size)
        hits: list[int] = []
        for h in hashes[:cap]:
            blocks = self.table.get(h)
            if not blocks:
                break  # a chain can only be matched from its start: stop at the first miss
            hits.append(next(iter(blocks)))  # the earliest-cached block with this hash
        return hits

    def lookup(self, tokens: Sequence[int], extra: object = None) -> tuple[list[int], int]:
        hashes = request_block_hashes(tokens, self.block_size, extra, self.hash_fn)
        hits = self._hits(hashes, len(tokens))
        return hits, len(hits) * self.block_size

    def allocate(self, req_id: str, tokens: Sequence[int],
                 extra: object = None) -> tuple[list[int], int] | None:
        B = self.block_size
        hashes = request_block_hashes(tokens, B, extra, self.hash_fn)
        hits = self._hits(hashes, len(tokens))
        need = -(-len(tokens) // B) - len(hits)
        # A hit on a freed block takes it out of the free queue, so it counts against the queue.
        queued_hits = sum(1 for b in hits if self.ref[b] == 0)
        if need + queued_hits > len(self.queue):
            return None
        for b in hits:  # touch first, so the pops below can never hand out a hit block
            if self.ref[b] == 0:
                del self.queue[b]
            self.ref[b] += 1
        new: list[int] = []
        for _ in range(need):
            b, _ = self.queue.popitem(last=False)
            self._evict(b)
            self.ref[b] = 1
            new.append(b)
        blocks = hits + new
        for i in range(len(hits), len(hashes)):  # newly full blocks join the cache
            self.block_hash[blocks[i]] = hashes[i]
            self.table.setdefault(hashes[i], {})[blocks[i]] = None
        self.requests[req_id] = blocks
        return blocks, len(hits) * B

    def _evict(self, b: int) -> None:
        h = self.block_hash[b]
        if h is None:
            return
        owners = self.table[h]
        del owners[b]
        if not owners:
            del self.table[h]
        self.block_hash[b] = None

    def free(self, req_id: str) -> None:
        # Last block first: the chain's tail reaches the queue head before its parents, so it is
        # evicted first and a parent is never evicted while its child is still cached.
        for b in reversed(self.requests.pop(req_id)):
            self.ref[b] -= 1
            if self.ref[b] == 0:
                self.queue[b] = None

    def free_queue(self) -> list[int]:
        return list(self.queue)

    def blocks_for_hash(self, h: BlockHash) -> list[int]:
        return list(self.table.get(h, ()))
