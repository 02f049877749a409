"""graders.number: reading numbers with units, tolerance, known mistakes and the hints."""
from __future__ import annotations

import pytest

from exercises.spec import Mistake, PartSpec, Quantity
from graders import number
from graders.base import GradeContext, GradeResult, InvalidAnswer

KV_GB = 2.68435456  # 2.5 GiB, the blurb's KV size, in GB


def part(unit: str = "GB", tolerance: float = 0.02, abs_tolerance: float = 0.0) -> PartSpec:
    return PartSpec(id="p", type="number", prompt="?", unit=unit, tolerance=tolerance,
                    abs_tolerance=abs_tolerance)


def grade(answer: str, reference: object = None, *, unit: str = "GB", tolerance: float = 0.02,
          abs_tolerance: float = 0.0, mistakes: tuple[Mistake, ...] = ()) -> GradeResult:
    ref = Quantity(KV_GB, "GB") if reference is None else reference
    ctx = GradeContext(reference=ref, mistakes=mistakes)
    return number.grade(part(unit, tolerance, abs_tolerance), answer, ctx)


# --- reading -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "unit"),
    [
        ("2.7", 2.7, None),
        ("-1", -1.0, None),
        ("+3", 3.0, None),
        ("−2.5", -2.5, None),  # typographic minus
        (".5", 0.5, None),
        ("5.", 5.0, None),
        ("2,684,354,560", 2684354560.0, None),
        ("2.7e9", 2.7e9, None),
        ("2.7E-3", 2.7e-3, None),
        ("2.7×10^9", 2.7e9, None),
        ("2.7 x 10^9", 2.7e9, None),
        ("2.7x10^9", 2.7e9, None),
        ("2.7*10**9", 2.7e9, None),
        ("2.7·10⁹", 2.7e9, None),
        ("2.7 × 10⁻³", 2.7e-3, None),
        ("10^9", 1e9, None),
        ("10⁹ B", 1e9, "B"),
        ("2.7 GB", 2.7, "GB"),
        ("2.7GB", 2.7, "GB"),
        ("2.7e9 B", 2.7e9, "B"),
        ("70%", 70.0, "%"),
        ("70 %", 70.0, "%"),
        ("1.8x", 1.8, "x"),
        ("1.8×", 1.8, "×"),
        ("~2.7 GB", 2.7, "GB"),
        ("≈ 2.7 GB", 2.7, "GB"),
        ("$0.44/h", 0.44, "$/h"),
        ("$2.50", 2.5, "$"),
        ("0.44 $/h", 0.44, "$/h"),
        ("12 tok/s", 12.0, "tok/s"),
    ],
)
def test_read_number(text: str, value: float, unit: str | None) -> None:
    got = number.read_number(text)
    assert got.value == pytest.approx(value, rel=1e-12)
    assert (got.unit.text if got.unit else None) == unit


# --- correct answers and unit conversion ---------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "2.68 GB",
        "2.684 GB",
        "2.7 GB",  # 0.6 % off: inside the default 2 %
        "2.684",  # bare: the part's unit
        "2684354560 B",
        "2,684,354,560 B",
        "2.68e9 B",
        "2.7×10^9 B",
        "2.7x10^9 B",
        "2684 MB",
        "2684354.56 kB",
        "2.5 GiB",  # the same bytes written in binary units: converted, so correct
        "2560 MiB",
        "0.002684 TB",
        "21.47 Gb",  # gigabits
        "  2.68 GB  ",
    ],
)
def test_correct_in_any_compatible_unit(answer: str) -> None:
    r = grade(answer)
    assert (r.verdict, r.score) == ("correct", 1.0), r.feedback
    assert "2.68 GB" in r.feedback  # the reference, rounded to the tolerance's digits


def test_echo_says_how_the_answer_was_read() -> None:
    assert grade("2684354560 B").echo == "2,684,354,560 B = 2.68 GB"
    assert grade("2.684").echo == "2.684 GB"
    assert grade("2.5 GiB").echo == "2.5 GiB = 2.68 GB"
    assert grade("2.68 GB").extra["value"] == pytest.approx(2.68)


