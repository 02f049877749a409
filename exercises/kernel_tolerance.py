"""The tolerance table a kernel exercise's statement shows, made from its kernel/task.py.

The harness compares each output of each case with `task.tolerance(case, name)` (gpu_sandbox/
compare.py, run on `task.cases(params, mode)`), so the statement's figures are read from the same
functions, for the same cases, never typed: one row per check group (the cases' label), one
column per device ("preview" on the CPU, "gpu"), and in each cell every output's rtol and atol
(a range where the group's cases differ), per input dtype where the cases name one. tests/exercises/test_kernel_statements.py reads the rendered table
back and checks every case against it.
"""
from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

MODES = (("preview", "CPU preview (interpreter)"), ("gpu", "GPU"))
NOT_RUN = "not run"


@cache
def load_task(exercise_dir: Path) -> ModuleType:
    """kernel/task.py of an exercise, by path (the kernel folder is not a package; the module
    needs torch only inside its functions)."""
    path = Path(exercise_dir) / "kernel" / "task.py"
    spec = importlib.util.spec_from_file_location(f"{Path(exercise_dir).name}_task", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def figure(x: float) -> str:
    """Three significant figures, as the table prints them (the test parses this back)."""
    return f"{x:.3g}"


def _span(values: list[float]) -> str:
    lo, hi = figure(min(values)), figure(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def _cell(task: ModuleType, cases: list[dict[str, Any]]) -> str:
    if not cases:
        return NOT_RUN
    parts = []
    for name in task.OUTPUTS:
        # (dtype or "") -> the rtols and atols of this output over the group's cases
        by_dtype: dict[str, tuple[list[float], list[float]]] = {}
        for case in cases:
            rtol, atol = task.tolerance(case, name)
            rtols, atols = by_dtype.setdefault(str(case.get("dtype", "")), ([], []))
            rtols.append(float(rtol))
            atols.append(float(atol))
        # Input dtypes with the same figures share one entry.
        merged: dict[tuple[str, str], list[str]] = {}
        for dtype, (rtols, atols) in by_dtype.items():
            merged.setdefault((_span(rtols), _span(atols)), []).append(dtype)
        for (rtol_text, atol_text), dtypes in merged.items():
            named = ", ".join(d for d in dtypes if d)
            parts.append(f"`{name}`{f' ({named})' if named else ''}: rtol {rtol_text}, "
                         f"atol {atol_text}")
    return "; ".join(parts)


def tolerance_table(exercise_dir: Path, params: dict[str, Any]) -> str:
    """A Markdown table: check group × device, each output's (rtol, atol) as the harness uses
    them, for |got − expected| ≤ atol + rtol·|expected| against the float64 reference."""
    task = load_task(Path(exercise_dir))
    by_mode = {mode: list(task.cases(params, mode)) for mode, _ in MODES}
    labels: list[str] = []
    for mode, _ in MODES:
        for case in by_mode[mode]:
            if case["label"] not in labels:
                labels.append(case["label"])
    rows = ["| check | " + " | ".join(title for _, title in MODES) + " |",
            "|---|" + "---|" * len(MODES)]
    for label in labels:
        cells = [_cell(task, [c for c in by_mode[mode] if c["label"] == label])
                 for mode, _ in MODES]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
