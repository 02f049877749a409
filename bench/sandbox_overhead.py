"""Overhead of the sandbox: bare vs sandboxed medians, interleaved in one run.

Three workloads, each run bare and through the configured backend (uid drop + cgroup + seccomp
+ rlimits + bwrap), alternating so background load hits both alike:

* `python -c pass`            the fixed cost of one sandbox run;
* `python -c "import numpy"`  the issue's target: sandboxed/bare <= 1.10;
* grading                     the Q41 (stop_strings_stream) reference through graders.grade_answer,
                              once with the real backend and once with `TrustedBareBackend`
                              below, which runs the same driver as a plain subprocess in a temp
                              dir. Same grader code, same cases and checks; only the backend
                              differs.

`TrustedBareBackend` runs code UNSANDBOXED. It exists only in this benchmark and only ever runs
our own reference solution; nothing in the application can reach it.

    .venv/bin/python bench/sandbox_overhead.py [-n 20] [--only pass,numpy,grading]
                                               [--backends bwrap,docker]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import runners  # noqa: E402
from runners import (  # noqa: E402
    SandboxResult,
    SandboxSpec,
    get_backend,
    runtime_python,
    runtime_venv_host_path,
)

# What the sandbox sets too (runners.sandbox_env.BASE_ENV), so bare runs do the same work.
BARE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2"}


class TrustedBareBackend:
    """NOT A SANDBOX: the spec's files in a temp dir, its argv as a plain subprocess. For
    measuring our own reference code only."""

    name = "bare"

    def available(self) -> tuple[bool, str]:
        return True, "benchmark only"

    def run(self, spec: SandboxSpec) -> SandboxResult:
        host_python = os.path.join(runtime_venv_host_path(), "bin", "python")
        argv = [host_python if a == runtime_python() else a for a in spec.argv]
        job = tempfile.mkdtemp(prefix="roofline-bench-")
        try:
            for name, content in spec.files.items():
                target = Path(job, name)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
            start = time.monotonic()
            proc = subprocess.run(argv, input=spec.stdin, capture_output=True, cwd=job,
                                  env={**BARE_ENV, **spec.env}, timeout=spec.wall_timeout_s)
            wall = time.monotonic() - start
        finally:
            shutil.rmtree(job, ignore_errors=True)
        return SandboxResult(
            exit_code=proc.returncode if proc.returncode >= 0 else None,
            signal=-proc.returncode if proc.returncode < 0 else None,
            stdout=proc.stdout, stderr=proc.stderr, wall_s=wall, cpu_s=0.0, timed_out=False,
            output_truncated=False, oom_killed=False, backend=self.name,
            memory_isolation="none")


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def python_workload(backend: runners.Backend, code: str) -> tuple[Callable[[], None],
                                                                   Callable[[], None]]:
    bare_python = os.path.join(runtime_venv_host_path(), "bin", "python")
    spec = SandboxSpec(argv=[runtime_python(), "-c", code])

    def bare() -> None:
        subprocess.run([bare_python, "-c", code], env=BARE_ENV, check=True,
                       stdout=subprocess.DEVNULL)

    def sandboxed() -> None:
        result = backend.run(spec)
        if result.verdict != "OK":
            raise SystemExit(f"sandboxed run of {code!r} failed: {result}")

    return bare, sandboxed


def grading_workload(backend: runners.Backend) -> tuple[Callable[[], None], Callable[[], None]]:
    import graders
    from exercises import registry

    # registry.load (not registry.get): one exercise, unaffected by any other's state.
    spec = registry.load(registry.EXERCISES_DIR / "stop_strings_stream")
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    source = (spec.path / "code" / "reference.py").read_text()
    bare_backend = TrustedBareBackend()
    real_get_backend = runners.get_backend

    def grade(use: runners.Backend) -> None:
        # graders.code imports get_backend from `runners` at call time.
        runners.get_backend = lambda name=None: use  # type: ignore[assignment]
        try:
            result = graders.grade_answer(spec, "streamer", source, params)
        finally:
            runners.get_backend = real_get_backend  # type: ignore[assignment]
        if result.score != 1.0:
            raise SystemExit(f"grading the reference with {use.name} gave {result}")

    return (lambda: grade(bare_backend)), (lambda: grade(backend))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=20, help="interleaved runs of each (default 20)")
    parser.add_argument("--only", default="pass,numpy,grading",
                        help="comma-separated subset of: pass, numpy, grading")
    parser.add_argument("--backends", default="",
                        help="comma-separated backends to measure side by side (bwrap,docker); "
                             "default: the configured one")
    args = parser.parse_args()

    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    backends = [get_backend(name) for name in names] if names else [get_backend()]
    chosen = [w.strip() for w in args.only.split(",") if w.strip()]
    # Per workload: the bare run, then one sandboxed run per backend (the bare ones of the
    # other backends' builders are the same work and are not repeated).
    workloads: dict[str, dict[str, Callable[[], None]]] = {}
    for name in chosen:
        for backend in backends:
            bare, sandboxed = {"pass": lambda b=backend: python_workload(b, "pass"),
                               "numpy": lambda b=backend: python_workload(b, "import numpy"),
                               "grading": lambda b=backend: grading_workload(b)}[name]()
            workloads.setdefault(name, {"bare": bare})[backend.name] = sandboxed
    for runs in workloads.values():  # warm-up: page cache, BPF, cgroup lanes, images
        for fn in runs.values():
            fn()
    times = {n: {key: [] for key in runs} for n, runs in workloads.items()}
    for i in range(args.n):
        for name, runs in workloads.items():
            # Rotate which goes first, so none always runs on a just-warmed cache.
            order = list(runs.items())
            shift = i % len(order)
            for key, fn in order[shift:] + order[:shift]:
                times[name][key].append(timed(fn))

    isolation = ", ".join(
        f"{b.name} {b.run(SandboxSpec(argv=[runtime_python(), '-c', 'pass'])).memory_isolation}"
        for b in backends)
    print(f"{args.n} interleaved runs, backends: {isolation}; "
          f"cgroup2 favordynmods={favordynmods()}, load average {os.getloadavg()[0]:.2f}")
    print(f"{'workload':10s} {'backend':8s} {'bare ms':>9s} {'sandbox ms':>11s} {'ratio':>7s} "
          f"{'+ms':>7s} {'paired':>7s}   (min bare / sandbox)")
    for name, t in times.items():
        bare_m = statistics.median(t["bare"])
        for key, runs in t.items():
            if key == "bare":
                continue
            sbx_m = statistics.median(runs)
            # The median of per-iteration ratios: each pair ran back to back, so a load spike
            # hits both; less noisy than the ratio of medians on a shared machine.
            paired = statistics.median(s / b for s, b in zip(runs, t["bare"], strict=True))
            print(f"{name:10s} {key:8s} {bare_m * 1e3:9.1f} {sbx_m * 1e3:11.1f} "
                  f"{sbx_m / bare_m:7.3f} {(sbx_m - bare_m) * 1e3:7.1f} {paired:7.3f}   "
                  f"({min(t['bare']) * 1e3:.1f} / {min(runs) * 1e3:.1f})")


def favordynmods() -> str:
    """Whether a cgroup2 mount has `favordynmods` (fast cgroup migration, see bwrap.run())."""
    try:
        with open("/proc/self/mounts") as fh:
            mounts = [line.split() for line in fh]
    except OSError:
        return "unknown"
    v2 = [m for m in mounts if len(m) > 3 and m[2] == "cgroup2"]
    if not v2:
        return "no cgroup2 mount"
    return "on" if any("favordynmods" in m[3].split(",") for m in v2) else "off"


if __name__ == "__main__":
    main()
