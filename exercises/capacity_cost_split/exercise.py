"""Q31: capacity and cost arithmetic before the router.

Do the arithmetic first. Per replica: the prefill capacity (tokens/s of prompt, compute-bound:
N * F * MFU / 2P) and the decode capacity (tokens/s of output at the KV-limited batch, memory-bound:
batch / step time, where a step streams the weights and every running request's KV). Demand in each
phase divided by its capacity is replica-seconds per second; their sum over a utilisation ceiling,
rounded up, is the replica count, and the replica count times GPUs times the hourly price is the
bill. Split the bill by replica-seconds and the prompt, not the reply, is most of it (68 % in the
canonical setting), even though each output token costs more than each input token.

Figures come from exercises/catalog (model, GPU, including the memory the driver reports); the
workload, the price per GPU-hour, the utilisation ceiling, the MFU and the HBM efficiency are keys of
the variant, printed by the statement.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits, Holds, WithinContext
from exercises.slips import Slips, near, tolerances, unusable
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

GIB = 2**30

# (model, GPU, GPUs per replica, weight precision): replicas that hold their weights with room for
# a real KV pool. FP8 means FP8 weights and activations, so the GEMMs run at the FP8 rate.
DEPLOYMENTS: tuple[tuple[str, str, int, str], ...] = (
    ("Llama-3.1-70B", "H100 SXM", 8, "FP8"),
    ("Llama-3.1-70B", "H100 SXM", 8, "BF16"),
    ("Llama-3.1-70B", "H200 SXM", 8, "FP8"),
    ("Llama-3.1-70B", "H200 SXM", 4, "FP8"),
    ("Llama-3.1-70B", "H200 SXM", 4, "BF16"),
    ("Qwen2.5-72B", "H100 SXM", 8, "FP8"),
    ("Qwen2.5-72B", "H200 SXM", 4, "FP8"),
    ("Llama-3.1-8B", "H100 SXM", 1, "BF16"),
    ("Llama-3.1-8B", "H100 SXM", 1, "FP8"),
    ("Llama-3.1-8B", "H200 SXM", 1, "FP8"),
    ("Llama-3.1-405B", "H200 SXM", 8, "FP8"),
    ("Llama-3.1-405B", "H100 SXM", 8, "FP8"),
)
RATES = (5, 10, 15, 20, 25, 30, 40, 50, 60, 80)
PROMPTS = (500, 1000, 1500, 2000, 2500, 3000, 4000, 6000, 8000)
OUTPUTS = (100, 200, 300, 500, 800, 1000, 1500, 2000)
PRICES: dict[str, tuple[float, ...]] = {"H100 SXM": (2.0, 2.5, 3.0), "H200 SXM": (3.0, 3.5, 4.0)}
CEILINGS = (0.6, 0.65, 0.7, 0.75, 0.8)
MFUS = (0.35, 0.4, 0.45, 0.5)
HBM_EFFS = (0.7, 0.75, 0.8)
TPOTS_MS = (30, 40, 50)

# The options of the last part: what acts on the prefill side, and what on the decode side.
PREFILL_LEVERS = ("prefix_cache", "shorter_prompts", "prefill_mfu")
DECODE_LEVERS = ("spec_decode", "kv_fp8")

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "gpu": "H100 SXM",
    "tp": 8,  # GPUs per replica
    "precision": "FP8",  # weights and GEMMs; the KV cache stays BF16
    "rate": 40,  # requests per second
    "prompt": 2500,  # tokens per request
    "output": 500,  # tokens per request
    "gpu_hour_usd": 2.5,  # price per GPU-hour [A]
    "ceiling": 0.7,  # utilisation ceiling [A]
    "mfu": 0.4,  # prefill MFU [A]
    "hbm_eff": 0.75,  # share of peak HBM bandwidth a decode step achieves [A]
    "mem_util": 0.9,  # vLLM's default gpu_memory_utilization
    "reserve_gib": 3,  # per GPU, activations and CUDA graphs [A]
    "tpot_ms": 40,  # the decode latency target per output token [A]
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        name, gpu_name, tp, precision = rng.choice(DEPLOYMENTS)
        return {**CANONICAL, "model": name, "gpu": gpu_name, "tp": tp, "precision": precision,
                **choose(rng, {"rate": RATES, "prompt": PROMPTS, "output": OUTPUTS,
                               "gpu_hour_usd": PRICES[gpu_name], "ceiling": CEILINGS,
                               "mfu": MFUS, "hbm_eff": HBM_EFFS, "tpot_ms": TPOTS_MS})}

    return draw_sensible(rng, draw, is_sensible, tries=5000)


def is_sensible(p: dict[str, Any]) -> bool:
    """The pool holds a real batch; the KV-limited batch meets the TPOT target (so the batch is
    set by memory, as the statement says); the replica count is not a rounding question and not
    absurd; one phase clearly dominates the bill, so the last part has one answer."""
    if _pool_gb(p) <= 0:
        return False
    s = solve(p)
    x = s["replicas_exact"]
    return (
        s["batch"] >= 16
        and s["step_ms"] <= p["tpot_ms"]
        and 3 <= math.ceil(x) <= 60
        # clear of a whole number by 0.05 and by 0.5 % (the tolerance policy's boundary rule)
        and min(x - math.floor(x), math.ceil(x) - x) >= max(0.05, 0.005 * x)
        and abs(s["prefill_share"].value - 50) >= 8
    )


# ----------------------------------------------------------------------------------------------
# The reference


def _weights_gb(p: dict[str, Any]) -> float:
    # Shown to 0.1 GB; the answers use that figure.
    per_param = 1 if p["precision"] == "FP8" else 2
    return round(model(p["model"]).weight_bytes(per_param) / 1e9, 1)


def _pool_gb(p: dict[str, Any]) -> float:
    """The replica's KV pool as the engine would report it, rounded to the GB the statement shows:
    mem_util of the total the CUDA driver reports (what vLLM multiplies by gpu_memory_utilization;
    H100: 81,090 MiB, not nvidia-smi's 81,559), less a per-GPU reserve, less the weights."""
    g = gpu(p["gpu"])
    per_gpu = p["mem_util"] * g.hbm_driver_total_bytes - p["reserve_gib"] * GIB
    return float(round((p["tp"] * per_gpu) / 1e9 - _weights_gb(p)))


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m, g = model(p["model"]), gpu(p["gpu"])
    n = p["tp"]
    flops = g.fp8_flops if p["precision"] == "FP8" else g.bf16_flops
    assert flops is not None
    params_b = round(m.params / 1e9, 2)  # shown to 0.01 B
    kappa = m.kv_bytes_per_token(2)
    prompt, out, lam = p["prompt"], p["output"], p["rate"]

    # -- capacities per replica -------------------------------------------------------------------
    prefill_cap = n * flops * p["mfu"] / (2 * params_b * 1e9)  # prompt tokens per second
    weights_gb = _weights_gb(p)
    pool_gb = _pool_gb(p)
    reserve_bytes = (prompt + out) * kappa  # what admission reserves per request
    batch = math.floor(pool_gb * 1e9 / reserve_bytes)
    avg_ctx = prompt + out / 2  # a running request is halfway through its output on average
    step_bytes = weights_gb * 1e9 + batch * avg_ctx * kappa
    hbm = n * g.hbm_bytes_per_s * p["hbm_eff"]
    step_s = step_bytes / hbm
    decode_cap = batch / step_s  # output tokens per second

    # -- demand and replicas ----------------------------------------------------------------------
    prefill_demand = lam * prompt
    decode_demand = lam * out
    rs_prefill = prefill_demand / prefill_cap  # replica-seconds per second
    rs_decode = decode_demand / decode_cap
    rs_total = rs_prefill + rs_decode
    replicas_exact = rs_total / p["ceiling"]
    replicas = math.ceil(replicas_exact)
    gpus = replicas * n
    bill_h = gpus * p["gpu_hour_usd"]
    share = rs_prefill / rs_total

    # -- prices: the hourly bill split by replica-seconds -------------------------------------------
    bill_prefill_h = bill_h * share
    bill_decode_h = bill_h * (1 - share)
    price_in = bill_prefill_h / (prefill_demand * 3600) * 1e6  # USD per 1M prompt tokens
    price_out = bill_decode_h / (decode_demand * 3600) * 1e6
    replica_usd_s = n * p["gpu_hour_usd"] / 3600
    full_in = replica_usd_s / prefill_cap * 1e6  # each phase priced at full capacity
    full_out = replica_usd_s / decode_cap * 1e6

    prefill_side = share > 0.5
    s: dict[str, Any] = {
        "prefill_capacity": Quantity(prefill_cap, "tok/s"),
        "decode_capacity": Quantity(decode_cap, "tok/s"),
        "replicas": Quantity(replicas, ""),
        "replicas_unrounded": replicas_exact,  # before the ceil (policy: boundary rule)
        "prefill_share": Quantity(share * 100, "%"),
        "price_in": Quantity(price_in, "USD/Mtok"),
        "price_out": Quantity(price_out, "USD/Mtok"),
        "levers": list(PREFILL_LEVERS if prefill_side else DECODE_LEVERS),
        # givens the statement prints
        "params_b": params_b,
        "kappa": kappa,
        "layers": m.layers,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "gemm_tflops": flops / 1e12,
        "hbm_tbps": g.hbm_tbps,
        "reported_mib": g.hbm_reported_mib,
        "driver_mib": g.hbm_driver_total_mib,
        "weights_gb": weights_gb,
        "pool_gb": pool_gb,
        "mfu_pct": p["mfu"] * 100,
        "ceiling_pct": p["ceiling"] * 100,
        "hbm_eff_pct": p["hbm_eff"] * 100,
        "mem_util_pct": p["mem_util"] * 100,
        "bytes_per_param": 1 if p["precision"] == "FP8" else 2,
        # intermediates for the solution
        "prefill_tflops_eff": n * flops * p["mfu"] / 1e12,
        "flops_per_token_g": 2 * params_b,
        "reserve_gb": reserve_bytes / 1e9,
        "batch_exact": pool_gb * 1e9 / reserve_bytes,
        "batch": batch,
        "avg_ctx": avg_ctx,
        "kv_stream_gb": batch * avg_ctx * kappa / 1e9,
        "step_gb": step_bytes / 1e9,
        "hbm_eff_tbs": hbm / 1e12,
        "step_ms": step_s * 1e3,
        "per_user_tps": 1 / step_s,
        "prefill_demand": prefill_demand,
        "decode_demand": decode_demand,
        "rs_prefill": rs_prefill,
        "rs_decode": rs_decode,
        "rs_total": rs_total,
        "replicas_exact": replicas_exact,
        "gpus": gpus,
        "bill_h": bill_h,
        "bill_day": bill_h * 24,
        "bill_prefill_h": bill_prefill_h,
        "bill_decode_h": bill_decode_h,
        "decode_share_pct": (1 - share) * 100,
        "token_share_pct": prompt / (prompt + out) * 100,
        "out_over_in": price_out / price_in,
        "per_request_usd": bill_h / (lam * 3600),
        "share_comment": _share_comment(prompt, out, share),
        "full_in": full_in,
        "full_out": full_out,
        "busy_pct": rs_total / replicas * 100,
        "bigger_side": "prefill (the prompt)" if prefill_side else "decode (the reply)",
        "smaller_side": "decode (the reply)" if prefill_side else "prefill (the prompt)",
        # a lever worked through: half of every prompt served from a prefix cache
        "cached_replicas": math.ceil((rs_prefill / 2 + rs_decode) / p["ceiling"]),
        "cached_rs": rs_prefill / 2 + rs_decode,
    }
    return s


def _share_comment(prompt: int, out: int, share: float) -> str:
    tokens = prompt / (prompt + out) * 100
    if share > 0.5:
        return (f"Yet prompt tokens are {tokens:.0f} % of the tokens and {share * 100:.0f} % of "
                f"the cost: each is cheap, but there are {prompt / out:.1f} times as many of them "
                "as output tokens. Long prompts and short replies (chat with retrieved context, "
                "agents re-sending their history) are why the prompt, not the reply, is usually "
                "most of the bill.")
    return (f"Here the replies are long enough to turn it around: prompt tokens are "
            f"{tokens:.0f} % of the tokens but only {share * 100:.0f} % of the cost. Reasoning "
            "workloads, short prompts and long replies, look like this; chat with retrieved "
            "context usually looks the other way.")


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    n, mfu, ceiling = p["tp"], p["mfu"], p["ceiling"]
    kappa = s["kappa"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, accept=near, merge=near, merge_floor=1e-9, skip=unusable).add

    # -- prefill capacity -------------------------------------------------------------------------
    cp = s["prefill_capacity"].value
    if p["precision"] == "FP8":
        add("prefill_capacity", cp / 2,
            "The weights and activations are FP8, so the GEMMs run at the FP8 rate; you used "
            "BF16.", "bf16_rate", kind="wrong_precision")
    else:
        add("prefill_capacity", cp * 2,
            "The weights are BF16, so the GEMMs run at the BF16 rate; you used FP8 (or a sparse "
            "figure).", "fp8_rate", kind="wrong_precision")
    add("prefill_capacity", cp / mfu,
        f"You ran prefill at 100 % of peak; the stated MFU is {s['mfu_pct']:.0f} %.", "no_mfu",
        kind="peak_vs_achievable")
    add("prefill_capacity", cp / 3,
        "6P per token is the training rule. Prefill is a forward pass: 2P.", "training",
        kind="flop_counting")
    if n > 1:
        add("prefill_capacity", cp / n,
            f"That is one GPU. The replica's {n} GPUs share every prompt.", "one_gpu",
            kind="forgot_tp")

    # -- decode capacity --------------------------------------------------------------------------
    cd = s["decode_capacity"].value
    hbm = s["hbm_eff_tbs"] * 1e12
    batch = s["batch"]
    add("decode_capacity", cd / p["hbm_eff"],
        f"You streamed at the peak {s['hbm_tbps']:g} TB/s; a step achieves "
        f"{s['hbm_eff_pct']:.0f} % of it.", "peak_hbm", kind="peak_vs_achievable")
    add("decode_capacity", batch / (batch * s["avg_ctx"] * kappa / hbm),
        "You left the weights out of the step. Every step reads all of them once, whatever the "
        "batch.", "no_weights", kind="miscounted_term")
    add("decode_capacity",
        batch / ((s["weights_gb"] * 1e9 + batch * (p["prompt"] + p["output"]) * kappa) / hbm),
        "You streamed each request's full prompt + output every step. On average a running "
        "request is halfway through its reply: P + O/2 tokens of context.", "full_context",
        kind="mean_vs_tail")
    half_batch = math.floor(s["pool_gb"] * 1e9 / (s["avg_ctx"] * kappa))
    add("decode_capacity",
        half_batch / ((s["weights_gb"] * 1e9 + half_batch * s["avg_ctx"] * kappa) / hbm),
        "You sized the batch by the average context. Admission reserves KV for the prompt and "
        "the whole output (P + O tokens) for as long as the request runs.", "avg_reservation",
        kind="mean_vs_tail")
    add("decode_capacity", s["per_user_tps"],
        "That is one request's decode speed (1 / step time). The replica produces one token per "
        "running request per step: batch / step.", "per_user", kind="wrong_scope")
    add("decode_capacity", batch / (p["tpot_ms"] / 1e3),
        f"You used the {p['tpot_ms']} ms TPOT target as the step time. The step is what the "
        "bytes cost; the target is only the bound it must meet.", "tpot_as_step",
        kind="misread_mechanism")
    if n > 1:
        add("decode_capacity", cd / n,
            f"That is one GPU's share. The batch runs on all {n} GPUs of the replica together.",
            "per_gpu", kind="forgot_tp")

    # -- replicas ---------------------------------------------------------------------------------
    r = int(s["replicas"].value)
    rs_p, rs_d, rs = s["rs_prefill"], s["rs_decode"], s["rs_total"]
    add("replicas", math.ceil(rs),
        f"You left out the {s['ceiling_pct']:.0f} % utilisation ceiling: replicas run at most "
        "that busy, so divide the replica-seconds by it.", "no_ceiling", kind="peak_vs_achievable")
    add("replicas", math.ceil(rs * ceiling),
        "You multiplied by the utilisation ceiling; divide by it. A replica may only be that "
        "busy, so you need more of them, not fewer.", "times_ceiling", kind="inverted")
    add("replicas", math.ceil(rs_p / ceiling),
        "You sized for prefill alone. Each replica also spends time decoding: add the two "
        "phases' replica-seconds.", "prefill_only", kind="miscounted_term")
    add("replicas", math.ceil(rs_d / ceiling),
        "You sized for decode alone. The prompt's prefill costs replica time too, here most of "
        "it.", "decode_only", kind="miscounted_term")
    add("replicas", math.ceil(rs_p / ceiling) + math.ceil(rs_d / ceiling),
        "You rounded each phase up separately, as if they ran on separate pools. Colocated "
        "replicas serve both: add the replica-seconds, then round once.", "two_pools",
        kind="rounding")
    add("replicas", r - 1,
        "One short: that count runs above the utilisation ceiling. Round up.", "round_down",
        kind="rounding")
    if n > 1:
        add("replicas", r * n,
            f"That is the number of GPUs. The part asks for replicas of {n} GPUs each.", "gpus",
            kind="forgot_tp")

    # -- share ------------------------------------------------------------------------------------
    share = s["prefill_share"].value
    add("prefill_share", 100 - share,
        "That is the decode share. The prefill share is prefill replica-seconds over the total.",
        "decode_share", kind="wrong_scope")
    add("prefill_share", s["token_share_pct"],
        "That is the prompt's share of the tokens. A prompt token is much cheaper than an output "
        "token, so split the bill by replica-seconds, not tokens.", "token_share",
        kind="misread_mechanism")
    add("prefill_share", math.ceil(rs_p / ceiling) / (math.ceil(rs_p / ceiling)
                                                     + math.ceil(rs_d / ceiling)) * 100,
        "You split by separately rounded replica counts. Split by the replica-seconds each phase "
        "uses.", "rounded_pools", kind="rounding")
    add("prefill_share", rs_p / r * 100,
        "You divided prefill's replica-seconds by the whole fleet. The headroom under the ceiling "
        "belongs to neither phase: divide by the replica-seconds the two phases use together.",
        "over_fleet", kind="wrong_scope")

    # -- prices -----------------------------------------------------------------------------------
    pin, pout = s["price_in"].value, s["price_out"].value
    blended = s["bill_h"] / ((s["prefill_demand"] + s["decode_demand"]) * 3600) * 1e6
    add("price_in", s["full_in"],
        "You priced a prompt token at a fully busy replica. The fleet is paid for while it sits "
        "below the utilisation ceiling and above the rounded-up demand; the statement splits the "
        "actual bill by replica-seconds.", "full_capacity", kind="peak_vs_achievable")
    add("price_in", blended,
        "That is the bill over all tokens, input and output alike. Split it by replica-seconds "
        "first.", "blended", kind="wrong_scope")
    add("price_in", s["bill_h"] / (s["prefill_demand"] * 3600) * 1e6,
        "You charged the whole bill to the prompt tokens. Only the prefill share of it is theirs.",
        "whole_bill", kind="wrong_scope")
    add("price_in", pin / n,
        f"You priced a replica-hour at one GPU's price; a replica is {n} GPUs.", "gpu_as_replica",
        kind="forgot_tp")
    add("price_out", s["full_out"],
        "You priced an output token at a fully busy replica. The statement splits the actual "
        "bill, idle headroom included, by replica-seconds.", "full_capacity",
        kind="peak_vs_achievable")
    add("price_out", blended,
        "That is the bill over all tokens, input and output alike. Split it by replica-seconds "
        "first.", "blended", kind="wrong_scope")
    add("price_out", s["bill_h"] / (s["decode_demand"] * 3600) * 1e6,
        "You charged the whole bill to the output tokens. Only the decode share of it is theirs.",
        "whole_bill", kind="wrong_scope")
    add("price_out", pout / n,
        f"You priced a replica-hour at one GPU's price; a replica is {n} GPUs.", "gpu_as_replica",
        kind="forgot_tp")

    # -- levers -----------------------------------------------------------------------------------
    wrong_side = list(DECODE_LEVERS if s["prefill_share"].value > 50 else PREFILL_LEVERS)
    out.append(Mistake(
        "levers", wrong_side,
        f"Those act on {s['smaller_side']}, the smaller share ({100 - share if share > 50 else share:.0f} %"
        f" of the bill here). Attack {s['bigger_side']} first.", "wrong_side",
        kind="misread_mechanism"))
    out.append(Mistake(
        "levers", [*PREFILL_LEVERS, *DECODE_LEVERS],
        f"They all help, but not equally: only the ones acting on {s['bigger_side']} touch the "
        "larger share of the bill.", "everything", kind="misread_mechanism"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [
        Fits(f"{p['precision']} weights inside gpu_memory_utilization", p["gpu"], p["tp"],
             _weights_gb(p) * 1e9, usable=p["mem_util"]),
        Holds(_pool_gb(p) > 0, "the KV pool the statement prints is positive"),
        WithinContext(p["model"], p["prompt"] + p["output"], "prompt plus reply"),
    ]
