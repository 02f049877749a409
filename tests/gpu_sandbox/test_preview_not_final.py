"""A CPU preview is not a final grade (issue 19 item 7), in the real sandbox: a kernel that passes
every check in Triton's interpreter is "provisional", not "correct"; and a NaN the kernel
computed is reported as such, never as an element "never written" (the grader's poison).

These are hostile-suite cases for the kernel layer: before the fix a preview pass returned
"correct" and solved the part, and a kernel's own NaN was blamed on a missing store.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from exercises.spec import PartSpec
from graders import kernel
from graders.base import GradeContext, GradeResult

FIXTURE = Path(__file__).resolve().parent / "fixture"
REFERENCE = (FIXTURE / "kernel" / "reference.py").read_text(encoding="utf-8")
PART = PartSpec(id="k", type="kernel", prompt="", time_limit_s=30, memory_mb=3072,
                output_limit_kb=64)
STORE = "tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)"


pytestmark = pytest.mark.usefixtures("sandbox")  # tests/gpu_sandbox/conftest.py


@pytest.fixture(autouse=True)
def on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROOFLINE_KERNEL_DEVICE", raising=False)


def grade(source: str) -> GradeResult:
    ctx = GradeContext(reference="kernel/reference.py", mistakes=(),
                       params={"sizes": [256, 1000]}, exercise_path=str(FIXTURE),
                       mode="submit", seed=7)
    return kernel.grade(PART, source, ctx)


def with_store(new: str) -> str:
    assert STORE in REFERENCE
    return REFERENCE.replace(STORE, new)


def test_a_full_pass_in_the_interpreter_is_provisional_and_says_so() -> None:
    r = grade(REFERENCE)
    assert all(c.passed for c in r.checks), r.feedback
    assert r.verdict == "provisional"
    # The preview's score is kept (every check passed), but the words say it is not final.
    assert r.score == 1.0
    assert "provisional" in r.feedback and "not final" in r.feedback
    assert r.extra["final"] is False


def test_a_nan_the_kernel_computed_is_not_reported_as_never_written() -> None:
    # 0/0 from element 900 on: every element is stored, some of them as NaN.
    source = with_store("z = x - x\n"
                        "    tl.store(out_ptr + offs, tl.where(offs < 900, 2.0 * x + y, z / z), "
                        "mask=mask)")
    r = grade(source)
    tail = next(c for c in r.checks if c.name == "tail")
    assert not tail.passed
    assert "never written" not in tail.message and "never written" not in r.feedback
    assert "your kernel produced NaN" in tail.message
    assert "(900,)" in tail.message  # the first NaN it computed
    assert r.verdict == "partial"


def test_never_written_elements_are_still_named_next_to_computed_nan() -> None:
    # Element 0 of each block is never stored; elements from 900 on are computed NaN.
    source = with_store("z = x - x\n"
                        "    keep = mask & (offs % 128 != 0)\n"
                        "    tl.store(out_ptr + offs, tl.where(offs < 900, 2.0 * x + y, z / z), "
                        "mask=keep)")
    r = grade(source)
    tail = next(c for c in r.checks if c.name == "tail")
    assert "never written" in tail.message and "produced NaN" in tail.message
    assert "8 never written" in tail.message  # elements 0, 128, ..., 896
