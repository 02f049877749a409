"""What a payload finds inside any sandbox, whichever backend runs it: the runtime venv's place
and its interpreter, and the environment the payload starts with.

The bwrap backend binds the host's runtime venv at SANDBOX_VENV; the docker image installs one
there. Both start the payload with BASE_ENV plus the spec's own variables, so a program behaves
the same under either.
"""

from __future__ import annotations

import os

# The sandbox's CPU quota (SandboxSpec.cpus) is told to cpuclock.py inside it by this variable.
from runners.cpuclock import CPUS_ENV

SANDBOX_VENV = "/opt/venv"
SANDBOX_PYTHON = f"{SANDBOX_VENV}/bin/python"
# Where the runtime venv lives on the host (bound read-only at SANDBOX_VENV by bwrap).
DEFAULT_VENV = "/opt/roofline/sandbox-venv"

BASE_ENV: dict[str, str] = {
    "PATH": f"{SANDBOX_VENV}/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    # One thread per BLAS/OpenMP pool, and few malloc arenas: each thread/arena reserves address
    # space that RLIMIT_AS counts (pitfall #14), and the run is capped to ~1 CPU anyway.
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
}


def payload_env(cpus: float, extra: dict[str, str]) -> dict[str, str]:
    """What a payload starts with: BASE_ENV, its CPU quota, then the spec's own variables."""
    return {**BASE_ENV, CPUS_ENV: f"{cpus:g}", **extra}


def runtime_venv_host_path() -> str:
    return os.environ.get("ROOFLINE_SANDBOX_VENV", DEFAULT_VENV)
