"""An expression part's `symbol_kinds` (exercise.toml) and the exercise's `symbol_values(p)`:
checked when the folder loads, so a wrong table is an authoring error, never a grading one."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from exercises import registry
from exercises.registry import ExerciseError
from exercises.spec import PartSpec

HEADER = ('title = "T"\nseed = "Q23"\nuuid = "6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b"\n'
          'topic = "Memory"\n[[parts]]\n')
EXPRESSION = 'id = "f"\ntype = "expression"\nprompt = "?"\nsymbols = ["N", "S"]\n'


def write(tmp_path: Path, part: str) -> Path:
    folder = tmp_path / "sample_ex"
    folder.mkdir()
    (folder / "exercise.toml").write_text(HEADER + part)
    for name in ("statement.md", "solution.md", "exercise.py"):
        (folder / name).write_text("")
    return folder


@pytest.mark.parametrize(("line", "message"), [
    ('symbol_kinds = { X = "count" }', "parts[0].symbol_kinds.X: not one of the part's symbols"),
    ('symbol_kinds = { N = "integer" }', "parts[0].symbol_kinds.N: 'integer' is not one of"),
    ('symbol_kinds = ["N"]', "parts[0].symbol_kinds: expected dict"),
])
def test_a_bad_kinds_table_names_the_field(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(ExerciseError, match=message.replace("[", r"\[").replace("]", r"\]")):
        registry.load(write(tmp_path, EXPRESSION + line + "\n"))


def test_kinds_only_on_expression_parts(tmp_path: Path) -> None:
    part = 'id = "a"\ntype = "number"\nprompt = "?"\nsymbol_kinds = { N = "count" }\n'
    with pytest.raises(ExerciseError, match="only for expression parts"):
        registry.load(write(tmp_path, part))


def test_kinds_default_to_positive_reals() -> None:
    part = PartSpec(id="f", type="expression", prompt="?", symbols=("N", "S"),
                    symbol_kinds=(("N", "count"),))
    assert (part.symbol_kind("N"), part.symbol_kind("S")) == ("count", "real")


def fake(values: object) -> Any:
    part = PartSpec(id="f", type="expression", prompt="?", symbols=("N", "i", "S"),
                    symbol_kinds=(("N", "count"), ("i", "count0")))
    other = PartSpec(id="n", type="number", prompt="?")
    return SimpleNamespace(slug="fake", parts=(part, other),
                           module=SimpleNamespace(symbol_values=lambda p: values))


def test_symbol_values_are_checked_against_the_part() -> None:
    good = {"f": {"N": 8, "i": 0, "S": 0.25}}
    assert registry.symbol_values(fake(good), {}) == {"f": {"N": 8.0, "i": 0.0, "S": 0.25}}
    assert registry.symbol_values(SimpleNamespace(slug="x", module=SimpleNamespace()), {}) == {}
    for bad in (
        [1, 2],
        {"g": {"N": 1}},  # no such part
        {"n": {"N": 1}},  # not an expression part
        {"f": {"X": 1}},  # not one of the part's symbols
        {"f": {"N": 2.5}},  # a count that is not whole
        {"f": {"N": 0}},  # a count starts at 1
        {"f": {"i": -1}},
        {"f": {"S": -0.5}},
        {"f": {"S": float("inf")}},
        {"f": {"S": "big"}},
    ):
        with pytest.raises(ExerciseError, match="exercises/fake/exercise.py: symbol_values"):
            registry.symbol_values(fake(bad), {})


def test_every_expression_part_states_its_kinds_and_values() -> None:
    for spec in registry.load_all().values():
        params = registry.params_for(spec, registry.CANONICAL_VARIANT)
        values = registry.symbol_values(spec, params)
        for part in spec.parts:
            if part.type == "expression":
                assert {n for n, _ in part.symbol_kinds} == set(part.symbols), spec.slug
                assert set(values.get(part.id, {})) == set(part.symbols), spec.slug
