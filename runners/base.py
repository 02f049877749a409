"""The backend protocol shared by bwrap (local) and docker (production)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from runners.spec import SandboxResult, SandboxSpec


class SandboxUnavailable(RuntimeError):
    """No sandbox can run here (or the requested one cannot). Never a cue to run unsandboxed.

    Graders let it propagate: the submission is marked as an infrastructure error, never as
    the student's failure.
    """


class SandboxSetupError(SandboxUnavailable):
    """The sandbox itself failed to start (e.g. bwrap could not bind the runtime venv).

    Raised only when the failure provably happened before any student code could run, so a
    submission cannot fake it by printing "bwrap: ..." to stderr.
    """

    def __init__(self, message: str, stderr: bytes = b"") -> None:
        super().__init__(message)
        self.stderr = stderr


@runtime_checkable
class Backend(Protocol):
    name: str

    def available(self) -> tuple[bool, str]:
        """(usable, reason). The reason says what is missing when unusable."""
        ...

    def run(self, spec: SandboxSpec) -> SandboxResult:
        """Run spec.argv confined; raise SandboxUnavailable if the sandbox cannot be set up."""
        ...


class MachineBusy(SandboxUnavailable):
    """A run was stopped at its wall-clock backstop while starved of a core (runners/cpuclock.py),
    again when retried: the machine's fault, so never graded as the student's time limit."""