def test_reference_in_another_unit_and_bare_float() -> None:
    assert grade("2.68 GB", reference=Quantity(2684354560, "B")).verdict == "correct"
    assert grade("2.68 GB", reference=KV_GB).verdict == "correct"


# --- tolerance -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [("102", "correct"), ("98", "correct"), ("101.99", "correct"), ("102.01", "incorrect"),
     ("97.99", "incorrect")],
)
def test_default_tolerance_edges(answer: str, verdict: str) -> None:
    assert grade(answer, Quantity(100, "s"), unit="s").verdict == verdict


def test_close_but_outside_tolerance() -> None:
    r = grade("103", Quantity(100, "s"), unit="s")
    assert r.verdict == "incorrect" and "rounding" in r.feedback
    far = grade("107", Quantity(100, "s"), unit="s")
    assert "rounding" not in far.feedback  # beyond 3× the tolerance


def test_tolerance_zero_is_exact() -> None:
    ref = Quantity(252, "")
    assert grade("252", ref, unit="", tolerance=0).verdict == "correct"
    assert grade("252.0", ref, unit="", tolerance=0).verdict == "correct"
    r = grade("253", ref, unit="", tolerance=0)
    assert r.verdict == "incorrect" and "rounding" not in r.feedback
    assert grade("252.001", ref, unit="", tolerance=0).verdict == "incorrect"
    # Exact through a unit conversion: bytes are bytes.
    assert grade("2.5 GiB", Quantity(2684354560, "B"), unit="B", tolerance=0).verdict == "correct"


def test_abs_tolerance_floor() -> None:
    ref = Quantity(0.0, "ms")
    assert grade("0.4", ref, unit="ms", abs_tolerance=0.5).verdict == "correct"
    assert grade("0.6", ref, unit="ms", abs_tolerance=0.5).verdict == "incorrect"
    assert grade("0", ref, unit="ms").verdict == "correct"


def test_looser_tolerance() -> None:
    assert grade("8.2", Quantity(8.6, "s"), unit="s", tolerance=0.05).verdict == "correct"
    assert grade("8.1", Quantity(8.6, "s"), unit="s", tolerance=0.05).verdict == "incorrect"


def test_correct_feedback_rounds_to_the_tolerance() -> None:
    assert "8.61 s" in grade("8.6", Quantity(8.6123, "s"), unit="s", tolerance=0.05).feedback
    assert "8.612 s" in grade("8.61", Quantity(8.6123, "s"), unit="s", tolerance=0.001).feedback
    assert "2,684,354,560 B" in grade("2.5 GiB", Quantity(2684354560, "B"), unit="B",
                                      tolerance=0).feedback


# --- known mistakes ------------------------------------------------------------------------

K_ONLY = Mistake("p", KV_GB / 2, "You counted K but not V.", "k_only")
DOUBLED = Mistake("p", KV_GB * 2, "Counted every layer twice.", "doubled")


def test_mistake_gets_its_feedback_and_scores_zero() -> None:
    r = grade("1.34 GB", mistakes=(K_ONLY,))
    assert (r.verdict, r.score, r.mistake) == ("incorrect", 0.0, "k_only")
    assert r.feedback == "You counted K but not V."


def test_mistake_matches_in_any_unit_and_within_tolerance() -> None:
    assert grade("1342 MB", mistakes=(K_ONLY,)).mistake == "k_only"
    assert grade("1.36", mistakes=(K_ONLY,)).mistake == "k_only"  # 1.3 % off
    assert grade("1.45", mistakes=(K_ONLY,)).mistake == ""


def test_mistake_beats_the_factor_of_two_hint() -> None:
    r = grade("5.37 GB", mistakes=(DOUBLED,))
    assert r.mistake == "doubled" and r.feedback == "Counted every layer twice."
    r = grade("5.37 GB")
    assert r.verdict == "incorrect" and "factor of 2" in r.feedback and "twice" in r.feedback


