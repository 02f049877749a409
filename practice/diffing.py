"""A line diff of two answers, shaped for a template: one row per line with its old and new line
numbers, and long unchanged stretches folded into one "skip" row (a reviewer wants the change,
not 300 identical lines around it). Pure: no Django."""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

Kind = Literal["same", "add", "del", "skip"]


@dataclass(frozen=True)
class DiffRow:
    kind: Kind
    old_no: int | None  # 1-based line in the old answer (None for an added line)
    new_no: int | None  # 1-based line in the new answer (None for a removed line)
    text: str  # the line; for "skip", empty (`skipped` says how many lines were folded)
    skipped: int = 0

    @property
    def sign(self) -> str:
        return {"same": " ", "add": "+", "del": "-", "skip": ""}[self.kind]


@dataclass(frozen=True)
class Diff:
    rows: tuple[DiffRow, ...]
    added: int
    removed: int

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").split("\n") if text else []


def line_diff(old: str, new: str, context: int | None = 3) -> Diff:
    """Rows turning `old` into `new`. `context`: unchanged lines kept on each side of a change
    (a longer unchanged run becomes one "skip" row); None keeps every line."""
    a, b = _lines(old), _lines(new)
    rows: list[DiffRow] = []
    added = removed = 0
    # autojunk off: in code, frequent lines ("", "    return x") are exactly the ones to match.
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend(DiffRow("same", i1 + k + 1, j1 + k + 1, a[i1 + k]) for k in range(i2 - i1))
            continue
        # "replace" reads best as all of the old block, then all of the new one (as git shows it).
        rows.extend(DiffRow("del", i + 1, None, a[i]) for i in range(i1, i2))
        rows.extend(DiffRow("add", None, j + 1, b[j]) for j in range(j1, j2))
        removed += i2 - i1
        added += j2 - j1
    if context is not None:
        rows = _fold(rows, context)
    return Diff(tuple(rows), added, removed)


def _fold(rows: list[DiffRow], context: int) -> list[DiffRow]:
    """Keep `context` unchanged rows next to each change; fold the rest of each unchanged run.
    A fold of a single line would take as much room as the line itself, so it is kept."""
    near = [False] * len(rows)
    for i, row in enumerate(rows):
        if row.kind != "same":
            for k in range(max(0, i - context), min(len(rows), i + context + 1)):
                near[k] = True
    out: list[DiffRow] = []
    i = 0
    while i < len(rows):
        if near[i] or rows[i].kind != "same":
            out.append(rows[i])
            i += 1
            continue
        j = i
        while j < len(rows) and not near[j]:
            j += 1
        if j - i == 1:
            out.append(rows[i])
        else:
            first = rows[i]
            out.append(DiffRow("skip", first.old_no, first.new_no, "", skipped=j - i))
        i = j
    return out
