"""Q39 (exercises/radix_prefix_trie): the canonical trace, sensible variants, and the code part's
machinery run in-process on trusted code only (the reference, our mutants, an independent
solution written from the statement, the driver).
"""
from __future__ import annotations

import json
import random
import types
from typing import Any

import pytest

from exercises import templating
from tests.exercises.support import ExerciseUnderTest, code_part, load_by_path, load_file

ex = load_by_path("radix_prefix_trie")
EX = ExerciseUnderTest.load(ex)
FOLDER = EX.folder
CODE = FOLDER / "code"
SEED = 12345
spec = EX.spec_fixture()


CODE_PART = code_part("radix_prefix_trie")
checks, driver, reference = CODE_PART.checks, CODE_PART.driver, CODE_PART.reference


all_cases, expected = CODE_PART.fixtures(SEED)


# --- the canonical trace ---------------------------------------------------------------------

def test_canonical_numbers() -> None:
    s = ex.solve(ex.CANONICAL)
    # C = system [11..14] + the first 3 tokens of B's question: 4 + 3 = 7 tokens matched.
    assert s["matched"].value == 7
    # system | A's question split by D (2 + 2) | D's new 3 | B's question split by C (3 + 3).
    assert s["nodes"].value == 6
    # 17 tokens cached; C pins 4 + 3 = 7 of them; 17 - 7 = 10 evictable.
    assert (s["total"], s["protected"], s["evictable"].value) == (17, 7, 10)
    # evict(6): [23, 24] (2, stamped by D's match), [41, 42, 43] (3, D's insert), then the
    # parent [21, 22] left childless (2, D's insert): 7 >= 6.
    assert s["freed"].value == 7
    assert s["evicted_keys"] == "[23, 24], then [41, 42, 43], then [21, 22]"
    assert s["evict_order_all"] == "[23, 24], [41, 42, 43], [21, 22], [34, 35, 36]"
    wrong = {(m.part, m.name): m.answer for m in ex.mistakes(ex.CANONICAL)
             if m.part in EX.number_parts}
    assert wrong == {
        ("matched", "node_boundary"): 4, ("matched", "whole_edge"): 10,
        ("matched", "whole_prompt"): 9,
        ("nodes", "no_match_split"): 5, ("nodes", "root_counted"): 7, ("nodes", "per_token"): 17,
        ("evictable", "counted_pinned"): 17, ("evictable", "pinned_whole_edge"): 7,
        ("evictable", "leaves_only"): 8,
        ("freed", "exact_k"): 6, ("freed", "one_leaf"): 2, ("freed", "all_evictable"): 10,
        ("freed", "no_parent_queue"): 8,
    }


def test_parts_agree_with_the_module() -> None:
    s = ex.solve(ex.CANONICAL)
    options = {o["id"] for o in EX.parts["eviction_loop"]["options"]}
    assert s["eviction_loop"] in options
    assert {m.answer for m in ex.mistakes(ex.CANONICAL) if m.part == "eviction_loop"} == \
        options - {s["eviction_loop"]}


def test_canonical_templates_render() -> None:
    s = ex.solve(ex.CANONICAL)
    statement = templating.render((FOLDER / "statement.md").read_text(encoding="utf-8"),
                                  ex.CANONICAL, s, "statement.md")
    assert "`[11, 12, 13, 14, 31, 32, 33, 51, 52]`" in statement and "evict(6)" in statement
    solution = templating.render((FOLDER / "solution.md").read_text(encoding="utf-8"),
                                 ex.CANONICAL, s, "solution.md")
    assert "**7 tokens**" in solution and "**6 nodes**" in solution
    assert "7 ≥ 6: stop" in solution


# --- variants --------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(60))
def test_variants_are_sensible(seed: int) -> None:
    p = ex.generate(random.Random(seed))
    s = ex.solve(p)
    # C's match stops inside B's question (a split), whole leaves overshoot k.
    assert s["matched"].value == len(p["sys"]) + p["c_share"]
    assert s["freed"].value > p["k"]
    assert s["nodes"].value == (6 if p["d_share"] else 5)
    assert s["evictable"].value + s["protected"] == s["total"]


def test_variants_differ() -> None:
    drawn = {json.dumps(ex.generate(random.Random(i)), sort_keys=True) for i in range(200)}
    assert len(drawn) >= 150


# --- the code part: reference, mutants, equivalents -------------------------------------------

