"""Forged figures: everything a code part's driver computes runs in the student's process, so a
submission can replace the driver and hand back any figure it likes. A check may compare that
output with the reference's, replay the student's decisions, or recompute invariants in the worker;
it must never credit a figure the driver worked out about the student's own code.

Each test takes a known-buggy solution (a mutant) or a fake, forges the driver-computed figure
the way a hostile submission would, and asserts the forgery earns nothing: the check the bug
should fail still fails, and the score is no higher than the honest run's. Grading runs
in-process (checks.check on the outputs the driver would send back), as the per-exercise tests do.
"""
from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from graders.code import expose_shared_modules, load_module
from tests.exercises.support import code_part, load_by_path

ROOT = Path(__file__).resolve().parents[2]
SEED = 12345
Output = dict[str, Any]


def _from_source(source: str, name: str, folder: Path) -> ModuleType:
    """A submission given as source text, imported from a file as the sandbox would."""
    path = folder / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    return load_module(path)


class Exercise:
    """One code part's trusted machinery (checks, driver, reference), loaded by path."""

    def __init__(self, slug: str) -> None:
        code = ROOT / "exercises" / slug / "code"
        self.slug = slug
        self.code = code
        self.params = load_by_path(slug).CANONICAL
        expose_shared_modules(("driver_errors",))  # the drivers import it by its plain name
        self.checks = load_module(code / "checks.py")
        self.driver = load_module(code / "driver.py")
        self.reference = load_module(code / "reference.py")
        self.cases = (self.checks.public_cases(self.params)
                      + self.checks.hidden_cases(self.params, SEED))
        self.expected = self.run(self.reference)

    def run(self, module: ModuleType) -> list[Output]:
        # Through JSON, as the result channel carries it (tuples become lists).
        return [{"output": json.loads(json.dumps(self.driver.run_case(module, c["input"])))}
                for c in self.cases]

    def mutant(self, stem: str) -> ModuleType:
        return code_part(self.slug).module(stem)

    def grade(self, got: list[Output]) -> dict[str, Any]:
        return {c.name: c for c in self.checks.check(self.cases, got, self.expected,
                                                     self.params)}

    def forge(self, got: list[Output], forger: Callable[[dict[str, Any], Output], None]
              ) -> list[Output]:
        forged = copy.deepcopy(got)
        for case, result in zip(self.cases, forged, strict=True):
            forger(case, result["output"])
        return forged


def _score(results: dict[str, Any]) -> float:
    return (sum(c.weight for c in results.values() if c.passed)
            / sum(c.weight for c in results.values()))


@pytest.fixture(scope="module")
def latency() -> Exercise:
    return Exercise("latency_period_owner")


@pytest.fixture(scope="module")
def batching() -> Exercise:
    return Exercise("continuous_batching_scheduler")


@pytest.fixture(scope="module")
def ledger() -> Exercise:
    return Exercise("kv_page_ledger")


# --- latency_period_owner: stall_period against detect_period of the student's slow steps ----

AGREE = "results agree with each other"


def _own_period_is_stall_period(case: dict[str, Any], out: Output) -> None:
    # The driver used to report detect_period(slow_steps(...)) itself; a forger copies
    # stall_period into it so the two always "agree".
    if case["input"]["kind"] == "trace" and "value" in out.get("stall_period", {}):
        out["detect_period_of_own_slow_steps"] = {"value": out["stall_period"]["value"]}


def _own_period_dropped(case: dict[str, Any], out: Output) -> None:
    out.pop("detect_period_of_own_slow_steps", None)


@pytest.mark.parametrize("forger", [_own_period_is_stall_period, _own_period_dropped],
                         ids=["copied", "dropped"])
def test_latency_agreement_is_recomputed_in_the_worker(
        latency: Exercise, forger: Callable[[dict[str, Any], Output], None]) -> None:
    # all_steps_period's stall_period runs detect_period on every step: it disagrees with
    # detect_period of its own (correct) slow steps, whatever the driver says about that.
    honest = latency.run(latency.mutant("all_steps_period"))
    before = latency.grade(honest)
    assert not before[AGREE].passed
    after = latency.grade(latency.forge(honest, forger))
    assert not after[AGREE].passed, after[AGREE].message
    assert "stall_period" in after[AGREE].message
    assert _score(after) <= _score(before)


