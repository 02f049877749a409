"""How long a student waits for a kernel grade on a CPU worker, against a bare torch import.

For every exercise with a kernel part, its reference is graded through graders.kernel.grade
(static checks, one sandbox run of gpu_sandbox/run.py: the interpreter's preview cases and the
sm_90 compile of every launched kernel), and a bare `python -c "import torch, triton"` runs
through the same backend with the same limits. The two alternate, round after round, so
background load hits both alike; the medians and their ratio are printed per exercise. Every
grade must come back "provisional" with all its checks run and passed, or the run fails: a
fast grade that skipped a check is not a fast grade.

    .venv/bin/python bench/kernels.py --cpu [--rounds 5] [--only slug,slug]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "practice.settings.dev")

# The share of a bare import a kernel grade may take (issue 24's target).
TARGET_RATIO = 2.5


def bare_import_spec(memory_mb: int) -> object:
    from graders.code import MiB
    from graders.kernel import TMPFS_BYTES
    from runners import SandboxSpec, runtime_python

    return SandboxSpec(argv=[runtime_python(), "-I", "-B", "-c", "import torch, triton"],
                       wall_timeout_s=120.0, cpu_time_s=60.0, memory_bytes=memory_mb * MiB,
                       tmpfs_bytes=TMPFS_BYTES)


def measure(slug: str, rounds: int) -> tuple[float, float, int]:
    """(median grade seconds, median bare-import seconds, checks per grade) of one exercise."""
    import graders
    from exercises import registry
    from graders import kernel, selftest
    from runners import get_backend

    spec = registry.get(slug)
    part = next(p for p in spec.parts if p.type == "kernel")
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    ctx = graders.context_for(spec, part, params, seed=selftest.SEED)
    reference = (Path(ctx.exercise_path) / "kernel" / "reference.py").read_text(encoding="utf-8")
    backend = get_backend()
    bare = bare_import_spec(part.memory_mb)
    grades: list[float] = []
    imports: list[float] = []
    checks = 0
    for round_ in range(rounds):
        order = ("grade", "import") if round_ % 2 == 0 else ("import", "grade")
        for what in order:
            start = time.perf_counter()
            if what == "import":
                run = backend.run(bare)  # type: ignore[arg-type]
                imports.append(time.perf_counter() - start)
                if run.verdict != "OK":
                    raise SystemExit(f"the bare import failed in the sandbox: {run.verdict} "
                                     f"{run.stderr[-500:]!r}")
                continue
            result = kernel.grade(part, reference, ctx)
            grades.append(time.perf_counter() - start)
            failed = [c.name for c in result.checks if not c.passed]
            if result.verdict != "provisional" or failed:
                raise SystemExit(f"{slug}: the reference graded {result.verdict} "
                                 f"(failed: {failed}): {result.feedback}")
            checks = len(result.checks)
    return statistics.median(grades), statistics.median(imports), checks


def main(rounds: int, only: set[str]) -> int:
    from graders.kernel import kernel_device
    from runners import get_backend

    if kernel_device() != "cpu":
        print("bench/kernels.py --cpu grades in the interpreter: unset ROOFLINE_KERNEL_DEVICE")
        return 2
    root = ROOT / "exercises"
    slugs = sorted(p.parent.parent.name for p in root.glob("*/kernel/task.py")
                   if not p.parent.parent.name.startswith("_"))
    if only:
        slugs = [s for s in slugs if s in only]
    backend = get_backend()
    print(f"kernel grades on the CPU, backend {backend.name}, {rounds} rounds each, "
          f"target <= {TARGET_RATIO}x a bare `import torch, triton` in the same sandbox")
    worst = 0.0
    for slug in slugs:
        grade_s, import_s, checks = measure(slug, rounds)
        ratio = grade_s / import_s
        worst = max(worst, ratio)
        print(f"  {slug:24s} grade {grade_s:6.2f} s ({checks} checks, all run)   "
              f"bare import {import_s:5.2f} s   ratio {ratio:4.2f}"
              f"{'' if ratio <= TARGET_RATIO else '   OVER TARGET'}", flush=True)
    print(f"worst ratio {worst:.2f} (target {TARGET_RATIO})")
    return 0
