"""Q12 (exercises/chunked_prefill_lockout): the canonical numbers, the notes' 128K figures from the
same formulas, the simulator's timeline against the closed forms, and sensible variants."""
from __future__ import annotations

import json
import re

import pytest

from exercises import registry, templating
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("chunked_prefill_lockout")
EX = ExerciseUnderTest.load(ex)
VARIANTS = EX.variants()
spec = EX.spec_fixture()


def test_parts_and_tolerances_agree_with_the_module() -> None:
    s = ex.solve(ex.CANONICAL)
    options = {o["id"] for o in EX.parts["fixes"]["options"]}
    assert set(s["fixes"]) == ex.CORRECT_FIXES and ex.CORRECT_FIXES < options


def test_canonical_numbers_are_the_blurbs() -> None:
    p = ex.CANONICAL
    assert (p["model"], p["gpu"], p["tp"], p["prompt"], p["chunk"], p["t_dec_ms"], p["n_dec"]) \
        == ("Llama-3.1-70B", "H100 SXM", 8, 98_304, 8_192, 10, 8)
    assert p["mfu"] == 0.395
    s = ex.solve(p)
    assert s["k"] == 12
    # Per chunk: 2P·C = 1.156e15 FLOPs -> 0.365 s at 8 x 989.4 TFLOPS x 39.5 % = 3.127 PFLOP/s;
    # attention 4·L·d_q·C² = 1.759e14 FLOPs -> 0.0563 s per unit of (k - 1/2).
    assert s["linear_pflop"] == pytest.approx(1.156, abs=0.001)
    assert s["attn_unit_pflop"] == pytest.approx(0.1759, abs=0.0001)
    # The blurb: the gap climbs from 10 ms to a full second ...
    assert s["first_gap"].value == pytest.approx(0.408, abs=0.001)
    assert s["last_gap"].value == pytest.approx(1.027, abs=0.001)
    # ... and new arrivals are locked out for 8.6 s: 12 x 10 ms + 2.654e16 FLOPs / 3.127e15.
    assert s["total_pflop"] == pytest.approx(26.54, abs=0.01)
    assert s["compute_s"] == pytest.approx(8.49, abs=0.005)
    assert s["lockout"].value == pytest.approx(8.61, abs=0.005)
    assert round(s["lockout"].value, 1) == 8.6
    # After: 98,304 x 327,680 B = 32.2 GB, 4.03 GB per GPU at 3.35 TB/s = 1.20 ms (+12 %).
    assert s["kv_gb"] == pytest.approx(32.21, abs=0.01)
    assert s["kv_tax"].value == pytest.approx(1.20, abs=0.005)
    assert s["kv_tax_pct"] == pytest.approx(12.0, abs=0.1)
    assert "8.6 s" in s["mfu_note"] and ex.is_sensible(p)


def test_the_notes_128k_figures_come_out_of_the_same_formulas() -> None:
    # facts-q01-q25 §Q12: N = 128K in 8K chunks, 10 ms decode slots. At 50 % MFU step 1 is 0.32 s,
    # step 16 0.99 s and the lockout 10.5 s; the whole lockout is 8.6 s only at ~61.4 % MFU
    # (where the last gap is 0.81 s), which is why the canonical prompt is 96K instead.
    p = dict(ex.CANONICAL, prompt=131_072, mfu=0.5)
    s = ex.solve(p)
    assert s["first_gap"].value == pytest.approx(0.32, abs=0.005)
    assert s["last_gap"].value == pytest.approx(0.99, abs=0.005)
    assert s["lockout"].value == pytest.approx(10.5, abs=0.05)
    assert s["kv_tax"].value == pytest.approx(1.6, abs=0.01)  # 42.9 GB, 5.37 GB per GPU
    s = ex.solve(dict(p, mfu=0.614))
    assert s["lockout"].value == pytest.approx(8.6, abs=0.01)
    assert s["last_gap"].value == pytest.approx(0.81, abs=0.005)
    s = ex.solve(dict(p, mfu=0.6))
    assert s["compute_s"] == pytest.approx(8.64, abs=0.01)  # "the 60 % prefill compute alone"


