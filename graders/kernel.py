"""Grades a `kernel` part: a Triton kernel and its host wrapper (DESIGN.md §5).

    1. static checks here (graders/kernel_static.py, ast only): a @triton.jit kernel that the wrapper
       launches, no torch compute in the wrapper, no streams, threads, exec, ctypes, caches;
    2. one sandbox run of gpu_sandbox/run.py, the trusted parent, which makes each case's inputs
       from the exercise's kernel/task.py and a seed chosen here, has kernel_child.py run the student's
       wrapper on them, and compares the outputs with a float64 reference it computes only after
       the child answered; then every kernel the cases launched is compiled for sm_90;
    3. on a GPU worker (ROOFLINE_KERNEL_DEVICE=gpu) the same run is the authoritative grade, on
       bigger shapes, followed by timing against the reference kernel (gpu_sandbox/timing.py).

On the CPU the cases run in Triton's interpreter and the result is labelled a preview: the
interpreter runs host Python inside kernels and does not trap out-of-bounds accesses, which is
why the compile step and the GPU run exist.

A preview is not a final grade. A full pass in the interpreter has the verdict "provisional":
its `score` (1.0) is the preview's fraction of checks passed, shown to the student, but it is
not final, solves nothing (practice/provisional.py: no solved_at, no best score, not solved in
statistics or exports) and is re-graded on a GPU worker once one exists. A preview that fails a
check keeps the usual "partial" / "incorrect": the failure (wrong values, an unwritten or NaN
element, an sm_90 compile error) is real and is what the student acts on. `extra["final"]` says
which of the two a result is. The result line is sealed with a key made here per
run, as for code parts, so nothing the student's code prints can pose as it.

`grade_batch` grades several TRUSTED sources (the selftest's reference, starter, mutants and
equivalents; never a student's) in one sandbox run: static checks per source as in `grade`,
then run.py runs each remaining source as it runs one (a fresh child, the same seeds, its own
budgets and compile step), sharing only its torch import and the sandbox's start, and seals one
line holding a report per source. Each report becomes a GradeResult through the same code as
`grade`'s, so a batch grades as the sources would one by one (tests/graders/
test_kernel_batch.py). The sandbox's limits are the sum of the sources'.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from exercises.spec import PartSpec
from graders import python_ast
from graders.base import Check, GradeContext, GradeResult
from graders.code import KiB, MiB, _source_bytes, output_tail, student_traceback

SEAL_BYTES = 16
STUDENT_FILE = "submission.py"
# What the parent needs beside it in the sandbox (flat: it imports them by plain name).
HARNESS_FILES = ("run.py", "zygote.py", "kernel_child.py", "aot.py", "sm90_compile.py",
                 "compare.py")
GPU_HARNESS_FILES = ("timing.py", "timed_case.py")
# Above the part's own limit (the cases): importing torch and Triton and the submission, and the
# sm_90 compile of each launched kernel (run.py bounds each phase to 20 CPU seconds). The
# sandbox's RLIMIT_CPU is their sum; its wall clock is a backstop WALL_FACTOR times longer,
# above run.py's own backstops, so on a busy machine run.py's CPU-time budgets decide. A kernel
# part's time_limit_s stays <= 40 so an unloaded run fits the Celery soft limit (90 s).
IMPORT_AND_COMPILE_S = 45.0
MAX_TIME_LIMIT_S = 40.0
# A run that run.py stopped as starved of a core ("busy") is run again this many times, then
# given up as MachineBusy: the machine's fault, never the student's time limit or compile.
BUSY_RETRIES = 1
RESULT_BYTES = 2 * MiB
TMPFS_BYTES = 512 * MiB
# The sandbox's CPU quota: the sm_90 compile builds each launched specialisation in its own
# process, two at a time (gpu_sandbox/sm90_compile.py), which halves most of a student's wait
# on this two-core machine. The CPU-time budgets count every process, so the limits are as
# before; only the wall clock is shorter.
KERNEL_CPUS = 2.0

STATUS_WORDS = {
    "mismatch": "wrong values",
    "unwritten": "some output elements were never written (they still hold the grader's "
                 "NaN poison)",
    "nan": "your kernel produced NaN",
    "inputs_changed": "an input was modified",
    "host_compute": "the outputs are computed outside the kernel",
    "shape": "an output changed shape or dtype",
    "structure": "the tensors came back altered",
    "error": "raised an exception",
    "crash": "the process died",
    "timeout": "the time limit ran out during this case",
    "not_run": "not run (an earlier case stopped the run)",
}


# What a NaN among the worst elements is (gpu_sandbox/compare.py tells them apart by the
# poison's payload).
WORST_WHY = {"unwritten": " (never written)", "nan": " (computed by your kernel)"}


def kernel_device() -> str:
    """"cpu": preview in the interpreter (dev, CI, CPU workers); "gpu": a GPU worker."""
    return "gpu" if os.environ.get("ROOFLINE_KERNEL_DEVICE", "cpu").strip() == "gpu" else "cpu"


def task_entry(task_path: Path) -> str:
    """ENTRY from kernel/task.py, read without importing it (it needs torch; we have none)."""
    tree = python_ast.parse(task_path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "ENTRY" for t in node.targets):
            value = ast.literal_eval(node.value)
            if isinstance(value, str) and value.isidentifier():
                return value
    raise ValueError(f"{task_path}: no ENTRY = \"<function name>\"")


def seal(key: bytes, body: bytes) -> str:
    return hashlib.blake2b(body, key=key, digest_size=SEAL_BYTES).hexdigest()


def read_result(stdout: bytes, key: bytes) -> dict[str, Any] | None:
    """The parent's one sealed line, or None (missing, forged, or not JSON)."""
    for line in stdout.split(b"\n"):
        if not line.startswith(b"RESULT "):
            continue
        _, mark, body = line.split(b" ", 2) if line.count(b" ") >= 2 else (b"", b"", b"")
        if secrets.compare_digest(mark, seal(key, body).encode()):
            try:
                value = json.loads(body)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def batch_file(index: int) -> str:
    """Where a batch's source lies in the sandbox: a folder of its own, under the name the
    child's tracebacks and messages give (submission.py)."""
    return f"batch/{index}/{STUDENT_FILE}"


