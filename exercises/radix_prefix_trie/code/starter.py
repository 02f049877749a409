"""A radix-tree prefix cache for KV slots, in the style of SGLang's RadixCache.

Implement the methods below (standard library only). The grader plays request scripts against
your cache (see the statement): after every operation it reads your tree through `root`,
`children`, `key`, `value`, `parent` and `lock_ref`, so keep those attributes as described.

Rules the checks rely on:

* Page size. Only whole pages are ever matched or stored: `match_prefix` and `insert` use
  the first len(key) // page_size * page_size tokens of their key and ignore the rest. With
  page_size 1 every token is a page.
* Tree. Every node but the root has a non-empty `key` (a whole number of pages) and as many
  slot ids in `value` as tokens in `key`. `children` maps the first token of a child's key
  (page_size 1) or the tuple of its first page_size tokens (page_size > 1) to the child, and
  `child.parent` is the node whose `children` holds it. Nodes are never merged back together.
* Edge split. When a walk (match or insert) stops inside an edge, split that node into an
  upper node holding the matched part (it takes the old node's place under the parent, and
  copies its lock_ref) and the old node holding the rest, now the only child of the upper node.
  A match that ends inside an edge splits it even though nothing is inserted.
* Clock (LRU). `match_prefix` and `insert` each advance a counter by one on every call (also
  when they walk nothing) and set `last_access` to its new value on every node they walk
  into: each node on the path, both halves of a node they split, and a leaf they create.
* Eviction. Repeatedly remove the leaf (no children, not the root) with lock_ref == 0 and the
  smallest `last_access`; call `free_fn` once per leaf with all of its slot ids, in key order,
  and unlink it. Its parent becomes a candidate when it is left with no children and
  lock_ref == 0. Stop as soon as at least `num_tokens` tokens are freed (a leaf is freed whole,
  so this can overshoot) or no candidate is left. Ties: an insert that diverges inside an edge
  stamps both the split's lower half and the new leaf with the same value; between leaves with
  equal `last_access`, the one whose first slot id is smaller goes first.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


class TreeNode:
    """The node an edge leads to: the edge's tokens (`key`) and their KV slot ids (`value`)."""

    def __init__(self) -> None:
        self.key: tuple[int, ...] = ()  # empty only for the root
        self.value: list[int] = []  # one KV slot id per token of `key`
        self.children: dict[Any, TreeNode] = {}  # first token (or first page tuple) -> child
        self.parent: TreeNode | None = None
        self.lock_ref: int = 0  # running requests whose matched path passes through here
        self.last_access: int = 0  # the clock value of the last walk into this node


class RadixCache:
    def __init__(self, page_size: int = 1) -> None:
        self.page_size = page_size
        self.root = TreeNode()
        raise NotImplementedError

    def match_prefix(self, key: Sequence[int]) -> tuple[list[int], TreeNode]:
        """The slot ids of the longest cached prefix of `key` (whole pages only), and the node
        where that prefix ends: exactly there, splitting an edge if the match stops inside it.
        No match: ([], self.root). Advances the clock and stamps the path."""
        raise NotImplementedError

    def insert(self, key: Sequence[int], value: Sequence[int]) -> int:
        """Store `key` (whole pages only) with its slot ids `value` (value[i] is the slot of
        key[i]). Walk as match_prefix does (splitting where the key stops or diverges inside an
        edge), then hang what is left as a new leaf with its slots. Return how many leading
        tokens were already cached: the caller frees its own slots for those positions. The
        new leaf is unlocked, even if its parent is locked."""
        raise NotImplementedError

    def inc_lock_ref(self, node: TreeNode) -> None:
        """Pin a request's matched path: add 1 to lock_ref of `node` and every ancestor below
        the root. A node going from 0 to 1 moves its tokens from evictable to protected."""
        raise NotImplementedError

    def dec_lock_ref(self, node: TreeNode) -> None:
        """Undo one inc_lock_ref(node) (1 -> 0 moves tokens back to evictable). The grader
        never calls it more often than inc_lock_ref on the same node."""
        raise NotImplementedError

    def evict(self, num_tokens: int, free_fn: Callable[[list[int]], None]) -> int:
        """Free at least `num_tokens` tokens of unlocked leaves, least recently used first (see
        the module docstring); return how many were freed. num_tokens <= 0 frees nothing."""
        raise NotImplementedError

    def evictable_size(self) -> int:
        """Tokens in nodes with lock_ref == 0 (the root holds none)."""
        raise NotImplementedError

    def protected_size(self) -> int:
        """Tokens in nodes with lock_ref > 0."""
        raise NotImplementedError

    def total_size(self) -> int:
        """All tokens in the tree."""
        raise NotImplementedError
