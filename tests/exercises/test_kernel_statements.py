"""Every kernel exercise's statement states the tolerances its checker applies, and says that a
preview pass is provisional and that BF16 paths are checked only on the GPU (issue 19 item 7).

The figures are read back from the rendered statement (the Markdown table) and compared, case by
case, with kernel/task.py's `tolerance`, the function gpu_sandbox/compare.py calls on the cases
`task.cases` makes for each device: a tolerance changed in task.py and not in the statement (or
the other way round) fails here, whatever produced the table.
"""
from __future__ import annotations

import re
from typing import Any

import pytest

from exercises import registry, templating
from exercises.kernel_tolerance import load_task

KERNEL_SLUGS = sorted(slug for slug, spec in registry.load_all().items()
                      if any(p.type == "kernel" for p in spec.parts))
COLUMNS = {"preview": 1, "gpu": 2}  # the table's columns after the check's label
NUMBER = r"[0-9.]+(?:e[+-]?[0-9]+)?"
ENTRY = re.compile(rf"`(?P<name>\w+)`(?: \((?P<dtypes>[\w, ]+)\))?: rtol (?P<rtol>{NUMBER}"
                   rf"(?:–{NUMBER})?), atol (?P<atol>{NUMBER}(?:–{NUMBER})?)")


def test_there_are_kernel_exercises() -> None:
    assert len(KERNEL_SLUGS) >= 3, KERNEL_SLUGS


def statement(slug: str, variant: str) -> tuple[str, dict[str, Any]]:
    spec = registry.get(slug)
    params = registry.params_for(spec, variant)
    return templating.render(spec.statement_template, params, registry.solve(spec, params),
                             "statement.md"), params


def table(text: str) -> dict[str, list[str]]:
    """label -> its cells, from the statement's tolerance table."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| check |"))
    rows: dict[str, list[str]] = {}
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


def span(text: str) -> tuple[float, float]:
    lo, _, hi = text.partition("–")
    return float(lo), float(hi or lo)


def shown(x: float) -> float:
    return float(f"{x:.3g}")


@pytest.mark.parametrize("variant", ["canonical", "1", "2"])
@pytest.mark.parametrize("slug", KERNEL_SLUGS)
def test_the_statement_states_the_checkers_tolerances(slug: str, variant: str) -> None:
    text, params = statement(slug, variant)
    rows = table(text)
    task = load_task(registry.get(slug).path)
    attained: set[tuple[str, int, str, str, float]] = set()
    for mode, column in COLUMNS.items():
        for case in task.cases(params, mode):
            cell = rows[case["label"]][column]
            for name in task.OUTPUTS:
                rtol, atol = task.tolerance(case, name)
                entries = [m for m in ENTRY.finditer(cell) if m["name"] == name and (
                    m["dtypes"] is None or str(case.get("dtype")) in m["dtypes"].split(", "))]
                assert len(entries) == 1, (slug, case["id"], name, cell)
                m = entries[0]
                for what, value in (("rtol", rtol), ("atol", atol)):
                    lo, hi = span(m[what])
                    assert lo <= shown(value) <= hi, (slug, case["id"], name, what, value, cell)
                    attained.add((case["label"], column, name, what, shown(value)))
    # No stated bound is wider than the cases: each end of every range is some case's value.
    for label, cells in rows.items():
        for column in COLUMNS.values():
            for m in ENTRY.finditer(cells[column]):
                for what in ("rtol", "atol"):
                    for end in span(m[what]):
                        assert (label, column, m["name"], what, end) in attained, (
                            slug, label, m[0])
    # A group that runs on only one device says so instead of inventing figures.
    for label, cells in rows.items():
        for mode, column in COLUMNS.items():
            if not any(c["label"] == label for c in task.cases(params, mode)):
                assert cells[column] == "not run", (slug, label, mode)


@pytest.mark.parametrize("slug", KERNEL_SLUGS)
def test_the_statement_says_a_preview_is_provisional_and_bf16_is_gpu_only(slug: str) -> None:
    text, _ = statement(slug, "canonical")
    flat = " ".join(text.split())
    assert "**provisional**, not a final grade" in flat
    assert "**BF16 paths are checked only on the GPU**" in flat
