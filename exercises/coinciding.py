"""One message for slips that give the same number in a variant.

When two known mistakes of a part land on the same value, the number alone cannot say which one
the student made, so the feedback must not assert either. The number grader words it with
`one_message()` when it finds several listed mistakes at the answer; exercises whose `mistakes()`
keep one entry per value merge coinciding feedback with `coinciding()`, which gives the same
wording, so no message ever joins two contradicting claims.
"""
from __future__ import annotations

import re

_COUNTS = {2: "Two", 3: "Three", 4: "Four", 5: "Five"}
_LIST = re.compile(r"^\w+ different slips give this value in your variant, so the number alone "
                   r"cannot tell which one you made\. It may be (?:either|any) of these: (.*)$",
                   re.DOTALL)
_ITEM = re.compile(r"(?:^| )\((\d+)\) ")


def one_message(texts: list[str]) -> str:
    """The feedback for an answer that matches every slip in `texts` (each a slip's own
    feedback); one text is returned as it is."""
    unique = list(dict.fromkeys(t.strip() for t in texts if t.strip()))
    if len(unique) == 1:
        return unique[0]
    count = _COUNTS.get(len(unique), str(len(unique)))
    which = "either" if len(unique) == 2 else "any"
    listed = " ".join(f"({i}) {t}" for i, t in enumerate(unique, 1))
    return (f"{count} different slips give this value in your variant, so the number alone "
            f"cannot tell which one you made. It may be {which} of these: {listed}")


def slips_in(message: str) -> list[str]:
    """The slips' own texts in a message `one_message` made (or the message itself)."""
    m = _LIST.match(message)
    if m is None:
        return [message]
    return [t.strip() for t in _ITEM.split(m.group(1))[2::2]]


def coinciding(first: str, second: str) -> str:
    """Merge the feedback of a slip that lands on an earlier one's value (`first` may itself be
    a merge)."""
    return one_message([*slips_in(first), *slips_in(second)])
