from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def sandbox() -> None:
    """Skip a module's sandboxed tests, with the reason, where no sandbox backend can run."""
    from runners import SandboxUnavailable, get_backend

    try:
        get_backend()
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox: {exc}")
