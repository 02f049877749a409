"""Fills `{{ p.name }}` / `{{ s.name:fmt }}` placeholders in statements and solutions.

Deliberately tiny: a name lookup and a Python format spec, no expressions, so a template cannot
compute a number that `solve()` did not. An unresolved placeholder is an error, never blank text.
"""
from __future__ import annotations

import re
from typing import Any

from exercises.spec import Quantity

PLACEHOLDER = re.compile(r"\{\{\s*([ps])\.([A-Za-z_][A-Za-z0-9_]*)\s*(?::([^}]*?))?\s*\}\}")
SECTION = re.compile(r"^<!--\s*part:\s*([a-z0-9_]+)\s*-->\s*$", re.MULTILINE)


class TemplateError(ValueError):
    pass


def _value(v: Any) -> Any:
    return v.value if isinstance(v, Quantity) else v


def render(text: str, params: dict[str, Any], solution: dict[str, Any] | None = None,
           where: str = "template") -> str:
    """Replace every placeholder; raise TemplateError naming the first one that fails."""
    scopes = {"p": params, "s": solution or {}}

    def sub(m: re.Match[str]) -> str:
        scope, name, fmt = m.group(1), m.group(2), (m.group(3) or "").strip()
        if name not in scopes[scope]:
            raise TemplateError(f"{where}: {{{{ {scope}.{name} }}}} is not defined")
        value = _value(scopes[scope][name])
        try:
            return format(value, fmt) if fmt else str(value)
        except (ValueError, TypeError) as exc:
            raise TemplateError(f"{where}: {{{{ {scope}.{name}:{fmt} }}}}: {exc}") from exc

    out = PLACEHOLDER.sub(sub, text)
    if "{{" in out:
        raise TemplateError(f"{where}: a placeholder is malformed near {out[out.index('{{'):][:40]!r}")
    return out


def split_sections(text: str) -> tuple[str, dict[str, str]]:
    """Split a solution into its preamble and one section per part id."""
    pieces = SECTION.split(text)
    preamble, sections = pieces[0], {}
    for i in range(1, len(pieces), 2):
        sections[pieces[i]] = pieces[i + 1]
    return preamble, sections
