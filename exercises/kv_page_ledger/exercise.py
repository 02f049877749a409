"""Q36: prompts fit, but their outputs exhaust the pool. A page-level ledger.

A vLLM replica (one GPU, one model) gets a burst of `n` requests at once. Its start-up budget gives
a KV pool of so many 16-token blocks; the prompts take most of it, which looks fine, but every
request then grows by a token per step and the pool runs dry a hundred-odd tokens into decoding,
after which every block boundary preempts someone (LIFO, recompute). The parts walk the ledger:
the pool in blocks, the decode step at which it runs dry, the concurrency cap that can never
preempt, the metric that confirms the diagnosis, the ledger itself as code, the cap's capacity in
requests per second, and why the fix is a cap tested against queueing rather than more blocks.

Conventions (printed by the statement): the GPU's total memory is what the CUDA driver reports to
the process (the catalog's hbm_driver_total_mib: 81,090 MiB = 79.19 GiB for an H100, the
total_gpu_memory vLLM logs), not nvidia-smi's figure nor the research notes' round 80 GiB; vLLM's
requested memory is gpu_memory_utilization x total; the weights, the profile run's activation peak, memory
allocated outside PyTorch and the CUDA-graph estimate are subtracted from it. Decode steps read
all weights plus every running request's KV once (MoE: at these batch sizes every expert is hit).
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises import engine_sim
from exercises.catalog import gpu, model
from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Fits, Holds, WithinContext
from exercises.slips import Slips, near, tolerances, unusable
from exercises.spec import Evidence, Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

GIB = 2**30
KV_DTYPE_BYTES = 2  # BF16 KV cache in every variant

# One-GPU deployments a variant may use: the BF16 weights fit with room for a real pool.
DEPLOYMENTS: tuple[tuple[str, str], ...] = (
    ("Llama-3.1-8B", "H100 SXM"), ("Llama-3.1-8B", "H200 SXM"),
    ("Llama-2-7B", "H100 SXM"), ("Llama-2-7B", "H200 SXM"),
    ("Qwen3-30B-A3B", "H100 SXM"), ("Qwen3-30B-A3B", "H200 SXM"),
    ("Mixtral-8x7B", "H200 SXM"),
)
PROMPTS = (800, 1000, 1200, 1500, 2000, 2500, 3000)
OUT_MEANS = (1200, 1500, 1800, 2000, 2200, 2500, 3000)
OUT_MAXES = (2500, 3000, 3500, 4000, 5000, 6000, 8000)
BURSTS = (128, 160, 192, 224, 256, 320, 384, 448, 512)
ACT_GIB = (3.0, 3.5, 4.0, 4.5, 5.0)
LOAD = (0.7, 0.75, 0.8)  # offered load as a share of the cap's capacity

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-8B",
    "gpu": "H100 SXM",
    "util": 0.9,  # gpu_memory_utilization (vLLM's default in v0.10-v0.16)
    "act_gib": 4.0,  # profile run's activation peak [A]
    "nontorch_gib": 1.0,  # memory allocated outside PyTorch (NCCL, CUDA context) [A]
    "graphs_gib": 0.5,  # CUDA-graph estimate [A]
    "block": 16,  # vLLM's default block size
    "n": 256,  # requests in the burst = max_num_seqs
    "prompt": 1500,
    "out_mean": 2500,
    "out_max": 4000,
    "eta": 0.8,  # share of the HBM bandwidth a decode step reaches [A]
    "rate": 1.5,  # req/s offered to the capped replica in the queueing test
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any] | None:
        name, g = rng.choice(DEPLOYMENTS)
        p = dict(CANONICAL)
        out_mean = rng.choice(OUT_MEANS)
        p.update(model=name, gpu=g, prompt=rng.choice(PROMPTS), out_mean=out_mean,
                 out_max=rng.choice([o for o in OUT_MAXES if o >= 1.5 * out_mean] or [8000]),
                 n=rng.choice(BURSTS), act_gib=rng.choice(ACT_GIB))
        if not _shape_ok(p):
            return None
        # The offered load: a share of the safe cap's capacity, rounded as displayed.
        p["rate"] = round(rng.choice(LOAD) * _capacity(p, _cap_worst(p)), 2)
        return p

    return draw_sensible(rng, draw, is_sensible, tries=2000)


def _shape_ok(p: dict[str, Any]) -> bool:
    m = model(p["model"])
    if m.max_context and p["prompt"] + p["out_max"] > m.max_context:
        return False
    if _pool_bytes(p) <= 0:
        return False
    blocks = _pool_blocks(p)
    admit = p["n"] * _blocks(p["prompt"], p["block"])
    # The story: the prompts fit (and look comfortable), the outputs do not.
    return 0.6 * blocks <= admit <= blocks


def is_sensible(p: dict[str, Any]) -> bool:
    if not _shape_ok(p) or p["rate"] <= 0:
        return False
    s = solve(p)
    x = s["cap_worst_unrounded"]
    return (
        1 <= s["exhaust_step"].value <= p["out_mean"] / 4  # dry early in the replies
        # ... before even the shortest reply in the evidence's spread has ended
        and s["exhaust_step"].value < 2 * p["out_mean"] - p["out_max"]
        and 8 <= s["cap_worst_n"] < s["cap_mean_n"] < p["n"]
        and s["rho_worst"] < 0.9
        # the cap clear of a whole number by 0.5 % (the tolerance policy's boundary rule)
        and (x == math.floor(x) or min(x - math.floor(x), math.ceil(x) - x) >= 0.005 * x)
    )


# ----------------------------------------------------------------------------------------------
# The reference


def _blocks(tokens: int, block: int) -> int:
    return -(-tokens // block)


def _total_gib(p: dict[str, Any]) -> float:
    # What the CUDA driver reports to the process, the total vLLM multiplies by
    # gpu_memory_utilization (H100: 81,090 MiB = 79.19 GiB; H200: 143,156 MiB = 139.80 GiB).
    return gpu(p["gpu"]).hbm_driver_total_bytes / GIB


def _weights_gb(p: dict[str, Any]) -> float:
    # Displayed to 0.01 GB; the answers use the displayed value.
    return round(model(p["model"]).weight_bytes(2) / 1e9, 2)


def _pool_bytes(p: dict[str, Any]) -> float:
    requested = round(p["util"] * _total_gib(p), 4) * GIB
    reserved = (p["act_gib"] + p["nontorch_gib"] + p["graphs_gib"]) * GIB
    return requested - _weights_gb(p) * 1e9 - reserved


def _block_bytes(p: dict[str, Any]) -> int:
    return model(p["model"]).kv_bytes_per_token(KV_DTYPE_BYTES) * p["block"]


def _pool_blocks(p: dict[str, Any]) -> int:
    return math.floor(_pool_bytes(p) / _block_bytes(p))


def _cap_worst(p: dict[str, Any]) -> int:
    return _pool_blocks(p) // _blocks(p["prompt"] + p["out_max"], p["block"])


def _step_s(p: dict[str, Any], n: int) -> float:
    """A decode step with n running requests at the mean context (prompt + half the mean reply):
    all weights plus every request's KV, read once at eta of the HBM bandwidth."""
    kv = model(p["model"]).kv_bytes_per_token(KV_DTYPE_BYTES)
    ctx = p["prompt"] + p["out_mean"] / 2
    return (_weights_gb(p) * 1e9 + n * ctx * kv) / (gpu(p["gpu"]).hbm_bytes_per_s * p["eta"])


