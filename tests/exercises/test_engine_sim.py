"""The scheduling simulator against the closed forms it must reproduce (within 2 %), and its
bookkeeping (conservation, no preemption under reservation, policies must be permutations)."""
from __future__ import annotations

import math
import random

import pytest

from exercises import engine_sim as sim
from exercises.catalog import gpu, model

M70 = model("Llama-3.1-70B")
F_8XH100_HALF = 8 * gpu("H100 SXM").bf16_flops * 0.5  # 3.96 PFLOP/s effective
COST = sim.StepCost(flops_per_s=F_8XH100_HALF, flops_per_token=2 * M70.params,
                    attn_coeff=4 * M70.layers * M70.q_dim)


def within(value: float, ref: float, rel: float = 0.02) -> bool:
    return abs(value - ref) <= rel * abs(ref)


def test_chunked_prefill_steps_match_the_closed_form() -> None:
    # Q12: N = 128K prompt in chunks of C = 8,192 while decodes run; step k takes
    # t_dec + [2PC + 4 L d_q C^2 (k - 1/2)] / F and the whole lockout K t_dec + (2PN + 2 L d_q N^2)/F.
    n, c, t_dec = 131_072, 8_192, 0.010
    cost = sim.StepCost(F_8XH100_HALF, 2 * M70.params, 4 * M70.layers * M70.q_dim,
                        decode_step_s=t_dec)
    decoders = [sim.Request(f"d{i}", 0.0, 100, 400) for i in range(8)]
    long = sim.Request("long", 0.001, n, 1)
    res = sim.simulate([*decoders, long], sim.EngineConfig(token_budget=c + 64, long_prefill_cap=c),
                       cost)
    steps = [s for s in res.steps if s.prefill_tokens == c]
    assert len(steps) == n // c == 16
    for k, step in enumerate(steps, start=1):
        ref = t_dec + (2 * M70.params * c + 4 * M70.layers * M70.q_dim * c * c * (k - 0.5)) / cost.flops_per_s
        assert within(step.duration, ref), (k, step.duration, ref)
    assert within(steps[0].duration, 0.32, 0.05) and within(steps[-1].duration, 0.99, 0.02)
    closed = 16 * t_dec + (2 * M70.params * n + 2 * M70.layers * M70.q_dim * n * n) / cost.flops_per_s
    assert within(sum(s.duration for s in steps), closed)
    assert within(closed, 10.5, 0.02)  # the notes' lockout at 50 % MFU
    # Every running decode sees the step time as its inter-token gap: ~1 s at the last chunk.
    assert max(res.requests["d0"].gaps) == pytest.approx(steps[-1].duration)


def _hol_workload() -> list[sim.Request]:
    # Q10: one 32K prompt a moment before ten 1K prompts; TTFT only (one output token each).
    return [sim.Request("long", 0.0, 32_768, 1)] + [
        sim.Request(f"s{i}", 0.0, 1_024, 1) for i in range(10)]


def test_head_of_line_blocking_fcfs_vs_shortest_first() -> None:
    cfg = sim.EngineConfig(token_budget=32_768, chunked_prefill=False)
    long_s = COST.chunk_flops(0, 32_768) / COST.flops_per_s
    short_s = COST.chunk_flops(0, 1_024) / COST.flops_per_s
    assert within(long_s, 1.52) and within(short_s, 0.0369)
    fcfs = sim.simulate(_hol_workload(), cfg, COST, sim.fcfs)
    sjf = sim.simulate(_hol_workload(), cfg, COST, sim.shortest_prefill_first)
    shorts = [f"s{i}" for i in range(10)]
    assert within(fcfs.mean_ttft(shorts), long_s + 10 * short_s)
    assert within(fcfs.mean_ttft(), (long_s + 10 * (long_s + 10 * short_s)) / 11)
    assert within(fcfs.mean_ttft(), 1.86) and within(sjf.mean_ttft(), 0.51)
    assert within(sjf.requests["long"].ttft, long_s + 10 * short_s)


def test_aging_bounds_the_long_prompts_wait() -> None:
    # A stream of short prompts keeps coming: pure shortest-first starves the long one; aging
    # lets it in.
    reqs = [sim.Request("long", 0.0, 16_384, 1)] + [
        sim.Request(f"s{i}", 0.05 * i, 2_048, 1) for i in range(200)]
    cfg = sim.EngineConfig(token_budget=16_384, chunked_prefill=False)
    starved = sim.simulate(reqs, cfg, COST, sim.shortest_prefill_first)
    aged = sim.simulate(reqs, cfg, COST, sim.with_aging(tokens_per_s=20_000))
    assert aged.requests["long"].ttft < starved.requests["long"].ttft / 2


def test_kv_pool_runs_dry_at_the_ledgers_step_and_preempts_lifo() -> None:
    # Q36: 256 requests of 1,500 prompt tokens, 26,389 blocks of 16. Decode step t needs
    # ceil((1500 + t) / 16) blocks each: 104 x 256 > 26,389 first at t = 149.
    reqs = [sim.Request(f"r{i:03d}", 0.0, 1_500, 400) for i in range(256)]
    cfg = sim.EngineConfig(token_budget=400_000, max_seqs=256, kv_blocks=26_389)
    res = sim.simulate(reqs, cfg, sim.StepCost(1e15, decode_step_s=0.01))
    assert res.steps[0].used_blocks == 256 * 94  # the prompts fit: 91 % of the pool
    first = next(i for i, s in enumerate(res.steps) if s.preempted)
    assert first == 149  # step 0 is the prefill, step t the t-th decode step
    assert res.steps[first].preempted[0] == "r255"  # the last admitted goes first
    for step in res.steps:
        assert step.used_blocks <= 26_389
    assert all(r.done and len(r.token_times) == 400 for r in res.requests.values())
    assert res.steps[-1].used_blocks == 0  # everything freed at the end


