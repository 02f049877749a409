"""Sandboxed execution of untrusted code. Imports nothing else of ours and no Django.

    backend = get_backend()            # raises SandboxUnavailable; never runs code unsandboxed
    result = backend.run(SandboxSpec(argv=[runtime_python(), "main.py"], files={...}))
    result.verdict                     # "OK" | "RE" | "TLE" | "MLE" | "OLE"
"""

from __future__ import annotations

import os
import threading

from runners import cgroups
from runners.base import Backend, SandboxUnavailable
from runners.bwrap import (
    SANDBOX_PYTHON,
    BwrapBackend,
    janitor_job_dirs,
    runtime_venv_host_path,
)
from runners.spec import SandboxResult, SandboxSpec, SpecError, Verdict

__all__ = [
    "Backend", "SandboxResult", "SandboxSpec", "SandboxUnavailable", "SpecError", "Verdict",
    "get_backend", "runtime_python", "runtime_venv_host_path",
]

_lock = threading.Lock()
_janitor_done = False
_backends: dict[str, Backend] = {}


def runtime_python() -> str:
    """The interpreter path as seen *inside* the sandbox (the runtime venv is bound there)."""
    return SANDBOX_PYTHON


def _janitor_once() -> None:
    global _janitor_done
    if not _janitor_done:
        _janitor_done = True
        # Cgroups and job dirs left by a worker that was kill -9ed mid-run (pitfall #13).
        cgroups.janitor()
        janitor_job_dirs()


def get_backend(name: str | None = None) -> Backend:
    """The sandbox backend named by `name` or $ROOFLINE_SANDBOX_BACKEND ("auto" by default).

    "auto" and "bwrap" return a backend whose probe run succeeded, or raise SandboxUnavailable
    with the reason; "docker" is not built yet. There is no unsandboxed fallback.
    """
    choice = (name or os.environ.get("ROOFLINE_SANDBOX_BACKEND") or "auto").strip().lower()
    if choice == "docker":
        raise SandboxUnavailable("the docker sandbox backend is not built yet")
    if choice not in ("auto", "bwrap"):
        raise SandboxUnavailable(f"unknown sandbox backend {choice!r} (expected auto|bwrap|docker)")
    with _lock:
        _janitor_once()
        # Keyed by the venv so a changed $ROOFLINE_SANDBOX_VENV gets its own probe.
        key = f"bwrap:{runtime_venv_host_path()}"
        backend = _backends.get(key)
        if backend is None:
            backend = _backends[key] = BwrapBackend()
    ok, reason = backend.available()
    if not ok:
        raise SandboxUnavailable(f"no sandbox backend available ({choice}): {reason}")
    return backend
