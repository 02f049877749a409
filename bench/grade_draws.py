"""Hidden-case draws: graders.checkkit.draw against Hypothesis's @given engine and against its
own ConjectureData, same strategies.

    .venv/bin/python bench/grade_draws.py [--seeds 4]

A code grade draws its hidden cases afresh for each submission (practice.variants.hidden_seed).
For every code exercise this records the strategies and counts its checks.py asks
checkkit.draw for (one hidden_cases call), then draws them with --seeds seeds both ways, in
this process three ways: the baseline, a @given test with the settings checkkit used before
(generate phase only, no database, no deadline, health checks off, pinned seed); checkkit.draw
with Hypothesis's own ConjectureData, which keeps the record a test engine reads (what draw
used before); and checkkit.draw as it is (its lean data object, the same values). Printed per
exercise: milliseconds per grade's draws each way, the ratios of draw to each of the other
two, and the share of distinct values (a repeat is dropped from the cases, so it is a case
lost).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "practice.settings.dev")

import django  # noqa: E402

django.setup()

from hypothesis import HealthCheck, Phase, Verbosity, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.internal.conjecture.data import ConjectureData  # noqa: E402

from exercises import registry  # noqa: E402
from graders import checkkit  # noqa: E402
from graders.code import load_module  # noqa: E402


def engine_draw(strategy: st.SearchStrategy[Any], seed: int, n: int) -> list[Any]:
    """The baseline: n examples of a @given test pinned to the seed, no shrinking."""
    drawn: list[Any] = []

    @settings(database=None, max_examples=n, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet)
    @hypothesis_seed(seed)
    @given(strategy)
    def collect(value: Any) -> None:
        drawn.append(value)

    collect()
    return drawn


def recorded_draw(strategy: st.SearchStrategy[Any], seed: int, n: int) -> list[Any]:
    """checkkit.draw with Hypothesis's own ConjectureData (and its whole record)."""
    lean = checkkit._DATA
    checkkit._DATA = ConjectureData
    try:
        return checkkit.draw(strategy, seed, n)
    finally:
        checkkit._DATA = lean


def requested_draws(spec: registry.ExerciseSpec) -> list[tuple[st.SearchStrategy[Any], int]]:
    """The (strategy, count) pairs one hidden_cases call of the exercise's checks.py asks
    checkkit.draw for."""
    asked: list[tuple[st.SearchStrategy[Any], int]] = []
    real = checkkit.draw

    def record(strategy: st.SearchStrategy[Any], seed: int, n: int) -> list[Any]:
        asked.append((strategy, n))
        return real(strategy, seed, n)

    checks = load_module(spec.code_dir / "checks.py")
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    checkkit.draw = record
    try:
        checks.hidden_cases(params, 987_654_321)  # a seed no cache of checks.py has seen
    finally:
        checkkit.draw = real
    return asked


def timed(draw: Any, asked: list[tuple[st.SearchStrategy[Any], int]], seeds: range
          ) -> tuple[float, float]:
    """(seconds per grade, distinct share) of `draw` over the requests, once per seed."""
    total = distinct = 0
    start = time.perf_counter()
    for seed in seeds:
        for strategy, n in asked:
            values = draw(strategy, seed, n)
            total += len(values)
            distinct += len({json.dumps(v, sort_keys=True, default=str) for v in values})
    return (time.perf_counter() - start) / len(seeds), distinct / max(total, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=4)
    args = parser.parse_args()
    seeds = range(1, args.seeds + 1)
    print(f"{'exercise':32s} {'@given ms':>10s} {'record ms':>10s} {'draw ms':>8s} "
          f"{'/@given':>8s} {'/record':>8s} {'distinct @given':>16s} {'draw':>5s}")
    sums = [0.0, 0.0, 0.0]
    for slug, spec in sorted(registry.load_all().items()):
        if not any(part.type == "code" for part in spec.parts):
            continue
        asked = requested_draws(spec)
        if not asked:
            continue
        for strategy, n in asked:  # warm all: strategies validate themselves once
            engine_draw(strategy, 0, min(n, 5))
            checkkit.draw(strategy, 0, min(n, 5))
        base, base_distinct = timed(engine_draw, asked, seeds)
        record, _ = timed(recorded_draw, asked, seeds)
        ours, ours_distinct = timed(checkkit.draw, asked, seeds)
        for i, figure in enumerate((base, record, ours)):
            sums[i] += figure
        print(f"{slug:32s} {1000 * base:10.0f} {1000 * record:10.0f} {1000 * ours:8.0f} "
              f"{ours / base:8.2f} {ours / record:8.2f} {base_distinct:16.2f} "
              f"{ours_distinct:5.2f}")
    print(f"{'all (one grade of each)':32s} {1000 * sums[0]:10.0f} {1000 * sums[1]:10.0f} "
          f"{1000 * sums[2]:8.0f} {sums[2] / sums[0]:8.2f} {sums[2] / sums[1]:8.2f}")

if __name__ == "__main__":
    main()