def test_mistake_given_as_quantity() -> None:
    m = Mistake("p", Quantity(1342177280, "B"), "K only", "k_only_bytes")
    assert grade("1.342 GB", mistakes=(m,)).mistake == "k_only_bytes"


def test_correct_beats_a_mistake_at_the_same_value() -> None:
    same = Mistake("p", KV_GB, "should never show", "bad_authoring")
    assert grade("2.68 GB", mistakes=(same,)).verdict == "correct"


# --- hints with partial credit --------------------------------------------------------------


def test_gib_figure_written_as_gb() -> None:
    for answer in ("2.5 GB", "2.5"):
        r = grade(answer)
        assert (r.verdict, r.score) == ("partial", 0.5)
        assert "GB vs GiB" in r.feedback and "GiB" in r.feedback


def test_gb_figure_written_as_gib() -> None:
    r = grade("2.68 GiB")
    assert (r.verdict, r.score) == ("partial", 0.5)
    assert "GB vs GiB" in r.feedback and "you wrote GiB" in r.feedback


def test_mib_and_kib_and_tib_confusion_named() -> None:
    mb = grade("2560 MB")  # 2560 is the MiB figure
    assert mb.verdict == "partial" and "MB vs MiB" in mb.feedback and "2^20" in mb.feedback
    kb = grade("320 kB", Quantity(327.68, "kB"), unit="kB")
    assert kb.verdict == "partial" and "kB vs KiB" in kb.feedback
    tb = grade("1 TB", Quantity(1.099511627776, "TB"), unit="TB")
    assert tb.verdict == "partial" and "TiB" in tb.feedback


def test_gib_part_given_the_gb_figure() -> None:
    r = grade("2.68", Quantity(2.5, "GiB"), unit="GiB")
    assert r.verdict == "partial" and "GiB" in r.feedback


def test_binary_confusion_in_bandwidth() -> None:
    r = grade("3000 GiB/s", Quantity(3000, "GB/s"), unit="GB/s", tolerance=0.01)
    assert r.verdict == "partial" and "GiB/s" in r.feedback


def test_right_number_wrong_unit() -> None:
    r = grade("2.68 MB")
    assert (r.verdict, r.score) == ("partial", 0.5)
    assert "right number in GB" in r.feedback and "MB" in r.feedback
    r = grade("8.6 min", Quantity(8.6, "s"), unit="s")
    assert r.verdict == "partial" and "check the unit" in r.feedback


@pytest.mark.parametrize(("answer", "size"), [("2684 GB", "10^3 times too large"),
                                              ("0.002684", "10^3 times too small"),
                                              ("2.684e9", "10^9 times too large"),
                                              ("26.84", "10^1 times too large")])
def test_power_of_ten(answer: str, size: str) -> None:
    r = grade(answer)
    assert (r.verdict, r.score) == ("partial", 0.5)
    assert "power of ten" in r.feedback and size in r.feedback


def test_fraction_for_a_percentage() -> None:
    ref = Quantity(70, "%")
    assert grade("70", ref, unit="%").verdict == "correct"
    assert grade("70 %", ref, unit="%").verdict == "correct"
    assert grade("0.7", ref, unit="%", tolerance=0.01).verdict == "partial"
    assert "did you mean 70 %?" in grade("0.7", ref, unit="%").feedback


def test_percentage_for_a_fraction() -> None:
    ref = Quantity(0.7, "")
    assert grade("0.7", ref, unit="").verdict == "correct"
    assert grade("70%", ref, unit="").verdict == "correct"  # 70 % = 0.70
    assert grade("70 percent", ref, unit="").verdict == "correct"
    r = grade("70", ref, unit="")
    assert r.verdict == "partial" and "did you mean 0.7" in r.feedback


def test_factor_of_two_and_bits_vs_bytes() -> None:
    half = grade("1.342 GB")
    assert half.verdict == "incorrect" and "half" in half.feedback
    bits = grade("21.47 GB")
    assert bits.verdict == "incorrect" and "bits vs bytes" in bits.feedback


def test_plain_wrong() -> None:
    r = grade("4.1 GB")
    assert (r.verdict, r.score, r.feedback) == ("incorrect", 0.0, "Not the expected value.")


