"""Q27 (chained_block_hash): the canonical trace, the known mistakes, sensible variants, and the
code part's machinery run in-process on trusted code only (the reference, the mutants, the
equivalents, the driver)."""
from __future__ import annotations

import json
import random
from typing import Any

import pytest

from exercises.chained_block_hash import exercise as ex
from tests.exercises.support import (
    ExerciseUnderTest,
    assert_speed_case_is_seeded_and_distinct,
    check_score,
    code_part,
)

EUT = ExerciseUnderTest.load(ex)
spec = EUT.spec_fixture()
SEED = 12345


CODE_PART = code_part("chained_block_hash")
checks, driver, reference = CODE_PART.checks, CODE_PART.driver, CODE_PART.reference
all_cases, expected = CODE_PART.fixtures(SEED)


# --- the canonical numbers (facts note Q27) ----------------------------------------------------

def test_canonical_hashes_are_the_facts_notes() -> None:
    h = [x.hex()[:8] for x in reference.request_block_hashes(checks.A, 4)]
    assert reference.NONE_HASH.hex()[:8] == "19b25856"
    assert h == ["4b21c0d3", "a36fe891", "b3129415"]  # 14 tokens: the 2-token tail gets none
    assert [x.hex()[:8] for x in reference.request_block_hashes(checks.A, 4, "loraA")] == \
        ["ed5bfa42", "b3ee9a20", "7df7a71c"]
    assert [x.hex()[:8] for x in reference.request_block_hashes(checks.C, 4)] == \
        ["4b21c0d3", "44617efb", "d159bf9c"]
    # E's block 0 has A's block 1's tokens but no parent: a different hash.
    assert [x.hex()[:8] for x in reference.request_block_hashes(checks.E, 4)] == \
        ["fe24e312", "0579c5b5"]


def test_canonical_trace_is_the_facts_notes() -> None:
    t = ex.run_trace(ex.CANONICAL)
    assert t["A"] == ([0, 1, 2, 3], 0)
    assert t["queue_after_A"] == [4, 5, 6, 7, 3, 2, 1, 0]  # freed in reverse, to the tail
    assert t["D"] == ([0, 1, 4], 8)  # cap floor(11/4) = 2 blocks; block 4 recomputes 8..11
    assert t["owners_last"] == [2, 4]  # the duplicate is kept
    assert t["queue_after_D"] == [5, 6, 7, 3, 2, 4, 1, 0]
    assert t["C"] == ([0, 5, 6, 7], 4)
    assert t["queue_after_C"] == [3, 2, 4, 1]
    assert t["F"] == ([0, 1, 2], 12)  # A[:13]: cap floor(12/4) = 3
    assert t["G"] == ([3, 2, 4], 0)  # uncached tail, then both copies of b3129415
    assert t["g_evicted"] == 2
    assert t["a_after_hits"] == [0, 1] and t["a_after"] == 8
    s = ex.solve(ex.CANONICAL)
    assert [s[k].value for k in ("d_cached", "c_cached", "g_evicted", "a_after")] == [8, 4, 2, 8]


def test_canonical_mistakes() -> None:
    wrong = {(m.part, m.name): m.answer for m in ex.mistakes(ex.CANONICAL)}
    assert wrong[("d_cached", "no_cap")] == 12  # all 3 blocks
    assert wrong[("d_cached", "unaligned_cap")] == 11  # min(12, 14 - 1)... of D: 12 - 1
    assert wrong[("d_cached", "evict_at_free")] == 0
    assert wrong[("c_cached", "unchained")] == 8  # blocks 0 and 2 match by their own tokens
    assert wrong[("g_evicted", "counts_uncached")] == 3
    assert wrong[("g_evicted", "hashes_not_blocks")] == 1
    assert wrong[("a_after", "forward_free")] == 4
    assert wrong[("a_after", "ignored_g")] == 12


@pytest.mark.parametrize("seed", range(60))
def test_variants_are_sensible(seed: int) -> None:
    p = ex.generate(random.Random(seed))
    s = ex.solve(p)
    B = p["block_size"]
    k = len(p["A"]) // B
    assert s["d_cached"].value == B * (k - 1)  # the cap, whatever the variant
    assert s["c_cached"].value == B * p["changed_block"]
    assert 1 <= s["g_evicted"].value <= p["g_blocks"]


# --- the code part -----------------------------------------------------------------------------

def test_cached_hashes_stay_prefix_closed() -> None:
    # Why walk_past_miss is equivalent: under the rules, every cached hash's parent hash is
    # cached too, after every operation of long random scripts.
    for seed in range(300):
        rng = random.Random(seed)
        B = rng.choice((1, 2, 4))
        m = reference.PrefixCacheModel(rng.randint(3, 12), B)
        parent: dict[bytes, bytes | None] = {}
        running: list[str] = []
        docs = [[rng.randint(1, 3) for _ in range(24)] for _ in range(3)]
        for i in range(60):
            if running and rng.random() < 0.45:
                m.free(running.pop(rng.randrange(len(running))))
            else:
                tokens = rng.choice(docs)[: rng.randint(1, 24)]
                hashes = reference.request_block_hashes(tokens, B)
                for j, h in enumerate(hashes):
                    parent[h] = hashes[j - 1] if j else None
                if m.allocate(f"r{i}", tokens) is not None:
                    running.append(f"r{i}")
            for h in m.table:
                assert parent[h] is None or parent[h] in m.table, (seed, i)


