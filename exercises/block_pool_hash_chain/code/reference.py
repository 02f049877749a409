"""Reference: a collision-safe block pool with chained hashes (Q40).

Blocks are found by a chained hash, but a hash only nominates candidates: a candidate is
accepted only if its own tokens and extra key equal the request's block and its recorded parent
is the very block accepted one level up, in the same incarnation (block id and generation). By
induction over the chain, an accepted block holds KV computed from exactly the request's prefix,
whatever the hash function does. Freed blocks stay hittable until the free queue hands them out;
frees go last block first by default, so chains lose their tails before their heads.
Standard library only.
"""
from __future__ import annotations

import hashlib
import struct
from collections import OrderedDict
from collections.abc import Callable, Sequence

HashFn = Callable[[bytes, tuple[int, ...], object], bytes]
NONE_HASH: bytes = hashlib.sha256(b"seed").digest()


def sha256_fn(parent: bytes, tokens: tuple[int, ...], extra: object) -> bytes:
    """SHA-256 of parent ‖ each token as a little-endian int32 ‖ repr(extra) in UTF-8."""
    h = hashlib.sha256(parent)
    h.update(struct.pack(f"<{len(tokens)}i", *tokens))
    h.update(repr(extra).encode("utf-8"))
    return h.digest()


class BlockPool:
    """See the starter for the rules; this is the reference implementation."""

    def __init__(self, num_blocks: int, block_size: int, hash_fn: HashFn = sha256_fn) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.hash_fn = hash_fn
        self.ref = [0] * num_blocks
        # A block's generation counts how often it has been handed out as a new block: (id,
        # generation) names one incarnation of its contents.
        self.gen = [0] * num_blocks
        # What a cached block holds: its hash, tokens, extra key and parent incarnation.
        self.meta: list[tuple[bytes, tuple[int, ...], object, tuple[int, int] | None] | None] = \
            [None] * num_blocks
        self.table: dict[bytes, dict[int, None]] = {}  # hash -> blocks, in caching order
        self.queue: OrderedDict[int, None] = OrderedDict((b, None) for b in range(num_blocks))
        self.requests: dict[str, list[int]] = {}

    def block_hashes(self, tokens: Sequence[int], extra: object = None) -> list[bytes]:
        B = self.block_size
        out: list[bytes] = []
        parent = NONE_HASH
        for start in range(0, len(tokens) - B + 1, B):
            parent = self.hash_fn(parent, tuple(tokens[start:start + B]), extra)
            out.append(parent)
        return out

    def _hits(self, tokens: Sequence[int], extra: object, hashes: list[bytes]) -> list[int]:
        B = self.block_size
        cap = max(0, (len(tokens) - 1) // B)
        hits: list[int] = []
        parent: tuple[int, int] | None = None
        for i, h in enumerate(hashes[:cap]):
            block = tuple(tokens[i * B:(i + 1) * B])
            found = None
            for b in self.table.get(h, ()):  # the hash only nominates; verify each candidate
                m = self.meta[b]
                if m is not None and m[1] == block and m[2] == extra and m[3] == parent:
                    found = b
                    break
            if found is None:
                break
            hits.append(found)
            parent = (found, self.gen[found])
        return hits

    def lookup(self, tokens: Sequence[int], extra: object = None) -> list[int]:
        return self._hits(tokens, extra, self.block_hashes(tokens, extra))

    def allocate(self, req_id: str, tokens: Sequence[int],
                 extra: object = None) -> tuple[list[int], int] | None:
        B = self.block_size
        hashes = self.block_hashes(tokens, extra)
        hits = self._hits(tokens, extra, hashes)
        need = -(-len(tokens) // B) - len(hits)
        queued_hits = sum(1 for b in hits if self.ref[b] == 0)
        if need + queued_hits > len(self.queue):
            return None
        for b in hits:  # touch first: a hit can never be popped as a new block below
            if self.ref[b] == 0:
                del self.queue[b]
            self.ref[b] += 1
        new: list[int] = []
        for _ in range(need):
            b, _ = self.queue.popitem(last=False)
            self._evict(b)
            self.gen[b] += 1  # new contents: a new incarnation
            self.ref[b] = 1
            new.append(b)
        blocks = hits + new
        for i in range(len(hits), len(hashes)):
            b = blocks[i]
            parent = None if i == 0 else (blocks[i - 1], self.gen[blocks[i - 1]])
            self.meta[b] = (hashes[i], tuple(tokens[i * B:(i + 1) * B]), extra, parent)
            self.table.setdefault(hashes[i], {})[b] = None
        self.requests[req_id] = blocks
        return blocks, len(hits) * B

    def _evict(self, b: int) -> None:
        m = self.meta[b]
        if m is None:
            return
        owners = self.table[m[0]]
        del owners[b]
        if not owners:
            del self.table[m[0]]
        self.meta[b] = None

    def free(self, req_id: str, tail_first: bool = True) -> None:
        blocks = self.requests.pop(req_id)
        for b in (reversed(blocks) if tail_first else blocks):
            self.ref[b] -= 1
            if self.ref[b] == 0:
                self.queue[b] = None

    def num_free(self) -> int:
        return len(self.queue)

    def free_order(self) -> list[int]:
        return list(self.queue)
