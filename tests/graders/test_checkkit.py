"""graders/checkkit.py, the kit every code part's checks.py uses: seeded Hypothesis draws, the
random cases made from them, and the "N of M cases fail. Smallest: ..." summary."""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from graders import checkkit

STRATEGY = st.lists(st.integers(0, 99), max_size=5)


def _case(case_id: str, n: int) -> dict[str, Any]:
    return {"id": case_id, "input": {"n": n}}


def test_a_seed_always_draws_the_same_values_and_another_seed_others() -> None:
    a = checkkit.draw(STRATEGY, 7, 30)
    assert a == checkkit.draw(STRATEGY, 7, 30)
    assert a != checkkit.draw(STRATEGY, 8, 30)
    assert 0 < len(a) <= 30


def test_a_filter_skips_the_values_it_rejects_and_a_hopeless_one_gives_fewer() -> None:
    evens = checkkit.draw(st.integers(0, 10**6).filter(lambda x: x % 2 == 0), 3, 40)
    assert len(evens) == 40 and all(x % 2 == 0 for x in evens)
    assert checkkit.draw(st.integers(0, 9).filter(lambda x: x > 99), 3, 5) == []


@st.composite
def _script(draw: st.DrawFn) -> list[Any]:
    """A stateful script, as the exercises draw them: later draws depend on earlier values."""
    n = draw(st.integers(0, 6))
    out: list[Any] = []
    for i in range(n):
        kind = draw(st.sampled_from(("a", "b", "c")))
        if kind == "a":
            out.append(draw(st.lists(st.integers(0, i + 1), unique=True, max_size=4)))
        else:
            out.append(draw(checkkit.picks((1, 2, 3), max_size=5)))
    return out


# One of each kind of strategy the exercises use, and some they may: every choice type
# (integers, floats, strings, bytes, booleans), filters, unique collections, recursion.
VARIED = st.one_of(
    st.integers(), st.integers(-5, 10**12), st.floats(), st.floats(0, 1, exclude_min=True),
    st.text(max_size=8), st.binary(max_size=8), st.booleans(),
    st.lists(st.integers(0, 9).filter(lambda x: x != 3), max_size=6),
    st.dictionaries(st.text(max_size=3), st.none() | st.integers(0, 5), max_size=4),
    st.tuples(st.sampled_from("xyz"), st.fractions(max_denominator=9)),
    st.recursive(st.integers(0, 3), lambda inner: st.lists(inner, max_size=3), max_leaves=8),
    _script(),
)


def test_the_lean_data_draws_what_hypothesis_own_draws(monkeypatch: Any) -> None:
    from hypothesis.internal.conjecture.data import ConjectureData

    lean = checkkit.draw(VARIED, 5, 300)
    # An example too large for Hypothesis's buffer overruns and is skipped in both.
    huge = checkkit.draw(st.lists(st.binary(min_size=64, max_size=64), min_size=200), 5, 3)
    monkeypatch.setattr(checkkit, "_DATA", ConjectureData)
    assert lean == checkkit.draw(VARIED, 5, 300)
    assert huge == checkkit.draw(st.lists(st.binary(min_size=64, max_size=64), min_size=200),
                                 5, 3) == []
    assert len({repr(v) for v in lean}) > 200  # many kinds of value, not one repeated


# Draws of a wide integer range in a bare interpreter, printed as JSON. The second process first
# loads a module full of other integer constants and has another hash seed: Hypothesis's default
# would mix those constants into its draws (it takes them from every local module loaded).
_DRAW_IN_A_FRESH_PROCESS = """
import json, sys
if sys.argv[1] == "more":
    sys.path.insert(0, sys.argv[2])
    import many_constants  # noqa: F401
from hypothesis import strategies as st
from graders import checkkit
print(json.dumps(checkkit.draw(st.lists(st.integers(0, 10**9), max_size=8), 11, 200)))
"""


def test_a_seed_draws_the_same_values_in_any_process(tmp_path: Any) -> None:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    constants = ", ".join(str(7 * 10**5 + 13 * i) for i in range(400))
    (tmp_path / "many_constants.py").write_text(f"VALUES = [{constants}]\n", encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    outputs = []
    for extra, hash_seed in (("few", "1"), ("more", "2")):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(root)}
        run = subprocess.run([sys.executable, "-c", _DRAW_IN_A_FRESH_PROCESS, extra,
                              str(tmp_path)], env=env, cwd=tmp_path, capture_output=True,
                             text=True, check=True)
        outputs.append(json.loads(run.stdout))
    assert outputs[0] == outputs[1] == checkkit.draw(
        st.lists(st.integers(0, 10**9), max_size=8), 11, 200)


