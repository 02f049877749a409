"""Q17 (exercises/fp8_blockscaled_gemm): the canonical numbers, sensible variants, distinct
mistakes, and the kernel task's shapes (the kernel cases themselves run in the selftest)."""
from __future__ import annotations

import math

import pytest

from exercises import registry
from exercises.catalog import gpu
from exercises.fp8_blockscaled_gemm import exercise as ex
from exercises.spec import Quantity
from tests.exercises.support import ExerciseUnderTest

EX = ExerciseUnderTest.load(ex)
VARIANTS = EX.variants()


def test_parts_and_tolerances_agree_with_the_module() -> None:
    s = ex.solve(ex.CANONICAL)
    options = {o["id"] for o in EX.parts["why_k"]["options"]}
    assert s["why_k"] in options and set(ex.OPTIONS) == options
    assert s["kernel"] == "kernel/reference.py"


def test_canonical_numbers() -> None:
    p = ex.CANONICAL
    assert (p["gpu"], p["layer"], p["m"], p["n"], p["k"]) == (
        "H100 SXM", "expert_down", 4096, 7168, 2048)
    s = ex.solve(p)
    # 2 FLOPs of promotion per 256 of MMA: 1/128, exactly.
    assert s["promotion_ratio"] == Quantity(100 / 128, "%")
    # (1/128) x 1,978.9 / 66.9 = 23.1 % (research notes, Q17).
    assert s["serial_overhead"].value == pytest.approx(23.1, abs=0.05)
    assert s["rate_ratio"] == pytest.approx(29.6, abs=0.05)
    # DeepGEMM's 1,550 TFLOPS is 78 % of the dense FP8 peak.
    assert round(s["deepgemm_pct"]) == 78
    assert (s["kb"], s["nb"]) == (16, 56)


def test_blackwell_would_pay_more() -> None:
    for name in ("B200", "B200 (GB200 NVL72)"):
        g = gpu(name)
        assert g.fp32_tflops is not None and g.fp8_dense_tflops is not None
        p = ex.with_shape({"gpu": name, "layer": "qkv_a", "m": 4096})
        s = ex.solve(p)
        assert s["serial_overhead"].value == pytest.approx(
            100 * g.fp8_dense_tflops / g.fp32_tflops / 128)
        assert s["serial_overhead"].value > 40 > s["hopper_overhead_pct"]


def test_layers_come_from_the_config() -> None:
    shapes = {key: (n, k) for key, (_, n, k) in ex.layers().items()}
    assert shapes["qkv_a"] == (2112, 7168)  # 1536 + 512 + 64
    assert shapes["q_b"] == (24576, 1536)
    assert shapes["kv_b"] == (32768, 512)
    assert shapes["o_proj"] == (7168, 16384)
    assert shapes["expert_up"] == (4096, 7168)
    assert shapes["expert_down"] == (7168, 2048)
    assert all(k % 128 == 0 for _, k in shapes.values())


def test_variants_cover_the_gpus_and_layers() -> None:
    assert {p["gpu"] for p in VARIANTS} == set(ex.GPUS)
    assert {p["layer"] for p in VARIANTS} == set(ex.layers())
    for p in VARIANTS:
        assert (p["n"], p["k"]) == ex.layers()[p["layer"]][1:]


def test_statement_quotes_the_task() -> None:
    s = ex.solve(ex.CANONICAL)
    task = ex.task()
    for case in task.cases(ex.CANONICAL, "preview"):
        assert case["label"] in s["preview_checks"]
    assert (s["tol_rtol"], s["tol_atol"]) == task.tolerance({"K": 1}, "c")
    assert s["scale_spread"] == 256


def test_task_cases_fit_the_preview_and_the_variant() -> None:
    task = ex.task()
    preview = task.cases(ex.CANONICAL, "preview")
    assert all(c["K"] % 128 == 0 for c in preview)
    # The reference's tiles: 64 or 128 rows by 128 columns; the preview stays small.
    programs = sum(math.ceil(c["M"] / (64 if c["M"] <= 64 else 128)) * math.ceil(c["N"] / 128)
                   for c in preview)
    assert programs <= 10
    labels = {c["label"] for c in preview}
    assert labels == {c["label"] for c in task.cases(ex.CANONICAL, "gpu")}
    assert any(c["M"] % 64 and c["N"] % 128 for c in preview)  # a ragged tail in both axes
    bench = task.cases(ex.CANONICAL, "bench")
    assert bench[0]["id"] == "variant" and (bench[0]["M"], bench[0]["N"], bench[0]["K"]) == (
        4096, 7168, 2048)
    assert len({(c["M"], c["N"], c["K"]) for c in bench}) == len(bench)
    r = task.roofline(bench[0])
    assert r["flops"] == 2 * 4096 * 7168 * 2048
    assert r["bytes"] == 4096 * 2048 + 7168 * 2048 + 4 * (4096 * 16 + 56 * 16) + 2 * 4096 * 7168


def test_registry_loads_the_kernel_part() -> None:
    spec = registry.load(EX.folder)
    part = spec.part("kernel")
    assert part.type == "kernel" and part.time_limit_s <= 40
