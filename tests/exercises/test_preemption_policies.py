"""Q07 (preemption_policies): the blurb's numbers for a 6K-token victim, sensible variants,
distinct mistakes, and the simulated timelines agreeing with the closed forms the parts grade."""
from __future__ import annotations

import json
import math
import re

import pytest

from exercises import engine_sim, templating
from exercises.catalog import gpu, model
from tests.exercises.support import ExerciseUnderTest, close, load_by_path

ex = load_by_path("preemption_policies")
EX = ExerciseUnderTest.load(ex)
FOLDER = EX.folder
VARIANTS = EX.variants(200)


def test_canonical_reproduces_the_notes() -> None:
    p = ex.CANONICAL
    assert (p["model"], p["gpu"], p["tp"], p["prompt"] + p["victim_generated"]) == (
        "Llama-3.1-70B", "H100 SXM", 8, 6_143)
    # One token short of max_tokens: a victim at its cap would have finished, not been preempted.
    assert p["victim_generated"] < p["max_tokens"]
    s = ex.solve(p)
    # 6,143 tokens x 327,680 B = 2,012,938,240 B = 2.013 GB (251.6 MB per GPU).
    assert s["kappa"] == 327_680 and s["kv_bytes"] == 2_012_938_240
    assert round(s["victim_kv"].value, 3) == 2.013 and round(s["kv_per_gpu_mb"], 1) == 251.6
    # (2P n + 2 L d_q n^2) = 8.67e14 + 4.95e13 FLOPs at 8 x 989.4 TFLOPS x 50 % = 0.232 s.
    assert round(s["lin_pflop"], 3) == 0.867 and round(s["attn_pflop"], 4) == 0.0495
    assert round(s["recompute_s"].value, 3) == 0.232
    # 251.7 MB per GPU at 50 GB/s: 5.0 ms out and 5.0 ms in, ~23x cheaper than recompute.
    assert round(s["swap_ms"].value, 1) == 5.0 and round(s["recompute_over_swap"]) == 23
    # Pool 8 x 80 x 0.9 - 141.1 - 8 x 2.5 = 414.9 GB = 1.27 M tokens: 206 reserved, 412 at peak.
    assert s["pool_gb"] == 414.9 and s["weights_gb"] == 141.1
    assert s["pool_tokens"] == 1_266_174
    assert s["reserved_concurrency"].value == 206 and s["peak_concurrency"].value == 412
    # The co-scheduled decodes' gap: ~240 ms instead of 10 ms.
    assert 235 <= s["step_with_recompute_ms"] <= 245


def test_parts_agree_with_the_module() -> None:
    s = ex.solve(ex.CANONICAL)
    options = {o["id"] for o in EX.parts["who_pays"]["options"]}
    assert set(s["who_pays"]) < options and set(ex.TRUE_STATEMENTS) == set(s["who_pays"])
    assert list(EX.parts)[-1] == "choose"


def test_variants_are_sensible_and_distinct() -> None:
    for p in VARIANTS:
        s = ex.solve(p)
        assert s["reserved_concurrency"].value < s["peak_concurrency"].value
        assert s["recompute_s"].value * 1e3 > 3 * s["swap_round_trip_ms"]
        assert p["prompt"] + p["victim_generated"] <= p["budget"]
    assert len({json.dumps(p, sort_keys=True) for p in VARIANTS}) >= 150
    assert {p["model"] for p in VARIANTS} >= {"Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B"}


PLACEHOLDER = re.compile(r"\{\{\s*s\.([A-Za-z_]\w*)")
STATEMENT_GIVENS = {
    "victim_tokens", "layers", "q_heads", "kv_heads", "head_dim", "params", "bf16_tflops",
    "hbm_gb", "pcie_gbs", "pcie_raw_gbs", "mfu_pct", "q_dim", "pool_gb", "mem_util_pct",
    "hbm_used_gb", "weights_gb", "act_total_gb",
}


def test_templates_render_and_the_statement_shows_only_givens() -> None:
    statement = (FOLDER / "statement.md").read_text(encoding="utf-8")
    assert set(PLACEHOLDER.findall(statement)) <= STATEMENT_GIVENS
    solution = (FOLDER / "solution.md").read_text(encoding="utf-8")
    text = templating.render(solution, ex.CANONICAL, ex.solve(ex.CANONICAL))
    for figure in ["2.013 GB", "0.232 s", "5.03 ms", "206 requests", "412 requests", "23 times"]:
        assert figure in text, figure