def test_latency_own_period_figure_carries_no_weight(latency: Exercise) -> None:
    # The reference's own outputs with a nonsense figure in that slot still score 1: the worker
    # does not read it at all (neither to pass nor to fail).
    def nonsense(case: dict[str, Any], out: Output) -> None:
        if case["input"]["kind"] == "trace":
            out["detect_period_of_own_slow_steps"] = {"value": 12345.0}

    results = latency.grade(latency.forge(latency.expected, nonsense))
    assert all(c.passed for c in results.values()), \
        [c.message for c in results.values() if not c.passed]


def test_latency_repeated_slow_steps_do_not_crash_the_worker(latency: Exercise) -> None:
    # The worker now runs the reference's detect_period on the student's slow_steps, which are
    # the student's to choose: repeated timestamps (a zero gap) must fail a check, not raise.
    def repeat(case: dict[str, Any], out: Output) -> None:
        if case["input"]["kind"] == "trace":
            out["slow_steps"] = {"value": [1.0, 1.0, 1.0, 2.0]}

    results = latency.grade(latency.forge(latency.expected, repeat))
    assert not results["slow_steps"].passed
    assert not results[AGREE].passed


# --- continuous_batching_scheduler: block conservation against the allocator call log ---------

BLOCKS = "blocks conserved: nothing leaked, shared or over-held"


def _held(rec: dict[str, Any]) -> dict[str, list[int]]:
    return {rid: list(st[2]) for rid, st in rec["state"].items()}


def _release_what_vanished(case: dict[str, Any], out: Output) -> None:
    """A forged call log: a release for every block that left a request's state and was not
    released, so the log never shows a leak (whatever the allocator really got back)."""
    before: dict[str, list[int]] = {}
    for rec in out.get("steps", []):
        now = _held(rec)
        released = {b for kind, ids in rec["calls"] if kind == "release" for b in ids}
        gone = [b for rid, blocks in before.items() for b in blocks
                if b not in now.get(rid, []) and b not in released]
        if gone:
            rec["calls"] = [*rec["calls"], ["release", gone]]
        before = now


def _calls_rebuilt_from_state(case: dict[str, Any], out: Output) -> None:
    """A forged call log written from the state alone: each step releases what left a request
    and then allocates what joined one, so the log and the state always agree."""
    before: dict[str, list[int]] = {}
    for rec in out.get("steps", []):
        now = _held(rec)
        calls: list[list[Any]] = []
        for rid, blocks in before.items():
            gone = [b for b in blocks if b not in now.get(rid, [])]
            if gone:
                calls.append(["release", gone])
        for rid, blocks in now.items():
            new = [b for b in blocks if b not in before.get(rid, [])]
            if new:
                calls.append(["allocate", new])
        rec["calls"] = calls
        before = now


def _finished_hold_nothing(case: dict[str, Any], out: Output) -> None:
    """A forged state: a finished request is reported holding no blocks (and the log releases
    them), whatever the scheduler really kept."""
    done: set[str] = set()
    for rec in out.get("steps", []):
        for rid in rec["finished"]:
            kept = rec["state"].get(rid, ["", 0, []])[2]
            if kept:
                rec["calls"] = [*rec["calls"], ["release", kept]]
        done.update(rec["finished"])
        for rid in done:
            if rid in rec["state"]:
                rec["state"][rid][2] = []


def _finished_tidied_then_calls_from_state(case: dict[str, Any], out: Output) -> None:
    _finished_hold_nothing(case, out)
    _calls_rebuilt_from_state(case, out)


# Each leak with the forgeries that, left unchecked, make its bookkeeping look clean:
# preempt_leaks_blocks drops a victim's blocks without releasing them (the state is right, the
# log is short of a release); finish_keeps_blocks leaves them on the finished request.
@pytest.mark.parametrize(("stem", "forger"), [
    ("preempt_leaks_blocks", _release_what_vanished),
    ("preempt_leaks_blocks", _calls_rebuilt_from_state),
    ("finish_keeps_blocks", _finished_hold_nothing),
    ("finish_keeps_blocks", _finished_tidied_then_calls_from_state),
], ids=["leak-releases-added", "leak-calls-from-state", "kept-finished-tidied",
        "kept-tidied-calls-from-state"])
def test_batching_forged_bookkeeping_does_not_hide_a_leak(
        batching: Exercise, stem: str, forger: Callable[[dict[str, Any], Output], None]) -> None:
    honest = batching.run(batching.mutant(stem))
    before = batching.grade(honest)
    assert not before[BLOCKS].passed
    after = batching.grade(batching.forge(honest, forger))
    assert not after[BLOCKS].passed, after[BLOCKS].message
    assert _score(after) <= _score(before)


