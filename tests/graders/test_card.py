"""Grading a deck card through the number grader: its own answer, other units, the known slips."""
from __future__ import annotations

import math

import pytest

from exercises.deck import SCALES, Card, cards
from graders.base import InvalidAnswer
from graders.card import grade_card, part_for, reference_for
from graders.number import Tolerance
from graders.units import (
    conversion_factor,
    has_information,
    parse_unit,
    swap_binary_prefixes,
    unit_text,
)

DECK = cards()
BY_ID = {card.id: card for card in DECK}
# Each unit the deck answers in, and another unit a person may write the same figure in.
OTHER_UNIT = {
    "TB/s": "GB/s",
    "GB": "MB",
    "MB": "kB",
    "GB/s": "MB/s",
    "Gb/s": "GB/s",
    "TFLOP/s": "PFLOP/s",
    "FLOP/B": "FLOP/kB",
    "KiB": "B",
    "B": "KiB",
    "billion": "million",
}


def in_unit(card: Card, unit: str) -> float:
    """The card's answer converted to `unit` (a count scale converts as a multiplier)."""
    if card.answer.unit in SCALES:
        return card.answer.value * SCALES[card.answer.unit] / {"million": 1e6}[unit]
    return card.answer.value * conversion_factor(parse_unit(card.answer.unit), parse_unit(unit))


def ids(cards_: list[Card]) -> list[str]:
    return [card.id for card in cards_]


COUNTS = [c for c in DECK if c.answer.unit == ""]
MEASURES = [c for c in DECK if c.answer.unit != ""]
DATA = [c for c in MEASURES if c.answer.unit not in SCALES
        and has_information(parse_unit(c.answer.unit))]
# Sizes and rates of data (not FLOP per byte): where a GB/GiB-style prefix slip can happen.
SIZES = [c for c in DATA if any(f.base in ("bit", "byte") and f.power > 0
                                for f in parse_unit(c.answer.unit).factors)]


@pytest.mark.parametrize("card", DECK, ids=ids(DECK))
def test_every_cards_own_answer_grades_1(card: Card):
    result = grade_card(card, card.answer_text)
    assert result.score == 1.0, (card.answer_text, result.feedback)
    assert result.verdict == "correct"


@pytest.mark.parametrize(("card_id", "answer"), [
    ("gpu/h100-sxm/hbm_bandwidth", "3.35 TB/s"),
    ("gpu/h100-sxm/hbm_bandwidth", "3350 GB/s"),
    ("gpu/h100-sxm/hbm_capacity", "80 GB"),
    ("gpu/h100-sxm/sms", "132"),
    ("gpu/h100-sxm/sms", "132 SMs"),
    ("gpu/h100-sxm/bf16_dense", "989 TFLOPS"),
    ("gpu/h100-sxm/nvlink", "900 GB/s"),
    ("gpu/h100-sxm/l2", "50 MiB"),  # quoted in MB, reported in MiB: both right
    ("link/connectx-7/line_rate", "400 Gb/s"),
    ("link/connectx-7/line_rate", "50 GB/s"),
    ("model/llama-3.1-70b/kv_bytes_per_token", "320 KiB"),
    ("model/llama-3.1-70b/kv_bytes_per_token", "327,680 B/token"),
    ("model/llama-3.1-70b/kv_bytes_per_token", "327680 bytes per token"),
    ("model/llama-3.1-70b/params", "70.6"),
    ("model/llama-3.1-70b/params", "70.6 billion"),
    ("model/llama-3.1-70b/params", "70.55G"),
    ("model/llama-3.1-70b/params", "70,553,706,496 parameters"),
    ("model/llama-3.1-70b/layers", "80 layers"),
    ("ratio/h100-sxm/ridge_bf16", "295"),
    ("ratio/h100-sxm/ridge_bf16", "295 FLOP/B"),
])
def test_answers_as_people_write_them(card_id: str, answer: str):
    result = grade_card(BY_ID[card_id], answer)
    assert result.score == 1.0, result.feedback


@pytest.mark.parametrize("card", MEASURES, ids=ids(MEASURES))
def test_the_same_value_in_another_unit_grades_1(card: Card):
    other = OTHER_UNIT[card.answer.unit]  # a KeyError here: a new unit, add its other unit
    result = grade_card(card, f"{in_unit(card, other)!r} {other}")
    assert result.score == 1.0, result.feedback


