"""The sm_90 compile in two processes (gpu_sandbox/sm90_compile.py, a kernel sandbox has two
CPUs) reports exactly what one process does: every launch, in launch order, with the same
figures. split_kv_decode's reference launches ten specialisations of two kernels."""
from __future__ import annotations

from typing import Any

import pytest

import graders
from exercises import registry
from graders import kernel, selftest

pytestmark = pytest.mark.usefixtures("sandbox")  # tests/gpu_sandbox/conftest.py


def compile_report(cpus: float, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(kernel, "KERNEL_CPUS", cpus)
    spec = registry.get("split_kv_decode")
    part = next(p for p in spec.parts if p.type == "kernel")
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    ctx = graders.context_for(spec, part, params, seed=selftest.SEED)
    reference = (spec.path / "kernel" / "reference.py").read_text(encoding="utf-8")
    result = kernel.grade(part, reference, ctx)
    assert result.verdict == "provisional", result.feedback
    return result.extra["compile"]


def test_two_compile_processes_report_what_one_does(monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = (compile_report(cpus, monkeypatch) for cpus in (1.0, 2.0))
    assert one["ok"] and two["ok"]
    assert len(one["kernels"]) >= 4  # enough that each process compiles more than one

    def figures(report: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in entry.items() if k != "seconds"}
                for entry in report["kernels"]]

    assert figures(two) == figures(one)
    assert {e["kernel"] for e in one["kernels"]} == {"_split_kernel", "_merge_kernel"}
