"""The practice modules import one another without a circle, counting the imports inside
functions too (a lazy import is still a dependency), and no action imports the workers: work
reaches practice/tasks.py by task name (practice/routing.py)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRACTICE = ROOT / "practice"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PRACTICE.rglob("*.py"))
            if "migrations" not in p.parts}


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The practice modules `path` imports, anywhere in it. `from a.b import c` counts as
    a.b.c when that is a module and as a.b otherwise; a package's own parents are not counted
    (importing practice.x runs practice/__init__.py, which only loads the Celery app)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m in known and m != name and m != "practice"}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(path, name, known) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports, if there is any."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_the_graph_is_read() -> None:
    graph = _graph()
    assert "practice.grading" in graph["practice.tasks"]
    assert "practice.actions.publish" in graph["practice.actions.submissions"]
    assert "practice.routing" in graph["practice.actions.publish"]


def test_no_circle_among_practice_modules() -> None:
    assert _cycle(_graph()) is None, " → ".join(_cycle(_graph()) or [])


def test_a_circle_would_be_found() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_action_and_nothing_an_action_uses_imports_the_workers() -> None:
    graph = _graph()
    actions = [name for name in graph if name.split(".")[:2] == ["practice", "actions"]]
    assert len(actions) > 5
    for name in actions:
        assert "practice.tasks" not in _reaches(graph, name), name
    assert "practice.tasks" not in _reaches(graph, "practice.grading")
    assert "practice.tasks" not in _reaches(graph, "practice.celery")


def test_importing_the_actions_does_not_load_the_workers() -> None:
    """The same, as Python sees it: every action module imported in a fresh interpreter."""
    graph = _graph()
    names = sorted(n for n in graph if n.startswith("practice.actions") or n == "practice.grading")
    code = ("import django, importlib, sys; django.setup(); "
            f"[importlib.import_module(n) for n in {names!r}]; "
            "print('practice.tasks' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr


def test_the_tasks_senders_name_are_the_workers() -> None:
    from practice import routing, tasks

    assert tasks.grade_submission.name == routing.GRADE_TASK
    assert tasks.run_regrade.name == routing.REGRADE_TASK
