# Bug: after evicting a leaf, the parent is queued when childless even if a running request still pins it.
"""Reference radix prefix cache (SGLang-style): edge split, lock counts, LRU leaf eviction.

The grader's expected outputs come from this file, run through driver.py in the worker. It
follows exactly the rules in the statement and in starter.py.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any


class TreeNode:
    """One edge of the trie and the node it leads to."""

    def __init__(self) -> None:
        self.key: tuple[int, ...] = ()
        self.value: list[int] = []
        self.children: dict[Any, TreeNode] = {}
        self.parent: TreeNode | None = None
        self.lock_ref: int = 0
        self.last_access: int = 0


class RadixCache:
    def __init__(self, page_size: int = 1) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self.page_size = page_size
        self.root = TreeNode()
        # The root is never evicted; a permanent lock keeps it out of every candidate test.
        self.root.lock_ref = 1
        self.clock = 0
        # Running totals so the scheduler's per-step size queries cost O(1).
        self._evictable = 0
        self._protected = 0

    # -- helpers ------------------------------------------------------------------------------

    def _child_key(self, key: tuple[int, ...], pos: int = 0) -> Any:
        if self.page_size == 1:
            return key[pos]
        return key[pos:pos + self.page_size]

    def _common(self, edge: tuple[int, ...], key: tuple[int, ...], pos: int) -> int:
        """How many leading tokens of `edge` equal key[pos:], rounded down to whole pages."""
        # A plain token-by-token loop, as SGLang's own matcher is: the speed check compares
        # students with this, so it must not be cleverer than a straightforward solution.
        i = 0
        for a, b in zip(edge, key[pos:pos + len(edge)], strict=False):
            if a != b:
                break
            i += 1
        return i - i % self.page_size

    def _split(self, child: TreeNode, at: int) -> TreeNode:
        """Cut `child`'s edge after `at` tokens; return the new upper node."""
        parent = child.parent
        assert parent is not None
        upper = TreeNode()
        upper.key, upper.value = child.key[:at], child.value[:at]
        upper.parent = parent
        # Every request that pins `child` passes through the upper half too.
        upper.lock_ref = child.lock_ref
        upper.last_access = child.last_access
        child.key, child.value = child.key[at:], child.value[at:]
        child.parent = upper
        upper.children = {self._child_key(child.key): child}
        parent.children[self._child_key(upper.key)] = upper
        return upper

    def _aligned(self, key: Sequence[int]) -> tuple[int, ...]:
        key = tuple(key)
        return key[: len(key) - len(key) % self.page_size]

    def _walk(self, key: tuple[int, ...]) -> tuple[TreeNode, int]:
        """Follow `key` from the root, stamping and splitting; (last node, tokens matched)."""
        self.clock += 1
        node, pos = self.root, 0
        while pos < len(key):
            child = node.children.get(self._child_key(key, pos))
            if child is None:
                break
            child.last_access = self.clock
            n = self._common(child.key, key, pos)
            if n < len(child.key):
                node, pos = self._split(child, n), pos + n
                break
            node, pos = child, pos + n
        return node, pos

    # -- the API ------------------------------------------------------------------------------

    def match_prefix(self, key: Sequence[int]) -> tuple[list[int], TreeNode]:
        node, matched = self._walk(self._aligned(key))
        slots: list[int] = []
        path = []
        x = node
        while x is not self.root:
            path.append(x)
            x = x.parent  # type: ignore[assignment]
        for x in reversed(path):
            slots.extend(x.value)
        assert len(slots) == matched
        return slots, node

    def insert(self, key: Sequence[int], value: Sequence[int]) -> int:
        key = self._aligned(key)
        value = list(value[: len(key)])
        node, matched = self._walk(key)
        if matched < len(key):
            leaf = TreeNode()
            leaf.key, leaf.value = key[matched:], value[matched:]
            leaf.parent = node
            leaf.last_access = self.clock
            node.children[self._child_key(leaf.key)] = leaf
            self._evictable += len(leaf.key)
        return matched

    def inc_lock_ref(self, node: TreeNode) -> None:
        while node is not self.root:
            if node.lock_ref == 0:
                self._evictable -= len(node.key)
                self._protected += len(node.key)
            node.lock_ref += 1
            node = node.parent  # type: ignore[assignment]

    def dec_lock_ref(self, node: TreeNode) -> None:
        while node is not self.root:
            if node.lock_ref == 1:
                self._evictable += len(node.key)
                self._protected -= len(node.key)
            node.lock_ref -= 1
            node = node.parent  # type: ignore[assignment]

    def evict(self, num_tokens: int, free_fn: Callable[[list[int]], None]) -> int:
        if num_tokens <= 0:
            return 0
        heap: list[tuple[int, int, int, TreeNode]] = []
        # Ties on last_access happen only between the two leaves an insert creates when it
        # diverges inside an edge; the statement breaks them by the smaller first slot id.
        stack = [self.root]
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if not node.children and node.lock_ref == 0:
                heap.append((node.last_access, node.value[0], id(node), node))
        heapq.heapify(heap)
        freed = 0
        while freed < num_tokens and heap:
            _, _, _, leaf = heapq.heappop(heap)
            free_fn(list(leaf.value))
            freed += len(leaf.value)
            parent = leaf.parent
            assert parent is not None
            del parent.children[self._child_key(leaf.key)]
            leaf.parent = None
            self._evictable -= len(leaf.key)
            # The parent becomes a candidate once its last child is gone, if nobody pins it.
            if not parent.children and parent is not self.root:
                heapq.heappush(heap, (parent.last_access, parent.value[0], id(parent), parent))
        return freed

    def evictable_size(self) -> int:
        return self._evictable

    def protected_size(self) -> int:
        return self._protected

    def total_size(self) -> int:
        return self._evictable + self._protected
