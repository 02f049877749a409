"""Grader for `choice` (one option, or several with `multi`) and `ranking` parts.

Contract: `grade(part, answer_text, ctx)`; `ctx.reference` is an option id (choice), a list of ids
(multi, ranking); a `Mistake.answer` is an id or a list of ids in the same form.

Reading. An option may be named by its id (case-insensitive), its 1-based number or its exact
label. Several options (multi) are separated by commas or spaces; a ranking by `>` or commas and
must name every option exactly once. Anything else raises `InvalidAnswer` listing the valid ids.

Scores. choice: 1 or 0. multi: max(0, (right picks − wrong picks) / number of right options), the
PrairieLearn rule. ranking: 1 − (pairs out of order) / (all pairs), i.e. one minus the normalised
Kendall tau distance. Verdict: correct at 1, partial above 0, incorrect at 0.

The multi rule is monotone, and nothing may break that: adding a right option never lowers the
score, adding a wrong one never raises it. So a known mistake (same id; same set for multi; same
order for a ranking) adds its feedback to the answer and never changes the score: a set of four
right options that the author listed as "forgot the fifth" still earns its 0.8.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import combinations

from exercises.spec import PartSpec
from graders.base import GradeContext, GradeResult, InvalidAnswer, Verdict, read_input

MAX_CHARS = 2000


def grade(part: PartSpec, answer_text: str, ctx: GradeContext) -> GradeResult:
    """Grade a choice, multi-choice or ranking answer; see the module docstring."""
    if not part.options:
        raise ValueError(f"part {part.id!r} has no options")
    text = read_input(answer_text, max_chars=MAX_CHARS, what="answer")
    if not text:
        what = "an order of the options" if part.type == "ranking" else "an option"
        raise InvalidAnswer(f"Pick {what}: {_valid(part)}.")
    reference = _reference_ids(part, ctx.reference)
    if part.type == "ranking":
        picked = read_ranking(part, text)
        score, summary = _ranking_score(picked, reference)
    elif part.multi:
        picked = read_multi(part, text)
        score, summary = _multi_score(picked, reference)
    else:
        picked = [read_single(part, text)]
        score = 1.0 if picked == reference else 0.0
        summary = "" if score else "Not the expected option."
    verdict = _verdict(score)
    feedback = "Correct." if verdict == "correct" else summary
    mistake_name = ""
    kinds: tuple[str, ...] = ()
    if verdict != "correct":
        mistake = next((m for m in ctx.mistakes if _equals(part, m.answer, picked)), None)
        if mistake is not None:
            # Feedback only: scoring a listed set differently from the same set unlisted would
            # let the list of mistakes make the score go backwards (see the module docstring).
            mistake_name = mistake.name or "mistake"
            kinds = mistake.kinds
            # The tally stays beside it for multi and ranking: it says where the score came from.
            tally = summary if (part.multi or part.type == "ranking") else ""
            feedback = f"{mistake.feedback} {tally}".strip()
    joiner = " > " if part.type == "ranking" else ", "
    echo = joiner.join(_label(part, i) for i in picked)
    return GradeResult(score, verdict, feedback, echo=echo, mistake=mistake_name, kinds=kinds,
                       extra={"answer": list(picked)})


# --- reading --------------------------------------------------------------------------------


def resolve(part: PartSpec, token: str) -> str | None:
    """The option id a token names (id, 1-based number, or label; case-insensitive), or None."""
    t = " ".join(token.split()).casefold()
    if not t:
        return None
    for opt in part.options:
        if opt.id.casefold() == t:
            return opt.id
    if t.isdigit() and t.isascii() and 1 <= int(t[:6]) <= len(part.options):
        return part.options[int(t) - 1].id
    for opt in part.options:
        if " ".join(opt.label.split()).casefold() == t:
            return opt.id
    return None


def read_single(part: PartSpec, text: str) -> str:
    found = resolve(part, text)
    if found is not None:
        return found
    pieces = _split(text, r"[,;\s]+")
    if len(pieces) > 1 and all(resolve(part, p) for p in pieces):
        raise InvalidAnswer("This part takes exactly one option.")
    raise InvalidAnswer(_unknown(part, text))


def read_multi(part: PartSpec, text: str) -> list[str]:
    """Options separated by commas or spaces, in the order first named, without repeats."""
    picks: list[str] = []
    for piece in _split(text, r"[,;]+"):
        found = resolve(part, piece)
        words = [found] if found else [_must_resolve(part, w) for w in piece.split()]
        picks.extend(w for w in words if w not in picks)
    if not picks:
        raise InvalidAnswer(f"Pick at least one option: {_valid(part)}.")
    return picks


def read_ranking(part: PartSpec, text: str) -> list[str]:
    """All options, best first, separated by `>` or commas (or spaces when there is neither)."""
    if ">" in text:
        pieces = _split(text, r">+")
    elif "," in text:
        pieces = _split(text, r",+")
    else:
        whole = resolve(part, text)
        pieces = [text] if whole is not None else _split(text, r"\s+")
    order = [_must_resolve(part, p) for p in pieces]
    seen: set[str] = set()
    for i in order:
        if i in seen:
            raise InvalidAnswer(f"{i!r} appears more than once; name each option exactly once.")
        seen.add(i)
    missing = [o.id for o in part.options if o.id not in seen]
    if missing:
        raise InvalidAnswer(
            f"Rank all {len(part.options)} options; missing: {', '.join(missing)}."
        )
    return order


def _split(text: str, pattern: str) -> list[str]:
    return [p.strip() for p in re.split(pattern, text) if p.strip()]


def _must_resolve(part: PartSpec, token: str) -> str:
    found = resolve(part, token)
    if found is None:
        raise InvalidAnswer(_unknown(part, token))
    return found


def _unknown(part: PartSpec, token: str) -> str:
    shown = token if len(token) <= 40 else token[:40] + "…"
    return f"Unknown option {shown!r}. Valid options: {_valid(part)}."


def _valid(part: PartSpec) -> str:
    ids = ", ".join(o.id for o in part.options)
    return f"{ids} (or their numbers 1–{len(part.options)})"


def _label(part: PartSpec, option_id: str) -> str:
    return next((o.label or o.id for o in part.options if o.id == option_id), option_id)


# --- scoring --------------------------------------------------------------------------------


def _ids(part: PartSpec, answer: object) -> list[str]:
    """An authored answer (id or list of ids) as canonical option ids; unknown ids kept as-is."""
    if isinstance(answer, str):
        items: list[object] = [answer]
    elif isinstance(answer, list | tuple | set | frozenset):
        items = list(answer)
    else:
        items = []
    out = []
    for item in items:
        text = str(item)
        match = next((o.id for o in part.options if o.id.casefold() == text.casefold()), text)
        out.append(match)
    return out


def _reference_ids(part: PartSpec, reference: object) -> list[str]:
    ids = _ids(part, reference)
    valid = {o.id for o in part.options}
    bad = [i for i in ids if i not in valid]
    if bad or (not ids and part.type != "choice"):
        raise ValueError(f"part {part.id!r}: reference {reference!r} names unknown options {bad}")
    if part.type == "choice" and not part.multi and len(ids) != 1:
        raise ValueError(f"part {part.id!r}: a single-choice reference must be one id")
    if part.type == "ranking" and sorted(ids) != sorted(o.id for o in part.options):
        raise ValueError(f"part {part.id!r}: a ranking reference must order every option once")
    return ids


def _multi_score(picks: Sequence[str], reference: Sequence[str]) -> tuple[float, str]:
    ref = set(reference)
    right = sum(1 for p in picks if p in ref)
    wrong = len(picks) - right
    if not ref:
        return (1.0 if not picks else 0.0), ""
    score = max(0.0, (right - wrong) / len(ref))
    summary = f"{right} of {len(ref)} right options picked"
    summary += f", {wrong} wrong pick{'s' if wrong != 1 else ''}." if wrong else "."
    return score, summary


def kendall_distance(order: Sequence[str], reference: Sequence[str]) -> int:
    """Pairs of options that `order` puts the other way round from `reference`."""
    pos = {item: i for i, item in enumerate(order)}
    return sum(1 for a, b in combinations(reference, 2) if pos[a] > pos[b])


def _ranking_score(order: Sequence[str], reference: Sequence[str]) -> tuple[float, str]:
    n = len(reference)
    pairs = n * (n - 1) // 2
    if pairs == 0:
        return 1.0, ""
    wrong = kendall_distance(order, reference)
    return 1.0 - wrong / pairs, f"{pairs - wrong} of {pairs} pairs in the right order."


def _verdict(score: float) -> Verdict:
    if score >= 1.0 - 1e-12:
        return "correct"
    return "partial" if score > 0 else "incorrect"


def _equals(part: PartSpec, authored: object, picked: Sequence[str]) -> bool:
    """Whether an authored answer (a mistake's) is the student's: same order for a ranking,
    same set otherwise."""
    ids = _ids(part, authored)
    if part.type == "ranking":
        return ids == list(picked)
    return set(ids) == set(picked)
