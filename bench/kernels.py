"""Kernel timing on a GPU: each exercise's reference kernel timed against itself, and its
roofline fraction at the benchmark shapes.

For every exercise folder with `kernel/task.py`, for each case of `task.cases(params, "bench")`:
two independent input sets from `task.make()` (same seed, separate buffers), the reference's entry
point timed on one against the other with `gpu_sandbox.timing.interleaved` (L2 flushed before
every call, CUDA events with a device-wide sync). The two medians are the same kernel measured
twice, so their ratio shows the noise of the method: it should be within 2 %. Then the roofline
floor from `task.roofline(case)` with this GPU's measured copy bandwidth and matmul peak, the
reference's fraction of it, and `judge()`'s verdict (a "held" reference means task.roofline()
claims more bytes/FLOPs than the kernel really needs, or the measured peak is off).

The compute peak is the fp8 matmul peak when any input of the case is fp8, else the bf16 one
(also for fp16/fp32 inputs: Triton's tl.dot runs fp32 as tf32, below bf16's peak), unless
`roofline(case)["peak_dtype"]` names a dtype. The higher peak makes the floor err low, the
lenient side for the plausibility gate.

Needs CUDA; without it prints "no CUDA device: kernel timing needs a GPU" and exits 0. Bounded:
at most --max-repeats rounds and about --budget-ms of device time per case.

    python bench/kernels.py [--only slug,slug] [--max-repeats 50] [--budget-ms 2000]

With --cpu it times what a CPU worker does instead: each kernel exercise's reference graded in
the sandbox (interpreter preview + sm_90 compile) against a bare `import torch, triton` there,
as ratios (bench/kernel_grades.py).

    python bench/kernels.py --cpu [--rounds 5] [--only slug,slug]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_sandbox import timing  # noqa: E402

NO_GPU = "no CUDA device: kernel timing needs a GPU"
SEED = 0


def kernel_exercises(root: Path = ROOT / "exercises") -> list[Path]:
    """Exercise folders that have a kernel part (a kernel/task.py), sorted by name."""
    return sorted(p.parent.parent for p in root.glob("*/kernel/task.py")
                  if not p.parent.parent.name.startswith("_"))


def import_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def canonical_params(folder: Path) -> tuple[dict[str, Any], str]:
    """The exercise's CANONICAL params, or {} with a note when exercise.py can't be imported
    here (a GPU box with only torch and triton lacks the site's other packages)."""
    try:
        module = importlib.import_module(f"exercises.{folder.name}.exercise")
        return dict(module.CANONICAL), ""
    except Exception as exc:  # any import failure: fall back, and say so
        return {}, f"(exercise.py not importable here: {exc!r}; cases({{}}, 'bench'))"


def peak_dtype(torch: Any, args: dict[str, Any], roof: dict[str, Any]) -> Any:
    named = roof.get("peak_dtype")
    if named:
        return getattr(torch, str(named).removeprefix("torch."))
    for value in args.values():
        if isinstance(value, torch.Tensor) and "float8" in str(value.dtype):
            return value.dtype
    return torch.bfloat16


def gpu_report(torch: Any) -> None:
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}", end="")
    try:
        import triton

        print(f"  triton {triton.__version__}")
    except ImportError:
        print("  (no triton)")
    nvsmi = shutil.which("nvidia-smi")
    if not nvsmi:
        print("nvidia-smi not found: clocks not shown")
        return
    # Separate queries: a field this driver doesn't know fails its whole query.
    for fields in ("clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,temperature.gpu,power.draw",
                   "clocks_event_reasons.active"):
        try:
            out = subprocess.run([nvsmi, f"--query-gpu={fields}", "--format=csv"],
                                 capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"nvidia-smi failed: {exc}")
            continue
        text = (out.stdout if out.returncode == 0 else out.stderr).strip()
        print("nvidia-smi: " + " | ".join(text.splitlines()))


def fmt_ms(ms: float) -> str:
    return f"{ms * 1e3:9.2f} us" if ms < 1.0 else f"{ms:9.3f} ms"