def test_batching_reference_passes_with_its_log_rebuilt_from_state(batching: Exercise) -> None:
    # The honest counterpart of the forgers above: a conserving scheduler whose log is rebuilt
    # from its state loses nothing on conservation (only the exact-calls check may care).
    results = batching.grade(batching.forge(batching.expected, _calls_rebuilt_from_state))
    assert results[BLOCKS].passed, results[BLOCKS].message


# --- kv_page_ledger: the trace invariants against a fake that runs requests one at a time -------

SERIAL_FAKE = '''
"""Not a ledger: every request runs alone, one after another, ignoring arrivals, the watermark
and the admission rule; the records are made to satisfy every invariant on their own. Its
dataclasses and the one line of blocks_needed are the reference's."""
from REFERENCE import LedgerConfig, Req, blocks_needed  # noqa: F401


def first_exhaustion_step(n, prompt_len, block_size, num_blocks):
    return None


def max_concurrency(num_blocks, block_size, prompt_len, output_len, mode):
    return 0


def simulate(cfg, reqs):
    steps, t = [], 0
    for r in reqs:
        for g in range(1, r.output_len + 1):
            held = r.max_tokens if cfg.policy == "reserve_max" else g - 1
            last = g == r.output_len
            steps.append({"step": t, "running": [] if last else [r.rid], "preempted": [],
                          "finished": [r.rid] if last else [],
                          "used_blocks": 0 if last else blocks_needed(r.prompt_len + held,
                                                                      cfg.block_size)})
            t += 1
    return steps
'''

EARLY_START = '''
"""The reference ledger, but every request is treated as arriving at step 0."""
from dataclasses import replace

from REFERENCE import *  # noqa: F403
from REFERENCE import simulate as _simulate


def simulate(cfg, reqs):
    return _simulate(cfg, [replace(r, arrival_step=0) for r in reqs])
'''


def _trace_checks(ledger: Exercise) -> tuple[str, ...]:
    return tuple(name for name in ledger.checks.TRACE_CHECKS
                 if name != "trace matches the reference step by step")


def _on_the_reference(ledger: Exercise, source: str, name: str, folder: Path) -> ModuleType:
    """A fake ledger that imports what it keeps of the reference as `REFERENCE`."""
    sys.modules["REFERENCE"] = ledger.reference
    try:
        return _from_source(source, name, folder)
    finally:
        del sys.modules["REFERENCE"]


def test_ledger_serial_fake_earns_no_invariant(ledger: Exercise, tmp_path: Path) -> None:
    results = ledger.grade(ledger.run(_on_the_reference(ledger, SERIAL_FAKE,
                                                        "forged_serial_ledger", tmp_path)))
    passed = [name for name in _trace_checks(ledger) if results[name].passed]
    assert not passed, passed
    # Of the twelve points only blocks_needed (one line of arithmetic) is left.
    assert _score(results) <= 1 / 12 + 1e-9


def test_ledger_early_start_breaks_the_invariants(ledger: Exercise, tmp_path: Path) -> None:
    # A real ledger that ignores arrival_step keeps every count consistent with itself; only
    # "no request starts before it arrives" tells it apart.
    module = _on_the_reference(ledger, EARLY_START, "forged_early_ledger", tmp_path)
    results = ledger.grade(ledger.run(module))
    for name in _trace_checks(ledger):
        assert not results[name].passed, name
    assert "arriv" in results["used blocks equal what the running requests hold"].message


def test_ledger_ignored_watermark_breaks_the_invariants(ledger: Exercise) -> None:
    # ignores_watermark admits into the last free blocks: its counts agree with themselves, but
    # its admissions break the rule the statement gives.
    results = ledger.grade(ledger.run(ledger.mutant("ignores_watermark")))
    assert not results["used blocks equal what the running requests hold"].passed
    assert "watermark" in results["used blocks equal what the running requests hold"].message


# --- the replays above read ids the student wrote: unknown ones must fail, never raise --------

