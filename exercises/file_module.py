"""Load an exercise's own Python file by path, once per process.

An exercise's code/ folder is not a package (the sandbox runs its files beside the student's), so
exercise.py reaches its reference, driver or checks by path. Each file is registered in
`sys.modules` under a private name, so every caller in the process shares one module object
(and the dataclasses and exceptions it defines compare as the same classes).
"""
from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

# A worker grades on several threads: two first calls must not run one file twice.
_lock = threading.RLock()


def load_file(name: str, path: Path) -> ModuleType:
    """The module at `path` under the private module name `name`, loaded on the first call."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            # Registered before it runs, as an import would: dataclasses look their module up.
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)  # a later call tries again, not a half-run module
                raise
        return module
