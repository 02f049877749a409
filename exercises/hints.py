"""Hints in statement.md: what interview mode holds back until the student asks for it.

A hint is a block of the statement (table rows, a bullet, a paragraph) between two marker lines:

    <!-- hint: the GPU's HBM bandwidth | parts: kv_budget, pool_tokens | cost: 0.25 -->
    | GPU | 3.35 TB/s of HBM bandwidth |
    <!-- /hint -->

`cost` is the share of each listed part's credit the reveal costs (0 < cost <= 1), or `free` for
a fact the parts cannot be answered without (a measured constant of this deployment). An optional
`id: name` fixes the hint's id; otherwise it is `h1`, `h2`, ... by position. Markers are whole
lines, like solution.md's `<!-- part: ID -->`, so they survive templating untouched and never reach
the Markdown renderer: practice mode deletes the marker lines (the text is exactly the statement
without them), interview mode deletes the blocks as well. Standard library only (no Django).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

OPEN = re.compile(r"^[ \t]*<!--\s*hint\s*:(?P<body>.*?)-->[ \t]*$")
CLOSE = re.compile(r"^[ \t]*<!--\s*/hint\s*-->[ \t]*$")
# Anything that looks like a hint marker but did not match OPEN/CLOSE is a typo, not prose.
LOOSE = re.compile(r"<!--\s*/?\s*hint\b", re.IGNORECASE)
ID_RE = re.compile(r"[a-z0-9_]+")
# A table whose every row became a hint is a bare header in interview mode: drop it.
_EMPTY_TABLE = re.compile(r"^\|[ |]*\|[ \t]*\n\|[-:| ]+\|[ \t]*(?:\n(?!\|)|\Z)", re.MULTILINE)


class HintError(ValueError):
    pass


@dataclass(frozen=True)
class Hint:
    id: str
    title: str
    parts: tuple[str, ...]
    cost: float  # share of each listed part's credit; 0.0 when free
    body: str

    @property
    def free(self) -> bool:
        return self.cost == 0.0


@dataclass(frozen=True)
class Parsed:
    practice: str  # the whole statement, markers removed
    interview: str  # the statement without the hints' blocks
    hints: tuple[Hint, ...]


def _fields(raw: str, line_no: int, where: str) -> dict[str, str]:
    title, *rest = [piece.strip() for piece in raw.split("|")]
    if not title:
        raise HintError(f"{where}: line {line_no}: a hint needs a title")
    fields = {"title": title}
    for piece in rest:
        key, sep, value = piece.partition(":")
        key = key.strip()
        if not sep or key not in ("parts", "cost", "id") or key in fields:
            raise HintError(f"{where}: line {line_no}: {piece!r} is not parts:, cost: or id: "
                            "(each once)")
        fields[key] = value.strip()
    for key in ("parts", "cost"):
        if key not in fields:
            raise HintError(f"{where}: line {line_no}: hint {title!r} has no {key}:")
    return fields


def _cost(value: str, line_no: int, where: str) -> float:
    if value == "free":
        return 0.0
    try:
        cost = float(value)
    except ValueError:
        raise HintError(f"{where}: line {line_no}: cost {value!r} is not a number or free") from None
    if not 0.0 < cost <= 1.0:
        raise HintError(f"{where}: line {line_no}: cost {cost} is outside (0, 1] (use free for 0)")
    return cost


def parse(text: str, part_ids: tuple[str, ...] | None = None,
          where: str = "statement.md") -> Parsed:
    """Split a statement (raw or rendered) into both modes and its hints. `part_ids`, when given,
    are the exercise's parts: a hint naming any other is refused."""
    practice: list[str] = []
    interview: list[str] = []
    hints: list[Hint] = []
    current: dict[str, str] | None = None
    body: list[str] = []
    open_line = 0
    for line_no, line in enumerate(text.splitlines(keepends=True), start=1):
        bare = line.rstrip("\r\n")
        opened, closed = OPEN.match(bare), CLOSE.match(bare)
        if opened:
            if current is not None:
                raise HintError(f"{where}: line {line_no}: a hint opens inside the hint of line "
                                f"{open_line} (close it with <!-- /hint -->)")
            current, body, open_line = _fields(opened["body"], line_no, where), [], line_no
            continue
        if closed:
            if current is None:
                raise HintError(f"{where}: line {line_no}: <!-- /hint --> without an open hint")
            hints.append(_hint(current, body, len(hints), open_line, part_ids, where))
            current = None
            continue
        if LOOSE.search(bare):
            raise HintError(f"{where}: line {line_no}: malformed hint marker {bare.strip()!r}")
        practice.append(line)
        if current is None:
            interview.append(line)
        else:
            body.append(line)
    if current is not None:
        raise HintError(f"{where}: line {open_line}: hint {current['title']!r} is never closed")
    ids = [h.id for h in hints]
    if len(set(ids)) != len(ids):
        raise HintError(f"{where}: two hints share an id")
    return Parsed("".join(practice),
                  _drop_empty_sections(_EMPTY_TABLE.sub("", "".join(interview))), tuple(hints))


