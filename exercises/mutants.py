"""Known-buggy solutions of a code or kernel part, kept as edits of its reference.

A mutant is the reference with one bug put in, so it is written as that bug: exact `old` ->
`new` edits of `reference.py`, applied in order. An edit whose `old` does not occur exactly once
(at the moment it is applied) is an error, so a change to the reference that orphans a mutant
fails at once instead of leaving a stale copy behind. A mutant that is not an edit of the
reference (a wrapper that does the work in torch, say) names a whole file instead.

`<part dir>/mutants.toml`, and `equivalents.toml` for solutions written otherwise than the
reference that must still score 1.0 (a listed bug no valid input can expose; `why` instead of
`bug` says why):

    [[mutant]]
    name = "evict_at_free"                   # unique in the file
    bug = "free evicts the blocks at once, so freed blocks are never hittable."
    caught_by = "freed blocks stay hittable"  # optional: the check that must fail on it
    [[mutant.edit]]
    old = '''
            self._free(b)
    '''
    new = '''
            self._free(b)
            self._evict(b)
    '''

    [[mutant]]
    name = "torch_in_wrapper"
    bug = "..."
    file = "mutants/torch_in_wrapper.py"     # not an edit of the reference
"""
from __future__ import annotations

import importlib.util
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

KINDS = {"mutants": "mutant", "equivalents": "equivalent"}
_built_dir: Path | None = None  # where module() writes the files it imports
# The key that says what a solution is: a mutant's bug, or why an equivalent is one.
SAYS = {"mutants": "bug", "equivalents": "why"}
KEYS = {"name", "caught_by", "edit", "file"}


class MutantError(ValueError):
    """A mutants.toml that cannot be built; the message names the file, the mutant and why."""


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str  # the bug in one sentence (for an equivalent: why no input can expose it)
    source: str  # the built solution
    caught_by: str | None = None


def build(reference: str, edits: list[dict[str, Any]], where: str) -> str:
    """The reference with `edits` applied in order; each `old` must occur exactly once."""
    text = reference
    for n, edit in enumerate(edits, 1):
        old, new = edit.get("old"), edit.get("new")
        if not isinstance(old, str) or not isinstance(new, str) or not old:
            raise MutantError(f"{where}: edit {n} needs a non-empty `old` and a `new` string")
        count = text.count(old)
        if count != 1:
            found = "does not occur" if count == 0 else f"occurs {count} times"
            raise MutantError(f"{where}: edit {n}'s `old` {found} in the reference as edited so "
                              f"far (it must occur exactly once): {old.strip()[:120]!r}")
        text = text.replace(old, new, 1)
    if text == reference:
        raise MutantError(f"{where}: the edits leave the reference unchanged")
    return text


def load(part_dir: Path, kind: str = "mutants") -> list[Mutant]:
    """The part's mutants (or equivalents), built; [] when it has no such file."""
    path = part_dir / f"{kind}.toml"
    if not path.exists():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise MutantError(f"{path}: {exc}") from exc
    unknown = set(data) - {KINDS[kind]}
    if unknown:
        raise MutantError(f"{path}: unknown tables {sorted(unknown)}")
    reference = (part_dir / "reference.py").read_text(encoding="utf-8")
    built: list[Mutant] = []
    for entry in data.get(KINDS[kind], []):
        name = entry.get("name")
        if not isinstance(name, str) or not name.isidentifier():
            raise MutantError(f"{path}: every {KINDS[kind]} needs a `name` (an identifier)")
        where = f"{path} [{name}]"
        says = SAYS[kind]
        extra = set(entry) - KEYS - {says}
        if extra:
            raise MutantError(f"{where}: unknown keys {sorted(extra)}")
        if any(m.name == name for m in built):
            raise MutantError(f"{where}: the name is used twice")
        bug = entry.get(says)
        if not isinstance(bug, str) or not bug.strip():
            raise MutantError(f"{where}: `{says}` says in a sentence "
                              + ("what is wrong" if kind == "mutants" else "why it is no bug"))
        if ("edit" in entry) == ("file" in entry):
            raise MutantError(f"{where}: give either [[{KINDS[kind]}.edit]] tables or a `file`")
        if "file" in entry:
            file = entry["file"]
            if not isinstance(file, str) or not (part_dir / file).is_file():
                raise MutantError(f"{where}: `file` names a file beside reference.py")
            source = (part_dir / file).read_text(encoding="utf-8")
        else:
            source = build(reference, entry["edit"], where)
        caught_by = entry.get("caught_by")
        if caught_by is not None and (kind != "mutants" or not isinstance(caught_by, str)):
            raise MutantError(f"{where}: `caught_by` names one check")
        built.append(Mutant(name, " ".join(bug.split()), source, caught_by))
    return built


def source(part_dir: Path, name: str, kind: str = "mutants") -> str:
    """One mutant's (or equivalent's) built source, by name."""
    for m in load(part_dir, kind):
        if m.name == name:
            return m.source
    raise MutantError(f"{part_dir / (kind + '.toml')}: no {KINDS[kind]} named {name!r}")


def module(part_dir: Path, name: str, kind: str = "mutants") -> ModuleType:
    """A mutant imported from a file (once per process, under a private name), as the sandbox
    imports a submission: for an exercise whose solve() or mistakes() plays one, and for tests.
    The file is written to a folder of this process's own."""
    global _built_dir
    module_name = f"roofline_{kind}_{part_dir.parent.name}_{name}"
    text = source(part_dir, name, kind)
    found = sys.modules.get(module_name)
    if found is not None and getattr(found, "__roofline_source__", None) == text:
        return found
    if _built_dir is None:
        _built_dir = Path(tempfile.mkdtemp(prefix="roofline-mutants-"))
    path = _built_dir / f"{module_name}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    built = importlib.util.module_from_spec(spec)
    built.__roofline_source__ = text  # type: ignore[attr-defined]
    sys.modules[module_name] = built  # dataclasses look their module up there
    spec.loader.exec_module(built)
    return built
