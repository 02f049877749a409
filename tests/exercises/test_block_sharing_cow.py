"""Q48 (exercises/block_sharing_cow): the facts notes' table, sensible variants, distinct mistakes,
and a reference-counted block manager with copy-on-write that checks the closed forms."""
from __future__ import annotations

import math
import random
import tomllib

import pytest

from exercises.spec import ExerciseSpec, Quantity
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("block_sharing_cow")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
VARIANTS = EX.variants()
spec = EX.spec_fixture()


# --- a block manager with reference counts and copy-on-write ---------------------------------

class BlockManager:
    """Blocks of `size` slots; a block table per sequence; copy before writing into a block
    whose reference count is above 1 (the PagedAttention / vLLM v0 rule)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.ref: dict[int, int] = {}
        self.fill: dict[int, int] = {}
        self.next_id = 0
        self.copies = 0

    def _new(self, fill: int = 0) -> int:
        bid = self.next_id
        self.next_id += 1
        self.ref[bid], self.fill[bid] = 1, fill
        return bid

    def append(self, table: list[int]) -> None:
        if not table or self.fill[table[-1]] == self.size:
            table.append(self._new())  # allocation by need
        last = table[-1]
        if self.ref[last] > 1:  # copy-on-write
            self.ref[last] -= 1
            table[-1] = last = self._new(self.fill[last])
            self.copies += 1
        self.fill[last] += 1

    def fork(self, table: list[int]) -> list[int]:
        for bid in table:
            self.ref[bid] += 1
        return list(table)

    def held(self) -> int:
        return sum(1 for r in self.ref.values() if r > 0)


def simulate(n: int, prompt: int, output: int, block: int, share: bool) -> tuple[int, int]:
    """(blocks held after every sample generated `output` tokens, copies made)."""
    bm = BlockManager(block)
    if share:
        parent: list[int] = []
        for _ in range(prompt):
            bm.append(parent)
        tables = [parent] + [bm.fork(parent) for _ in range(n - 1)]
    else:
        tables = []
        for _ in range(n):
            t: list[int] = []
            for _ in range(prompt):
                bm.append(t)
            tables.append(t)
    for _ in range(output):  # decode steps, every sample appends one token per step
        for t in tables:
            bm.append(t)
    return bm.held(), bm.copies


def test_the_closed_forms_match_the_block_manager() -> None:
    rng = random.Random(48)
    cases = [(4, 1000, 200, 16), (4, 1008, 200, 16), (4, 100, 2000, 16), (8, 4000, 500, 16)]
    cases += [(rng.randint(2, 9), rng.randint(1, 700), rng.randint(1, 300), rng.choice((8, 16, 32)))
              for _ in range(60)]
    for n, prompt, output, block in cases:
        held, copies = simulate(n, prompt, output, block, share=False)
        assert held == ex.no_share(n, prompt, output, block) and copies == 0
        held, copies = simulate(n, prompt, output, block, share=True)
        assert held == ex.shared(n, prompt, output, block), (n, prompt, output, block)
        assert copies == ex.copies(n, prompt, block), (n, prompt, output, block)


# --- the facts notes' table (facts-q26-q49.md, Q48) ------------------------------------------

@pytest.mark.parametrize(
    ("n", "prompt", "output", "block", "no_share", "shared", "saving_pct", "copies"),
    [
        (4, 1000, 200, 16, 300, 114, 62.0, 3),
        (4, 1008, 200, 16, 304, 115, 62.2, 0),
        (4, 100, 2000, 16, 528, 510, 3.4, 3),
        (8, 4000, 500, 16, 2256, 506, 77.6, 0),
    ],
)
def test_worked_table(n: int, prompt: int, output: int, block: int, no_share: int, shared: int,
                      saving_pct: float, copies: int) -> None:
    assert ex.no_share(n, prompt, output, block) == no_share
    assert ex.shared(n, prompt, output, block) == shared
    assert ex.copies(n, prompt, block) == copies
    assert (no_share - shared) / no_share * 100 == pytest.approx(saving_pct, abs=0.05)


def test_canonical_is_the_notes_setting() -> None:
    p = ex.CANONICAL
    assert (p["n"], p["block"], p["prompt"], p["output"], p["r_prompt"], p["r_output"]) == (
        4, 16, 1000, 200, 100, 2000)
    s = ex.solve(p)
    assert s["blocks_no_share"].value == 300 and s["blocks_shared"].value == 114
    assert s["cow_copies"].value == 3
    assert s["saving_pct"] == pytest.approx(62.0)
    assert s["reasoning_saving"].value == pytest.approx(18 / 528 * 100)
    assert round(s["reasoning_saving"].value, 1) == 3.4
    assert s["saving_formula"] == "(n-1)*P/(n*(P+O))"
    # An aligned prompt on the same setting: no copy (the notes' second row).
    aligned = ex.solve(dict(p, prompt=1008))
    assert aligned["cow_copies"].value == 0 and aligned["aligned"]
    assert "0 copies" in aligned["copy_story"]


def test_continuous_formula_is_the_limit_of_the_block_count() -> None:
    # With B = 1 every count divides evenly and the block saving equals the formula exactly.
    for n, prompt, output in [(4, 1000, 200), (3, 77, 5000), (16, 4096, 1)]:
        a, b = ex.no_share(n, prompt, output, 1), ex.shared(n, prompt, output, 1)
        assert (a - b) / a == pytest.approx((n - 1) * prompt / (n * (prompt + output)))


# --- variants --------------------------------------------------------------------------------

def test_variants_are_sensible_and_differ() -> None:
    aligned = 0
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        assert s["blocks_shared"].value < s["blocks_no_share"].value
        assert s["saving_pct"] >= 25 and s["reasoning_saving"].value <= 10
        assert s["cow_copies"].value in (0, p["n"] - 1)
        aligned += s["aligned"]
        for pid in NUMBER_PARTS:
            assert math.isfinite(s[pid].value) and s[pid].value >= 0
    # Both kinds of prompt occur, so the copy count is not always n - 1.
    assert 20 <= aligned <= 120
    assert len({tuple(sorted(p.items())) for p in VARIANTS}) == 200
    answers = {tuple(ex.solve(p)[pid].value for pid in NUMBER_PARTS) for p in VARIANTS}
    assert len(answers) >= 195


# --- mistakes --------------------------------------------------------------------------------

def test_formula_and_its_mistakes(spec: ExerciseSpec) -> None:
    EX.assert_formula_grader_separates(spec, "saving_formula", "1 - (P + n*O)/(n*(P+O))")


# --- templates -------------------------------------------------------------------------------

def test_templates_render_for_every_variant() -> None:
    for which in ("statement.md", "solution.md"):
        for text in EX.rendered(which, VARIANTS):
            assert "nan" not in text.lower().split()
    # The statement shows givens only: no answer or worked intermediate.
    EX.assert_statement_shows_only_givens(())


def test_canonical_solution_quotes_the_worked_numbers() -> None:
    EX.assert_solution_quotes([
        "4 \\times 75", "\\mathbf{ 300 }", "\\mathbf{ 114 }", "62.0 %", "3 copies", "528 blocks",
        "510 blocks", "3.4 %", "62.5 %", "75 %"
    ])


def test_selftest_has_the_required_cases() -> None:
    cases = tomllib.loads((FOLDER / "selftest.toml").read_text(encoding="utf-8"))["case"]
    assert any(c.get("invalid") for c in cases)
    assert any(c["answer"] == "228" and c["score"] == 0 for c in cases)  # off by 2x
    assert any(c.get("variant") == 2 and c["answer"] == "0" and c["score"] == 1 for c in cases)
    assert ex.solve(ex.generate(random.Random(2)))["aligned"]  # the aligned case stays aligned
    assert isinstance(ex.solve(ex.CANONICAL)["blocks_shared"], Quantity)
