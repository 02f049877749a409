"""A digest of the exercises' code and data: what a figure made from them may be keyed by in a
cache that outlives the process (practice.evidence), so that a figure made by other code, before
a deploy or on another machine, is never read back as this code's."""
from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent


@cache
def code_digest(root: Path = ROOT) -> str:
    """sha256 over every file under `root` (exercises/: its shared modules, each exercise's
    code, templates and data), names included, compiled files left out; once per process
    (about 400 files, 4 MB)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