def test_drawn_cases_skip_inputs_already_there_and_number_the_rest() -> None:
    cases = [_case("edge-one", 1)]
    fresh = checkkit.drawn_cases(cases, [{"n": 1}, {"n": 2}, {"n": 2}, {"n": 3}])
    assert fresh == [{"id": "random-001", "input": {"n": 2}},
                     {"id": "random-002", "input": {"n": 3}}]
    assert cases == [_case("edge-one", 1)]  # the caller appends


def test_a_passing_check_says_so_with_its_case_count() -> None:
    v = checkkit.Verdicts(lambda c: c["input"]["n"])
    v.add("sums", _case("a", 1), True)
    v.add("sums", _case("b", 2), True)
    (check,) = v.checks([("sums", 2.0, "Every sum matched."), ("unused", 1.0, "-")])
    assert (check.name, check.passed, check.message, check.weight) == \
        ("sums", True, "Every sum matched.", 2.0)
    assert check.details == {"cases": 2}


def test_a_failing_check_counts_failures_and_shows_the_smallest() -> None:
    v = checkkit.Verdicts(lambda c: c["input"]["n"])
    v.add("sums", _case("big", 9), False, "wrong on 9")
    v.add("sums", _case("ok", 0), True)
    v.problem("sums", _case("small", 3), "wrong on 3")
    v.problem("sums", _case("also-small", 3), "wrong on the other 3")  # a tie: the first wins
    (check,) = v.checks([("sums", 1.0, "-")])
    assert not check.passed
    assert check.message == "3 of 4 cases fail. Smallest: wrong on 3"
    assert check.details == {"case": "small", "failing": 3, "cases": 4}


def test_a_rank_details_noun_and_lead_of_its_own() -> None:
    v = checkkit.Verdicts(lambda c: c["input"]["n"])
    v.add("speed", _case("a", 1), False, "slow at step 5", rank=(5,), details={"step": 5})
    v.add("speed", _case("b", 9), False, "slow at step 2", rank=(2,), details={"step": 2})
    (check,) = v.checks([("speed", 1.0, "-")], noun="workloads", lead="Shortest: ")
    assert check.message == "2 of 2 workloads fail. Shortest: slow at step 2"
    assert check.details == {"case": "b", "step": 2, "failing": 2, "cases": 2}


def test_bare_when_alone_drops_the_count_for_a_single_case() -> None:
    v = checkkit.Verdicts(lambda c: 0)
    v.add("speed", _case("large", 0), False, "too slow")
    (check,) = v.checks([("speed", 1.0, "-")], bare_when_alone=True)
    assert check.message == "too slow"


def test_a_sibling_is_loaded_once_under_a_private_name(tmp_path: Any) -> None:
    folder = tmp_path / "some_exercise" / "code"
    folder.mkdir(parents=True)
    (folder / "reference.py").write_text("LOADS = []\nLOADS.append(1)\n", encoding="utf-8")
    checks_file = str(folder / "checks.py")
    first = checkkit.sibling(checks_file, "reference")
    assert checkkit.sibling(checks_file, "reference") is first
    assert first.LOADS == [1] and first.__name__ == "roofline_checks_some_exercise_reference"


def test_with_draws_adds_the_fresh_draws_and_sorts() -> None:
    edge = [_case("edge-big", 9)]
    cases = checkkit.with_draws(edge, ['{"n": 9}', '{"n": 4}'], lambda c: c["input"]["n"])
    assert [c["id"] for c in cases] == ["random-001", "edge-big"]


def test_the_envelope_is_the_error_text_the_output_dict_or_nothing() -> None:
    assert checkkit.envelope({"error": "ValueError: x"}) == "ValueError: x"
    assert checkkit.envelope({"output": {"value": 1}}) == {"value": 1}
    # Shapes a forged line may take: each is None, never an exception.
    for forged in (None, [], "text", 7, {"error": 3}, {"error": None, "output": {}},
                   {"output": [1]}, {"output": "x"}, {}):
        assert checkkit.envelope(forged) is None, forged