# ---------------------------------------------------------------------------------------------
# The simulated timelines


@pytest.fixture(scope="module")
def sims() -> dict[str, dict[str, engine_sim.SimResult]]:
    return {"canonical": ex.simulate(ex.CANONICAL),
            **{str(i): ex.simulate(VARIANTS[i]) for i in range(4)}}


def _params(key: str) -> dict:
    return ex.CANONICAL if key == "canonical" else VARIANTS[int(key)]


@pytest.mark.parametrize("key", ["canonical", "0", "1", "2", "3"])
def test_reservation_caps_the_batch_at_the_closed_form(key: str, sims: dict) -> None:
    p = _params(key)
    res = sims[key]["reserve_max"]
    assert res.preemptions == 0
    # Part 4's formula on the slice: floor(slice tokens / (prompt + max_tokens)).
    slice_tokens = ex.slice_blocks(p) * 16
    assert max(st.running for st in res.steps) == slice_tokens // (p["prompt"] + p["max_tokens"])
    assert max(st.running for st in res.steps) == math.floor(ex.SLICE_RESERVATIONS)


@pytest.mark.parametrize("key", ["canonical", "0", "1", "2", "3"])
def test_recompute_preempts_and_the_re_prefill_costs_the_closed_form(key: str, sims: dict) -> None:
    p = _params(key)
    rec, res = sims[key]["current_length"], sims[key]["reserve_max"]
    assert rec.preemptions > 0
    m = model(p["model"])
    f_eff = p["tp"] * gpu(p["gpu"]).bf16_flops * p["mfu"]
    preempted: set[str] = set()
    checked = 0
    for st in rec.steps:
        again = [a for a in st.admitted if a in preempted]
        if len(st.admitted) == 1 and again:
            # One victim re-prefills its prompt + generated tokens (part 2's formula), and the
            # step also carries the running decodes (the floor plus their KV reads).
            closed = ex.recompute_flops(m, st.prefill_tokens) / f_eff
            decode = st.duration - closed
            assert p["decode_step_ms"] / 1e3 - 1e-9 <= decode <= p["decode_step_ms"] / 1e3 + 0.01
            checked += 1
        preempted |= set(st.preempted)
    assert checked, "no single re-prefill step to compare"
    # Who waits: with recompute the batch is larger and arrivals start sooner, but the decode
    # steps spike; with reservation arrivals queue (TTFT) and steps stay at the floor.
    assert max(st.running for st in rec.steps) > max(st.running for st in res.steps)
    assert rec.mean_ttft() < res.mean_ttft()
    assert rec.makespan < res.makespan
    victims = [t for t in rec.requests.values() if t.preemptions]
    assert victims and all(t.done for t in rec.requests.values())


@pytest.mark.parametrize("variant", ["canonical", 0, 1])
def test_evidence_agrees_with_the_simulation(variant: object) -> None:
    p = ex.CANONICAL if variant == "canonical" else VARIANTS[variant]  # type: ignore[index]
    found = ex.evidence(p)
    assert set(found) == {"timeline", "per_request"}
    body = json.dumps({k: v.data for k, v in found.items()}, allow_nan=False)
    assert json.dumps({k: v.data for k, v in ex.evidence(p).items()}, allow_nan=False) == body
    sims = ex.simulate(p)
    per = {s["label"]: s["points"] for s in found["per_request"].data["series"]}
    rec_ttft = per["TTFT, recompute (vLLM V1)"]
    assert len(rec_ttft) == ex.TIMELINE_REQUESTS
    assert sum(y for _, y in per["times preempted, recompute"]) == \
        sims["current_length"].preemptions
    timeline = {s["label"]: s["points"] for s in found["timeline"].data["series"]}
    gaps = timeline["step time = inter-token gap of running decodes, recompute (vLLM V1)"]
    # Every re-prefill spike is kept, so the largest gap in the file is the largest step.
    assert max(y for _, y in gaps) == pytest.approx(
        max(st.duration for st in sims["current_length"].steps if st.decode_tokens) * 1e3,
        abs=0.01)
    assert sum(len(s["points"]) for d in found.values() for s in d.data["series"]) < 4_000


def test_evidence_differs_between_variants() -> None:
    bodies = {json.dumps(ex.evidence(p)["per_request"].data) for p in VARIANTS[:6]}
    assert len(bodies) == 6
    assert close(ex.arrival_gap_s(ex.CANONICAL), 0.4, 0.05)
