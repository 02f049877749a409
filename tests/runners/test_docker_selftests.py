"""The docker backend grades exercises as the bwrap one does: a code exercise's and a kernel
exercise's selftests (reference, listed cases, mutants) pass with ROOFLINE_SANDBOX_BACKEND=docker,
every sandboxed grade run in a container of roofline-sandbox:py311."""
from __future__ import annotations

from typing import Any

import pytest

from exercises import registry
from graders import selftest
from runners import SandboxUnavailable, get_backend
from tests.runners.conftest import required

# One exercise of each sandboxed kind: Python code parts, and a Triton kernel part (the
# interpreter preview and the sm_90 compile, in the image's torch and triton).
SLUGS = ("stop_strings_stream", "fused_rope_positions")


@pytest.mark.parametrize("slug", SLUGS)
def test_the_selftest_passes_on_docker(slug: str, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        backend = get_backend("docker")
    except SandboxUnavailable as exc:
        if required("docker"):
            pytest.fail(f"docker sandbox unavailable here: {exc}")
        pytest.skip(f"docker sandbox unavailable: {exc}")
    monkeypatch.setenv("ROOFLINE_SANDBOX_BACKEND", "docker")
    # Graded here, not taken from an earlier selftest's cache (run on bwrap in this process).
    monkeypatch.setattr(selftest, "_sandboxed", {})
    runs: list[str] = []
    run = backend.run

    def counted(spec: Any) -> Any:
        result = run(spec)
        runs.append(result.backend)
        return result

    monkeypatch.setattr(backend, "run", counted)
    report = selftest.run(registry.get(slug))
    assert report.passed and report.ok, report.failed[:5]
    assert runs and set(runs) == {"docker"}