def sandbox_spec(part: PartSpec, source: bytes | list[bytes], kernel_dir: Path,
                 params: dict[str, Any], seed: int, device: str, key: bytes) -> Any:
    """One source's run, or (a list) a batch of trusted sources in one run."""
    from runners import runtime_python
    from runners.spec import SandboxSpec

    here = Path(__file__).resolve().parent.parent / "gpu_sandbox"
    names = HARNESS_FILES + (GPU_HARNESS_FILES if device == "gpu" else ())
    files = {name: (here / name).read_bytes() for name in names}
    files["cpuclock.py"] = (here.parent / "runners" / "cpuclock.py").read_bytes()
    files["task.py"] = (kernel_dir / "task.py").read_bytes()
    config: dict[str, Any] = {"mode": "gpu" if device == "gpu" else "preview", "params": params,
                              "seed": int(seed), "time_limit_s": part.time_limit_s}
    if isinstance(source, bytes):
        files[STUDENT_FILE] = source
        runs = 1
    else:
        files.update({batch_file(i): s for i, s in enumerate(source)})
        config["batch"] = [batch_file(i) for i in range(len(source))]
        runs = len(source)
    if device == "gpu":
        files["reference_kernel.py"] = (kernel_dir / "reference.py").read_bytes()
    stdin = key.hex() + "\n" + json.dumps(config, default=str) + "\n"
    from runners.cpuclock import WALL_FACTOR

    # The sources run one after another, each within its own budgets: the sum of theirs.
    cpu = runs * (part.time_limit_s + IMPORT_AND_COMPILE_S)
    return SandboxSpec(
        argv=[runtime_python(), "-I", "-B", "run.py"],
        files=files,
        stdin=stdin.encode("utf-8"),
        wall_timeout_s=WALL_FACTOR * cpu,
        cpu_time_s=cpu,
        memory_bytes=part.memory_mb * MiB,
        tmpfs_bytes=TMPFS_BYTES,
        cpus=KERNEL_CPUS,
        output_limit_bytes=runs * (part.output_limit_kb * KiB + RESULT_BYTES),
        gpu=0 if device == "gpu" else None,
    )


