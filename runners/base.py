"""The backend protocol shared by bwrap (local) and docker (production, later)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from runners.spec import SandboxResult, SandboxSpec


class SandboxUnavailable(RuntimeError):
    """No sandbox can run here (or the requested one cannot). Never a cue to run unsandboxed."""


@runtime_checkable
class Backend(Protocol):
    name: str

    def available(self) -> tuple[bool, str]:
        """(usable, reason). The reason says what is missing when unusable."""
        ...

    def run(self, spec: SandboxSpec) -> SandboxResult:
        """Run spec.argv confined; raise SandboxUnavailable if the sandbox cannot be set up."""
        ...
