"""The command line keeps DESIGN §8's contract; a hostile formula is rejected and runs nothing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from exercises import registry
from graders import kernel
from graders.selftest import answer_text
from graders.text import checkable
from tests.part_kinds import part_type_cover

ROOT = Path(__file__).resolve().parent.parent


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


# `make test` runs the command line on the fewest exercises that hold every kind of part; the
# same tests over every exercise are `make test-full`'s (marker `full`), as is the shared
# contract tool (../shared/tools/cli_contract.py), which also runs `selftest` through it.
SPECS = registry.load_all()
COVER = part_type_cover(SPECS)
EVERY = [pytest.param(slug, marks=pytest.mark.full) if slug not in COVER else slug
         for slug in sorted(SPECS)]


def test_list() -> None:
    listed = json.loads(manage("exercises", "list", "--json").stdout)
    assert {e["slug"] for e in listed} == set(SPECS)
    for e in listed:
        assert {"slug", "seed", "title", "topic", "parts"} <= set(e)


@pytest.mark.parametrize("slug", EVERY)
def test_show(slug: str) -> None:
    shown = json.loads(manage("exercises", "show", slug, "--variant", "canonical",
                              "--json").stdout)
    assert {"params", "answers", "intermediates"} <= set(shown)
    for part in SPECS[slug].parts:
        if part.type == "number":
            ans = shown["answers"][part.id]
            assert isinstance(ans["value"], float) and isinstance(ans["unit"], str)


@pytest.mark.parametrize("slug", EVERY)
def test_grade_prints_the_contract_for_every_part_type(slug: str) -> None:
    spec = registry.get(slug)
    solution = registry.solve(spec, registry.params_for(spec, "canonical"))
    for part in spec.parts:
        ref = solution[part.id]
        args = ["--file", str(spec.path / ref)] if part.type in ("code", "kernel") else \
            ["--answer", answer_text(part, ref)]
        out = manage("grade", slug, part.id, *args, "--json")
        doc = json.loads(out.stdout)
        assert {"score", "verdict", "feedback", "checks"} <= set(doc), out.stderr
        assert doc["score"] == (0.0 if part.type == "text" else 1.0), doc
        # A kernel graded only in the interpreter is a preview: provisional, not final.
        assert doc["final"] is (doc["verdict"] != "provisional"), doc
        if part.type == "kernel" and kernel.kernel_device() == "cpu":
            assert doc["verdict"] == "provisional", doc
        for check in doc["checks"]:
            assert {"name", "passed", "message"} <= set(check)
        if part.type == "text" and checkable(part):
            # One check per key point, in order, named by its index; the model answer makes
            # every one of them.
            assert [c["name"] for c in doc["checks"]] == [
                str(i) for i in range(len(part.key_points))], doc
            assert all(c["passed"] and c["message"].startswith("covered: ")
                       for c in doc["checks"]), doc


def test_a_hostile_formula_is_invalid_and_runs_nothing(tmp_path: Path) -> None:
    spec = next(s for s in registry.load_all().values()
                if any(p.type == "expression" for p in s.parts))
    part = next(p for p in spec.parts if p.type == "expression")
    marker = tmp_path / "pwned"
    for hostile in (f"__import__('os').system('touch {marker}')",
                    f"open('{marker}', 'w')", "().__class__.__bases__[0].__subclasses__()",
                    "9**9**9**9**9", "(" * 5000 + "1" + ")" * 5000):
        doc = json.loads(manage("grade", spec.slug, part.id, "--answer", hostile, "--json").stdout)
        assert doc["verdict"] == "invalid" and doc["score"] == 0.0, (hostile, doc)
    assert not marker.exists()


def test_selftest_exits_nonzero_on_an_unknown_slug() -> None:
    assert manage("selftest", "no_such_exercise").returncode != 0


@pytest.mark.parametrize("slug", ["no_such_exercise", "_template", "../exercises", "README.md"])
def test_grade_and_show_name_a_slug_that_is_no_exercise(slug: str) -> None:
    """`grade` and `show` load only the exercise named (registry.load_one): a folder that is not
    one (the template, a path, a file) is refused like an unknown slug."""
    for args in (("grade", slug, "p", "--answer", "1"), ("exercises", "show", slug)):
        out = manage(*args)
        assert out.returncode != 0 and f"no exercise {slug!r}" in out.stderr, (args, out.stderr)