def test_hidden_cases_are_deterministic_and_cover_the_edges() -> None:
    a = CODE_PART.assert_hidden_cases_seeded()
    ids = [c["id"] for c in a]
    assert len(ids) == len(set(ids))
    for name in ("one-token-prompt", "aligned-prompt-recomputes-a-block", "block-size-1",
                 "pool-exhausted", "queued-hits-count-against-the-pool", "extra-isolates",
                 "evicted-block-is-not-hit", "duplicate-copies", "blake2b-trace"):
        assert f"edge-{name}" in ids, name
    assert ids[-1] == "speed-large"
    assert 120 <= sum(i.startswith("random-") for i in ids) <= 200
    keys = [checks.size_key(c) for c in a[:-1]]
    assert keys == sorted(keys)  # smallest scripts first
    inputs = [c["input"] for c in a if c["id"].startswith("random-")]
    assert {i["block_size"] for i in inputs} == {1, 2, 4, 16}
    assert any(i["hash"] == "blake2b" for i in inputs)


def test_random_scripts_hit_and_fill_the_pool() -> None:
    # The random scripts must exercise what they are meant to: hits (in allocate and lookup)
    # and a full pool (None).
    hits = nones = lookup_hits = 0
    for case in checks.hidden_cases(ex.CANONICAL, SEED):
        inp = case["input"]
        if not case["id"].startswith("random-"):
            continue
        out = driver.run_case(reference, inp)["steps"]
        for op, step in zip(inp["ops"], out, strict=True):
            if op[0] == "allocate":
                nones += step["out"] is None
                hits += bool(step["out"] and step["out"][1])
            lookup_hits += op[0] == "lookup" and step["out"][1] > 0
    assert hits > 40 and nones > 40 and lookup_hits > 20


def test_smallest_failing_sequence_is_reported(all_cases: list[dict[str, Any]],
                                               expected: list[dict[str, Any]]) -> None:
    # Break the first lookup of two cases; the message must name the shorter failing prefix.
    got = json.loads(json.dumps(expected))
    first_lookup = {}
    for i, c in enumerate(all_cases):
        ops = c["input"].get("ops", [])
        j = next((k for k, op in enumerate(ops) if op[0] == "lookup"), None)
        if j is not None:
            first_lookup[i] = j
    chosen = sorted(first_lookup, key=lambda i: first_lookup[i])
    small, big = chosen[0], chosen[-1]
    assert first_lookup[small] < first_lookup[big]
    for i in (small, big):
        j = first_lookup[i]
        right = expected[i]["output"]["steps"][j]["out"]
        got[i]["output"]["steps"][j]["out"] = [[], 0] if right != [[], 0] else [[0], 4]
    msg = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)}[
        "lookup results"].message
    assert msg.startswith("2 of ")
    assert checks.describe(all_cases[small], first_lookup[small]) in msg


def test_speed_check_gives_partial_credit_never_noise(all_cases: list[dict[str, Any]],
                                                      expected: list[dict[str, Any]]) -> None:
    results = CODE_PART.assert_speed_check_gives_partial_credit(all_cases, expected)
    slow = next(c for c in results if not c.passed)
    assert "dictionary probe" in slow.message and check_score(results) == pytest.approx(0.9)


def test_speed_case_is_drawn_per_submission_and_never_repeats() -> None:
    assert_speed_case_is_seeded_and_distinct(checks, driver, reference, ex.CANONICAL, lambda r: len(r[0]))


def test_a_fast_but_wrong_large_case_does_not_pass_the_speed_check(
        all_cases: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    CODE_PART.assert_fast_but_wrong_speed_case_fails(all_cases, expected)

def test_edge_queued_hits_count_against_the_pool() -> None:
    # Hand-written: 4 blocks, X = 5 tokens (3 blocks) freed; Y needs 5 blocks of which 2 are
    # hits still in the free queue: 3 new + 2 queued hits > 4 free, so None and no change.
    m = reference.PrefixCacheModel(4, 2)
    assert m.allocate("x", [1, 2, 3, 4, 5]) == ([0, 1, 2], 0)
    m.free("x")
    before = m.free_queue()
    assert before == [3, 2, 1, 0]
    assert m.allocate("y", [1, 2, 3, 4, 9, 9, 9, 9, 9]) is None
    assert m.free_queue() == before
    assert m.allocate("y", [1, 2, 3, 4, 9, 9, 9]) == ([0, 1, 3, 2], 4)


def test_driver_reports_bad_return_types() -> None:
    class Bad:
        NONE_HASH = b""

        @staticmethod
        def hash_block_tokens(*args: Any, **kw: Any) -> str:
            return "not bytes"

        class PrefixCacheModel:
            def __init__(self, *a: Any) -> None:
                pass

            def lookup(self, tokens: Any, extra: Any = None) -> list[int]:
                return [1, 2, 3]

            def free_queue(self) -> list[int]:
                return []

    out = driver.run_case(Bad, {"block_size": 2, "num_blocks": 2, "hash": "sha256",
                                "ops": [["hash_block", None, [1, 2], None]]})
    assert out["steps"][0]["error"].startswith("TypeError: hash_block_tokens returned str")
    out = driver.run_case(Bad, {"block_size": 2, "num_blocks": 2, "hash": "sha256",
                                "ops": [["lookup", [1, 2], None]]})
    assert out["steps"][0]["error"].startswith("TypeError: lookup returned")


def test_malformed_results_fail(all_cases: list[dict[str, Any]],
                                expected: list[dict[str, Any]]) -> None:
    bad = [{"output": {"steps": 5}}, {"output": []}, {"error": "x"}, "text",
           {"output": {"speed": None}}]
    CODE_PART.assert_lines_fail_every_check(bad, all_cases, expected)


def test_every_mutant_failure_names_its_smallest_case() -> None:
    # Each check a mutant (code/mutants.toml) fails names a replayable script, or the speed case described in words.
    for name, c in CODE_PART.failures():
        assert "m = PrefixCacheModel(" in c.message or "large" in c.message, (name, c.message)
