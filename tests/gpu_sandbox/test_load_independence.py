"""Verdicts that do not depend on the machine's load (issue 19, item 8).

In a fresh-clone `make test` on a busy machine, fp8_blockscaled_gemm's mutants scored 0.0 where
0.2 is expected: the sm_90 compile check ran past a wall-clock limit, alone it passed. Every
limit that decides a verdict now counts the CPU time of the student's processes (and of our
compiler), with a wall-clock backstop several times longer that reports the machine as busy
instead of the student as slow. This test grades the kernel exercises' selftest cases while
the test itself keeps every core busy with spinning processes, several grades at once, so each
sandbox gets a fraction of a core: a wall-clock limit on the compile fails here, a CPU-time one
does not.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest

from exercises import registry
from exercises.spec import ExerciseSpec, PartSpec
from exercises.stop_strings_stream import exercise as stop_strings
from graders import code as code_grader
from graders import selftest
from graders.base import GradeContext

# Three spinning processes per core: with the grades below running at once, each sandbox gets
# well under half a core, so the compile step's wall time is several times its CPU time.
HOGS = 3 * (os.cpu_count() or 1)


def _kernel_exercises() -> list[ExerciseSpec]:
    return [spec for _, spec in sorted(registry.load_all().items())
            if any(p.type == "kernel" for p in spec.parts)]


def _chosen_files(spec: ExerciseSpec) -> set[str]:
    """The reference, and the first listed case with the lowest score above 0: that score is
    the sm_90 compile check alone (the cases fail), the check a slow compile used to cost."""
    cases = [c for c in spec.selftest if (c.file or c.mutant)
             and spec.part(c.part).type == "kernel"]
    reference = [c.file for c in cases if c.score == 1.0][:1]
    positive = [c for c in cases if c.score and 0 < c.score < 1]
    lowest = min((c.score for c in positive), default=None)
    partial = [c.file or c.mutant for c in positive if c.score == lowest][:1]
    return {f for f in (*reference, *partial) if f}


@contextmanager
def cpu_hogs(n: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`n` processes spinning on the CPU for as long as the block runs (killed at its end)."""
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            # A session each: the scheduler groups a session's processes (autogroup) and a
            # sandbox's cgroup competes with that group as one, so hogs sharing our session
            # would take a sandbox no more than one share, however many they were.
            hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                         stdin=subprocess.DEVNULL, start_new_session=True))
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()


def test_the_chosen_cases_depend_on_the_compile_check() -> None:
    # The load test below means something only if each exercise contributes its reference and
    # a case whose only passing check is the compile.
    for spec in _kernel_exercises():
        files = _chosen_files(spec)
        assert len(files) == 2, (spec.slug, files)


@pytest.mark.alone  # it keeps every core busy: alone, so that load is the only one
def test_kernel_selftests_hold_with_every_core_busy() -> None:
    specs = _kernel_exercises()
    if not specs:
        pytest.fail("no kernel exercise found")
    with cpu_hogs(HOGS) as hogs, ThreadPoolExecutor(max_workers=len(specs)) as pool:
        reports = list(pool.map(lambda s: selftest.sandboxed_cases(s, _chosen_files(s)), specs))
        # Still spinning at the end: the grades above really ran on a busy machine.
        assert all(h.poll() is None for h in hogs)
    assert all(r.passed for r in reports), [r.slug for r in reports if not r.passed]
    failed = [f"{r.slug}: {line}" for r in reports for line in r.failed]
    assert not failed, "\n".join(failed)


# -- the code path: the relay's budget is CPU time, its wall clock only a backstop ---------------

STREAMER = PartSpec(id="streamer", type="code", prompt="", time_limit_s=2,
                    sandbox_modules=("driver_errors",))


def _grade_streamer(source: str) -> tuple[float, str, dict]:
    folder = os.path.dirname(os.path.abspath(stop_strings.__file__))
    ctx = GradeContext(reference="code/reference.py", params=dict(stop_strings.CANONICAL),
                       exercise_path=folder, mode="submit", seed=12345)  # type: ignore[arg-type]
    r = code_grader.grade(STREAMER, source, ctx)
    return r.score, r.feedback, r.extra.get("relay", {}).get("stop") or {}


@pytest.mark.alone  # as above: the load it makes is the only one
def test_code_limits_hold_with_every_core_busy() -> None:
    reference = os.path.join(os.path.dirname(os.path.abspath(stop_strings.__file__)), "code",
                             "reference.py")
    with open(reference, encoding="utf-8") as f:
        honest = f.read()
    with cpu_hogs(os.cpu_count() or 1):
        score, feedback, _ = _grade_streamer(honest)
        assert score == 1.0, feedback
        # A CPU-bound loop spends the CPU budget: still the student's time limit, never "busy".
        score, feedback, stop = _grade_streamer("while True:\n    pass\n")
        assert score == 0.0 and feedback.startswith("Time limit (2 s) exceeded"), feedback
        assert stop.get("reason") == "time", stop
        # So does code that only waits: it meets the wall-clock backstop, and waiting for
        # nothing is not being starved of a core.
        score, feedback, stop = _grade_streamer("import time\ntime.sleep(600)\n")
        assert score == 0.0 and feedback.startswith("Time limit (2 s) exceeded"), feedback
        assert stop.get("reason") == "time", stop
