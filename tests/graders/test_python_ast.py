"""graders.python_ast: every grader's parse holds the one lock (CPython 3.11's AST constructor
keeps its recursion depth in state the threads share)."""
from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from graders import python_ast

ROOT = Path(__file__).resolve().parents[2]


def test_a_parse_holds_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    held: list[bool] = []
    real = ast.parse

    def watched(source: str, *args: Any, **kwargs: Any) -> ast.AST:
        held.append(python_ast._lock.locked())
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", watched)
    assert isinstance(python_ast.parse("x = 1"), ast.Module)
    assert isinstance(python_ast.parse("a + b", mode="eval"), ast.Expression)
    assert held == [True, True] and not python_ast._lock.locked()


def test_no_grader_parses_around_it() -> None:
    """Only python_ast calls ast.parse in the graders."""
    for path in sorted((ROOT / "graders").glob("*.py")):
        if path.name != "python_ast.py":
            assert "ast.parse(" not in path.read_text(encoding="utf-8").replace(
                "python_ast.parse(", ""), path.name


def test_threads_parsing_at_once_all_get_their_trees() -> None:
    sources = [f"def f{i}(x):\n" + "    x = [x, (x, {x: x})]\n" * 200 + "    return x\n"
               for i in range(64)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        trees = list(pool.map(python_ast.parse, sources))
    assert [t.body[0].name for t in trees] == [f"f{i}" for i in range(64)]  # type: ignore[attr-defined]
