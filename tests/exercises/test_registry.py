"""Loading exercise folders: a bad exercise.toml fails with the file and the field named."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from exercises import registry, templating
from exercises.registry import ExerciseError

GOOD_PART = 'id = "a"\ntype = "number"\nprompt = "How much?"\nunit = "GB"\n'


def write(tmp_path: Path, toml: str, slug: str = "sample_ex") -> Path:
    folder = tmp_path / slug
    folder.mkdir()
    (folder / "exercise.toml").write_text(toml)
    for name in ("statement.md", "solution.md", "exercise.py"):
        (folder / name).write_text("")
    return folder


def header(**over: str) -> str:
    fields = {"title": '"T"', "seed": '"Q23"', "uuid": '"6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b"',
              "topic": '"Memory"'} | over
    return "".join(f"{k} = {v}\n" for k, v in fields.items())


@pytest.mark.parametrize(("toml", "field"), [
    (header(seed='"Q99"') + "[[parts]]\n" + GOOD_PART, "seed"),
    (header() + "[[parts]]\n" + GOOD_PART.replace('"number"', '"nuber"'), "parts[0].type"),
    (header() + "[[parts]]\n" + GOOD_PART + "tolerance = 0.1\n", "parts[0].tolerance_reason"),
    (header() + "[[parts]]\n" + GOOD_PART + "colour = 1\n", "parts[0].colour"),
    (header() + "[[parts]]\n" + GOOD_PART.replace("prompt", "promt"), "parts[0]"),
    (header() + "[[parts]]\n" + 'id = "e"\ntype = "expression"\nprompt = "f"\n', "parts[0].symbols"),
    (header() + "[[parts]]\n" + 'id = "c"\ntype = "choice"\nprompt = "?"\n', "parts[0].options"),
    (header() + "[[parts]]\n" + GOOD_PART + "[[parts]]\n" + GOOD_PART, "parts"),
    (header(title="3") + "[[parts]]\n" + GOOD_PART, "title"),
    ('title = "T"\nseed = "Q01"\nuuid = "6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b"\n[[parts]]\n'
     + GOOD_PART, "topic"),
    (header(uuid='"Q23"') + "[[parts]]\n" + GOOD_PART, "uuid"),
    ("title = ", "syntax"),
])
def test_a_bad_toml_names_file_and_field(tmp_path: Path, toml: str, field: str) -> None:
    folder = write(tmp_path, toml)
    with pytest.raises(ExerciseError) as err:
        registry.load(folder)
    assert "exercise.toml" in str(err.value)
    assert field in str(err.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    folder = write(tmp_path, header() + "[[parts]]\n" + GOOD_PART)
    (folder / "solution.md").unlink()
    with pytest.raises(ExerciseError, match="solution.md"):
        registry.load(folder)


def test_every_real_exercise_loads_and_solves_every_part() -> None:
    specs = registry.load_all()
    assert len(specs) >= 3
    for spec in specs.values():
        for variant in ("canonical", 7):
            solution = registry.solve(spec, registry.params_for(spec, variant))
            assert {p.id for p in spec.parts} <= set(solution)


def test_variant_parsing() -> None:
    assert registry.parse_variant("canonical") == "canonical"
    assert registry.parse_variant("42") == 42
    for bad in ("-1", "canon", "1e3", ""):
        with pytest.raises(ValueError):
            registry.parse_variant(bad)


def test_templates_fill_and_refuse_unknown_names() -> None:
    text = "KV {{ s.kv:,.0f }} B for {{ p.model }}"
    assert templating.render(text, {"model": "70B"}, {"kv": 2684354560}) == \
        "KV 2,684,354,560 B for 70B"
    with pytest.raises(templating.TemplateError, match="s.nope"):
        templating.render("{{ s.nope }}", {}, {})
    with pytest.raises(templating.TemplateError, match="malformed"):
        templating.render("{{ s.kv + 1 }}", {}, {"kv": 1})


def test_solution_sections_split_by_part() -> None:
    pre, parts = templating.split_sections("intro\n<!-- part: a -->\nA\n<!-- part: b -->\nB\n")
    assert pre.strip() == "intro" and parts["a"].strip() == "A" and parts["b"].strip() == "B"


def test_evidence_is_checked_and_names_the_exercise() -> None:
    from types import SimpleNamespace

    from exercises.spec import Evidence

    def spec_with(result: object) -> Any:
        return SimpleNamespace(slug="fake", module=SimpleNamespace(evidence=lambda p: result))

    good = Evidence("Trace", "t.json", "trace", {"traceEvents": []})
    assert registry.evidence(spec_with({"trace": good}), {}) == {"trace": good}
    latency = Evidence("S", "s.json", "series", {"x": {}, "series": [
        {"unit": "ms", "points": [[0, 1.5]]}], "histogram": ["ms"]})
    assert registry.evidence(spec_with({"s": latency}), {}) == {"s": latency}
    assert registry.evidence(SimpleNamespace(slug="x", module=SimpleNamespace()), {}) == {}
    bad = [
        {"Bad Name": good},
        {"trace": Evidence("T", "t.json", "movie", {"traceEvents": []})},
        {"trace": Evidence("T", "../t.json", "trace", {"traceEvents": []})},
        {"trace": Evidence("T", "t.json", "trace", {"events": []})},
        {"s": Evidence("S", "s.json", "series", {"x": {}, "series": []})},
        {"s": Evidence("S", "s.json", "series", {"x": {}, "series": [
            {"unit": "s", "points": []}], "histogram": ["ms"]})},  # no series in ms
        {"trace": {"traceEvents": []}},
    ]
    for result in bad:
        with pytest.raises(registry.ExerciseError, match="exercises/fake/exercise.py"):
            registry.evidence(spec_with(result), {})
    # Cached per variant: the second call does not run the exercise's evidence() again.
    calls: list[dict[str, Any]] = []

    def counted(p: dict[str, Any]) -> dict[str, Evidence]:
        calls.append(p)
        return {"trace": good}

    counting = SimpleNamespace(slug="fake", module=SimpleNamespace(evidence=counted))
    assert registry.evidence(counting, {"v": 1}) == registry.evidence(counting, {"v": 1})
    assert registry.evidence(counting, {"v": 2}) == {"trace": good}
    assert calls == [{"v": 1}, {"v": 2}]
    with pytest.raises(ValueError):
        registry.evidence_bytes(Evidence("S", "s.json", "series",
                                         {"x": {}, "series": [{"points": [[0, float("nan")]]}]}))