def test_judge_each_judges_every_case_in_order_then_summarises() -> None:
    seen: list[str] = []

    def judge(case: dict[str, Any], got: Any, expected: Any, v: checkkit.Verdicts) -> None:
        seen.append(case["id"])
        v.problem("equal", case, "" if got == expected else f"got {got}, expected {expected}")

    cases = [{"id": "b", "input": {"n": 2}}, {"id": "a", "input": {"n": 1}}]
    checks = checkkit.judge_each(cases, [2, 0], [2, 1], judge, lambda c: c["input"]["n"],
                                 [("equal", 1.0, "all equal")], noun="workloads")
    assert seen == ["b", "a"]
    assert [(c.name, c.passed) for c in checks] == [("equal", False)]
    assert checks[0].message == "1 of 2 workloads fail. Smallest: got 0, expected 1"


@st.composite
def _script_built_each_time(draw: st.DrawFn) -> list[Any]:
    n = draw(st.integers(1, 6))
    return [draw(st.lists(st.sampled_from((1, 2, 3)), max_size=n)), draw(st.booleans()),
            draw(st.tuples(st.integers(0, 9), st.sampled_from(["a", "b"])))]


@st.composite
def _script_built_once(draw: st.DrawFn) -> list[Any]:
    n = draw(checkkit.integers(1, 6))
    return [draw(checkkit.lists(checkkit.sampled_from((1, 2, 3)), max_size=n)),
            draw(checkkit.booleans()),
            draw(checkkit.tuples(checkkit.integers(0, 9), checkkit.sampled_from(["a", "b"])))]


def test_strategies_built_once_draw_what_fresh_ones_draw() -> None:
    # The exercises' hidden cases must not change with the cache: same seed, same values,
    # whether the strategies are new, cached from an earlier draw, or the cache was cleared.
    fresh = checkkit.draw(_script_built_each_time(), 5, 40)
    checkkit._BUILT.clear()
    assert checkkit.draw(_script_built_once(), 5, 40) == fresh
    assert checkkit.draw(_script_built_once(), 5, 40) == fresh


def test_the_built_strategies_are_reused_and_bounded(monkeypatch: Any) -> None:
    assert checkkit.integers(0, 7) is checkkit.integers(0, 7)
    assert checkkit.sampled_from([1, 2]) is checkkit.sampled_from((1, 2))
    assert checkkit.sampled_from([[1], [2]]) is not checkkit.sampled_from([[1], [2]])
    monkeypatch.setattr(checkkit, "MAX_BUILT", 3)
    checkkit._BUILT.clear()
    for n in range(10):  # keys that never repeat
        checkkit.integers(0, n)
        assert len(checkkit._BUILT) <= 3


def test_each_failing_case_is_ranked_once_however_many_checks_it_fails() -> None:
    ranked: list[str] = []

    def rank(case: dict[str, Any]) -> int:
        ranked.append(case["id"])
        return case["input"]["n"]

    v = checkkit.Verdicts(rank)
    cases = [_case("a", 3), _case("b", 1), _case("c", 2)]
    for name in ("one", "two", "three"):
        for c in cases:
            v.add(name, c, False, f"{name} fails on {c['id']}")
    found = v.checks([("one", 1.0, "-"), ("two", 1.0, "-"), ("three", 1.0, "-")])
    assert [c.details["case"] for c in found] == ["b", "b", "b"]
    assert sorted(ranked) == ["a", "b", "c"]


def test_picks_draws_lists_of_the_options_in_their_sizes_each_about_equally() -> None:
    from collections import Counter

    lists = checkkit.draw(checkkit.picks(("a", "b", "c"), min_size=2, max_size=6), 5, 300)
    assert len(lists) == 300 and all(2 <= len(x) <= 6 for x in lists)
    counts = Counter(v for x in lists for v in x)
    assert set(counts) == {"a", "b", "c"}
    assert max(counts.values()) < 1.25 * min(counts.values())
    exact = checkkit.draw(checkkit.picks((1, 2), min_size=4, max_size=4), 5, 50)
    assert {len(x) for x in exact} == {4}


def test_picks_refuses_more_options_than_a_byte_spreads_evenly() -> None:
    import pytest

    with pytest.raises(ValueError, match="1 to 16 options"):
        checkkit.picks(tuple(range(17)), max_size=3)