def test_check_names_are_the_checks() -> None:
    # The reference's own pass, named as CHECKS names them, is the contract's (test_mutants.py).
    assert checks.NAMES == [name for name, _, _ in checks.CHECKS]


# An independent solution written from the statement alone, in another style (lists, per-edge
# slicing, sizes recomputed by walking the tree, eviction by rescanning): the rules must pin
# down every output the checks compare.
INDEPENDENT = '''
class TreeNode:
    def __init__(self, key=(), value=None, parent=None):
        self.key, self.value = tuple(key), list(value or [])
        self.children, self.parent = {}, parent
        self.lock_ref, self.last_access = 0, 0

class RadixCache:
    def __init__(self, page_size=1):
        self.page_size, self.root, self.t = page_size, TreeNode(), 0
    def _ck(self, key):
        return key[0] if self.page_size == 1 else tuple(key[:self.page_size])
    def _trim(self, key):
        key = list(key)
        return key[:len(key) // self.page_size * self.page_size]
    def _split(self, node, n):
        up = TreeNode(node.key[:n], node.value[:n], node.parent)
        up.lock_ref, up.last_access = node.lock_ref, node.last_access
        node.parent.children[self._ck(up.key)] = up
        node.key, node.value, node.parent = node.key[n:], node.value[n:], up
        up.children[self._ck(node.key)] = node
        return up
    def _walk(self, key):
        self.t += 1
        node, slots = self.root, []
        while key:
            child = node.children.get(self._ck(key))
            if child is None:
                break
            child.last_access = self.t
            n = 0
            while n < min(len(child.key), len(key)) and child.key[n] == key[n]:
                n += 1
            n -= n % self.page_size
            if n < len(child.key):
                child = self._split(child, n)
                return child, slots + child.value, key[n:]
            slots += child.value
            node, key = child, key[n:]
        return node, slots, key
    def match_prefix(self, key):
        node, slots, _ = self._walk(self._trim(key))
        return slots, node
    def insert(self, key, value):
        key = self._trim(key)
        node, _, rest = self._walk(key)
        done = len(key) - len(rest)
        if rest:
            leaf = TreeNode(rest, list(value)[done:len(key)], node)
            leaf.last_access = self.t
            node.children[self._ck(leaf.key)] = leaf
        return done
    def inc_lock_ref(self, node):
        while node is not self.root:
            node.lock_ref += 1
            node = node.parent
    def dec_lock_ref(self, node):
        while node is not self.root:
            node.lock_ref -= 1
            node = node.parent
    def _all(self):
        out, st = [], [self.root]
        while st:
            x = st.pop()
            out.append(x)
            st.extend(x.children.values())
        return out[1:]
    def evict(self, num_tokens, free_fn):
        freed = 0
        while freed < num_tokens:
            cands = [x for x in self._all() if not x.children and x.lock_ref == 0]
            if not cands:
                break
            x = min(cands, key=lambda n: (n.last_access, n.value[0]))
            free_fn(list(x.value))
            freed += len(x.value)
            del x.parent.children[self._ck(x.key)]
        return freed
    def evictable_size(self):
        return sum(len(x.key) for x in self._all() if x.lock_ref == 0)
    def protected_size(self):
        return sum(len(x.key) for x in self._all() if x.lock_ref > 0)
    def total_size(self):
        return sum(len(x.key) for x in self._all())
'''


def test_an_independent_solution_passes(all_cases: list[dict[str, Any]],
                                        expected: list[dict[str, Any]]) -> None:
    module = types.ModuleType("q39_independent")
    exec(compile(INDEPENDENT, "q39_independent.py", "exec"), module.__dict__)  # noqa: S102
    results = CODE_PART.check(module, all_cases, expected)
    assert all(c.passed for c in results), [c.message for c in results if not c.passed]


def test_starter_fails_every_check(all_cases: list[dict[str, Any]],
                                   expected: list[dict[str, Any]]) -> None:
    starter = load_file(CODE / "starter.py", "q39_test_starter")
    results = CODE_PART.check(starter, all_cases, expected)
    assert not any(c.passed for c in results)
    runs = next(c for c in results if c.name == checks.RUNS)
    assert "NotImplementedError" in runs.message


# --- the rules the statement promises ----------------------------------------------------------

TIES: list[int] = []


