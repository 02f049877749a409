"""Load an exercise's own Python file by path, once per process.

An exercise's code/ folder is not a package (the sandbox runs its files beside the student's), so
exercise.py reaches its reference, driver or checks by path. Each file is registered in
`sys.modules` under a private name, so every caller in the process shares one module object
(and the dataclasses and exceptions it defines compare as the same classes).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_file(name: str, path: Path) -> ModuleType:
    """The module at `path` under the private module name `name`, loaded on the first call."""
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module