@pytest.mark.parametrize("index", [None, *range(0, 200, 25)])
def test_the_simulated_timeline_matches_the_closed_forms(index: int | None) -> None:
    p = ex.CANONICAL if index is None else VARIANTS[index]
    s = ex.solve(p)
    res, arrive = ex.simulation(p)
    steps = ex.chunk_steps(res)
    assert len(steps) == s["k"]
    assert all(st.prefill_tokens == p["chunk"] and st.decode_tokens == p["n_dec"] for st in steps)
    # The decode slot drifts by a few microseconds as the decoders' contexts grow.
    assert steps[0].duration == pytest.approx(s["first_gap"].value, rel=1e-3)
    assert steps[-1].duration == pytest.approx(s["last_gap"].value, rel=1e-3)
    assert sum(st.duration for st in steps) == pytest.approx(s["lockout"].value, rel=1e-3)
    long = res.requests["long"]
    assert long.first_scheduled == pytest.approx(arrive, abs=s["t_dec_s"] + 1e-9)
    # Nobody who arrived behind the long prompt was admitted before its last chunk ended.
    for rid, r in res.requests.items():
        if rid.startswith("a"):
            assert r.ttft > 0 and r.token_times[0] > long.token_times[0]
    # Every running decode saw the last chunk's step as its worst gap ...
    assert max(res.requests["d0"].gaps) == pytest.approx(s["last_gap"].value, rel=1e-3)
    # ... and, once the long request decodes, each plain step carries its KV read. (1 %: the
    # decoders' own contexts have grown by a few hundred tokens each since the stated step.)
    after = [st.duration for st in res.steps if st.start > long.token_times[0]
             and st.prefill_tokens == 0 and st.decode_tokens == p["n_dec"] + 1]
    assert after and after[0] == pytest.approx(s["t_dec_s"] + s["kv_tax"].value / 1e3, rel=1e-2)


def test_evidence_matches_the_parts() -> None:
    """The series count tokens and requests; the parts' times are distances along the time axis
    (two points of a series), to 1e-4 s, the rounding of the file's times."""
    for p in [ex.CANONICAL, *VARIANTS[:20]]:
        s = ex.solve(p)
        body = json.loads(registry.evidence_bytes(ex.evidence(p)["timeline"]))
        tokens, prefilled, waiting = (series["points"] for series in body["series"])
        assert len(tokens) + len(prefilled) + len(waiting) <= 5_000
        # One running decode: a token per step, its longest gap the last chunk's step and its
        # shortest the decode-only step.
        assert [y for _, y in tokens] == list(range(tokens[0][1], tokens[0][1] + len(tokens)))
        gaps = [b[0] - a[0] for a, b in zip(tokens, tokens[1:], strict=False)]
        assert max(gaps) == pytest.approx(s["last_gap"].value, abs=2e-4)
        assert min(gaps) == pytest.approx(s["t_dec_s"], abs=2e-4)
        # The long prompt: one chunk per step, the steps climbing from part 1's to part 2's gap,
        # the whole staircase part 3's lockout.
        assert [y for _, y in prefilled] == [i * p["chunk"] for i in range(s["k"] + 1)]
        steps = [b[0] - a[0] for a, b in zip(prefilled, prefilled[1:], strict=False)]
        assert steps == sorted(steps)
        assert steps[0] == pytest.approx(s["first_gap"].value, abs=2e-4)
        assert steps[-1] == pytest.approx(s["last_gap"].value, abs=2e-4)
        assert prefilled[-1][0] - prefilled[0][0] == pytest.approx(s["lockout"].value, rel=1e-3)
        # Nobody behind it is admitted before the last chunk ends: the queue only grows until
        # then, to about the arrivals of the whole lockout, and then drains to nobody.
        end = prefilled[-1][0]
        during = [y for t, y in waiting if t < end]
        assert during == sorted(during)
        assert max(during) >= int(ex.ARRIVAL_RATE * s["lockout"].value) - 1
        assert waiting[-1][1] == 0


def test_every_variant_is_sensible() -> None:
    for p in VARIANTS:
        s = ex.solve(p)
        assert p["prompt"] == s["k"] * p["chunk"] and 4 <= s["k"] <= 32
        assert s["first_gap"].value < s["last_gap"].value < s["lockout"].value
    assert len({json.dumps(p, sort_keys=True) for p in VARIANTS}) >= 150
    assert {p["model"] for p in VARIANTS} == set(ex.TP_CHOICES)
    assert {p["chunk"] for p in VARIANTS} == set(ex.CHUNKS)


def test_templates_render_and_the_statement_shows_only_givens() -> None:
    for p in [ex.CANONICAL, *VARIANTS[:40]]:
        s = ex.solve(p)
        statement = templating.render((EX.folder / "statement.md").read_text(), p, s)
        templating.render((EX.folder / "solution.md").read_text(), p, s)
        assert "8.6" not in statement  # the MFU is given, the lockout is the question
    used = set(re.findall(r"\{\{\s*s\.(\w+)", (EX.folder / "statement.md").read_text()))
    assert used <= {"budget", "layers", "q_heads", "kv_heads", "head_dim", "q_dim", "params",
                    "bf16_tflops", "hbm_tbps", "mfu_pct", "f_eff_pflops"}, used