def bench_exercise(torch: Any, folder: Path, flush: timing.L2Flush, bandwidth: float,
                   peaks: dict[Any, float | str], args: argparse.Namespace) -> int:
    """Times every bench case of one exercise; returns how many cases broke the 2 % rule."""
    slug = folder.name
    task = import_path(f"roofline_bench_{slug}_task", folder / "kernel" / "task.py")
    ref = import_path(f"roofline_bench_{slug}_reference", folder / "kernel" / "reference.py")
    entry = getattr(ref, task.ENTRY)
    params, note = canonical_params(folder)
    print(f"\n{slug} {note}".rstrip())
    off = 0
    for case in task.cases(params, "bench"):
        describe = getattr(task, "describe", None)
        what = describe(case) if describe else ""
        print(f"  {case['id']} [{case.get('label', '')}] {what}")
        a = task.make(case, SEED, torch, "cuda")
        b = task.make(case, SEED, torch, "cuda")
        run_a = functools.partial(entry, *[a[name] for name in task.ARGS])
        run_b = functools.partial(entry, *[b[name] for name in task.ARGS])
        clock = timing.CudaClock(torch)
        t = timing.interleaved(run_a, run_b, clock=clock,
                               flush=flush, max_repeats=args.max_repeats,
                               budget_ms=args.budget_ms)
        torch.cuda.synchronize()
        same = all(torch.equal(a[name], b[name]) for name in task.OUTPUTS)
        ratio = t.ratio
        ok = abs(ratio - 1.0) <= 0.02
        off += not ok
        print(f"    A {fmt_ms(t.ref_ms)} (spread {t.ref_spread:.1%})   B {fmt_ms(t.sub_ms)} "
              f"(spread {t.sub_spread:.1%})   A/B {ratio:.4f} {'ok' if ok else 'OFF BY > 2 %'}"
              f"   {t.rounds} rounds, {t.stop_reason}; outputs A == B: {same}"
              + (f"; {len(clock.flags)} windows with host >> device" if clock.flags else ""))
        roof = task.roofline(case)
        dtype = peak_dtype(torch, a, roof)
        if dtype not in peaks:
            try:
                peaks[dtype] = timing.measure_peak_tflops(torch, "cuda", dtype)
            except RuntimeError as exc:
                peaks[dtype] = str(exc)
        peak = peaks[dtype]
        if isinstance(peak, str):
            print(f"    roofline: no {dtype} peak ({peak}); memory term only")
            floor = timing.roofline_floor_ms(int(roof["bytes"]), 0, bandwidth, 1.0)
            term, peak_note = "memory", "no compute term"
        else:
            peak_note = f"{dtype} peak"
            floor = timing.roofline_floor_ms(int(roof["bytes"]), int(roof["flops"]), bandwidth,
                                             peak)
            term = timing.binding_term(int(roof["bytes"]), int(roof["flops"]), bandwidth, peak)
        verdict = timing.judge(t, floor)
        print(f"    {roof['bytes'] / 1e6:.1f} MB, {roof['flops'] / 1e9:.2f} GFLOP -> floor "
              f"{fmt_ms(floor).strip()} ({term}-bound, {peak_note}); reference at "
              f"{verdict.roofline_fraction:.1%} of the floor; judge: {verdict.status}")
        for reason in verdict.reasons:
            print(f"      {reason}")
        del a, b, run_a, run_b
        torch.cuda.empty_cache()
    return off


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated exercise slugs")
    parser.add_argument("--max-repeats", type=int, default=50,
                        help="timed rounds per case at most (default 50)")
    parser.add_argument("--budget-ms", type=float, default=2000.0,
                        help="device time per case before stopping (default 2000)")
    parser.add_argument("--cpu", action="store_true",
                        help="time kernel grades on the CPU against a bare torch import")
    parser.add_argument("--rounds", type=int, default=5, help="--cpu: grades per exercise")
    args = parser.parse_args()
    if args.cpu:
        from kernel_grades import main as cpu_main

        sys.exit(cpu_main(args.rounds, {s.strip() for s in args.only.split(",") if s.strip()}))

    # Real kernels, not the interpreter: Triton reads this when a kernel is decorated, i.e.
    # when reference.py is imported below.
    os.environ.pop("TRITON_INTERPRET", None)
    try:
        import torch
    except ImportError:
        print(NO_GPU + " (torch is not installed)")
        return
    if not torch.cuda.is_available():
        print(NO_GPU)
        return

    gpu_report(torch)
    folders = kernel_exercises()
    if args.only:
        wanted = {s.strip() for s in args.only.split(",") if s.strip()}
        folders = [f for f in folders if f.name in wanted]
    flush = timing.L2Flush("cuda", torch=torch)
    bandwidth = timing.measure_bandwidth_gbs(torch, "cuda")
    peaks: dict[Any, float | str] = {}
    try:
        peaks[torch.bfloat16] = timing.measure_peak_tflops(torch, "cuda", torch.bfloat16)
    except RuntimeError as exc:
        peaks[torch.bfloat16] = str(exc)
    shown = {str(k): (f"{v:.0f} TFLOP/s" if isinstance(v, float) else v)
             for k, v in peaks.items()}
    print(f"measured: copy bandwidth {bandwidth:.0f} GB/s, matmul peak {shown}")
    if not folders:
        print("no exercise has a kernel/task.py")
        return
    off = 0
    for folder in folders:
        try:
            off += bench_exercise(torch, folder, flush, bandwidth, peaks, args)
        except Exception:  # one broken exercise should not hide the others' numbers
            print(f"\n{folder.name}: FAILED")
            traceback.print_exc(file=sys.stdout)
    for dtype, value in peaks.items():
        if dtype is not torch.bfloat16:
            print(f"matmul peak {dtype}: "
                  + (f"{value:.0f} TFLOP/s" if isinstance(value, float) else value))
    print(f"\ncases whose two medians differ by more than 2 %: {off}")
    gpu_report(torch)  # clocks again: did they drop while we ran?


if __name__ == "__main__":
    main()
