"""MUTANT: ignores the route and always sends request i to replica i % replicas."""
from __future__ import annotations

from collections.abc import Callable, Sequence

HITS = "vllm:prefix_cache_hits_total"
QUERIES = "vllm:prefix_cache_queries_total"


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def reusable_tokens(cached: Sequence[int], new: Sequence[int], block_size: int) -> int:
    if not new:
        return 0
    usable = min(common_prefix_len(cached, new), len(new) - 1)
    return block_size * (usable // block_size)


def _evict_one(cache: dict[tuple[int, ...], int], now: int) -> bool:
    """Drop the least recently used block not used by request `now`; False if there is none."""
    victim = None
    best = None
    for key, used in cache.items():
        if used == now:
            continue
        rank = (used, -len(key))  # oldest first; then the longest prefix (the chain's tail)
        if best is None or rank < best:
            best, victim = rank, key
    if victim is None:
        return False
    del cache[victim]
    return True


def predict_window(trace: list[list[int]], block_size: int, replicas: int = 1,
                   route: Callable[[int, list[int]], int] | None = None,
                   capacity_blocks: int | None = None) -> tuple[int, int]:
    caches: list[dict[tuple[int, ...], int]] = [{} for _ in range(replicas)]
    queries = hits = 0
    b = block_size
    for i, prompt in enumerate(trace):
        r = i % replicas
        cache = caches[r]
        n = len(prompt)
        found = 0
        while (found + 1) * b <= n - 1:
            key = tuple(prompt[: (found + 1) * b])
            if key not in cache:
                break
            cache[key] = i
            found += 1
        queries += n
        hits += found * b
        for j in range(n // b):
            key = tuple(prompt[: (j + 1) * b])
            if key in cache:
                cache[key] = i
                continue
            if capacity_blocks is not None and len(cache) >= capacity_blocks \
                    and not _evict_one(cache, i):
                break  # every cached block belongs to this request: cache no more of it
            cache[key] = i
    return queries, hits


def counter_delta(before: dict[str, float], after: dict[str, float], name: str) -> float:
    delta = after[name] - before[name]
    # A counter only goes down when the process restarted; the new value is what it counted
    # since then (the part of the window before the restart is lost, so this is a lower bound).
    return after[name] if delta < 0 else delta


def observed_hit_rate(before: list[dict[str, float]], after: list[dict[str, float]]) -> float:
    hits = sum(counter_delta(b, a, HITS) for b, a in zip(before, after, strict=True))
    queries = sum(counter_delta(b, a, QUERIES) for b, a in zip(before, after, strict=True))
    # Sum first, then divide: a replica that served little traffic must weigh little.
    return hits / queries if queries else 0.0


def diagnose(observed: float, predictions: dict[str, float], tol: float = 0.05) -> str:
    best = None
    for name in sorted(predictions):
        gap = abs(observed - predictions[name])
        if gap <= tol and (best is None or gap < best[0]):
            best = (gap, name)
    return best[1] if best is not None else "none"
