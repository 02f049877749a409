"""The sm_90 compile of what a kernel run's cases launched (aot.py records the launches).

Runs in the compile child (kernel_child.py, "compile" mode), forked from the zygote without
TRITON_INTERPRET: it imports the submission again, so its @triton.jit functions are real
JITFunctions, and compiles each recorded launch with `triton.compile(..., GPUTarget("cuda", 90,
32))` as Triton's launcher would (aot.py says how a launch is specialised), in as many processes
as the sandbox has CPUs: each specialisation is its own MLIR, LLVM and ptxas pipeline. A kernel
whose fingerprint differs from the one the cases ran, or that exceeds sm_90's per-block limits
(aot.SM90_LIMITS), fails the step. Standard library + triton only; nothing of ours outside
gpu_sandbox.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import tempfile
import time
from typing import Any

from aot import TARGET, Launch, kernel_fingerprint, over_limits, unwrap_jit
from cpuclock import MAX_CPUS

TOOL_TIMEOUT_S = 10.0


def sandbox_cache_key() -> None:
    """Triton names its on-disk cache entries by a key that starts with a hash of its own files
    (triton.runtime.cache.triton_key(): 460 MB of libtriton read and hashed, a quarter of a
    second per process that compiles). The cache here is the sandbox's own /tmp, which starts
    empty and is gone with the run, and one Triton writes it: the version tells its entries
    apart as well, and the rest of the key (the kernel's source, specialisation, options and
    target) is Triton's as before."""
    import triton
    from triton.runtime import cache

    key = f"{triton.__version__}-roofline-sandbox"
    cache.triton_key = lambda: key


def registers(cubin: bytes) -> int | None:
    """Registers per thread of the compiled kernel, from the cubin by the cuobjdump bundled
    with Triton (a real launch reads them from the driver, which needs a GPU)."""
    from triton import knobs

    try:
        tool = knobs.nvidia.cuobjdump.path
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(cubin)
        try:
            out = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True,
                                 timeout=TOOL_TIMEOUT_S, check=False).stdout.decode("utf-8",
                                                                                   "replace")
        finally:
            os.unlink(f.name)
    except Exception:
        return None
    found = re.findall(r"\bREG:(\d+)", out)
    return max(int(n) for n in found) if found else None


def compile_launches(source_path: str, launches: list[Launch]) -> dict[str, Any]:
    """Compile each recorded launch for sm_90, in as many processes as the sandbox has CPUs
    (compile_all). Returns a JSON-able report: {"ok", "kernels": [{"kernel", "signature",
    "seconds", "shared", "registers", "threads", "num_warps", "num_stages", "wgmma", "mma",
    "error"}]}, the kernels in the order they were launched."""
    spec = importlib.util.spec_from_file_location("submission_compiled", source_path)
    if spec is None or spec.loader is None:
        return {"ok": False, "kernels": [], "error": "the submission could not be loaded again"}
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        return {"ok": False, "kernels": [],
                "error": f"loading the submission for compilation failed: {exc!r}"[:1000]}
    jitted = {}
    for value in vars(module).values():
        fn = unwrap_jit(value)
        if fn is not None:
            jitted[fn.fn.__name__] = fn
    # As many processes as the sandbox has whole CPUs (cpuclock reads its quota).
    reports = compile_all(jitted, launches, int(MAX_CPUS))
    return {"ok": bool(reports) and all("error" not in r for r in reports), "kernels": reports}


def compile_all(jitted: dict[str, Any], launches: list[Launch], workers: int
                ) -> list[dict[str, Any]]:
    """compile_one() of each launch, in order. With more than one CPU the launches are dealt
    round-robin to that many forked processes (each specialisation is a separate MLIR/LLVM/
    ptxas pipeline, so they compile independently); one that dies without its share of the
    report leaves those launches failed, in words."""
    workers = min(workers, len(launches))
    if workers <= 1:
        return [compile_one(jitted, launch) for launch in launches]
    readers: list[tuple[int, int]] = []
    for w in range(workers):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            for other, _ in readers:
                os.close(other)
            os.close(read_fd)
            code = 1
            try:
                share = [compile_one(jitted, launch) for launch in launches[w::workers]]
                with os.fdopen(write_fd, "w", encoding="utf-8") as out:
                    json.dump(share, out, default=str)
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        readers.append((read_fd, pid))
    reports: list[dict[str, Any] | None] = [None] * len(launches)
    for w, (read_fd, pid) in enumerate(readers):
        with os.fdopen(read_fd, "rb") as f:
            data = f.read()
        _, status = os.waitpid(pid, 0)
        try:
            share = json.loads(data)
        except ValueError:
            share = None
        mine = range(w, len(launches), workers)
        if not isinstance(share, list) or len(share) != len(mine):
            how = os.waitstatus_to_exitcode(status)
            share = [{"kernel": launches[i].kernel, "signature": launches[i].signature,
                      "error": f"the compiler process ended without a report (exit code "
                               f"{how})"} for i in mine]
        for i, entry in zip(mine, share, strict=True):
            reports[i] = entry
    return [r for r in reports if r is not None]


def compile_one(jitted: dict[str, Any], launch: Launch) -> dict[str, Any]:
    """One launch compiled for sm_90 as its report entry (an "error" if it failed or does not
    fit sm_90's limits)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = jitted.get(launch.kernel)
    entry: dict[str, Any] = {"kernel": launch.kernel, "signature": launch.signature}
    if fn is None:
        entry["error"] = ("launched a function that is not a module-level @triton.jit kernel")
        return entry
    if kernel_fingerprint(fn) != launch.fingerprint:
        entry["error"] = (
            "the kernel loaded for the sm_90 compile is not the one the cases launched: its "
            "code, a @triton.jit function it calls, or the value of a constexpr global it "
            "reads differs when submission.py is imported again. Define kernels and their "
            "constexpr globals the same way on every import.")
        return entry
    start = time.perf_counter()
    try:
        compiled = triton.compile(
            ASTSource(fn=fn, signature=launch.signature, constexprs=launch.constexprs,
                      attrs=launch.attrs), target=GPUTarget(*TARGET), options=launch.options)
        ptx = compiled.asm.get("ptx", "")
        meta = compiled.metadata
        entry.update(shared=int(meta.shared), num_warps=int(meta.num_warps),
                     num_stages=int(meta.num_stages), threads=int(meta.num_warps) * TARGET[2],
                     registers=registers(compiled.asm.get("cubin", b"")),
                     wgmma=ptx.count("wgmma.mma_async"), mma=ptx.count("mma.sync"))
        over = over_limits(entry)
        if over:
            entry["error"] = ("does not fit an sm_90 thread block: it " + "; it ".join(over)
                              + " (a real launch fails with OutOfResources).")
    except Exception as exc:
        entry["error"] = _first_lines(f"{type(exc).__name__}: {exc}")
    entry["seconds"] = round(time.perf_counter() - start, 3)
    return entry


def finish_report(report: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """The compile report with what recording saw (LaunchLog.close()): a refused launch fails
    the step, even if the student's wrapper caught the exception."""
    problems = [str(p) for p in summary.get("problems") or []][:5]
    report["launches"] = summary.get("launches")
    report["record_problems"] = problems
    if problems:
        report["ok"] = False
        report["error"] = ("A kernel launch was refused, so not every launched kernel could "
                           "be compiled for sm_90: " + problems[0])
    return report


def _first_lines(text: str, lines: int = 12, chars: int = 1500) -> str:
    return "\n".join(text.splitlines()[:lines])[:chars]
