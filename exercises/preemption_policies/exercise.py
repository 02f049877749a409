"""Q07: three preemption policies and a 6K-token victim.

When the KV pool runs out, an engine can (a) recompute: free the victim's blocks and re-prefill
its prompt plus the tokens it had generated later (vLLM V1); (b) swap: copy the victim's KV to
host memory and back; or (c) never evict: admit a request only if prompt + max_tokens can be
reserved (TensorRT-LLM's GUARANTEED_NO_EVICT). The parts price each for one victim and for the
pool, all in closed form:

  victim KV            n kappa                                  (kappa = KV bytes per token)
  recompute            (2 P n + 2 L d_q n^2) / (tp F_bf16 MFU)  (causal attention)
  swap, per direction  n kappa / tp / B_pcie                    (each GPU moves its own shard)
  no-evict concurrency floor(pool tokens / (prompt + max_tokens))
  true-peak concurrency floor(pool tokens / (prompt + typical output))

`evidence()` runs the scheduling simulator (exercises/engine_sim) on a slice of the pool with
recompute and with reservation, to show who waits under each; the simulator has no swap mode.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises import engine_sim
from exercises.catalog import gpu, link, model
from exercises.deployment import deployment
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits, Holds, WithinContext, check
from exercises.slips import Slips, nonpositive, tolerances
from exercises.spec import Evidence, Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# Deployments: (model, GPU, tensor-parallel degree). Each holds its BF16 weights with a real pool.
DEPLOYMENTS: tuple[tuple[str, str, int], ...] = (
    ("Llama-3.1-70B", "H100 SXM", 8),
    ("Llama-3.1-70B", "H200 SXM", 8),
    ("Llama-3.1-70B", "H200 SXM", 4),
    ("Llama-3.1-70B", "B200", 4),
    ("Llama-3.1-70B", "B200", 8),
    ("Qwen2.5-72B", "H100 SXM", 8),
    ("Qwen2.5-72B", "H200 SXM", 4),
    ("Llama-3.1-8B", "H100 SXM", 1),
    ("Llama-3.1-8B", "H100 SXM", 2),
    ("Llama-3.1-405B", "H200 SXM", 8),
    ("Llama-3.1-405B", "B200", 8),
)
PROMPTS = (1024, 2048, 3072, 4096)
MAX_TOKENS = (2048, 4096, 8192)
OUTPUTS = (512, 768, 1024, 1536, 2048)  # what a typical request really generates
MFUS = (0.4, 0.45, 0.5, 0.55, 0.6)
PCIE = "PCIe Gen5 x16"

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "gpu": "H100 SXM",
    "tp": 8,
    "prompt": 2048,  # every request's prompt, tokens
    "max_tokens": 4096,  # the clients' cap, what a reservation must cover
    "output": 1024,  # what a typical request really generates [A]
    # One token short of its cap: a request that reached max_tokens has finished and is freed,
    # not preempted. 6,143 tokens of context, the blurb's "6K-token victim".
    "victim_generated": 4095,
    "mfu": 0.5,  # prefill model-FLOPs utilisation [A]
    "mem_util": 0.9,  # share of HBM the engine may use (vLLM's default)
    "act_reserve_gb": 2.5,  # per GPU, kept for activations [A]
    "decode_step_ms": 10,  # a decode step's floor at this batch, for the timeline [A]
    "budget": 8192,  # tokens per engine step (vLLM's default max_num_batched_tokens on H100)
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        name, g, tp = rng.choice(DEPLOYMENTS)
        max_tokens = rng.choice(MAX_TOKENS)
        return {**CANONICAL, "model": name, "gpu": g, "tp": tp, "prompt": rng.choice(PROMPTS),
                "max_tokens": max_tokens,
                **choose(rng, {"output": OUTPUTS, "mfu": MFUS, "victim_generated": [
                    max_tokens // 2, 3 * max_tokens // 4, max_tokens - 1]})}

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    """A pool that holds a real batch, outputs well under the cap (that is the reservation's
    cost), a victim that fits one step's budget, and swap clearly cheaper than recompute."""
    if check(constraints(p)):  # a story that could not happen: see exercises/feasibility.py
        return False
    if _pool_gb(p) <= 0 or p["output"] * 2 > p["max_tokens"]:
        return False
    if p["prompt"] + p["victim_generated"] > p["budget"]:
        return False
    s = solve(p)
    return (s["reserved_concurrency"].value >= 16
            and s["recompute_over_swap"] >= 3
            and s["peak_concurrency"].value < 4 * s["reserved_concurrency"].value
            # the timeline's decode-step floor must not read as the swap time part 3 asks for
            and abs(s["swap_ms"].value / p["decode_step_ms"] - 1) > 0.05)


