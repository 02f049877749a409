from __future__ import annotations

import os

import pytest

from runners import Backend, SandboxUnavailable, get_backend


def _on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def sandbox() -> Backend:
    """The configured backend. Unavailable: a failure on CI (the sandbox is part of what CI
    proves), a skip with the reason on a developer machine without bwrap/userns."""
    try:
        return get_backend()
    except SandboxUnavailable as exc:
        if _on_ci():
            pytest.fail(f"sandbox unavailable on CI: {exc}")
        pytest.skip(f"sandbox unavailable: {exc}")