class _Audited(reference.RadixCache):
    """The reference, asserting at every evict what the statement says about stamps: a parent
    is never stamped before a child, and candidates tie only as two siblings (the lower half
    and the new leaf of an insert that diverged inside an edge)."""

    def evict(self, num_tokens: int, free_fn: Any) -> int:
        by_stamp: dict[int, list[Any]] = {}
        stack = [self.root]
        while stack:
            node = stack.pop()
            for child in node.children.values():
                if node is not self.root:
                    assert node.last_access >= child.last_access
                stack.append(child)
            if node is not self.root and not node.children and node.lock_ref == 0:
                by_stamp.setdefault(node.last_access, []).append(node)
        for group in by_stamp.values():
            assert len(group) <= 2
            if len(group) == 2:
                assert group[0].parent is group[1].parent
                TIES.append(1)
        return super().evict(num_tokens, free_fn)


def test_candidates_tie_only_as_stated(all_cases: list[dict[str, Any]]) -> None:
    audited = types.SimpleNamespace(RadixCache=_Audited)
    for case in all_cases:
        if case["input"]["mode"] == "trace":
            out = driver.run_case(audited, case["input"])
            assert "error" not in out, (case["id"], out.get("error"))
    assert TIES, "no case exercises the tie-break"


def test_split_of_a_locked_node_by_hand() -> None:
    ops = [["start", "a", [1, 2, 3, 4]], ["finish", "a"], ["start", "r1", [1, 2, 3, 4, 5]],
           ["start", "r2", [1, 2, 6]], ["evict", 10], ["finish", "r1"], ["evict", 1]]
    out = driver.run_case(reference, checks.make_case("x", ops, 1, 24)["input"])
    steps = out["steps"]
    # r2's match splits r1's pinned node: the upper half inherits r1's lock, then gets r2's.
    assert steps[3]["tree"] == [[-1, [], [], 0], [0, [1, 2], [0, 1], 2], [1, [3, 4], [2, 3], 1]]
    assert steps[3]["depth"] == 2 and steps[3]["sizes"] == [0, 4, 4]
    # Everything is pinned: evict frees nothing.
    assert steps[4]["ret"] == 0 and "calls" not in steps[4]
    # r1 done: [3, 4] and r1's leaf [5] (slot 4) are unlocked; [3, 4] is not a leaf, so [5] goes.
    assert steps[6]["calls"] == [[4]] and steps[6]["ret"] == 1


def test_paged_partial_page_by_hand() -> None:
    ops = [["start", "a", [1, 2, 3, 4, 5]], ["finish", "a"], ["start", "b", [1, 2, 3, 9]]]
    out = driver.run_case(reference, checks.make_case("x", ops, 2, 16)["input"])
    steps = out["steps"]
    # The partial page [5] is freed by the caller; only [1, 2, 3, 4] is cached.
    assert steps[1]["tail"] == [4] and steps[1]["tree"][1][1] == [1, 2, 3, 4]
    # [1, 2, 3, 9]: page (3, 9) differs from (3, 4), so the match ends after the first page.
    assert steps[2]["m"] == [0, 1] and steps[2]["depth"] == 2


def test_sibling_pages_that_share_a_first_token_do_not_fail_the_reference() -> None:
    """A drawn script (bench/load.py's grade phase, page size 2) the reference failed: [2, 2]
    and [2, 3, 2, 3] are sibling pages under the root that share their first token, so a model
    keyed by token prefix gave the prefix (2,) to [2, 2]'s slot, lost it with [2, 2]'s evict,
    then took r1's duplicate slots for cached and called the final evict's shortfall a leaked
    lock."""
    ops = [["start", "r1", [2, 3, 2, 3]], ["start", "r2", [2, 2]],
           ["start", "r3", [2, 3, 2, 3, 1]], ["finish", "r3"],
           ["start", "r4", [2, 3, 2, 3, 1, 2, 1, 1, 2, 3, 3]], ["match", [2, 3, 2, 3, 1, 2]],
           ["finish", "r2"], ["evict", 0], ["start", "r5", [3, 1]],
           ["start", "r6", [3, 2, 1, 1, 3, 3, 3]], ["finish", "r1"], ["finish", "r6"],
           ["evict", 7]]
    case = checks.make_case("random-064", ops, 2, 23)
    results = CODE_PART.check(reference, [case], [{"output": driver.run_case(
        reference, case["input"])}])
    assert all(c.passed for c in results), [c.message for c in results if not c.passed]


# --- the hidden cases and the checks' plumbing --------------------------------------------------

def test_hidden_cases_are_deterministic_per_seed() -> None:
    CODE_PART.assert_hidden_cases_seeded()


