"""Timing on a GPU worker: the task's "bench" cases, the reference kernel against the student's.

`time_case` runs in the child (kernel_child.py, "time" command): the reference kernel
(reference_kernel.py, the exercise's kernel/reference.py) and the submission alternate under
timing.interleaved with CUDA events, a device-wide synchronize before each end event and an L2
flush before every call. Each side has its own copy of the tensors, and the submission's outputs
from its last timed call go back to the parent, which checks them again: a kernel that is only
right when it is not being timed fails there.

`time_all` runs in the parent (run.py): it makes the inputs, asks the child, recomputes the
medians from the raw samples, prices the shape's roofline floor from the bandwidth and peak the
child measured on this GPU, and lets timing.judge hold implausible results (faster than the floor,
or more than 10x the reference) for review instead of scoring them.
"""
from __future__ import annotations

import importlib.util
import math
import os
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
TIME_LIMIT_S = 60.0  # per bench case, in the child (bounded repeats make it seconds)
_machine: dict[str, float] = {}
_reference: list[Any] = []


def _reference_module() -> Any:
    if not _reference:
        spec = importlib.util.spec_from_file_location(
            "reference_kernel", os.path.join(HERE, "reference_kernel.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _reference.append(module)
    return _reference[0]


def _peak_dtype(torch: Any, args: dict[str, Any], named: str | None) -> Any:
    if named:
        return getattr(torch, named)
    if any(isinstance(v, torch.Tensor) and "float8" in str(v.dtype) for v in args.values()):
        return torch.float8_e4m3fn
    return torch.bfloat16


def time_case(torch: Any, module: Any, cmd: dict[str, Any], clock: Any, flush: Any
              ) -> dict[str, Any]:
    """Child side. `clock` and `flush` were made before the submission was imported."""
    from timing import interleaved, measure_bandwidth_gbs, measure_peak_tflops

    loaded = torch.load(cmd["in"], weights_only=True)
    mine = {k: v.to("cuda") if isinstance(v, torch.Tensor) else v for k, v in loaded.items()}
    theirs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in mine.items()}
    names = cmd["args"]
    ref_fn = getattr(_reference_module(), cmd["entry"])
    sub_fn = getattr(module, cmd["entry"])
    t = interleaved(lambda: ref_fn(*[theirs[n] for n in names]),
                    lambda: sub_fn(*[mine[n] for n in names]),
                    clock=clock, flush=flush, warmup=3, min_repeats=10, max_repeats=100,
                    budget_ms=2000.0)
    torch.save({k: v.detach().to("cpu") if isinstance(v, torch.Tensor) else v
                for k, v in mine.items()}, cmd["out"])
    dtype = _peak_dtype(torch, mine, cmd.get("peak_dtype"))
    if "bandwidth_gbs" not in _machine:
        _machine["bandwidth_gbs"] = measure_bandwidth_gbs(torch, "cuda")
    key = f"peak_tflops:{dtype}"
    if key not in _machine:
        _machine[key] = measure_peak_tflops(torch, "cuda", dtype)
    return {"ref_samples": list(t.ref_samples), "sub_samples": list(t.sub_samples),
            "ref_wall_samples": list(t.ref_wall_samples),
            "sub_wall_samples": list(t.sub_wall_samples), "stop_reason": t.stop_reason,
            "bandwidth_gbs": _machine["bandwidth_gbs"], "peak_tflops": _machine[key],
            "peak_dtype": str(dtype), "clock_flags": list(getattr(clock, "flags", []))[:5]}


def _samples(report: dict[str, Any], name: str) -> tuple[float, ...]:
    values = report.get(name)
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) for v in values):
        raise ValueError(f"malformed timing report ({name})")
    return tuple(float(v) for v in values)


def time_all(torch: Any, task: Any, config: dict[str, Any], ask: Any) -> dict[str, Any]:
    """Parent side: every bench case, judged. Never raises for the child's failures."""
    from compare import compare_case, poison
    from run import WORK, case_seed
    from timing import Sample, Timings, judge, roofline_floor_ms

    cases = list(task.cases(config["params"], "bench"))
    results: list[dict[str, Any]] = []
    for index, case in enumerate(cases):
        entry: dict[str, Any] = {"id": case["id"]}
        results.append(entry)
        seed = case_seed(int(config["seed"]), f"bench:{case['id']}")
        args = task.make(case, seed, torch, "cpu")
        for name in task.OUTPUTS:
            poison(torch, args[name])  # NaN with our payload (compare.py)
        roof = task.roofline(case)
        in_path = os.path.join(WORK, f"bench-in-{index}.pt")
        out_path = os.path.join(WORK, f"bench-out-{index}.pt")
        torch.save({n: args[n] for n in task.ARGS}, in_path)
        try:
            reply = ask({"op": "time", "in": in_path, "out": out_path, "entry": task.ENTRY,
                         "args": list(task.ARGS), "peak_dtype": roof.get("peak_dtype")},
                        TIME_LIMIT_S)
            if reply.get("kind") != "timed":
                raise ValueError(str(reply.get("report"))[:500])
            report = reply["report"]
            ref = Sample(list(_samples(report, "ref_samples")))
            sub = Sample(list(_samples(report, "sub_samples")))
            recheck = compare_case(torch, task, case, args,
                                   torch.load(out_path, weights_only=True))
        except Exception as exc:  # the child died, timed out or sent nonsense
            entry.update(status="failed", message=f"timing failed: {exc}"[:500])
            break
        t = Timings(ref_ms=ref.median, sub_ms=sub.median, ref_spread=ref.spread,
                    sub_spread=sub.spread, ref_samples=ref.ms, sub_samples=sub.ms,
                    stop_reason=str(report.get("stop_reason", "")),
                    ref_wall_samples=_samples(report, "ref_wall_samples"),
                    sub_wall_samples=_samples(report, "sub_wall_samples"))
        floor = roofline_floor_ms(int(roof["bytes"]), int(roof["flops"]),
                                  float(report["bandwidth_gbs"]), float(report["peak_tflops"]))
        verdict = judge(t, floor)
        reasons = list(verdict.reasons)
        if recheck.get("status") != "ok":
            reasons.append("the outputs of the timed runs are wrong (right only when untimed)")
        entry.update(
            status="held" if reasons else "scored", reasons=reasons,
            ref_ms=t.ref_ms, sub_ms=t.sub_ms, ref_spread=t.ref_spread, sub_spread=t.sub_spread,
            ratio=t.ratio if math.isfinite(t.ratio) else None, floor_ms=floor,
            roofline_fraction=verdict.roofline_fraction, rounds=t.rounds,
            bandwidth_gbs=report["bandwidth_gbs"], peak_tflops=report["peak_tflops"],
            bytes=int(roof["bytes"]), flops=int(roof["flops"]),
            describe=str(task.describe(case))[:200] if hasattr(task, "describe") else "")
    scored = [r for r in results if r.get("status") == "scored"]
    status = "scored" if results and len(scored) == len(results) else (
        "failed" if any(r.get("status") == "failed" for r in results) else "held")
    ratios = [r["ratio"] for r in scored if r.get("ratio")]
    geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None
    return {"status": status, "cases": results, "geomean_ratio": geomean}