def _capacity(p: dict[str, Any], n: int) -> float:
    # n slots, each busy for a mean reply of out_mean steps: requests per second.
    return n / (p["out_mean"] * _step_s(p, n))


def erlang_c(c: int, a: float) -> float:
    """Probability that an arrival waits in an M/M/c queue with offered load a = lambda x S."""
    if a >= c:
        return 1.0
    # Erlang B by its stable recurrence, then C from B.
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    rho = a / c
    return b / (1 - rho + rho * b)


def queue_row(p: dict[str, Any], n: int) -> dict[str, float]:
    t = _step_s(p, n)
    service = p["out_mean"] * t
    a = p["rate"] * service
    rho = a / n
    wait_p = erlang_c(n, a)
    mean_wait = wait_p * service / (n - a) if a < n else math.inf
    return {"n": n, "step_ms": t * 1e3, "user_tps": 1 / t, "tps": n / t,
            "capacity": n / service, "rho": rho, "p_wait": wait_p, "wait_s": mean_wait}


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    B, n, P = p["block"], p["n"], p["prompt"]
    kv = m.kv_bytes_per_token(KV_DTYPE_BYTES)
    total = _total_gib(p)
    requested = round(p["util"] * total, 4)
    weights_gb = _weights_gb(p)
    weights_gib = weights_gb * 1e9 / GIB
    pool_bytes = _pool_bytes(p)
    blocks = _pool_blocks(p)
    prompt_blocks = _blocks(P, B)
    admit = n * prompt_blocks
    per_req = blocks // n  # blocks each of the n requests can have
    exhaust = max(0, B * per_req - P + 1)
    worst_blocks = _blocks(P + p["out_max"], B)
    mean_blocks = _blocks(P + p["out_mean"] - 1, B)
    cap_worst = blocks // worst_blocks
    cap_mean = blocks // mean_blocks
    lower = max(1, math.floor(0.85 * cap_worst))
    rows = [queue_row(p, k) for k in (lower, cap_worst, cap_mean)]
    table = ["| cap | step (ms) | per-user tok/s | tok/s | capacity (req/s) | utilisation | "
             "P(wait) | mean wait |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        wait = "overloaded" if not math.isfinite(r["wait_s"]) else f"{r['wait_s']:.2f} s"
        table.append(f"| {r['n']} | {r['step_ms']:.1f} | {r['user_tps']:.1f} | {r['tps']:,.0f} | "
                     f"{r['capacity']:.2f} | {min(r['rho'], 9.99):.2f} | {r['p_wait']:.3f} | "
                     f"{wait} |")
    worst_row = rows[1]
    step_n = _step_s(p, n)
    return {
        # part answers
        "pool_blocks": Quantity(blocks, ""),
        "pool_blocks_unrounded": pool_bytes / (kv * B),  # before the floor (boundary rule)
        "exhaust_step": Quantity(exhaust, ""),
        "cap_worst": Quantity(cap_worst, ""),
        # floor(floor(x) / w) = floor(x / w): the real value is the unfloored pool over w.
        "cap_worst_unrounded": pool_bytes / (kv * B) / worst_blocks,
        "next_check": "preemption_metrics",
        "ledger": "code/reference.py",
        "cap_capacity": Quantity(worst_row["capacity"], "1/s"),
        "fix": MODEL_ANSWER.format(cap=cap_worst, rho=worst_row["rho"], wait=worst_row["wait_s"],
                                   cap_mean=cap_mean),
        # givens the statement prints
        "total_gib": total,
        "requested_gib": requested,
        "weights_gb": weights_gb,
        "weights_gib": weights_gib,
        "params_b": m.params / 1e9,
        "layers": m.layers,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "hbm_tbps": g.hbm_tbps,
        "driver_mib": g.hbm_driver_total_mib,
        "reported_mib": g.hbm_reported_mib,
        "reported_gib": g.hbm_reported_mib / 1024,
        "eta_pct": p["eta"] * 100,
        "util_pct": p["util"] * 100,
        # intermediates for the solution
        "kv_per_token": kv,
        "kv_kib": kv / 1024,
        "block_bytes": kv * B,
        "block_mib": kv * B / 2**20,
        "pool_gib": pool_bytes / GIB,
        "pool_tokens": blocks * B,
        "prompt_blocks": prompt_blocks,
        "prompt_slack": prompt_blocks * B - P,
        "admit_blocks": admit,
        "admit_pct": admit / blocks * 100,
        "per_req_blocks": per_req,
        "per_req_tokens": per_req * B,
        "exhaust_ctx": P + exhaust,
        "exhaust_need": n * (per_req + 1),
        "exhaust_prev_need": n * per_req,
        "recompute_tokens": P + exhaust,
        "worst_tokens": P + p["out_max"],
        "worst_blocks": worst_blocks,
        "cap_worst_n": cap_worst,
        "cap_worst_frac": blocks / worst_blocks,
        "mean_tokens": P + p["out_mean"] - 1,
        "mean_blocks": mean_blocks,
        "cap_mean_n": cap_mean,
        "ctx_mean": P + p["out_mean"] / 2,
        "weights_read_ms": weights_gb * 1e9 / (g.hbm_bytes_per_s * p["eta"]) * 1e3,
        "step_worst_ms": worst_row["step_ms"],
        "user_tps_worst": worst_row["user_tps"],
        "tps_worst": worst_row["tps"],
        "service_worst_s": p["out_mean"] * worst_row["step_ms"] / 1e3,
        "capacity_worst": worst_row["capacity"],
        "rho_worst": worst_row["rho"],
        "p_wait_worst": worst_row["p_wait"],
        "wait_worst_s": worst_row["wait_s"],
        "capacity_mean": rows[2]["capacity"],
        "step_n_ms": step_n * 1e3,
        "queue_table": "\n".join(table),
        "lower_cap": lower,
        "cap_time_n": blocks * p["out_mean"] // sum(_blocks(P + k, B) for k in range(p["out_mean"])),
    }


# One sentence per line: the key-point matcher cuts answers at line breaks.
MODEL_ANSWER = (
    "The pool is not too small for the prompts; it is too small for the replies. "
    "Admission looks only at the blocks a request needs now (its prompt), so it lets in far "
    "more requests than can finish together, and from then on every block boundary preempts the "
    "newest request, which throws away its KV and recomputes prompt plus generated tokens later: "
    "the GPU spends time redoing work and the tail latency of the victims explodes.\n"
    "Adding blocks (a higher gpu_memory_utilization, FP8 KV) moves the dry point but does not "
    "remove it, because each request still grows by up to the longest reply.\n"
    "The fix is to cap concurrency at what the pool holds for the replies: max_num_seqs at the "
    "no-preemption worst case, {cap} sequences (or near the mean end-of-life footprint, "
    "{cap_mean}, if the tail is rare and some preemption is acceptable).\n"
    "Then test that cap against queueing: at the offered rate the capped replica runs at a "
    "utilisation of {rho:.2f}, below one, so requests wait about {wait:.2f} s on average in the "
    "queue instead of being preempted mid-reply.\n"
    "Per-user speed rises because the batch is smaller, and goodput (requests finished within "
    "their SLO) goes up even though peak concurrency goes down.\n"
    "Pair it with realistic max_tokens from clients and an alert on the preemption counter.\n"
)


# ----------------------------------------------------------------------------------------------
# Evidence: the burst through the engine simulator, uncapped and capped


def _scaled_run(p: dict[str, Any], max_seqs: int) -> engine_sim.SimResult:
    """The burst at block granularity: one simulated token is one block of `block` real tokens,
    so a request holds exactly the blocks the real ledger gives it at the moments a block count
    changes (see `step_of`). Reply lengths are spread evenly over [2 x mean - max, max] (mean =
    out_mean), shuffled with a seed taken from the variant."""
    B, P, n = p["block"], p["prompt"], p["n"]
    lo = max(1, 2 * p["out_mean"] - p["out_max"])
    outs = [round(lo + (p["out_max"] - lo) * (i + 0.5) / n) for i in range(n)]
    random.Random(f"{p['model']}|{p['gpu']}|{n}|{P}|{p['out_mean']}|{p['out_max']}").shuffle(outs)
    prompt_blocks = _blocks(P, B)
    reqs = [engine_sim.Request(f"r{i:03d}", 0.0, prompt_blocks,
                               _blocks(P + o - 1, B) - prompt_blocks + 1) for i, o in enumerate(outs)]
    cfg = engine_sim.EngineConfig(token_budget=10**9, max_seqs=max_seqs,
                                  kv_blocks=_pool_blocks(p), block_size=1)
    return engine_sim.simulate(reqs, cfg, engine_sim.StepCost(1.0, decode_step_s=1.0))


def step_of(p: dict[str, Any], k: int) -> int:
    """The real decode step at which simulated step k >= 1 begins: the first step whose token
    needs a request's (prompt blocks + k)-th block."""
    B, P = p["block"], p["prompt"]
    return B * (k - 1) + (B * _blocks(P, B) - P) + 1 if k else 0


def evidence(p: dict[str, Any]) -> dict[str, Evidence]:
    blocks = _pool_blocks(p)
    cap = _cap_worst(p)
    series = []
    # The capped run is named after part 3, not by its number, and shows no running count (it
    # sits at the cap): either would print part 3's answer (exercises/evidence_leaks.py).
    for label, seqs in ((f"max_num_seqs = {p['n']}", p["n"]), ("the cap of part 3", cap)):
        res = _scaled_run(p, seqs)
        used, running, pre = [], [], []
        total = 0
        for k, st in enumerate(res.steps):
            x = step_of(p, k)
            total += len(st.preempted)
            used.append([x, round(100 * st.used_blocks / blocks, 2)])
            running.append([x, st.running])
            pre.append([x, total])
        series.append({"label": f"KV pool used ({label})", "unit": "%", "points": used})
        if seqs == p["n"]:
            series.append({"label": f"running requests ({label})", "unit": "requests",
                           "points": running})
        series.append({"label": f"preemptions so far ({label})", "unit": "preemptions",
                       "points": pre})
    return {
        "ledger": Evidence(
            title="The burst through the block ledger",
            filename="kv_ledger_timeline.json",
            kind="series",
            data={"x": {"label": "decode step", "unit": "steps"}, "series": series},
            caption=(f"{p['n']} requests arrive together; replies spread evenly between "
                     f"{max(1, 2 * p['out_mean'] - p['out_max']):,} and {p['out_max']:,} tokens "
                     f"(mean {p['out_mean']:,}). Simulated one block at a time (a point each time "
                     f"a request needs a new {p['block']}-token block): current-length admission, "
                     "LIFO preemption by recompute, once with every request admitted and once "
                     "with the cap of part 3."),
        )
    }


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    B, n, P = p["block"], p["n"], p["prompt"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, accept=near, merge=near, merge_floor=1e-9, skip=unusable).add

    bb = s["block_bytes"]
    reserved = (p["act_gib"] + p["nontorch_gib"] + p["graphs_gib"]) * GIB
    w = s["weights_gb"] * 1e9
    add("pool_blocks", math.floor((p["util"] * s["total_gib"] * 1e9 - w - reserved) / bb),
        f"You read the {s['total_gib']:.2f} GiB of the GPU as {s['total_gib']:.2f} GB (10^9 B). "
        "The memory budget is in GiB: 0.9 x total GiB.", "gb_not_gib", kind="gb_vs_gib")
    driver = (f"vLLM multiplies gpu_memory_utilization by the total the CUDA driver reports to "
              f"the process, {s['driver_mib']:,.0f} MiB = {s['total_gib']:.2f} GiB (the "
              "total_gpu_memory its start-up log prints).")
    if s["reported_mib"] is not None:
        add("pool_blocks", math.floor((round(p["util"] * s["reported_gib"], 4) * GIB - w
                                       - reserved) / bb),
            f"That starts from the {s['reported_mib']:,.0f} MiB nvidia-smi shows. {driver}",
            "nvidia_smi", kind="peak_vs_achievable")
        whole = round(s["reported_gib"])
        add("pool_blocks", math.floor((round(p["util"] * whole, 4) * GIB - w - reserved) / bb),
            f"That starts from a round {whole} GiB. {driver}", "round_total", kind="peak_vs_achievable")
    add("pool_blocks", math.floor((s["requested_gib"] * GIB - w - reserved + p["graphs_gib"] * GIB)
                                  / bb),
        f"You left out the {p['graphs_gib']} GiB CUDA-graph estimate; this vLLM subtracts it "
        "before sizing the pool.", "no_graphs", kind="miscounted_term")
    add("pool_blocks", math.floor((s["total_gib"] * GIB - w - reserved) / bb),
        f"You used all {s['total_gib']:.2f} GiB. vLLM works inside gpu_memory_utilization x "
        f"total = {s['requested_gib']:g} GiB.", "no_util", kind="peak_vs_achievable")
    add("pool_blocks", math.floor((s["requested_gib"] * GIB - s["weights_gb"] * GIB - reserved)
                                  / bb),
        f"The weights are {s['weights_gb']} GB = {s['weights_gib']:.2f} GiB; you subtracted "
        f"{s['weights_gb']} GiB.", "weights_gib", kind="gb_vs_gib")
    add("pool_blocks", s["pool_tokens"],
        f"That is the pool in tokens. The part asks for {B}-token blocks.", "tokens",
        kind="unit_slip")

    t = s["exhaust_step"].value
    add("exhaust_step", t + 1,
        f"One step late. At decode step t a request writes the KV of the token sampled at step "
        f"t - 1, so it holds prompt + t = {P} + t tokens; the first t where {n} x "
        f"blocks({P} + t) exceeds the pool of part 1 is {t}. (Counting tokens instead of blocks, "
        "or numbering the prefill as step 1, also lands here.)", "off_by_one", kind="rounding")
    add("exhaust_step", s["exhaust_ctx"],
        f"That is the context length at which the pool runs dry ({P} + {t}). The part asks for "
        "the decode step: tokens generated after the prompt.", "context_not_step",
        kind="wrong_scope")
    add("exhaust_step", max(1, t - 1),
        f"One step early: at step {t - 1} the {n} requests need {n} x {s['per_req_blocks']} = "
        f"{s['exhaust_prev_need']:,} blocks, which still fit in the pool of part 1.",
        "early", kind="rounding")

    add("cap_worst", s["cap_mean_n"],
        f"That uses the mean reply ({p['out_mean']:,} tokens). A cap that can never preempt must "
        f"hold every request at its longest: {P:,} + {p['out_max']:,} tokens. (Dropping the "
        "prompt from the footprint can land here too.)", "mean_reply", kind="mean_vs_tail")
    add("cap_worst", s["pool_blocks"].value // s["prompt_blocks"],
        f"That counts only the prompts ({s['prompt_blocks']} blocks each): it is exactly what "
        "current-length admission sees, and why it over-admits.", "prompt_only",
        kind="miscounted_term")
    add("cap_worst", s["pool_blocks"].value // _blocks(P + p["out_max"] // 2, B),
        "That uses the average footprint over a maximal reply (prompt + max/2). Averages are "
        "fine for a steady-state estimate, but they do not guarantee no preemption.", "half_max",
        kind="mean_vs_tail")
    add("cap_worst", round(s["cap_worst_frac"]),
        f"The pool of part 1 over {s['worst_blocks']} blocks a request is {s['cap_worst_frac']:.2f}: "
        "round down, a fraction of a request does not fit.", "rounded_up", kind="rounding")

    cap = s["cap_capacity"].value
    n_w = s["cap_worst_n"]
    add("cap_capacity", cap * p["out_mean"] / p["out_max"],
        f"You used the longest reply ({p['out_max']:,} tokens) as the service time. Throughput "
        f"depends on the mean reply, {p['out_mean']:,} tokens.", "max_reply", kind="mean_vs_tail")
    t_w = s["weights_read_ms"] / 1e3
    add("cap_capacity", n_w / (p["out_mean"] * t_w),
        "You timed a step by the weights alone. At part 3's cap every request in the step also "
        f"reads its KV, {s['ctx_mean']:,.0f} tokens on average, which more than doubles it.",
        "no_kv_read", kind="miscounted_term")
    add("cap_capacity", cap / p["eta"],
        f"You used the full {s['hbm_tbps']} TB/s. The statement says a decode step reaches "
        f"{s['eta_pct']:.0f} % of it.", "no_eta", kind="peak_vs_achievable")
    add("cap_capacity", queue_row(p, n)["capacity"],
        f"That is the capacity of {n} slots, but {n} requests do not fit: use part 3's cap.",
        "uncapped", kind="misread_mechanism")
    add("cap_capacity", n_w / s["service_worst_s"] * p["out_mean"],
        "That is tokens per second, not requests per second: divide by the mean reply.",
        "tokens_per_s", kind="unit_slip")

    out.append(Mistake("next_check", "raise_util",
                       "That is a change, not a check. Confirm the diagnosis first: the pool can "
                       "also look full because of a leak or a prefix cache, and more blocks only "
                       "move the dry point by a few steps.", "raise_util",
                       kind="misread_mechanism"))
    out.append(Mistake("next_check", "startup_log",
                       "The start-up line tells you the pool size, which you already computed. "
                       "It cannot show what happens later: the preemptions during decoding.",
                       "startup_log", kind="misread_mechanism"))
    out.append(Mistake("next_check", "profile",
                       "A kernel profile would show slow steps, not why: the engine is doing "
                       "recompute work because requests keep being preempted. The counters say "
                       "that directly.", "profile", kind="misread_mechanism"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [
        Fits("BF16 weights inside gpu_memory_utilization", p["gpu"], 1, _weights_gb(p) * 1e9,
             usable=p["util"]),
        Holds(_pool_bytes(p) > 0, "the KV pool is positive"),
        WithinContext(p["model"], p["prompt"] + p["out_max"], "a prompt plus the longest reply"),
        Holds(p["out_mean"] < p["out_max"], "the mean reply is below the cap"),
    ]