def test_hidden_cases_cover_the_edges(expected: list[dict[str, Any]],
                                      all_cases: list[dict[str, Any]]) -> None:
    hidden = checks.hidden_cases(ex.CANONICAL, SEED)
    ids = [c["id"] for c in hidden]
    assert len(ids) == len(set(ids))
    for name, *_ in checks.EDGE_CASES:
        assert f"edge-{name}" in ids
    assert 120 <= sum(i.startswith("random-") for i in ids) <= 200
    assert ids[-1] == "speed-long-prompts"
    keys = [checks.size_key(c) for c in hidden[:-1]]
    assert keys == sorted(keys)
    # The random scripts exercise what they are for.
    seen: dict[str, int] = {}
    for case, exp in zip(all_cases, expected, strict=True):
        if case["input"]["mode"] != "trace" or not case["id"].startswith("random-"):
            continue
        for op, st in zip(case["input"]["ops"], exp["output"]["steps"], strict=True):
            seen["paged"] = seen.get("paged", 0) + (case["input"]["page_size"] > 1)
            seen["evict-on-start"] = seen.get("evict-on-start", 0) + ("short" in st)
            seen["rejected"] = seen.get("rejected", 0) + bool(st.get("rejected"))
            seen["multi-leaf"] = seen.get("multi-leaf", 0) + (len(st.get("calls", [])) > 1)
            seen["shared-lock"] = seen.get("shared-lock", 0) + any(n[3] > 1 for n in st["tree"])
            seen["hit"] = seen.get("hit", 0) + (op[0] == "start" and bool(st.get("m")))
    assert all(v >= 10 for v in seen.values()), seen


def test_public_cases_replay_the_statement() -> None:
    cases = checks.public_cases(ex.CANONICAL)
    assert cases[0]["input"]["ops"] == ex.CANONICAL["ops"]
    assert [c["input"]["page_size"] for c in cases] == [1, 1, 2]


def test_smallest_failing_case_is_reported(all_cases: list[dict[str, Any]],
                                           expected: list[dict[str, Any]]) -> None:
    got = [json.loads(json.dumps(e)) for e in expected]
    trace = [i for i, c in enumerate(all_cases) if c["input"]["mode"] == "trace"
             and any(op[0] == "finish" for op in c["input"]["ops"])]
    small, big = trace[3], trace[-1]
    for i in (small, big):
        steps = got[i]["output"]["steps"]
        j = next(k for k, op in enumerate(all_cases[i]["input"]["ops"]) if op[0] == "finish")
        steps[j]["n"] = -5
    results = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)}
    msg = results[checks.INSERT].message
    assert msg.startswith("2 of ") and f"[{all_cases[small]['id']}," in msg


def test_speed_check_is_lenient_and_partial(all_cases: list[dict[str, Any]],
                                            expected: list[dict[str, Any]]) -> None:
    i = next(k for k, c in enumerate(all_cases) if c["input"]["mode"] == "timed")
    got = [json.loads(json.dumps(e)) for e in expected]
    ref = expected[i]["cpu_s"]
    # 15x slower passes; 30x slower loses only the speed check; a tiny absolute time passes.
    for factor, passes in ((15, True), (30, False)):
        got[i] = dict(expected[i], cpu_s=max(ref * factor, 0.06))
        results = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)}
        assert results[checks.SPEED].passed is passes or ref * factor < 0.06
        assert all(c.passed for n, c in results.items() if n != checks.SPEED)
    got[i] = dict(expected[i], cpu_s=0.04)
    results = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)}
    assert results[checks.SPEED].passed
    # The relay's figure missing (never a driver's): the case counts as malformed.
    got[i] = {"output": expected[i]["output"]}
    results = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)}
    assert not results[checks.SPEED].passed