# ----------------------------------------------------------------------------------------------
# The reference


def _weights_gb(p: dict[str, Any]) -> float:
    return round(model(p["model"]).weight_bytes(2) / 1e9, 1)  # shown to 0.1 GB


def _pool_gb(p: dict[str, Any], hbm_bytes: float | None = None, mem_util: float | None = None,
             weights: bool = True) -> float:
    """KV pool of the whole instance in GB, rounded to 0.1 GB as the statement shows it."""
    g = gpu(p["gpu"])
    per_gpu = (hbm_bytes if hbm_bytes is not None else g.hbm_bytes) / 1e9
    util = p["mem_util"] if mem_util is None else mem_util
    raw = p["tp"] * per_gpu * util - (_weights_gb(p) if weights else 0) \
        - p["tp"] * p["act_reserve_gb"]
    return round(raw, 1)


def recompute_flops(m: Any, n: int) -> float:
    """Re-prefill of n tokens: 2P per token for the weights plus causal attention 2 L d_q n^2."""
    return 2 * m.params * n + 2 * m.layers * m.q_dim * n * n


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    pcie = link(PCIE)
    tp = p["tp"]
    kappa = m.kv_bytes_per_token(2)
    n = p["prompt"] + p["victim_generated"]

    # -- the victim ---------------------------------------------------------------------------
    kv_bytes = n * kappa
    kv_gb = kv_bytes / 1e9
    lin = 2 * m.params * n
    attn = 2 * m.layers * m.q_dim * n * n
    flops = lin + attn
    f_eff = tp * g.bf16_flops * p["mfu"]
    recompute_s = flops / f_eff
    b_pcie = pcie.effective_gb_per_s * 1e9
    shard = kv_bytes / tp
    swap_s = shard / b_pcie

    # -- the pool -----------------------------------------------------------------------------
    weights_gb = _weights_gb(p)
    pool_gb = _pool_gb(p)
    pool_tokens = math.floor(pool_gb * 1e9 / kappa)
    reserve_tokens = p["prompt"] + p["max_tokens"]
    peak_tokens = p["prompt"] + p["output"]
    reserved = pool_tokens // reserve_tokens
    peak = pool_tokens // peak_tokens

    s: dict[str, Any] = {
        "victim_kv": Quantity(kv_gb, "GB"),
        "recompute_s": Quantity(recompute_s, "s"),
        "swap_ms": Quantity(swap_s * 1e3, "ms"),
        "reserved_concurrency": Quantity(reserved, ""),
        "peak_concurrency": Quantity(peak, ""),
        # floor(floor(x) / r) = floor(x / r): the real values before the floors (boundary rule).
        "reserved_concurrency_unrounded": pool_gb * 1e9 / kappa / reserve_tokens,
        "peak_concurrency_unrounded": pool_gb * 1e9 / kappa / peak_tokens,
        "who_pays": sorted(TRUE_STATEMENTS),
        "choose": _model_answer(p),
        # givens the statement prints
        "params": m.params,
        "layers": m.layers,
        "q_heads": m.q_heads,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "q_dim": m.q_dim,
        "bf16_tflops": g.bf16_dense_tflops,
        "hbm_gb": g.hbm_gb,
        "mfu_pct": p["mfu"] * 100,
        "mem_util_pct": p["mem_util"] * 100,
        "pcie_gbs": pcie.effective_gb_per_s,
        "pcie_raw_gbs": pcie.gb_per_s,
        "weights_gb": weights_gb,
        "pool_gb": pool_gb,
        "hbm_used_gb": tp * g.hbm_gb * p["mem_util"],
        "act_total_gb": tp * p["act_reserve_gb"],
        "victim_tokens": n,
        # intermediates for the solution
        "kappa": kappa,
        "kv_bytes": kv_bytes,
        "kv_per_gpu_mb": shard / 1e6,
        "lin_pflop": lin / 1e15,
        "attn_pflop": attn / 1e15,
        "flops_pflop": flops / 1e15,
        "attn_pct": attn / lin * 100,
        "f_eff_pflops": f_eff / 1e15,
        "recompute_ms": recompute_s * 1e3,
        "step_with_recompute_ms": recompute_s * 1e3 + p["decode_step_ms"],
        "gap_ratio": (recompute_s * 1e3 + p["decode_step_ms"]) / p["decode_step_ms"],
        "swap_round_trip_ms": 2 * swap_s * 1e3,
        "recompute_over_swap": recompute_s / (2 * swap_s),
        "prompt_only_recompute_ms": recompute_flops(m, p["prompt"]) / f_eff * 1e3,
        "pool_tokens": pool_tokens,
        "reserve_tokens": reserve_tokens,
        "peak_tokens": peak_tokens,
        "reserve_gb": reserve_tokens * kappa / 1e9,
        "peak_gb": peak_tokens * kappa / 1e9,
        "concurrency_ratio": peak / reserved,
        "reserved_share_used_pct": peak_tokens / reserve_tokens * 100,
        "host_gb_all": pool_gb,  # what swapping the whole pool out would need in pinned memory
    }
    return s