def _fmt(x: Any) -> str:
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def _case_message(case: dict[str, Any], part: PartSpec) -> str:
    status = case.get("status", "not_run")
    what = case.get("describe") or case["id"]
    words = STATUS_WORDS.get(status, status)
    if status == "timeout":
        words = (f"the time limit ({part.time_limit_s:g} s of CPU time for all cases "
                 "together) ran out during this case")
    lines = [f"Case {case['id']} ({what}): {words}."]
    if case.get("message"):
        lines.append(str(case["message"]))
    for name, out in (case.get("outputs") or {}).items():
        if not out.get("mismatched"):
            continue
        lines.append(
            f"`{name}`: {out['mismatched']:,} of {out['total']:,} elements outside "
            f"|got - expected| <= {out['atol']:g} + {out['rtol']:g}·|expected|"
            + (f" ({out['unwritten']:,} never written)" if out.get("unwritten") else "")
            + (f"; the first at index {tuple(out['first_bad'])}" if out.get("first_bad") else "")
            + (f"; your kernel produced NaN at {out['nan']:,} element"
               f"{'s' if out['nan'] != 1 else ''}, the first at index {tuple(out['first_nan'])}"
               if out.get("nan") and out.get("first_nan") else "")
            + ".")
        for w in out.get("worst", []):
            why = WORST_WHY.get(w.get("why", ""), "")
            lines.append(f"  at {tuple(w['index'])}: expected {_fmt(w['expected'])}, "
                         f"got {_fmt(w['got'])}{why}")
    trace = student_traceback(case.get("report"))
    if trace:
        lines.append(trace)
    return "\n".join(lines)


def _compile_check(report: dict[str, Any] | None) -> Check:
    name = "compiles for sm_90 (H100/H200)"
    if not report:
        return Check(name, False, "Not compiled: the run stopped before the compile step.")
    if report.get("error"):
        return Check(name, False, str(report["error"]))
    kernels = report.get("kernels") or []
    if not kernels:
        return Check(name, False, "No @triton.jit kernel was launched by the cases: the "
                                  "wrapper must launch your kernel (kernel[grid](...)).")
    lines = []
    for k in kernels:
        if k.get("error"):
            lines.append(f"{k['kernel']}: {k['error']}")
        else:
            # Figures of the compile a real launch makes (gpu_sandbox/aot.py specialises it).
            regs = f", {k['registers']} registers per thread" if k.get("registers") else ""
            extra = f", {k['wgmma']} wgmma" if k.get("wgmma") else ""
            lines.append(f"{k['kernel']}: {k.get('num_warps')} warps, "
                         f"{k.get('shared', 0):,} B shared memory{regs}{extra}")
    ok = bool(report.get("ok"))
    head = "Every launched kernel compiles for sm_90." if ok else \
        "A launched kernel does not compile for, or does not fit, a real GPU (the interpreter " \
        "accepted it):"
    # One line per distinct result: a kernel launched with several specialisations often
    # compiles to the same figures.
    return Check(name, ok, "\n".join([head, *dict.fromkeys(lines)]),
                 details={"kernels": [k.get("kernel") for k in kernels]})


def _static_result(source: bytes, entry: str) -> GradeResult | None:
    """The result of a source the static checks refuse (it is not run), else None."""
    from graders.kernel_static import check as static_check

    problems = static_check(source.decode("utf-8"), entry)
    if not problems:
        return None
    message = "\n".join(f"line {p.line}: {p.message}" if p.line else p.message
                        for p in problems[:12])
    check = Check("static checks", False, message,
                  details={"rules": sorted({p.rule for p in problems})})
    return GradeResult(score=0.0, verdict="incorrect",
                       feedback="The submission was not run: " + problems[0].message,
                       checks=(check,), extra={"static": [p.rule for p in problems]})


def _busy() -> Exception:
    from runners.base import MachineBusy

    return MachineBusy("the machine was too busy to run or compile the kernel in its time "
                       f"limits ({BUSY_RETRIES + 1} tries); the attempt is not counted")