_HEADING = re.compile(r"^(#{1,6})[ \t]")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")


def _drop_empty_sections(text: str) -> str:
    """Drop each heading whose section became empty in interview mode (every line of it was a
    hint): nothing but blank lines before the next heading of the same or a higher level, or the
    end. A `#` line inside a fenced code block is code, not a heading."""
    lines = text.splitlines(keepends=True)
    level: list[int] = []  # per line: its heading level, 0 for any other line
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        found = None if fenced else _HEADING.match(line)
        level.append(len(found[1]) if found else 0)
    keep = [True] * len(lines)
    for i in reversed(range(len(lines))):
        if not level[i]:
            continue
        j = i + 1
        while j < len(lines) and not level[j] and (not lines[j].strip() or not keep[j]):
            j += 1
        if j == len(lines) or (level[j] and level[j] <= level[i]):
            # Empty: the heading goes, and with it the blank lines up to what follows.
            for k in range(i, j):
                keep[k] = False
    return "".join(line for line, kept in zip(lines, keep, strict=True) if kept)


def _hint(fields: dict[str, str], body: list[str], index: int, line_no: int,
          part_ids: tuple[str, ...] | None, where: str) -> Hint:
    parts = tuple(p.strip() for p in fields["parts"].split(",") if p.strip())
    if not parts:
        raise HintError(f"{where}: line {line_no}: hint {fields['title']!r} unlocks no part")
    if part_ids is not None:
        unknown = [p for p in parts if p not in part_ids]
        if unknown:
            raise HintError(f"{where}: line {line_no}: hint {fields['title']!r} names unknown "
                            f"part(s) {', '.join(unknown)} (the parts are {', '.join(part_ids)})")
    hint_id = fields.get("id", f"h{index + 1}")
    if not ID_RE.fullmatch(hint_id):
        raise HintError(f"{where}: line {line_no}: hint id {hint_id!r} must match [a-z0-9_]+")
    text = "".join(body).strip("\n")
    if not text.strip():
        raise HintError(f"{where}: line {line_no}: hint {fields['title']!r} is empty")
    return Hint(hint_id, fields["title"], parts, _cost(fields["cost"], line_no, where), text)


def penalty(hints: tuple[Hint, ...], revealed: set[str] | frozenset[str], part_id: str) -> float:
    """The share of `part_id`'s credit the revealed hints cost (free ones nothing), at most 1."""
    return min(1.0, sum(h.cost for h in hints if h.id in revealed and part_id in h.parts))


def credited(score: float, share: float) -> float:
    """A graded score less the hints' share, never below 0."""
    return max(0.0, score - share)


def body_markdown(hint: Hint) -> str:
    """The hint's body as Markdown that stands alone: table rows taken out of a table get the
    empty header row that key-value tables use (practice/markdown.py drops it again)."""
    lines = hint.body.splitlines()
    if lines and all(line.lstrip().startswith("|") for line in lines):
        columns = max(line.strip().strip("|").count("|") + 1 for line in lines)
        return "|" + " |" * columns + "\n|" + "---|" * columns + "\n" + hint.body
    return hint.body


def share_label(hint: Hint, part_numbers: dict[str, int]) -> str:
    """'free' or 'costs 25% of part 2' / 'costs 25% of parts 2 and 3', said before the click."""
    if hint.free:
        return "free"
    numbers = [str(part_numbers.get(p, p)) for p in hint.parts]
    which = (f"part {numbers[0]}" if len(numbers) == 1
             else f"parts {', '.join(numbers[:-1])} and {numbers[-1]}")
    return f"costs {hint.cost:.0%} of {which}"
