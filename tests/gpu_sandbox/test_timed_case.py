"""The GPU timing path without a GPU: time_all (parent side) driven with a scripted child, run
in the sandbox runtime's Python (it has torch; this venv does not), and the grader's summary.

No student code runs here: the "child" is a function in the script that answers like kernel_child.py
would, so these tests pin what the parent does with the answers (medians recomputed from the
raw samples, the roofline floor, held vs scored, the re-check of timed outputs).
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from graders.kernel import timing_summary

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_TASK = Path(__file__).resolve().parent / "fixture" / "kernel" / "task.py"

SCRIPT = r"""
import json, os, shutil, sys
sys.path.insert(0, sys.argv[1])
import importlib.util
spec = importlib.util.spec_from_file_location("task", sys.argv[2])
task = importlib.util.module_from_spec(spec); spec.loader.exec_module(task)
import torch
import run
run.WORK = sys.argv[3]
os.makedirs(run.WORK, exist_ok=True)
import timed_case
scenario = json.loads(sys.argv[4])

def ask(cmd, timeout):
    args = torch.load(cmd["in"], weights_only=True)
    if scenario["correct"]:
        args["out"] = 2 * args["x"] + args["y"]
    torch.save(args, cmd["out"])
    return {"kind": "timed", "report": {
        "ref_samples": scenario["ref"], "sub_samples": scenario["sub"],
        "ref_wall_samples": [], "sub_wall_samples": [], "stop_reason": "stable",
        "bandwidth_gbs": 3000.0, "peak_tflops": 900.0, "peak_dtype": "torch.bfloat16"}}

result = timed_case.time_all(torch, task, {"params": {"sizes": [4096]}, "seed": 3}, ask)
print(json.dumps(result))
"""


def _runtime_python() -> str:
    from runners import runtime_venv_host_path

    python = Path(runtime_venv_host_path()) / "bin" / "python"
    if not python.exists():
        pytest.skip("the sandbox runtime venv is not installed")
    return str(python)


def time_all(tmp_path: Path, **scenario: object) -> dict:
    out = subprocess.run(
        [_runtime_python(), "-c", SCRIPT, str(ROOT / "gpu_sandbox"), str(FIXTURE_TASK),
         str(tmp_path / "work"), json.dumps(scenario)],
        capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_plausible_result_is_scored_with_medians_from_the_raw_samples(tmp_path: Path) -> None:
    # 4096 floats: 48 KiB moved -> a 16.4 ns floor at 3,000 GB/s; the kernels take microseconds.
    r = time_all(tmp_path, correct=True, ref=[0.010, 0.011, 0.012, 0.010, 0.011],
                 sub=[0.020, 0.022, 0.021, 0.020, 0.500])
    case = r["cases"][0]
    assert r["status"] == "scored" and case["status"] == "scored"
    assert case["sub_ms"] == pytest.approx(0.021)  # the median: the 0.5 ms outlier is ignored
    assert case["ratio"] == pytest.approx(0.011 / 0.021)
    assert case["floor_ms"] == pytest.approx(12 * 4096 / 3000e9 * 1e3)
    assert r["geomean_ratio"] == pytest.approx(case["ratio"])


def test_faster_than_the_reference_by_more_than_ten_times_is_held(tmp_path: Path) -> None:
    r = time_all(tmp_path, correct=True, ref=[1.0] * 5, sub=[0.05] * 5)
    assert r["status"] == "held" and r["cases"][0]["reasons"]
    summary, held = timing_summary(r)
    assert held and "review" in summary


def test_outputs_wrong_only_while_timed_are_held(tmp_path: Path) -> None:
    r = time_all(tmp_path, correct=False, ref=[0.010] * 5, sub=[0.011] * 5)
    assert r["status"] == "held"
    assert any("timed runs" in reason for reason in r["cases"][0]["reasons"])


def test_the_summary_reports_ratio_and_roofline_fraction() -> None:
    timing = {"status": "scored", "geomean_ratio": 0.8, "cases": [
        {"id": "b1", "describe": "n = 4096", "sub_ms": 0.0125, "ratio": 0.8,
         "roofline_fraction": 0.42, "status": "scored"}]}
    summary, held = timing_summary(timing)
    assert not held
    assert "0.80x the reference" in summary and "42% of the roofline floor" in summary


def test_a_failed_timing_keeps_the_correctness_grade() -> None:
    summary, held = timing_summary({"status": "failed", "cases": [
        {"id": "b1", "status": "failed", "message": "timing failed: the process was ended"}]})
    assert not held and "did not finish" in summary