# The who_pays options that are true (exercise.toml lists them all).
TRUE_STATEMENTS = ("rc_cogap", "rc_redo", "swap_victim", "ne_queue")


def _model_answer(p: dict[str, Any]) -> str:
    # Built without solve() to avoid recursion: the figures are recomputed here.
    m = model(p["model"])
    n = p["prompt"] + p["victim_generated"]
    f_eff = p["tp"] * gpu(p["gpu"]).bf16_flops * p["mfu"]
    rec_ms = recompute_flops(m, n) / f_eff * 1e3
    swap_ms = n * m.kv_bytes_per_token(2) / p["tp"] / (link(PCIE).effective_gb_per_s * 1e9) * 1e3
    return (
        f"For a {n:,}-token victim, swap moves {swap_ms:.1f} ms of PCIe traffic each way where "
        f"recompute burns {rec_ms:.0f} ms of every GPU in the instance, and that re-prefill sits "
        "in a step every running decode shares, so their p99 inter-token gap jumps. I would "
        "swap (or offload to a CPU KV tier) as long as there is pinned host memory for the "
        "victims and the copies run asynchronously on their own stream; recompute stays the "
        "fallback for short victims, where it costs little, and when a prefix cache still holds "
        "the victim's blocks. No-evict reservation (TensorRT-LLM's default) gives the most "
        "predictable latency but, with max_tokens far above the real outputs, it halves the "
        "batch: I would use it only with tight, realistic max_tokens or when tail latency of "
        "running streams is the contract. Whatever the policy, pick victims that are cheap to "
        "evict (the youngest or shortest), keep a free-block watermark, and watch preemption "
        "counts and TTFT versus ITL percentiles to see which percentile is absorbing it."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m, g, tp = deployment(p)
    n = s["victim_tokens"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge_floor=1e-9, skip=nonpositive).add

    kv = s["victim_kv"].value
    add("victim_kv", kv * p["prompt"] / n,
        f"You counted only the prompt. The victim also holds KV for the {p['victim_generated']:,} "
        f"tokens it generated: {n:,} tokens in all.", "prompt_only", kind="miscounted_term")
    add("victim_kv", kv / 2, "Half the reference: you counted K but not V.", "k_only",
        kind="k_without_v")
    add("victim_kv", kv / tp,
        f"That is one GPU's shard. The question asks for the victim's whole cache across the "
        f"{tp} GPUs.", "per_gpu", kind="forgot_tp")
    add("victim_kv", kv * m.q_heads / m.kv_heads,
        f"You used the {m.q_heads} query heads; grouped-query attention caches only "
        f"{m.kv_heads} KV heads.", "q_heads", kind="q_vs_kv_heads")

    rec = s["recompute_s"].value
    f_eff = tp * g.bf16_flops * p["mfu"]
    add("recompute_s", 2 * m.params * n / f_eff,
        f"You left out attention. Re-prefilling {n:,} tokens adds causal attention, "
        f"{s['attn_pct']:.1f} % on top of the weight FLOPs.", "no_attention",
        kind="miscounted_term")
    add("recompute_s", recompute_flops(m, p["prompt"]) / f_eff,
        f"You re-prefilled only the prompt. Recompute rebuilds the KV of every token the victim "
        f"holds, the {p['victim_generated']:,} generated ones too: {n:,} tokens.", "prompt_only",
        kind="miscounted_term")
    add("recompute_s", rec / p["mfu"],
        f"You ran at 100 % of peak; the statement's MFU is {s['mfu_pct']:.0f} %.", "no_mfu",
        kind="peak_vs_achievable")
    add("recompute_s", rec * tp,
        f"That is one GPU doing all the work. The re-prefill runs tensor-parallel on all {tp}.",
        "one_gpu", kind="forgot_tp")
    add("recompute_s", (2 * m.params * n + 4 * m.layers * m.q_dim * n * n) / f_eff,
        "You counted full (non-causal) attention. Each token attends only to the ones before "
        "it, which halves the attention FLOPs: 2·L·n²·d_q.", "non_causal", kind="flop_counting")

    sw = s["swap_ms"].value
    add("swap_ms", sw * tp,
        f"You pushed the whole cache through one link. Each of the {tp} GPUs copies its own "
        "shard over its own PCIe link, in parallel.", "one_link", kind="forgot_tp")
    add("swap_ms", sw * 2,
        "That is the round trip. The question asks for one direction (out, or back in).",
        "round_trip", kind="wrong_scope")
    add("swap_ms", sw * s["pcie_gbs"] / (2 * s["pcie_raw_gbs"]),
        f"You used the bidirectional {2 * s['pcie_raw_gbs']:.0f} GB/s datasheet figure. Plan "
        f"one direction at the stated {s['pcie_gbs']:.0f} GB/s effective.", "bidirectional",
        kind="peak_vs_achievable")

    res = s["reserved_concurrency"].value
    pool_tokens = s["pool_tokens"]
    add("reserved_concurrency", s["peak_concurrency"].value,
        f"That reserves only what a typical request uses ({s['peak_tokens']:,} tokens). "
        f"No-evict must reserve prompt + max_tokens = {s['reserve_tokens']:,} up front, because "
        "the engine cannot know which request will run to its cap.", "typical_output",
        kind="mean_vs_tail")
    add("reserved_concurrency", pool_tokens // p["prompt"],
        "You reserved the prompt only. A no-evict engine reserves the prompt and the whole "
        "max_tokens before starting a request.", "prompt_only", kind="miscounted_term")
    add("reserved_concurrency", pool_tokens // s["reserve_tokens"] // tp,
        f"That is one GPU's share. At TP{tp} every request's KV is spread over all {tp} GPUs, "
        "so the instance's whole pool counts.", "per_gpu", kind="forgot_tp")
    no_w = math.floor(_pool_gb(p, weights=False) * 1e9 / s["kappa"]) // s["reserve_tokens"]
    add("reserved_concurrency", no_w,
        f"You forgot the {s['weights_gb']} GB of weights that share the HBM with the pool.",
        "no_weights", kind="miscounted_term")
    full = math.floor(_pool_gb(p, mem_util=1.0) * 1e9 / s["kappa"]) // s["reserve_tokens"]
    add("reserved_concurrency", full,
        f"You used all of the HBM. The engine takes {s['mem_util_pct']:.0f} % of it.", "no_util",
        kind="peak_vs_achievable")
    reported = gpu(p["gpu"]).hbm_reported_bytes
    if reported is not None:
        smi = math.floor(_pool_gb(p, hbm_bytes=reported) * 1e9 / s["kappa"]) // s["reserve_tokens"]
        add("reserved_concurrency", smi,
            "You sized the pool from the memory nvidia-smi reports. These exercises read the "
            f"marketed {s['hbm_gb']:.0f} GB as 10^9 bytes (see the statement).", "smi_bytes",
            kind="gb_vs_gib")

    add("peak_concurrency", res,
        "That is the reservation answer. Here each request holds only what it really uses at "
        f"its peak, prompt + output = {s['peak_tokens']:,} tokens.", "reserved", kind="wrong_scope")
    add("peak_concurrency", pool_tokens // (p["prompt"] + p["output"] // 2),
        f"That is the average footprint over a request's life ({p['prompt']:,} + "
        f"{p['output']:,}/2). A request must fit at its peak, just before it finishes.",
        "life_average", kind="mean_vs_tail")
    add("peak_concurrency", pool_tokens // p["prompt"],
        "You counted the prompt only; the request's KV grows by one token per generated token.",
        "prompt_only", kind="miscounted_term")
    add("peak_concurrency", pool_tokens // p["output"],
        "You counted the output only; the prompt's KV stays for the whole request.",
        "output_only", kind="miscounted_term")

    out.append(Mistake(
        "who_pays", ["ne_queue", "rc_redo", "rc_victim_only", "swap_victim"],
        "Recompute does not only hurt the victim: its re-prefill runs in a step that every "
        f"running decode shares, so each of them waits about {s['step_with_recompute_ms']:.0f} ms "
        "for its next token.", "victim_only", kind="miscounted_term"))
    out.append(Mistake(
        "who_pays", ["ne_itl", "ne_queue", "rc_cogap", "rc_redo", "swap_victim"],
        "No-evict never pauses a running request, so running streams keep a steady gap; its cost "
        "is queueing before admission and a smaller batch.", "ne_itl", kind="misread_mechanism"))
    return out


# ----------------------------------------------------------------------------------------------
# Evidence: who waits, simulated on a slice of the pool

SLICE_RESERVATIONS = 8.5  # the slice holds this many no-evict reservations
TIMELINE_REQUESTS = 40
OVERLOAD = 1.5  # offered load over what the slice sustains at the true footprint
LONG_REQUESTS = 3  # requests that run to max_tokens, like the victim


def step_cost(p: dict[str, Any]) -> engine_sim.StepCost:
    m = model(p["model"])
    g = gpu(p["gpu"])
    return engine_sim.StepCost(
        flops_per_s=p["tp"] * g.bf16_flops * p["mfu"],
        flops_per_token=2 * m.params,
        attn_coeff=4 * m.layers * m.q_dim,  # engine_sim halves it for causal prefill
        decode_step_s=p["decode_step_ms"] / 1e3,
        kv_read_s_per_token=m.kv_bytes_per_token(2) / p["tp"] / g.hbm_bytes_per_s,
    )


def arrival_gap_s(p: dict[str, Any]) -> float:
    """Seconds between arrivals: 1.5 times what the slice sustains if every request held only
    its true peak (slice tokens / (prompt + output) running, each for `output` decode steps), so
    a policy that admits at the current length overfills the pool and must preempt."""
    running = slice_blocks(p) * 16 / (p["prompt"] + p["output"])
    sustained = running / (p["output"] * p["decode_step_ms"] / 1e3)
    return round(1 / (OVERLOAD * sustained), 2)


def timeline_workload(p: dict[str, Any]) -> list[engine_sim.Request]:
    """40 evenly spaced requests: the same prompt, typical outputs around the statement's
    figure, and a few that run to max_tokens. Seeded from the variant."""
    rng = random.Random(f"{p['model']}|{p['gpu']}|{p['tp']}|{p['prompt']}|{p['max_tokens']}|"
                        f"{p['output']}|{p['mfu']}")
    outputs = [rng.randint(p["output"] // 2, 3 * p["output"] // 2)
               for _ in range(TIMELINE_REQUESTS)]
    for i in rng.sample(range(4, TIMELINE_REQUESTS), LONG_REQUESTS):
        outputs[i] = p["max_tokens"]
    return [engine_sim.Request(f"r{i:02d}", round(arrival_gap_s(p) * i, 3), p["prompt"], o,
                               max_tokens=p["max_tokens"]) for i, o in enumerate(outputs)]


def slice_blocks(p: dict[str, Any], block: int = 16) -> int:
    return int(SLICE_RESERVATIONS * engine_sim.blocks_for(p["prompt"] + p["max_tokens"], block))


def simulate(p: dict[str, Any]) -> dict[str, engine_sim.SimResult]:
    reqs = timeline_workload(p)
    cost = step_cost(p)
    out = {}
    for policy in ("current_length", "reserve_max"):
        cfg = engine_sim.EngineConfig(token_budget=p["budget"], max_seqs=256,
                                      kv_blocks=slice_blocks(p), block_size=16,
                                      admission=policy)  # type: ignore[arg-type]
        out[policy] = engine_sim.simulate(reqs, cfg, cost)
    return out


def evidence(p: dict[str, Any]) -> dict[str, Evidence]:
    sims = simulate(p)
    reqs = timeline_workload(p)
    labels = {"current_length": "recompute (vLLM V1)",
              "reserve_max": "no-evict reservation (GUARANTEED_NO_EVICT)"}
    series: list[dict[str, Any]] = []
    for policy, res in sims.items():
        stride = max(1, len(res.steps) // 400)
        series.append({"label": f"running requests, {labels[policy]}", "unit": "requests",
                       "points": [[round(st.start, 3), st.running]
                                  for st in res.steps[::stride]]})
    for policy, res in sims.items():
        # The inter-token gap a running decode sees is the step time; keep every step that is
        # far above the floor (re-prefills) and a sample of the rest.
        steps = [st for st in res.steps if st.decode_tokens]
        floor = min(st.duration for st in steps)
        stride = max(1, len(steps) // 300)
        chosen = [st for i, st in enumerate(steps) if i % stride == 0 or st.duration > 2 * floor]
        series.append({"label": f"step time = inter-token gap of running decodes, "
                                f"{labels[policy]}", "unit": "ms",
                       "points": [[round(st.start, 3), round(st.duration * 1e3, 2)]
                                  for st in chosen]})
    timeline = {"x": {"label": "time", "unit": "s"}, "series": series}

    per_req: list[dict[str, Any]] = []
    for policy, res in sims.items():
        per_req.append({"label": f"TTFT, {labels[policy]}", "unit": "s",
                        "points": [[i, round(res.requests[r.rid].ttft, 3)]
                                   for i, r in enumerate(reqs)]})
    for policy, res in sims.items():
        per_req.append({"label": f"end-to-end latency, {labels[policy]}", "unit": "s",
                        "points": [[i, round(res.requests[r.rid].e2e, 3)]
                                   for i, r in enumerate(reqs)]})
    rec = sims["current_length"]
    per_req.append({"label": "times preempted, recompute", "unit": "preemptions",
                    "points": [[i, rec.requests[r.rid].preemptions] for i, r in enumerate(reqs)]})
    per_request = {"x": {"label": "request (in arrival order)", "unit": ""}, "series": per_req,
                   "histogram": ["s"]}

    caption = (
        f"engine_sim on a slice of the pool holding {SLICE_RESERVATIONS:g} reservations "
        f"({slice_blocks(p):,} blocks of 16 tokens), not the whole instance: "
        f"{TIMELINE_REQUESTS} requests of {p['prompt']:,} prompt tokens, one every "
        f"{arrival_gap_s(p):g} s ({OVERLOAD:g} times what the slice sustains at the true "
        "footprint), "
        f"typical outputs around {p['output']:,} tokens and {LONG_REQUESTS} that run to "
        f"max_tokens = {p['max_tokens']:,}; {p['budget']:,}-token steps, a "
        f"{p['decode_step_ms']} ms decode floor and prefill at {p['mfu'] * 100:.0f} % MFU. "
        "Recompute preempts the most recently admitted request and re-prefills it later; "
        "reservation admits only what fits at prompt + max_tokens. The simulator has no swap "
        "mode: swap's cost is the PCIe copy of part 3.")
    return {
        "timeline": Evidence("Running batch and inter-token gap over time, per policy",
                             "preemption_timeline.json", "series", timeline, caption),
        "per_request": Evidence("TTFT, end-to-end latency and preemptions per request",
                                "preemption_per_request.json", "series", per_request, caption),
    }


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [
        Fits("BF16 weights inside the memory setting", p["gpu"], p["tp"], _weights_gb(p) * 1e9,
             usable=p["mem_util"]),
        Holds(_pool_gb(p) > 0, "the KV pool is positive"),
        WithinContext(p["model"], p["prompt"] + p["max_tokens"], "prompt plus max_tokens"),
        # A request that has generated max_tokens is finished and frees its KV by itself.
        Holds(p["victim_generated"] < p["max_tokens"], "the victim has not finished"),
    ]
