"""The deployment a variant names: its model, its GPU and its tensor-parallel degree.

Many exercises' `solve()` and `mistakes()` opened with the same three look-ups; they live here
once so that a variant's "model"/"gpu"/"tp" keys are read one way everywhere.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exercises.catalog import gpu, model
from exercises.catalog.hardware import GPU
from exercises.catalog.models import Model


def deployment(p: Mapping[str, Any]) -> tuple[Model, GPU, int]:
    """The catalog model and GPU named by `p`, and its TP degree, looked up in that order."""
    return model(p["model"]), gpu(p["gpu"]), p["tp"]
