"""`ast.parse` behind one lock, for every grader that parses Python.

CPython 3.11 keeps the AST constructor's recursion depth in state that every thread of the
interpreter shares. Two threads parsing at once can leave it unbalanced, and a parse then fails
with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905 mends one
path of it; CI's 3.11.7 still failed so). The graders parse in threads: a selftest grades its
kernel exercises in a pool, and a threaded worker grades several answers at once. A parse takes
milliseconds at most (submissions are capped in size), and only parses wait for one another."""
from __future__ import annotations

import ast
import threading
from typing import Literal

_lock = threading.Lock()


def parse(source: str, mode: Literal["exec", "eval"] = "exec") -> ast.AST:
    """ast.parse(source, mode=mode), one thread at a time."""
    with _lock:
        return ast.parse(source, mode=mode)
