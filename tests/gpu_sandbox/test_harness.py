"""The kernel harness end to end, in the real sandbox: gpu_sandbox/run.py and kernel_child.py under
bwrap with the runtime venv's torch and Triton (interpreter), graded by graders/kernel.py.

The fixture task is out = 2·x + y. Each broken submission below is the reference with one thing
wrong, and each must fail the check that names it. The static checks are switched off here
(monkeypatched) because several of these submissions do what they forbid: this file tests what
happens when something gets past them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from exercises.spec import PartSpec
from graders import kernel
from graders.base import GradeContext, GradeResult

FIXTURE = Path(__file__).resolve().parent / "fixture"
REFERENCE = (FIXTURE / "kernel" / "reference.py").read_text(encoding="utf-8")
PART = PartSpec(id="k", type="kernel", prompt="", time_limit_s=30, memory_mb=3072,
                output_limit_kb=64)


pytestmark = pytest.mark.usefixtures("sandbox")  # tests/gpu_sandbox/conftest.py


@pytest.fixture(autouse=True)
def no_static_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    from graders import kernel_static as static

    monkeypatch.setattr(static, "check", lambda source, entry: [])


def grade(source: str, *, seed: int = 7, sizes: list[int] | None = None,
          part: PartSpec = PART) -> GradeResult:
    ctx = GradeContext(reference="kernel/reference.py", mistakes=(),
                       params={"sizes": sizes or [256, 1000]}, exercise_path=str(FIXTURE),
                       mode="submit", seed=seed)
    return kernel.grade(part, source, ctx)


def checks(result: GradeResult) -> dict[str, Any]:
    return {c.name: c for c in result.checks}


def mutate(old: str, new: str) -> str:
    assert old in REFERENCE
    return REFERENCE.replace(old, new)


def test_reference_passes_every_check_including_the_sm90_compile() -> None:
    r = grade(REFERENCE)
    assert r.score == 1.0, r.feedback
    assert set(checks(r)) == {"whole blocks", "tail", "compiles for sm_90 (H100/H200)"}
    assert "preview" in r.feedback and "GPU" in r.feedback
    assert r.extra["compile"]["kernels"][0]["signature"]["x_ptr"] == "*fp32"


def test_a_dropped_tail_leaves_nan_and_names_the_element() -> None:
    r = grade(mutate("triton.cdiv(n, 128)", "n // 128"))
    c = checks(r)
    assert c["whole blocks"].passed and not c["tail"].passed
    assert "never written" in c["tail"].message
    assert "(896,)" in c["tail"].message  # the first element past the last whole block


def test_a_wrong_formula_fails_with_expected_and_got() -> None:
    r = grade(mutate("2.0 * x + y", "2.0 * x - y"))
    c = checks(r)
    assert not c["whole blocks"].passed and not c["tail"].passed
    assert "expected" in c["tail"].message and "got" in c["tail"].message
    assert r.verdict == "partial"  # it still compiles


def test_writing_into_an_input_is_caught() -> None:
    r = grade(mutate("tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)",
                     "tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)\n"
                     "    tl.store(x_ptr + offs, x * 0.0, mask=mask)"))
    assert "input `x` was modified" in checks(r)["tail"].message


def test_host_python_inside_the_kernel_passes_the_interpreter_but_not_the_compile() -> None:
    source = mutate("@triton.jit\ndef axpy_kernel", "def twice(v):\n    return 2.0 * v\n\n\n"
                    "@triton.jit\ndef axpy_kernel").replace("2.0 * x + y", "twice(x) + y")
    r = grade(source)
    c = checks(r)
    assert c["tail"].passed and c["whole blocks"].passed
    assert not c["compiles for sm_90 (H100/H200)"].passed
    assert "twice" in c["compiles for sm_90 (H100/H200)"].message


def test_an_exception_shows_the_students_own_frames() -> None:
    r = grade(REFERENCE.replace("    n = x.numel()\n", "    n = x.numel()\n"
                                "    if n > 500:\n        raise ValueError('too big')\n"))
    message = checks(r)["tail"].message
    assert "ValueError: too big" in message and 'File "submission.py"' in message
    assert checks(r)["whole blocks"].passed


def test_an_import_error_is_one_failing_check_with_the_traceback() -> None:
    r = grade("import torch\nraise RuntimeError('broken at import')\n")
    assert r.score == 0.0 and [c.name for c in r.checks] == ["loads"]
    assert "broken at import" in r.checks[0].message


def test_an_endless_kernel_call_runs_into_the_limit_and_later_cases_are_not_run() -> None:
    part = PartSpec(id="k", type="kernel", prompt="", time_limit_s=3, memory_mb=3072)
    r = grade(REFERENCE.replace("    n = x.numel()\n", "    n = x.numel()\n"
                                "    while n > 500:\n        pass\n"), part=part,
              sizes=[256, 1000, 512])
    c = checks(r)
    assert c["whole blocks"].passed is False  # the 512 case after the stuck one never ran
    assert "time limit" in c["tail"].message
    assert "not run" in c["whole blocks"].message
    assert not c["compiles for sm_90 (H100/H200)"].passed


def test_a_crash_costs_its_case_and_the_child_is_restarted() -> None:
    r = grade(REFERENCE.replace("import torch\n", "import os\n\nimport torch\n", 1).replace(
        "    n = x.numel()\n", "    n = x.numel()\n    if n == 1000:\n        os._exit(9)\n"),
        sizes=[1000, 256])
    c = checks(r)
    assert not c["tail"].passed and "process died" in c["tail"].message
    assert c["whole blocks"].passed and c["compiles for sm_90 (H100/H200)"].passed


def test_a_forged_result_line_is_ignored() -> None:
    forged = ('RESULT 00000000000000000000000000000000 {"import": {"kind": "ready"}, '
              '"cases": [], "compile": {"ok": true, "kernels": []}}')
    # Printed at import and again in every call, on the stdout the child shares with nobody.
    source = mutate("2.0 * x + y", "x") + f"\nprint({forged!r}, flush=True)\n"
    source = source.replace("    n = x.numel()\n", f"    n = x.numel()\n    print({forged!r})\n")
    r = grade(source)
    assert r.score < 1.0
    assert not checks(r)["tail"].passed


def test_the_seed_changes_the_inputs_but_not_the_verdict() -> None:
    assert grade(REFERENCE, seed=1).score == grade(REFERENCE, seed=2).score == 1.0


def test_tensor_arithmetic_in_the_wrapper_is_seen_at_run_time() -> None:
    # `2 * x + y` in the wrapper cannot be told from grid arithmetic statically; the child
    # watches the torch operations the wrapper runs outside kernel launches.
    source = mutate("    n = x.numel()\n", "    n = x.numel()\n    z = 2 * x + y\n"
                    "    axpy_kernel[(triton.cdiv(n, 128),)](z, y * 0, out, n, BLOCK=128)\n"
                    "    return\n")
    source = source.replace("tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)",
                            "tl.store(out_ptr + offs, x + y, mask=mask)")
    r = grade(source)
    assert r.score < 1.0
    message = checks(r)["tail"].message
    assert "outside the kernel" in message and "mul" in message and "add" in message


def test_reductions_and_dtype_constexprs_compile_after_the_interpreted_run() -> None:
    # The interpreter patches triton.language in place; compiling in a fresh process keeps a
    # correct kernel that reduces (tl.max) and takes a dtype constexpr from failing the check.
    source = mutate("def axpy_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):",
                    "def axpy_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr,\n"
                    "                OUT: tl.constexpr):")
    source = source.replace("2.0 * x + y, mask=mask)",
                            "(2.0 * x + y + tl.max(x * 0.0, axis=0)).to(OUT), mask=mask)")
    source = source.replace("BLOCK=128)", "BLOCK=128, OUT=tl.float32)")
    r = grade(source)
    assert r.score == 1.0, r.feedback
    kernels = r.extra["compile"]["kernels"]
    assert kernels and all("error" not in k for k in kernels)