def test_reserve_max_never_preempts_and_caps_concurrency() -> None:
    # Q28: a 120,000-token pool, prompts of 1,000, max_tokens 2,000, real outputs 1,000:
    # GUARANTEED_NO_EVICT runs floor(pool / (P + max)) = 40 at once.
    reqs = [sim.Request(f"r{i}", 0.0, 1_000, 1_000, max_tokens=2_000) for i in range(100)]
    cfg = sim.EngineConfig(token_budget=200_000, max_seqs=1024, kv_blocks=120_000 // 8,
                           block_size=8, admission="reserve_max")
    res = sim.simulate(reqs, cfg, sim.StepCost(1e15, decode_step_s=0.01))
    assert res.preemptions == 0
    assert max(s.running for s in res.steps) == 40
    current = sim.simulate(reqs, sim.EngineConfig(token_budget=200_000, max_seqs=1024,
                                                  kv_blocks=120_000 // 8, block_size=8),
                           sim.StepCost(1e15, decode_step_s=0.01))
    assert max(s.running for s in current.steps) > 40


def test_random_workloads_conserve_tokens_and_blocks() -> None:
    rng = random.Random(7)
    for _ in range(30):
        reqs = [sim.Request(f"r{i}", rng.uniform(0, 2), rng.randint(1, 300), rng.randint(1, 60))
                for i in range(rng.randint(1, 25))]
        cfg = sim.EngineConfig(token_budget=rng.choice([64, 256, 1024]), max_seqs=rng.randint(1, 8),
                               kv_blocks=rng.choice([0, 40, 80]), block_size=rng.choice([4, 16]),
                               admission=rng.choice(["current_length", "reserve_max"]))
        try:
            res = sim.simulate(reqs, cfg, sim.StepCost(1e12, 1e9, 1e6, 0.005, 1e-6),
                               rng.choice([sim.fcfs, sim.shortest_prefill_first]))
        except sim.SimulationError as exc:
            assert "pool" in str(exc)  # a request larger than the pool is refused up front
            continue
        for r in reqs:
            t = res.requests[r.rid]
            assert len(t.token_times) == r.output
            assert t.token_times == sorted(t.token_times) and t.ttft > 0
        assert res.steps[-1].used_blocks == 0
        assert all(s.running <= cfg.max_seqs for s in res.steps)
        if cfg.admission == "reserve_max":
            assert res.preemptions == 0
        starts = [s.start for s in res.steps]
        assert starts == sorted(starts)


def test_a_policy_must_return_a_permutation() -> None:
    reqs = [sim.Request("a", 0, 10, 2), sim.Request("b", 0, 10, 2)]
    with pytest.raises(sim.SimulationError, match="exactly once"):
        sim.simulate(reqs, sim.EngineConfig(token_budget=8), COST, lambda w, now: ["a"])


def test_overload_queue_matches_the_fluid_numbers() -> None:
    # Q13: capacity 20 req/s, 40 req/s for 60 s, then 10 req/s; clients give up after 30 s.
    arrivals = sim.spike_arrivals(10, 40, 0.0, 60.0, 400.0)
    fifo = sim.simulate_queue(arrivals, 20, 30)
    assert within(len(fifo.dead), 1_800)
    assert within(fifo.busy_on_dead_s, 90.0)  # 1,800 dead requests x 50 ms
    at_end = sum(1 for a in arrivals if a < 60) - sum(
        1 for a, start, _ in fifo.served if start < 60) - sum(1 for a, s in fifo.dead if s < 60)
    assert within(at_end, 1_200)
    capped = sim.simulate_queue(arrivals, 20, 30, queue_cap=600)
    assert not capped.dead and within(len(capped.rejected), 600)
    assert capped.max_wait() <= 30.0 + 1e-9
    dropping = sim.simulate_queue(arrivals, 20, 30, drop_expired=True)
    assert not dropping.dead and dropping.busy_on_dead_s == 0
    assert math.isclose(len(dropping.served) + len(dropping.dropped), len(arrivals))


def test_a_predicted_wait_rule_admits_only_what_can_start_in_time() -> None:
    # The same rule as the cap, written as a function: admit iff the predicted wait fits the
    # client's timeout. Nobody admitted waits longer; about 600 are turned away.
    arrivals = sim.spike_arrivals(10, 40, 0.0, 60.0, 400.0)
    res = sim.simulate_queue(arrivals, 20, 30,
                             admit=lambda s: s["predicted_wait_s"] <= s["timeout_s"])
    assert not res.dead and res.max_wait() <= 30.0 + 1e-9
    assert within(len(res.rejected), 600)
    everyone = sim.simulate_queue(arrivals, 20, 30, admit=lambda s: True)
    assert len(everyone.dead) == len(sim.simulate_queue(arrivals, 20, 30).dead)