def grade(part: PartSpec, answer_text: str, ctx: GradeContext) -> GradeResult:
    """Static checks, then the sandboxed run; a score from the checks that passed."""
    source = _source_bytes(answer_text)
    kernel_dir = Path(ctx.exercise_path) / "kernel"
    refused = _static_result(source, task_entry(kernel_dir / "task.py"))
    if refused is not None:
        return refused
    from runners import get_backend

    device = kernel_device()
    for _ in range(BUSY_RETRIES + 1):
        key = secrets.token_bytes(16)
        spec = sandbox_spec(part, source, kernel_dir, ctx.params, ctx.seed, device, key)
        result = get_backend().run(spec)  # SandboxUnavailable propagates: never unsandboxed
        report = read_result(result.stdout, key)
        if not (report and report.get("busy")):
            break
    else:
        raise _busy()
    extra: dict[str, Any] = {"sandbox": {"verdict": result.verdict,
                                         "wall_s": round(result.wall_s, 3),
                                         "backend": result.backend}, "device": device}
    if report is None:
        return _stopped(part, result, extra)
    return _graded(part, report, result.stderr, extra, device)


def grade_batch(part: PartSpec, sources: list[str], ctx: GradeContext) -> list[GradeResult]:
    """`grade` of each of `sources`, in order, with one sandbox run for all that pass the static
    checks. For TRUSTED sources only (the selftest's reference, starter, mutants, equivalents),
    never a student's: they share a sandbox, one after another. Raises InvalidAnswer if a
    source is not one grade() would read; a batch stopped without a result is graded one
    source at a time; a source that found the machine busy is run again once (with the others
    that did), then MachineBusy."""
    data = [_source_bytes(text) for text in sources]
    kernel_dir = Path(ctx.exercise_path) / "kernel"
    entry = task_entry(kernel_dir / "task.py")
    results: list[GradeResult | None] = [_static_result(d, entry) for d in data]
    pending = [i for i, r in enumerate(results) if r is None]
    from runners import get_backend

    device = kernel_device()
    for _ in range(BUSY_RETRIES + 1):
        if not pending:
            break
        key = secrets.token_bytes(16)
        spec = sandbox_spec(part, [data[i] for i in pending], kernel_dir, ctx.params, ctx.seed,
                            device, key)
        result = get_backend().run(spec)  # SandboxUnavailable propagates: never unsandboxed
        report = read_result(result.stdout, key)
        if report is not None and "internal" in report:
            raise RuntimeError(f"the kernel harness failed: {report['internal']}")
        reports = report.get("batch") if report else None
        if not isinstance(reports, list) or len(reports) != len(pending):
            # A limit stopped the whole batch: whichever source did it, each alone is graded
            # (and stopped) exactly as a student's would be.
            for i in pending:
                results[i] = grade(part, sources[i], ctx)
            return [r for r in results if r is not None]
        busy = []
        for i, one in zip(pending, reports, strict=True):
            if one.get("busy"):
                busy.append(i)
                continue
            extra: dict[str, Any] = {"sandbox": {"verdict": result.verdict,
                                                 "wall_s": one.get("wall_s"),
                                                 "backend": result.backend,
                                                 "batch": len(pending)}, "device": device}
            stderr = str(one.get("stderr") or "").encode("latin-1")
            results[i] = _graded(part, one, stderr, extra, device)
        pending = busy
    if pending:
        raise _busy()
    return [r for r in results if r is not None]


