"""practice.warm: a web worker loads what its first requests would, before it takes them, and
starts anyway when that fails."""
from __future__ import annotations

import gc
import logging

import pytest

from exercises import registry
from practice import warm


def test_a_failed_warm_up_is_logged_and_the_worker_starts(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> None:
        raise registry.ExerciseError("exercises/x/exercise.toml: uuid is also y's")

    monkeypatch.setattr(registry, "load_all", broken)
    try:
        with caplog.at_level(logging.ERROR, logger="practice.warm"):
            warm.warm_web_process()  # does not raise
    finally:
        gc.unfreeze()  # this test process keeps its heap as it was
    assert "warming the web process failed" in caplog.text
    assert "uuid is also y's" in caplog.text
