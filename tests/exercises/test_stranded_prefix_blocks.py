"""Q05 (exercises/stranded_prefix_blocks): the facts notes' worked numbers, sensible variants,
distinct mistakes, and a small prefix cache that checks the stranding count and which eviction
orders keep the cache prefix-closed."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import pytest

from exercises.spec import ExerciseSpec
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("stranded_prefix_blocks")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
VARIANTS = EX.variants()
spec = EX.spec_fixture()


# --- a small prefix cache: blocks keyed by (parent key, tokens), as in vLLM's hash chain ------

# A block's key is an interned id of (parent's id, its tokens): a chain of keys, like vLLM's
# chained block hashes, without hashing ever-deeper nested tuples.
Key = int
_IDS: dict[tuple[int | None, tuple[int, ...]], int] = {}


def _key(parent: Key | None, tokens: tuple[int, ...]) -> Key:
    return _IDS.setdefault((parent, tokens), len(_IDS))


@dataclass
class Block:
    parent: Key | None
    depth: int
    born: int
    last_use: int = 0
    ref: int = 0


@dataclass
class Cache:
    capacity: int
    policy: str
    blocks: dict[Key, Block] = field(default_factory=dict)
    queue: list[Key] = field(default_factory=list)  # free queue for the vLLM-style policies
    clock: int = 0
    violations: int = 0
    evictions: int = 0

    def keys(self, tokens: list[int], size: int) -> list[Key]:
        out: list[Key] = []
        parent: Key | None = None
        for start in range(0, len(tokens) - size + 1, size):
            key = _key(parent, tuple(tokens[start:start + size]))
            out.append(key)
            parent = key
        return out

    def lookup(self, keys: list[Key]) -> int:
        hit = 0
        for key in keys:  # stops at the first miss
            if key not in self.blocks:
                break
            hit += 1
        return hit

    def unreachable(self) -> int:
        """Cached blocks with a missing ancestor: resident, and no lookup can reach them."""
        return sum(1 for key in self.blocks if not self._reachable(key))

    def _reachable(self, key: Key) -> bool:
        parent = self.blocks[key].parent
        while parent is not None:
            if parent not in self.blocks:
                return False
            parent = self.blocks[parent].parent
        return True

    def _victim(self) -> Key:
        free = [k for k, b in self.blocks.items() if b.ref == 0]
        if self.policy in ("vllm_head_first", "vllm_tail_first"):
            return self.queue.pop(0)
        if self.policy == "lru_deepest":
            return min(free, key=lambda k: (self.blocks[k].last_use, -self.blocks[k].depth))
        if self.policy == "leaves_only":
            parents = {b.parent for b in self.blocks.values()}
            leaves = [k for k in free if k not in parents]
            return min(leaves, key=lambda k: self.blocks[k].last_use)
        if self.policy == "fifo":
            return min(free, key=lambda k: self.blocks[k].born)
        raise ValueError(self.policy)

    def evict_one(self) -> None:
        key = self._victim()
        self.evictions += 1
        del self.blocks[key]
        if key in self.queue:
            self.queue.remove(key)
        if self.unreachable():
            self.violations += 1

    def serve(self, tokens: list[int], size: int) -> None:
        """One request: hit what is cached, compute and cache the rest, then release."""
        self.clock += 1
        keys = self.keys(tokens, size)
        if len(keys) > self.capacity:
            return
        hit = self.lookup(keys)
        for key in keys[:hit]:
            block = self.blocks[key]
            if block.ref == 0 and key in self.queue:
                self.queue.remove(key)  # touched: out of the free queue while in use
            block.ref += 1
        for depth, key in enumerate(keys[hit:], start=hit):
            while len(self.blocks) >= self.capacity:
                self.evict_one()
            parent = keys[depth - 1] if depth else None
            self.blocks[key] = Block(parent, depth, self.clock, ref=1)
        for key in keys:
            self.blocks[key].last_use = self.clock  # a use refreshes the whole path
        order = reversed(keys) if self.policy == "vllm_tail_first" else iter(keys)
        for key in order:
            block = self.blocks[key]
            block.ref -= 1
            if block.ref == 0:
                self.queue.append(key)


def _workload(rng: random.Random, size: int) -> list[list[int]]:
    """Requests over two system prompts and a dozen multi-turn conversations."""
    systems = [[1000 * s + t for t in range(rng.randint(2, 4) * size)] for s in range(2)]
    history: dict[int, list[int]] = {}
    out = []
    for _ in range(120):
        conv = rng.randrange(12)
        if conv not in history:
            history[conv] = list(systems[conv % 2])
        history[conv] += [10_000 * (conv + 1) + len(history[conv]) + j
                          for j in range(rng.randint(3, 3 * size))]
        out.append(list(history[conv]))
    return out


def _run(policy: str, seed: int, size: int = 4, capacity: int = 40) -> Cache:
    rng = random.Random(seed)
    cache = Cache(capacity, policy)
    for tokens in _workload(rng, size):
        cache.serve(tokens, size)
    return cache


@pytest.mark.parametrize("policy", ["leaves_only", "lru_deepest", "vllm_tail_first"])
def test_safe_orders_never_strand(policy: str) -> None:
    # The options the exercise marks safe, and vLLM's tail-first free order, keep the cache
    # prefix-closed after every one of many evictions.
    runs = [_run(policy, seed) for seed in range(6)]
    assert all(c.violations == 0 for c in runs)
    assert sum(c.evictions for c in runs) > 500


@pytest.mark.parametrize("policy", ["vllm_head_first", "fifo"])
def test_unsafe_orders_strand(policy: str) -> None:
    assert sum(_run(policy, seed).violations for seed in range(6)) > 0


def test_evicting_block_i_strands_the_rest_of_the_chain_and_a_subtree() -> None:
    size = 4
    for n, i in [(2048, 0), (50, 17), (10, 9)]:
        cache = Cache(10**6, "lru_deepest")
        cache.serve(list(range(n * size)), size)
        keys = cache.keys(list(range(n * size)), size)
        del cache.blocks[keys[i]]
        assert cache.unreachable() == n - 1 - i
        assert cache.lookup(keys) == i
    # Tree: 3-block system prompt, 5 sessions of 2 full blocks plus a partial one.
    cache = Cache(10**6, "lru_deepest")
    system = list(range(3 * size))
    for sess in range(5):
        cache.serve(system + [100 * (sess + 1) + t for t in range(2 * size + 3)], size)
    last_system = cache.keys(system, size)[-1]
    del cache.blocks[last_system]
    assert cache.unreachable() == 5 * 2


# --- the facts notes' worked numbers (facts-q01-q25.md, Q05) ---------------------------------

def test_canonical_reproduces_the_worked_numbers() -> None:
    p = ex.CANONICAL
    assert (p["model"], p["tp"], p["block"], p["kv_dtype"], p["conv_tokens"],
            p["evict_index"]) == ("Llama-3.1-70B", 8, 16, "BF16", 32768, 0)
    s = ex.solve(p)
    assert s["block_bytes"].value == 5_242_880  # 16 x 327,680 B
    assert s["block_bytes_per_gpu"] == 655_360  # at TP8
    assert s["n_blocks"] == 2048
    assert s["conv_gb"] == pytest.approx(10.74, abs=0.005)
    assert s["stranded_blocks"] == 2047
    assert s["stranded_gb"].value == pytest.approx(10.73, abs=0.005)
    assert s["stranded_gb"].value * 1e9 == 2047 * 5_242_880
    # Our tree: 20 sessions x 250 full blocks of 5,242,880 B.
    assert s["tree_blocks"] == 5000
    assert s["tree_stranded_gb"].value == pytest.approx(26.2144)
    assert s["stranded_formula"] == "(N-1-i)*S"


# --- variants --------------------------------------------------------------------------------

def test_variants_are_sensible_and_differ() -> None:
    heads = 0
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        assert 0 <= p["evict_index"] < s["n_blocks"] - 1
        assert p["sys_tokens"] % p["block"] == 0
        assert s["cached_gb"] <= s["pool_gb"]
        heads += p["evict_index"] == 0
        for pid in NUMBER_PARTS:
            assert math.isfinite(s[pid].value) and s[pid].value > 0
    assert 40 <= heads <= 130
    assert len({tuple(sorted(p.items())) for p in VARIANTS}) == 200
    answers = {tuple(ex.solve(p)[pid].value for pid in NUMBER_PARTS) for p in VARIANTS}
    assert len(answers) >= 195


# --- mistakes --------------------------------------------------------------------------------

def test_formula_and_its_mistakes(spec: ExerciseSpec) -> None:
    EX.assert_formula_grader_separates(spec, "stranded_formula", "S*(N-i-1)")


# --- templates -------------------------------------------------------------------------------

STATEMENT_GIVENS = {"layers", "kv_heads", "q_heads", "head_dim", "dtype_bytes", "attn_desc"}


def test_templates_render_for_every_variant() -> None:
    for which in ("statement.md", "solution.md"):
        for text in EX.rendered(which, VARIANTS):
            assert "nan" not in text.lower().split()
    EX.assert_statement_shows_only_givens(STATEMENT_GIVENS)


def test_canonical_solution_quotes_the_worked_numbers() -> None:
    EX.assert_solution_quotes([
        "327,680", "5,242,880 B", "655,360 B", "2,048 blocks", "2,047", "10.73 GB", "10.74 GB",
        "26.21 GB"
    ])


def test_selftest_has_the_required_cases() -> None:
    # "21.46 GB" is off by 2x; "10 GiB" is right, in another unit.
    EX.assert_selftest_cases_well_formed("21.46 GB", "10 GiB")
