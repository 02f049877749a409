"""Sandboxed execution of untrusted code. Imports nothing else of ours and no Django.

    backend = get_backend()            # raises SandboxUnavailable; never runs code unsandboxed
    result = backend.run(SandboxSpec(argv=[runtime_python(), "main.py"], files={...}))
    result.verdict                     # "OK" | "RE" | "TLE" | "MLE" | "OLE"
"""

from __future__ import annotations

import contextlib
import os
import threading

from runners.base import Backend, SandboxUnavailable
from runners.bwrap import BwrapBackend
from runners.sandbox_env import SANDBOX_PYTHON, runtime_venv_host_path
from runners.spec import SandboxResult, SandboxSpec, SpecError, Verdict

__all__ = [
    "Backend", "SandboxResult", "SandboxSpec", "SandboxUnavailable", "SpecError", "Verdict",
    "get_backend", "runtime_python", "runtime_venv_host_path",
]
# Choose with $ROOFLINE_SANDBOX_BACKEND (auto|bwrap|docker); the docker backend runs the image
# named by $ROOFLINE_SANDBOX_IMAGE (default roofline-sandbox:py311, built from docker/sandbox).

_lock = threading.Lock()
_janitor_done = False
_backends: dict[str, Backend] = {}
_docker_janitor_done: set[str] = set()


def runtime_python() -> str:
    """The interpreter path as seen *inside* the sandbox (the runtime venv is bound there)."""
    return SANDBOX_PYTHON


def _janitor_once() -> None:
    global _janitor_done
    if not _janitor_done:
        _janitor_done = True
        # Cgroups, job dirs and (with an explicit slot) stray processes left by a worker that
        # was kill -9ed mid-run (pitfall #13).
        from runners import janitor

        janitor.janitor()


BACKENDS = ("auto", "bwrap", "docker")


def _bwrap() -> Backend:
    with _lock:
        # Keyed by the venv so a changed $ROOFLINE_SANDBOX_VENV gets its own probe.
        key = f"bwrap:{runtime_venv_host_path()}"
        backend = _backends.get(key)
        if backend is None:
            backend = _backends[key] = BwrapBackend()
    return backend


def _docker() -> tuple[Backend | None, str]:
    """The docker backend if usable (engine answers, sandbox image present, probe run OK)."""
    try:
        # Imported here so the docker SDK is needed only where the docker backend is used.
        from runners.docker import DockerBackend, sandbox_image
    except ImportError as exc:
        return None, f"docker SDK not importable: {exc}"
    with _lock:
        # Keyed by the image so a changed $ROOFLINE_SANDBOX_IMAGE gets its own probe.
        key = f"docker:{sandbox_image()}"
        backend = _backends.get(key)
        if backend is None:
            backend = _backends[key] = DockerBackend()
    ok, reason = backend.available()
    if not ok:
        return None, reason
    with _lock:
        first = key not in _docker_janitor_done
        _docker_janitor_done.add(key)
    if first:
        # Containers and volumes left by a worker that was kill -9ed mid-run (outside the lock:
        # it talks to the engine). A failing janitor must not cost us a backend that passed.
        with contextlib.suppress(Exception):
            backend.janitor()  # type: ignore[attr-defined]
    return backend, reason


def get_backend(name: str | None = None) -> Backend:
    """The sandbox backend named by `name` or $ROOFLINE_SANDBOX_BACKEND ("auto" by default).

    "bwrap" and "docker" return that backend once its probe run succeeded, else raise
    SandboxUnavailable with the reason. "auto" prefers docker when the engine answers and the
    sandbox image ($ROOFLINE_SANDBOX_IMAGE) exists, else bwrap. There is no unsandboxed
    fallback.
    """
    choice = (name or os.environ.get("ROOFLINE_SANDBOX_BACKEND") or "auto").strip().lower()
    if choice not in BACKENDS:
        raise SandboxUnavailable(
            f"unknown sandbox backend {choice!r} (expected {'|'.join(BACKENDS)})")
    with _lock:
        _janitor_once()
    reasons: list[str] = []
    if choice in ("auto", "docker"):
        docker_backend, reason = _docker()
        if docker_backend is not None:
            return docker_backend
        if choice == "docker":
            raise SandboxUnavailable(f"docker sandbox backend unavailable: {reason}")
        reasons.append(f"docker: {reason}")
    backend = _bwrap()
    ok, reason = backend.available()
    if not ok:
        reasons.append(f"bwrap: {reason}" if reasons else reason)
        raise SandboxUnavailable(f"no sandbox backend available ({choice}): {'; '.join(reasons)}")
    return backend
