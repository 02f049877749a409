"""The exercises `make test` walks in place of all of them hold every kind of part."""
from __future__ import annotations

from exercises import registry
from tests.part_kinds import part_kind, part_type_cover


def test_the_cover_holds_every_part_type() -> None:
    specs = registry.load_all()
    cover = part_type_cover(specs)
    held = {part_kind(p) for slug in cover for p in specs[slug].parts}
    assert held == {part_kind(p) for spec in specs.values() for p in spec.parts}
    assert {"code", "kernel", "expression", "number", "text", "choice", "choice-multi",
            "ranking"} <= held
    assert len(cover) < len(specs) / 4
