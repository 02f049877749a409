"""What every grader returns, and the error that means "invalid, not wrong".

A grader module exposes `grade(part, answer_text, ctx) -> GradeResult`. Raising `InvalidAnswer`
rejects the input with a message and costs the student no attempt.
"""
from __future__ import annotations

import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from exercises.spec import Mistake

# "provisional": every check passed in a preview that is not the authoritative grade (a kernel
# run only in Triton's interpreter, graders/kernel.py); it solves nothing until re-graded.
Verdict = Literal["correct", "partial", "incorrect", "pending", "provisional", "invalid", "error"]


class InvalidAnswer(ValueError):
    """The answer cannot be read (bad syntax, unknown unit, wrong type): no attempt is used."""


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    message: str = ""
    weight: float = 1.0
    details: dict[str, Any] | None = None


@dataclass(frozen=True)
class GradeResult:
    score: float
    verdict: Verdict
    feedback: str
    checks: tuple[Check, ...] = ()
    # How the grader read the answer (a LaTeX echo of a formula, "2.7 GB", ...).
    echo: str = ""
    mistake: str = ""  # name of the known mistake the answer matched, if any
    # The kinds (exercises.mistake_kinds) of the slip the answer showed: the matched mistakes'
    # kinds, or a number detector's (a GiB read as GB is gb_vs_gib, listed or not); () for none.
    kinds: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "verdict": self.verdict,
            "feedback": self.feedback,
            "checks": [
                {"name": c.name, "passed": c.passed, "message": c.message}
                | ({"details": c.details} if c.details else {})
                for c in self.checks
            ],
            "echo": self.echo,
            "mistake": self.mistake,
            "kinds": list(self.kinds),
            **({"extra": self.extra} if self.extra else {}),
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> GradeResult:
        return GradeResult(
            score=float(data["score"]),
            verdict=data["verdict"],
            feedback=data.get("feedback", ""),
            checks=tuple(
                Check(c["name"], bool(c["passed"]), c.get("message", ""), details=c.get("details"))
                for c in data.get("checks", [])
            ),
            echo=data.get("echo", ""),
            mistake=data.get("mistake", ""),
            # Results stored before kinds existed have none.
            kinds=tuple(data.get("kinds", ())),
            extra=data.get("extra", {}),
        )


@dataclass(frozen=True)
class GradeContext:
    """Everything a grader may need about the variant, computed outside the grader.

    `reference` is the answer `solve()` gave for this part; `mistakes` are the known mistakes for
    this part only; `params` the variant; `mode` is "submit" (hidden cases) or "run" (public only).
    `symbol_values` (expression parts) is the variant's own value of each of the part's symbols
    that the exercise states, so equivalence is also tested where this variant lives.
    """

    reference: Any
    mistakes: tuple[Mistake, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    symbol_values: dict[str, float] = field(default_factory=dict)
    exercise_path: str = ""
    mode: Literal["submit", "run"] = "submit"
    seed: int = 0
    # text parts: (value, unit, relative tolerance) of each key point's `number` in this
    # variant, by the key point's index
    key_numbers: dict[int, tuple[float, str, float]] = field(default_factory=dict)


def check_dict(c: Check) -> dict[str, Any]:
    return asdict(c)


# Characters that reorder how text is displayed (the "Trojan Source" trick); never accepted.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")


def read_input(text: object, *, max_chars: int, what: str = "answer", multiline: bool = False) -> str:
    """Check the raw answer's size and characters; return it stripped (and, unless `multiline`,
    on one line: tabs, newlines and exotic spaces become plain spaces).

    Raises `InvalidAnswer` for a non-string, an answer over `max_chars` characters, control or
    invisible characters (bidi overrides always; other format characters unless `multiline`).
    """
    if not isinstance(text, str):
        raise InvalidAnswer(f"The {what} must be text.")
    if len(text) > max_chars:
        raise InvalidAnswer(
            f"That {what} is too long ({len(text):,} characters; at most {max_chars:,} here)."
        )
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    out: list[str] = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "\n\t":
            out.append(ch if multiline else " ")
        elif ch in _BIDI_CONTROLS or cat in ("Cc", "Cs", "Co", "Cn"):
            raise InvalidAnswer(
                f"The {what} contains a control or invisible character (U+{ord(ch):04X}); "
                "please retype it."
            )
        elif cat == "Cf" and not multiline:
            raise InvalidAnswer(
                f"The {what} contains an invisible character (U+{ord(ch):04X}); please retype it."
            )
        elif cat == "Zs" and not multiline:
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out).strip()
