"""Prefix-boundary check and cache-counter deltas.

Implement the six functions below. Standard library only. The grader calls each on many inputs
and compares the result with a reference (see the statement for the rules).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

HITS = "vllm:prefix_cache_hits_total"  # tokens served from the prefix cache
QUERIES = "vllm:prefix_cache_queries_total"  # prompt tokens looked up


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading token ids a and b share (compare ids, never text)."""
    raise NotImplementedError


def reusable_tokens(cached: Sequence[int], new: Sequence[int], block_size: int) -> int:
    """Prompt tokens of `new` the engine can take from the cache when `cached` is cached.

    Only whole blocks of `block_size` tokens are reused, and the last prompt token is always
    recomputed (its logits start the reply): block_size * floor(min(lcp, len(new) - 1) /
    block_size), and 0 for an empty prompt.
    """
    raise NotImplementedError


def predict_window(trace: list[list[int]], block_size: int, replicas: int = 1,
                   route: Callable[[int, list[int]], int] | None = None,
                   capacity_blocks: int | None = None) -> tuple[int, int]:
    """Replay `trace` (prompts in arrival order) against `replicas` prefix caches, all empty at
    the start; return (queries_tokens, hits_tokens) summed over all requests.

    Request i goes to replica route(i, prompt), or i % replicas when route is None; route
    always returns an index in 0 .. replicas - 1.
    Block j of a prompt (tokens j*B .. (j+1)*B - 1, full blocks only) is identified by the whole
    prefix prompt[:(j+1)*B], so it matches only a block with the same tokens before it too.
    Serving request i on its replica:
      1. Lookup: walk blocks j = 0, 1, ... while (j+1)*B <= len(prompt) - 1 and block j is cached
         there; stop at the first miss. hits += B * (blocks found); queries += len(prompt).
         The blocks found become "used by request i".
      2. Insert: for every full block of the prompt, j = 0 .. len(prompt)//B - 1, in order: if it
         is cached, it becomes used by request i; if not, cache it (used by request i).
    capacity_blocks (None = unlimited) caps the blocks one replica holds. Before caching a new
    block on a full replica, evict the block whose last use is oldest; among blocks last used by
    the same request, evict the longest prefix first (the tail of the chain). Blocks used by
    request i itself are never evicted while it is served: if every cached block was used by it,
    stop caching the rest of its prompt.
    """
    raise NotImplementedError


def counter_delta(before: dict[str, float], after: dict[str, float], name: str) -> float:
    """after[name] - before[name]; if that is negative the counter reset (a restart), and the
    delta is after[name] (what the new process counted since it started)."""
    raise NotImplementedError


def observed_hit_rate(before: list[dict[str, float]], after: list[dict[str, float]]) -> float:
    """Token hit rate over a window from per-replica snapshots (before[r] and after[r] are
    replica r's counters): the sum of the HITS deltas over the sum of the QUERIES deltas, each
    delta taken with counter_delta. Returns 0.0 when no token was queried."""
    raise NotImplementedError


def diagnose(observed: float, predictions: dict[str, float], tol: float = 0.05) -> str:
    """The hypothesis whose predicted hit rate is closest to the observed one, if that distance
    is at most tol (absolute, in rate units: 0.05 = 5 percentage points). On a tie, the name that
    sorts first. "none" when no hypothesis is within tol (or there are none). Distances are
    compared as plain floats, abs(observed - prediction), with no rounding."""
    raise NotImplementedError