def _graded(part: PartSpec, report: dict[str, Any], stderr: bytes, extra: dict[str, Any],
            device: str) -> GradeResult:
    """One submission's sealed report (a run of its own or a batch's) as its GradeResult."""
    if "internal" in report:
        raise RuntimeError(f"the kernel harness failed: {report['internal']}")
    imported = report.get("import") or {}
    if imported.get("kind") != "ready":
        return _import_failed(imported, stderr, extra)

    checks: list[Check] = []
    labels: dict[str, list[dict[str, Any]]] = {}
    for case in report["cases"]:
        labels.setdefault(case["label"], []).append(case)
    for label, cases in labels.items():
        failed = [c for c in cases if c.get("status") != "ok"]
        message = (f"{len(cases)} case{'s' if len(cases) != 1 else ''} match the float64 "
                   "reference." if not failed else _case_message(failed[0], part))
        checks.append(Check(label, not failed, message,
                            details={"cases": [c["id"] for c in cases],
                                     "failed": [c["id"] for c in failed]}))
    checks.append(_compile_check(report.get("compile")))
    extra["cases"] = [{k: c.get(k) for k in ("id", "label", "status", "seconds")}
                      for c in report["cases"]]
    extra["compile"] = report.get("compile")
    passed = sum(1 for c in checks if c.passed)
    score = round(passed / len(checks), 6)
    where = ("in Triton's interpreter on the CPU (a preview; timing awaits a GPU worker)"
             if device == "cpu" else f"on {report.get('device')}")
    if passed == len(checks) and device == "cpu":
        # Every check passed, but only in the interpreter: the preview's score, not a grade.
        verdict, score = "provisional", 1.0
        feedback = (f"All {len(checks)} checks passed {where}. This is provisional, not final: "
                    "the part is not solved until a GPU worker grades it (larger shapes, "
                    "BF16 paths, real memory faults and timing), which re-grades it by "
                    "itself once GPU workers are running.")
    elif passed == len(checks):
        verdict, score = "correct", 1.0
        feedback = f"All {len(checks)} checks passed {where}."
    else:
        first = next(c for c in checks if not c.passed)
        verdict = "partial" if score > 0 else "incorrect"
        feedback = (f"{passed} of {len(checks)} checks passed {where}; first failure: "
                    f"{first.name}: {first.message.splitlines()[0]}")
    extra["final"] = verdict != "provisional"
    timing = report.get("timing")
    if timing:
        extra["timing"] = timing
        summary, held = timing_summary(timing)
        feedback += " " + summary
        if held:
            # Held for an instructor's review instead of scored (the text parts' path).
            return GradeResult(score=0.0, verdict="pending", feedback=feedback,
                               checks=tuple(checks), extra=extra)
    return GradeResult(score=score, verdict=verdict, feedback=feedback, checks=tuple(checks),
                       extra=extra)


def timing_summary(timing: dict[str, Any]) -> tuple[str, bool]:
    """(what the student reads about speed, whether the result is held for review)."""
    cases = timing.get("cases") or []
    status = timing.get("status")
    if status == "failed":
        failed = next((c for c in cases if c.get("status") == "failed"), {})
        return f"Timing did not finish ({failed.get('message', 'no report')}); the grade " \
               "stands on correctness.", False
    if status == "held":
        reasons = sorted({r for c in cases for r in c.get("reasons", [])})
        return ("The timing is held for an instructor's review: " + "; ".join(reasons) + "."), True
    parts = []
    for c in cases:
        ratio = c.get("ratio")
        speed = f"{ratio:.2f}x the reference" if ratio else "no ratio"
        parts.append(f"{c.get('describe') or c['id']}: {c['sub_ms']:.4g} ms ({speed}, "
                      f"{c['roofline_fraction']:.0%} of the roofline floor)")
    geomean = timing.get("geomean_ratio")
    head = f"Speed: {geomean:.2f}x the reference (geometric mean)" if geomean else "Speed"
    return head + "; " + "; ".join(parts) + ".", False


def _import_failed(imported: dict[str, Any], stderr: bytes, extra: dict[str, Any]
                   ) -> GradeResult:
    kind = imported.get("kind")
    if kind == "import_timeout":
        first = "Loading submission.py took too long (its module-level code never finished)."
    elif kind == "import_crash":
        first = f"The process {imported.get('how', 'died')} while loading submission.py."
    else:
        first = "submission.py failed to load."
    message = first
    trace = student_traceback(imported.get("report"))
    if trace:
        message += "\n\n" + trace
    tail, _ = output_tail(stderr)
    if tail:
        message += f"\n\nYour output:\n{tail}"
    return GradeResult(score=0.0, verdict="incorrect", feedback=first,
                       checks=(Check("loads", False, message),), extra=extra)


def _stopped(part: PartSpec, result: Any, extra: dict[str, Any]) -> GradeResult:
    """No sealed result: a sandbox limit stopped the whole run (or it was tampered with)."""
    head = {
        "TLE": f"Time limit ({part.time_limit_s:g} s for the cases, plus start-up and "
               "compilation) exceeded",
        "MLE": f"Memory limit ({part.memory_mb} MiB) exceeded",
        "OLE": f"Output limit ({part.output_limit_kb} KiB of prints) exceeded",
    }.get(result.verdict, "The run stopped without a result")
    message = head + "."
    tail, _ = output_tail(result.stderr)
    if tail:
        message += f"\n\nOutput before it stopped:\n{tail}"
    return GradeResult(score=0.0, verdict="incorrect", feedback=head + ".",
                       checks=(Check("runs to the end", False, message),), extra=extra)
