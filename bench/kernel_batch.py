"""A kernel exercise's trusted sources graded one by one vs in one batch, in one process.

The selftest grades every source of a kernel part (reference, starter, mutants, equivalents,
selftest.toml cases): once each through graders.kernel.grade (one sandbox run of
gpu_sandbox/run.py each), or all in one graders.kernel.grade_batch run, which shares the
sandbox's start and run.py's torch import. Both ways are timed in this process, alternating
which goes first from round to round so background load hits both alike, and the ratio of the
medians is printed; the grades of the two ways are compared too (they must be the same).
No absolute times are asserted: the machine decides them.

    .venv/bin/python bench/kernel_batch.py [--exercise fused_rope_positions] [--limit N]
                                           [--rounds 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import graders  # noqa: E402
from exercises import registry  # noqa: E402
from graders import kernel, selftest  # noqa: E402
from graders.base import GradeResult  # noqa: E402


def seen(r: GradeResult) -> tuple[Any, ...]:
    return r.score, r.verdict, r.feedback, tuple((c.name, c.passed) for c in r.checks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exercise", default="fused_rope_positions")
    parser.add_argument("--limit", type=int, default=0, help="the first N sources only")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()

    spec = registry.get(args.exercise)
    part = next(p for p in spec.parts if p.type == "kernel")
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    sources = selftest._kernel_sources(spec, part, params)
    if args.limit:
        sources = sources[:args.limit]
    ctx = graders.context_for(spec, part, params, seed=selftest.SEED)
    print(f"{args.exercise}: {len(sources)} sources, device {kernel.kernel_device()}, "
          f"{args.rounds} round(s)")

    def one_by_one() -> list[GradeResult]:
        return [kernel.grade(part, s, ctx) for s in sources]

    def batch() -> list[GradeResult]:
        return kernel.grade_batch(part, sources, ctx)

    times: dict[str, list[float]] = {"one by one": [], "batch": []}
    grades: dict[str, list[GradeResult]] = {}
    for round_ in range(args.rounds):
        order = [("one by one", one_by_one), ("batch", batch)]
        for name, fn in order if round_ % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            grades[name] = fn()
            times[name].append(time.perf_counter() - start)
            print(f"  round {round_ + 1} {name}: {times[name][-1]:.1f} s", flush=True)
    same = [seen(a) for a in grades["one by one"]] == [seen(b) for b in grades["batch"]]
    single, batched = (statistics.median(times[k]) for k in ("one by one", "batch"))
    print(f"one by one {single:.1f} s, batch {batched:.1f} s (medians): batch/one-by-one = "
          f"{batched / single:.2f}; grades {'identical' if same else 'DIFFER'}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