def test_timed_script_is_drawn_per_submission_and_never_repeats() -> None:
    # The driver runs in the student's process, which can replace any of it: a script known in
    # advance could be played at import (outside the timed window) and replayed, and a script
    # that repeats itself could be played in part and the results copied.
    a, b = (checks.hidden_cases(ex.CANONICAL, s)[-1] for s in (7, 8))
    assert a == checks.timed_case(7) and a["input"]["script"]["seed"] == 7
    ops = checks.timed_ops(a)
    assert list(ops) == driver.long_script(a["input"]["script"])
    assert checks.timed_ops(b) != ops
    starts = [op[2] for op in ops if op[0] == "start"]
    assert len({tuple(t) for t in starts}) == len(starts)
    # Each session over system prompts of its own: no first token is shared across sessions.
    per_session = checks.TIMED_SCRIPT["convs"] * checks.TIMED_SCRIPT["turns"]
    firsts = [{t[0] for t in starts[i:i + per_session]}
              for i in range(0, len(starts), per_session)]
    assert len(firsts) == checks.TIMED_SCRIPT["sessions"]
    assert all(not x & y for i, x in enumerate(firsts) for y in firsts[i + 1:])
    # Every operation's result is compared; the input sent to the sandbox stays small (the
    # script is built there, not decoded from JSON inside the timed window).
    assert len(driver.run_case(reference, a["input"])["results"]) == len(ops)
    assert len(json.dumps(a["input"])) < 1_000


def test_timed_results_must_all_match(all_cases: list[dict[str, Any]],
                                      expected: list[dict[str, Any]]) -> None:
    # A play of part of the script with its results copied over the rest is fast and wrong.
    i = next(k for k, c in enumerate(all_cases) if c["input"]["mode"] == "timed")
    got = [json.loads(json.dumps(e)) for e in expected]
    results = got[i]["output"]["results"]
    third = len(results) // 3
    got[i]["output"]["results"] = (results[:third] * 3 + results)[: len(results)]
    got[i]["cpu_s"] = expected[i]["cpu_s"] / 3
    checked = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)}
    assert not checked[checks.SPEED].passed
    assert "Fix the other checks first" in checked[checks.SPEED].message

def test_errors_and_forged_lines_fail_every_check(all_cases: list[dict[str, Any]],
                                                  expected: list[dict[str, Any]]) -> None:
    # (An error on every case failing every check is the contract's: test_mutants.py.)
    bad = [{"output": {"steps": 5}}, {"output": []}, {"error": 3}, "text",
           {"output": {"steps": [{"tree": [[0, 1]]}]}}]
    results = CODE_PART.assert_lines_fail_every_check(bad, all_cases, expected)
    assert "malformed" in results[0].message


def test_driver_reports_an_unreadable_tree() -> None:
    class NoRoot:
        class RadixCache:
            def __init__(self, page_size: int = 1) -> None:
                pass

            def match_prefix(self, key: list[int]) -> tuple[list[int], None]:
                return [], None

    out = driver.run_case(NoRoot, checks.make_case("x", [["match", [1]]])["input"])
    assert out["steps"] == [] and out["error"]["op"] == 0


def _forged_insert_counts(all_cases: list[dict[str, Any]],
                          expected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reference's traces with every insert that found cached tokens claiming it found none,
    and everything else (the driver's free count, no double frees) left as the reference's."""
    got = [json.loads(json.dumps(e)) for e in expected]
    for c, g in zip(all_cases, got, strict=True):
        if c["input"]["mode"] == "timed":
            continue
        for op, s in zip(c["input"]["ops"], g["output"]["steps"], strict=False):
            if op[0] == "finish" and s.get("n"):
                s["n"] = 0
    return got


def test_hostile_slot_counts_are_the_workers_own(all_cases: list[dict[str, Any]],
                                                 expected: list[dict[str, Any]]) -> None:
    # A submission that replaces the driver can claim any free count; the slot check works the
    # pool out from the cache's answers instead. Insert counts of 0 where tokens were cached
    # leave the request's duplicate slots unfreed (a leak): the slot check must see it.
    results = {c.name: c for c in checks.check(
        all_cases, _forged_insert_counts(all_cases, expected), expected, ex.CANONICAL)}
    assert not results[checks.INSERT].passed
    assert not results[checks.SLOTS].passed, results[checks.SLOTS].message
    assert "leaked" in results[checks.SLOTS].message
    # The worker's ledger agrees with the driver's on every honest trace.
    for c, e in zip(all_cases, expected, strict=True):
        if c["input"]["mode"] != "timed":
            steps = e["output"]["steps"]
            assert [f for _, f, _ in checks.slot_ledger(c["input"], steps)] == \
                [s["free"] for s in steps]


def test_every_mutant_failure_names_its_smallest_case() -> None:
    # Each check a mutant (code/mutants.toml) fails names the smallest script (or, for speed, the page size).
    for name, c in CODE_PART.failures():
        assert "Smallest:" in c.message, (name, c.message)
        if c.name != checks.SPEED:
            assert "Script: [" in c.message or "on page_size=" in c.message, (name, c.message)