def test_negative_reference() -> None:
    assert grade("-3.1", Quantity(-3.1, "s"), unit="s").verdict == "correct"
    assert grade("3.1", Quantity(-3.1, "s"), unit="s").verdict == "incorrect"


def test_rates_and_money() -> None:
    assert grade("1200 tok/s", Quantity(1.2, "ktok/s"), unit="ktok/s").verdict == "correct"
    assert grade("72000 tok/min", Quantity(1200, "tok/s"), unit="tok/s").verdict == "correct"
    assert grade("989 TFLOPS", Quantity(989, "TFLOP/s"), unit="TFLOP/s").verdict == "correct"
    assert grade("$0.44/h", Quantity(0.44, "$/h"), unit="$/h").verdict == "correct"
    assert grade("3.35 TB/s", Quantity(3350, "GB/s"), unit="GB/s").verdict == "correct"
    assert grade("400 Gb/s", Quantity(50, "GB/s"), unit="GB/s").verdict == "correct"
    assert grade("1.8x", Quantity(1.8, ""), unit="").verdict == "correct"
    assert grade("250 us", Quantity(0.25, "ms"), unit="ms").verdict == "correct"
    assert grade("250 µs", Quantity(0.25, "ms"), unit="ms").verdict == "correct"
    assert grade("4 /s", Quantity(4, "1/s"), unit="1/s").verdict == "correct"


# --- invalid, not wrong ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("2.68 s", "This part wants a data size, e.g. GB; 's' is a time"),
        ("2.68 GB/s", "'GB/s' is a bandwidth"),
        ("12 tok/s", "is a token rate"),
        ("", "Type a number"),
        ("   ", "Type a number"),
        ("GB", "Start the answer with a number"),
        ("two gigabytes", "Start the answer with a number"),
        ("2,68", "Use a dot for decimals"),
        ("2.68 gb", "Did you mean GB?"),
        ("2.68 parsecs", "Unknown unit"),
        ("1e999", "too large"),
        ("2.68\x00", "control"),
        ("2.68\u202e", "control"),
        ("2.68\u200b GB", "invisible"),
        ("2" * 2001, "too long"),
        ("２.６８", "Start the answer with a number"),  # fullwidth digits
        ("2.68 GB; rm -rf /", "Unexpected character"),
        ("__import__('os')", "Start the answer with a number"),
        ("2.68 GB GB GB GB GB GB GB GB GB GB GB GB GB", "too many parts"),
        ("2 3", "Could not read"),
        ("1/3", "Could not read"),
    ],
)
def test_invalid_answers(answer: str, message: str) -> None:
    with pytest.raises(InvalidAnswer, match=message.replace("(", r"\(").replace(")", r"\)")):
        grade(answer)


def test_plain_number_part_refuses_units() -> None:
    with pytest.raises(InvalidAnswer, match="plain number without a unit; 'GB' is a data size"):
        grade("0.7 GB", Quantity(0.7, ""), unit="")


def test_authoring_errors_are_not_invalid_answers() -> None:
    with pytest.raises(ValueError) as excinfo:
        grade("1", Quantity(1, "parsec"), unit="GB")
    assert not isinstance(excinfo.value, InvalidAnswer)
    with pytest.raises(ValueError) as excinfo:
        grade("1", Quantity(1, "s"), unit="GB")
    assert not isinstance(excinfo.value, InvalidAnswer)
    with pytest.raises(ValueError):
        grade("1", "2.7 GB")


@pytest.mark.parametrize(
    ("x", "sig", "text"),
    [(2.68435456, 3, "2.68"), (2684354560, None, "2,684,354,560"), (2.68e9, 3, "2.68e9"),
     (0.0012345, 3, "0.00123"), (1.5e-7, 3, "1.5e-7"), (0, 3, "0"), (70, 3, "70"),
     (12345.6, 3, "12,346"), (-8.6, 3, "-8.6")],
)
def test_format_value(x: float, sig: int | None, text: str) -> None:
    assert number.format_value(x, sig) == text
