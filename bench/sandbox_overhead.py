"""Overhead of the sandbox: `python -c pass` bare (the runtime venv's python) vs through the
configured backend (cgroup + seccomp + rlimits + bwrap). Prints medians and the ratio.

    .venv/bin/python bench/sandbox_overhead.py [-n 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runners import SandboxSpec, get_backend, runtime_python, runtime_venv_host_path  # noqa: E402


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=20, help="interleaved runs of each (default 20)")
    args = parser.parse_args()

    backend = get_backend()
    bare_python = os.path.join(runtime_venv_host_path(), "bin", "python")
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    spec = SandboxSpec(argv=[runtime_python(), "-c", "pass"])

    def bare() -> None:
        subprocess.run([bare_python, "-c", "pass"], env=env, check=True)

    def sandboxed() -> None:
        result = backend.run(spec)
        if result.verdict != "OK":
            raise SystemExit(f"sandboxed run failed: {result}")

    bare()
    sandboxed()  # warm-up: page cache, seccomp BPF cache, cgroup detection
    times: dict[str, list[float]] = {"bare": [], "sandbox": []}
    for _ in range(args.n):  # interleaved, so background load hits both alike
        times["bare"].append(timed(bare))
        times["sandbox"].append(timed(sandboxed))

    med = {k: statistics.median(v) for k, v in times.items()}
    isolation = backend.run(spec).memory_isolation
    print(f"python -c pass, {args.n} interleaved runs, backend={backend.name} ({isolation})")
    for key, values in times.items():
        print(f"  {key:8s} median {med[key] * 1e3:6.1f} ms   min {min(values) * 1e3:6.1f} ms")
    print(f"  ratio    {med['sandbox'] / med['bare']:.2f}x  "
          f"(+{(med['sandbox'] - med['bare']) * 1e3:.1f} ms per run)")


if __name__ == "__main__":
    main()