@pytest.mark.parametrize("card", SIZES, ids=ids(SIZES))
def test_a_binary_prefix_slip_is_named_where_the_grader_tells_it_apart(card: Card):
    unit = parse_unit(card.answer.unit)
    swapped = swap_binary_prefixes(unit)
    if swapped is None:  # a plain "B": write the figure in KiB and swap that to kB
        unit, swapped = parse_unit("KiB"), parse_unit("kB")
    number = in_unit(card, unit.text)
    result = grade_card(card, f"{number!r} {unit_text(swapped.factors)}")
    reference = reference_for(card).value
    slipped = number * conversion_factor(swapped, parse_unit(card.answer.unit))
    if Tolerance.of(part_for(card)).matches(slipped, reference):
        assert result.score == 1.0, result.feedback  # L2: quoted MB and reported MiB both right
    else:
        assert result.score == 0.5 and result.verdict == "partial", result.feedback
        assert " vs " in result.feedback and "10^" in result.feedback


def test_the_hbm_capacity_in_gib_is_the_gb_gib_slip():
    card = BY_ID["gpu/h100-sxm/hbm_capacity"]
    result = grade_card(card, f"{card.answer.value:g} GiB")
    assert result.score == 0.5 and result.feedback.startswith("GB vs GiB")


@pytest.mark.parametrize("card", DATA, ids=ids(DATA))
def test_bits_for_bytes_is_named(card: Card):
    # The number eight times off in the card's own unit: the factor-8 detector.
    for factor in (8, 1 / 8):
        result = grade_card(card, repr(card.answer.value * factor))
        assert result.score == 0.0, result.feedback
        assert "bits vs bytes" in result.feedback
    # The right number with bits written for bytes (or back): the wrong-unit detector.
    flipped = card.answer.unit.translate(str.maketrans("Bb", "bB"))
    result = grade_card(card, f"{card.answer.value!r} {flipped}")
    assert result.score == 0.5 and "right number" in result.feedback, result.feedback


@pytest.mark.parametrize("card", DECK, ids=ids(DECK))
def test_a_wrong_number_grades_0(card: Card):
    # 1.37x is no known slip (not 2, 8, 10^k or 1.024^k) and outside every card's tolerance.
    wrong = card.answer.value + 1 if card.exact else card.answer.value * 1.37
    result = grade_card(card, repr(wrong) + (f" {card.answer.unit}" if card.answer.unit else ""))
    assert result.score == 0.0 and result.verdict == "incorrect", result.feedback


@pytest.mark.parametrize("card", COUNTS, ids=ids(COUNTS))
def test_counts_are_exact(card: Card):
    assert part_for(card).tolerance == 0
    assert grade_card(card, f"{card.answer.value:,.0f}").score == 1.0
    assert grade_card(card, repr(card.answer.value * 1.01)).score == 0.0


def test_the_part_is_the_number_part_the_card_would_be():
    card = BY_ID["gpu/h100-sxm/hbm_bandwidth"]
    part = part_for(card)
    assert (part.type, part.prompt, part.unit, part.tolerance) == (
        "number", card.question, "TB/s", card.tolerance)
    params = part_for(BY_ID["model/llama-3.1-70b/params"])
    assert params.unit == ""  # a count; the card's "billion" is a scale of it
    assert math.isclose(reference_for(BY_ID["model/llama-3.1-70b/params"]).value,
                        BY_ID["model/llama-3.1-70b/params"].answer.value * 1e9)


def test_a_bare_full_count_of_parameters_is_read_in_billions():
    # The question says "in billions", so a bare number is billions: written out in full it is
    # 10^9 too large, which the power-of-ten detector says.
    card = BY_ID["model/llama-3.1-70b/params"]
    result = grade_card(card, f"{card.answer.value * 1e9:.0f}")
    assert result.score == 0.5 and "power of ten" in result.feedback


@pytest.mark.parametrize("card", DECK[::7], ids=ids(DECK[::7]))
def test_the_feedback_cites_the_source_after_answering(card: Card):
    for answer in (card.answer_text, "1e-6"):
        result = grade_card(card, answer)
        assert card.sources[0].text in result.feedback
        assert result.extra["card"] == card.id
        assert result.extra["sources"] == [s.text for s in card.sources]
        if card.formula:
            assert card.formula in result.feedback


@pytest.mark.parametrize("answer", ["two gigabytes", "80 GB/token", "3.35 s", "", "9" * 5000])
def test_unreadable_answers_are_invalid(answer: str):
    with pytest.raises(InvalidAnswer):
        grade_card(BY_ID["gpu/h100-sxm/hbm_capacity"], answer)


def test_per_token_is_read_only_where_the_figure_is_per_token():
    kv = BY_ID["model/llama-3.1-70b/kv_bytes_per_token"]
    for per in (" per token", "/token", " / tokens", "/tok"):
        assert grade_card(kv, f"{kv.answer_text}{per}").score == 1.0, per
    with pytest.raises(InvalidAnswer):
        grade_card(BY_ID["gpu/h100-sxm/l2"], "50 MB/token")
