"""graders/kernel.py without the sandbox: the static gate, the sealed result line, ENTRY."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from exercises.spec import PartSpec
from graders import kernel
from graders.base import GradeContext, InvalidAnswer

FIXTURE = Path(__file__).resolve().parent / "fixture"
PART = PartSpec(id="k", type="kernel", prompt="", time_limit_s=30, memory_mb=3072)
CTX = GradeContext(reference="kernel/reference.py", mistakes=(), params={},
                   exercise_path=str(FIXTURE), mode="submit", seed=1)

TORCH_WRAPPER = """
import torch
import triton
import triton.language as tl


@triton.jit
def noop(x_ptr):
    pass


def axpy(x, y, out):
    noop[(1,)](x)
    out.copy_(2 * x + y)
"""


def test_a_wrapper_that_computes_with_torch_is_refused_before_anything_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_sandbox() -> None:
        raise AssertionError("the sandbox must not be asked")

    monkeypatch.setattr("runners.get_backend", no_sandbox)
    r = kernel.grade(PART, TORCH_WRAPPER, CTX)
    assert r.score == 0.0 and [c.name for c in r.checks] == ["static checks"]
    assert "copy_" in r.checks[0].message
    assert r.feedback.startswith("The submission was not run")


def test_empty_and_oversized_submissions_are_invalid() -> None:
    with pytest.raises(InvalidAnswer):
        kernel.grade(PART, "   \n", CTX)
    with pytest.raises(InvalidAnswer):
        kernel.grade(PART, "#" * 200_000, CTX)


def test_entry_is_read_from_task_py_without_importing_it(tmp_path: Path) -> None:
    assert kernel.task_entry(FIXTURE / "kernel" / "task.py") == "axpy"
    bad = tmp_path / "task.py"
    bad.write_text("import torch\nENTRY = 'not an identifier'\n")
    with pytest.raises(ValueError):
        kernel.task_entry(bad)


def test_only_a_line_sealed_with_this_runs_key_counts() -> None:
    key, other = b"k" * 16, b"o" * 16
    body = json.dumps({"cases": [], "import": {"kind": "ready"}}).encode()
    good = b"RESULT " + kernel.seal(key, body).encode() + b" " + body
    forged = b"RESULT " + kernel.seal(other, body).encode() + b" " + body
    assert kernel.read_result(b"noise\n" + forged + b"\n", key) is None
    assert kernel.read_result(forged + b"\n" + good + b"\n", key) == json.loads(body)
    assert kernel.read_result(b"RESULT onlyonefield\n", key) is None


def test_the_device_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROOFLINE_KERNEL_DEVICE", raising=False)
    assert kernel.kernel_device() == "cpu"
    monkeypatch.setenv("ROOFLINE_KERNEL_DEVICE", "gpu")
    assert kernel.kernel_device() == "gpu"


def test_gpu_runs_ship_the_timing_files_and_the_reference_kernel() -> None:
    spec = kernel.sandbox_spec(PART, b"x = 1\n", FIXTURE / "kernel", {}, 5, "gpu", b"k" * 16)
    assert {"timing.py", "timed_case.py", "reference_kernel.py", "task.py"} <= set(spec.files)
    assert spec.gpu == 0
    preview = kernel.sandbox_spec(PART, b"x = 1\n", FIXTURE / "kernel", {}, 5, "cpu", b"k" * 16)
    assert "reference_kernel.py" not in preview.files and preview.gpu is None
    config = json.loads(preview.stdin.decode().splitlines()[1])
    assert config == {"mode": "preview", "params": {}, "seed": 5, "time_limit_s": 30}
