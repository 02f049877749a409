"""What a sandbox run is asked to do (SandboxSpec) and what came of it (SandboxResult).

Both backends (bwrap now, docker later) take the same spec and return the same result, so
graders never care which one ran. Defaults follow research/sandbox-feasibility.md §4.
"""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass, field
from typing import Literal

MiB = 1 << 20

Verdict = Literal["OK", "RE", "TLE", "MLE", "OLE"]


class SpecError(ValueError):
    """The spec asks for something no backend may do (e.g. network access)."""


def _check_relpath(name: str) -> None:
    # Job files are written by the (privileged) harness, so a name like "../../etc/x" or an
    # absolute path must never escape the job directory.
    parts = name.split("/")
    if "\x00" in name or any(part in ("", ".", "..") for part in parts):
        raise SpecError(f"file name must be a plain relative path: {name!r}")


@dataclass
class SandboxSpec:
    """One untrusted command. Everything the command may see is listed here."""

    argv: list[str]
    # path relative to the job dir -> content; the job dir is bound read-only at /sandbox (cwd).
    files: dict[str, bytes] = field(default_factory=dict)
    stdin: bytes = b""
    # Added on top of the fixed allow-list (PATH, HOME, LANG, thread counts). Never the host env.
    env: dict[str, str] = field(default_factory=dict)
    wall_timeout_s: float = 10.0
    cpu_time_s: float = 5.0
    # The whole sandbox (cgroup), or per process where there is no cgroup ("rlimit-only").
    memory_bytes: int = 512 * MiB
    # Processes and threads of the payload; the backend adds what it needs for itself.
    pids: int = 64
    nofile: int = 256
    fsize_bytes: int = 16 * MiB
    tmpfs_bytes: int = 64 * MiB
    shm_bytes: int = 16 * MiB
    # Shared by stdout and stderr together.
    output_limit_bytes: int = 1 * MiB
    # A CPU quota (cgroup) for the whole sandbox; cpu_time_s is the RLIMIT_CPU of each process.
    cpus: float = 1.0
    network: bool = False
    gpu: int | None = None
    seccomp: bool = True

    def __post_init__(self) -> None:
        if not self.argv or not all(isinstance(a, str) and "\x00" not in a for a in self.argv):
            raise SpecError("argv must be a non-empty list of strings without NUL")
        # Network access is excluded by design (DESIGN.md §4), not merely unimplemented.
        if self.network:
            raise SpecError("network access is not supported in the sandbox")
        for name in self.files:
            _check_relpath(name)
        for key, value in self.env.items():
            if not key or "=" in key or "\x00" in key or "\x00" in value:
                raise SpecError(f"bad environment variable: {key!r}")
        positive: dict[str, float] = {
            "wall_timeout_s": self.wall_timeout_s,
            "cpu_time_s": self.cpu_time_s,
            "memory_bytes": self.memory_bytes,
            "pids": self.pids,
            "nofile": self.nofile,
            "fsize_bytes": self.fsize_bytes,
            "tmpfs_bytes": self.tmpfs_bytes,
            "shm_bytes": self.shm_bytes,
            "output_limit_bytes": self.output_limit_bytes,
            "cpus": self.cpus,
        }
        for name, value in positive.items():
            if not value > 0:
                raise SpecError(f"{name} must be positive, got {value!r}")


@dataclass
class SandboxResult:
    # None when the command was killed by a signal (then `signal` is set).
    exit_code: int | None
    signal: int | None
    stdout: bytes
    stderr: bytes
    wall_s: float
    cpu_s: float
    timed_out: bool
    output_truncated: bool
    oom_killed: bool
    backend: str
    # "cgroup": the whole sandbox shares one memory limit; "rlimit-only": per-process RLIMIT_AS
    # only (pids were clamped to keep pids x RLIMIT_AS bounded), see feasibility pitfall #10.
    memory_isolation: str

    @property
    def verdict(self) -> Verdict:
        # Precedence matters: killing for too much output also ends the run by SIGKILL, and a
        # SIGXCPU death is a time limit, not a crash.
        if self.output_truncated:
            return "OLE"
        if self.timed_out or self.signal == _signal.SIGXCPU:
            return "TLE"
        if self.oom_killed:
            return "MLE"
        if self.signal is not None or self.exit_code != 0:
            return "RE"
        return "OK"