def test_replays_survive_ids_the_input_does_not_have(batching: Exercise, ledger: Exercise) -> None:
    def stranger_preempted(case: dict[str, Any], out: Output) -> None:
        for rec in out.get("steps", []):
            if isinstance(rec, dict):
                rec["preempted"] = [*rec["preempted"], "nobody"]
            else:  # a ledger record: [step, used, running, preempted, finished]
                rec[3] = [*rec[3], "nobody"]

    results = batching.grade(batching.forge(batching.expected, stranger_preempted))
    assert not results["preemption policy"].passed
    sims = [i for i, c in enumerate(ledger.cases) if c["input"]["kind"] == "simulate"]
    forged = copy.deepcopy(ledger.expected)
    for i in sims:
        stranger_preempted(ledger.cases[i], forged[i]["output"])
    results = ledger.grade(forged)
    assert not results["trace matches the reference step by step"].passed
    assert not results["used blocks equal what the running requests hold"].passed


# --- radix_prefix_trie: lock counts and sizes against the reference and what evict frees ------

RADIX_LOCKS = "lock counts equal the running requests through each node"
RADIX_SIZES = "sizes: evictable + protected = total, as the tree says"


@pytest.fixture(scope="module")
def radix() -> Exercise:
    return Exercise("radix_prefix_trie")


def _radix_locks_from_held(case: dict[str, Any], out: Output) -> None:
    """Every node's reported lock_ref rewritten to the number of running requests whose held
    node is it or lies below it (the driver's own `held`), so the snapshot always looks pinned
    exactly right, whatever the cache's real counts are."""
    for step in out.get("steps", []):
        tree = step["tree"]
        through = [0] * len(tree)
        for idx in step["held"].values():
            while 0 <= idx < len(tree):
                through[idx] += 1
                idx = tree[idx][0]
        for j, node in enumerate(tree[1:], start=1):
            node[3] = through[j]


def _radix_sizes_from_tree(case: dict[str, Any], out: Output) -> None:
    """The three sizes rewritten from the (reported) tree: unlocked tokens, locked tokens, all."""
    for step in out.get("steps", []):
        keys = [(len(n[1]), n[3]) for n in step["tree"][1:]]
        free = sum(k for k, lock in keys if lock == 0)
        pinned = sum(k for k, lock in keys if lock > 0)
        step["sizes"] = [free, pinned, free + pinned]


def _radix_locks_and_sizes(case: dict[str, Any], out: Output) -> None:
    _radix_locks_from_held(case, out)
    _radix_sizes_from_tree(case, out)


def _radix_unaligned(case: dict[str, Any], out: Output) -> None:
    """As above, with one stray node added to every snapshot, so that no step's tree is the
    reference's and nothing can be compared with its lock counts node for node."""
    for step in out.get("steps", []):
        step["tree"].append([0, [99], [999], 0])
    _radix_locks_and_sizes(case, out)


# lock_node_only leaves the ancestors of a held node unpinned (and stale after a split);
# split_forgets_lock gives the new upper half of a split lock_ref 0; sizes_ignore_locks never
# moves tokens between its evictable and protected counters. Each, its figures rewritten to be
# right, must still fail its check: the first two by what their evict frees, the third by the
# long script's sizes (where the driver reports no tree to derive them from).
@pytest.mark.parametrize(("stem", "check", "forger"), [
    ("lock_node_only", RADIX_LOCKS, _radix_locks_and_sizes),
    ("split_forgets_lock", RADIX_LOCKS, _radix_locks_and_sizes),
    ("sizes_ignore_locks", RADIX_SIZES, _radix_locks_and_sizes),
    ("lock_node_only", RADIX_LOCKS, _radix_unaligned),
    ("split_forgets_lock", RADIX_LOCKS, _radix_unaligned),
], ids=["node-only-locks", "split-forgets-lock", "sizes-ignore-locks", "node-only-unaligned",
        "split-forgets-unaligned"])
def test_radix_forged_locks_and_sizes_earn_nothing(
        radix: Exercise, stem: str, check: str,
        forger: Callable[[dict[str, Any], Output], None]) -> None:
    honest = radix.run(radix.mutant(stem))
    before = radix.grade(honest)
    assert not before[check].passed
    after = radix.grade(radix.forge(honest, forger))
    assert not after[check].passed, after[check].message
    assert _score(after) <= _score(before)


def test_radix_reference_keeps_its_figures_under_the_forgeries(radix: Exercise) -> None:
    # The forgers above rewrite nothing on a correct cache: its own figures are already right.
    assert radix.forge(radix.expected, _radix_locks_and_sizes) == radix.expected
    results = radix.grade(radix.expected)
    assert results[RADIX_LOCKS].passed and results[RADIX_SIZES].passed
