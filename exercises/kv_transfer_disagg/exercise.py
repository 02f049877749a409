"""Q23: the KV a long prompt leaves behind has to cross the network before decode can start.

The scenario is a prefill/decode-disaggregated deployment: one prefill instance (tp GPUs, one NIC
per GPU) computes a long prompt, then ships its KV to a decode instance of the same shape. The parts
walk the blurb's argument: the KV size; the sustained rate a prefill GPU emits (small next to a
NIC); the wire time (small); the number of block-sized transfers (large, and that is where the
latency goes); the decode side's request cap from Little's law on its KV pool; and, at a stated
prefill:decode instance ratio, which side saturates first.

Every hardware and model figure comes from exercises/catalog; every assumption is a key of the
variant so the statement can print it.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, link, model
from exercises.deployment import deployment
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits, Holds, WithinContext
from exercises.slips import Slips, near, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# Where variants are drawn from. Prompt lengths are multiples of 2,048 so every block size divides
# them; tensor-parallel degrees must divide the model's 8 KV heads.
MODELS = ("Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B")
GPUS = ("H100 SXM", "H200 SXM", "B200")
NICS = ("ConnectX-7", "ConnectX-8")
TP_CHOICES: dict[str, tuple[int, ...]] = {
    "Llama-3.1-8B": (2, 4),
    "Llama-3.1-70B": (4, 8),
    "Llama-3.1-405B": (8,),
}
PROMPTS = (4096, 6144, 8192, 12288, 16384, 24576, 32768)
OUTPUTS = (256, 512, 1024)
TPOTS_MS = (25, 30, 40)
MFUS = (0.4, 0.45, 0.5, 0.55, 0.6)
BLOCKS = (16, 32)
RATIOS = (1, 2, 3, 4, 6)

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "gpu": "H100 SXM",
    "nic": "ConnectX-7",
    "tp": 8,  # GPUs per instance (prefill and decode alike), tensor parallel across them
    "prompt": 8192,  # tokens
    "output": 512,  # tokens generated per request [A]
    "mfu": 0.5,  # prefill model-FLOPs utilisation [A]
    "tpot_ms": 25,  # decode time per output token [A]
    "block": 16,  # tokens per KV block (vLLM's default)
    "ratio": 4,  # prefill instances per decode instance
    "mem_util": 0.9,  # share of HBM the engine may use (vLLM's default gpu_memory_utilization)
    "act_reserve_gb": 2.5,  # per GPU, kept back for activations [A]
    "post_us_lo": 1,  # software cost per posted transfer, low end [A]
    "post_us_hi": 5,  # and high end [A]
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw a sensible variant: the weights fit with room for KV, the TPOT is reachable at a full
    pool, and the two sides are far enough apart that the which-side answer is not a coin toss."""
    def draw(rng: random.Random) -> dict[str, Any]:
        name = rng.choice(MODELS)
        return {**CANONICAL, "model": name, **choose(rng, {
            "gpu": GPUS, "nic": NICS, "tp": TP_CHOICES[name], "prompt": PROMPTS,
            "output": OUTPUTS, "mfu": MFUS, "tpot_ms": TPOTS_MS, "block": BLOCKS, "ratio": RATIOS,
        })}

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    """The checks generate() applies; the tests apply them to every variant too."""
    m = model(p["model"])
    if m.kv_heads % p["tp"] or p["prompt"] % p["block"]:
        return False
    pool = _pool_gb(p)
    if pool <= 0:
        return False
    s = solve(p)
    return (
        s["concurrency"] >= 8  # a pool that holds a real batch, not two requests
        and s["tpot_ms_floor"] <= p["tpot_ms"]  # the TPOT is reachable with the pool full
        # at least 10 % apart, so the which-side answer does not hinge on rounding
        and abs(math.log(s["prefill_side_rps"] / s["decode_cap_rps"])) >= math.log(1.1)
        # the NIC is never the answer, and the emission really is a small share of it
        and s["nic_share_pct"] < 25
        and s["decode_ingress_pct"] < 30
        # decode holds each request's KV much longer than prefill does (the Little's-law point)
        and s["hold_ratio"] >= 4
        # the lesson of the transfers part holds: posting costs well over the wire time
        and s["post_over_wire_lo"] >= 3
    )


# ----------------------------------------------------------------------------------------------
# The reference


def _weights_gb(p: dict[str, Any]) -> float:
    # Displayed to 0.1 GB, so computed from that.
    return round(model(p["model"]).weight_bytes(2) / 1e9, 1)


def _pool_gb(p: dict[str, Any]) -> float:
    # The decode instance's KV pool: usable HBM (marketed GB read as 10^9 B, times the memory
    # utilisation) minus BF16 weights minus the activation reserve, rounded to the GB the statement
    # shows. The answers use the rounded figure.
    g = gpu(p["gpu"])
    raw = p["tp"] * g.hbm_gb * p["mem_util"] - _weights_gb(p) - p["tp"] * p["act_reserve_gb"]
    return float(round(raw))


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    nic = link(p["nic"])
    tp, n, out, block = p["tp"], p["prompt"], p["output"], p["block"]

    # -- KV size ---------------------------------------------------------------------------------
    kappa = m.kv_bytes_per_token(2)
    kv_bytes = n * kappa
    kv_gb = kv_bytes / 1e9

    # -- prefill time and the rate KV appears at ------------------------------------------------
    linear_flops = 2 * m.params * n  # 2 FLOPs per parameter per token
    attn_flops = 2 * m.layers * n * n * m.q_dim  # causal QK^T and PV: 4·L·n²·d_q halved
    prefill_flops = linear_flops + attn_flops
    instance_flops = tp * g.bf16_flops * p["mfu"]
    prefill_s = prefill_flops / instance_flops
    emit_instance = kv_bytes / prefill_s  # B/s for the whole instance
    emit_gpu = emit_instance / tp
    nic_bps = nic.bytes_per_s

    # -- wire time if shipped after prefill ------------------------------------------------------
    bytes_per_gpu = kv_bytes / tp
    wire_s = bytes_per_gpu / nic_bps  # each GPU's share through its own NIC, all in parallel
    one_nic_s = kv_bytes / nic_bps

    # -- block-granular transfers ----------------------------------------------------------------
    blocks = n // block
    transfers = blocks * m.layers * 2  # per GPU: one write per (block, layer, K or V)
    kv_heads_per_gpu = m.kv_heads // tp
    transfer_bytes = block * kv_heads_per_gpu * m.head_dim * 2
    post_lo_s = transfers * p["post_us_lo"] * 1e-6
    post_hi_s = transfers * p["post_us_hi"] * 1e-6

    # -- the decode side: Little's law on the KV pool --------------------------------------------
    weights_gb = _weights_gb(p)
    pool_gb = _pool_gb(p)
    held_tokens = n + out
    req_bytes = held_tokens * kappa  # reserved for prompt + whole output, for the whole decode
    hold_s = out * p["tpot_ms"] / 1e3
    concurrency = pool_gb * 1e9 / req_bytes
    decode_cap = concurrency / hold_s
    prefill_hold_s = prefill_s + wire_s
    # Decode streams the full pool and its weight shard every step at best at peak HBM bandwidth.
    tpot_floor_s = (pool_gb + weights_gb) * 1e9 / tp / g.hbm_bytes_per_s

    # -- which side saturates first -------------------------------------------------------------
    prefill_rps = 1 / prefill_s  # one prefill instance, compute-bound
    prefill_side = p["ratio"] * prefill_rps
    balance_ratio = decode_cap / prefill_rps
    which = "decode" if prefill_side > decode_cap else "prefill"
    system_rps = min(prefill_side, decode_cap)
    # What the decode instance's NICs take in at that rate (the other end of the link).
    ingress_gpu = system_rps * bytes_per_gpu

    s: dict[str, Any] = {
        # part answers
        "kv_size": Quantity(kv_gb, "GB"),
        "emit_rate": Quantity(emit_gpu / 1e9, "GB/s"),
        "wire_time": Quantity(wire_s * 1e3, "ms"),
        "transfers": Quantity(transfers, ""),
        "decode_cap": Quantity(decode_cap, "1/s"),
        "which_side": which,
        # givens the statement prints
        "params": m.params,
        "params_b": m.params / 1e9,
        "layers": m.layers,
        "hidden": m.hidden,
        "q_heads": m.q_heads,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "q_dim": m.q_dim,
        "bf16_tflops": g.bf16_dense_tflops,
        "hbm_gb": g.hbm_gb,
        "hbm_tbps": g.hbm_tbps,
        "nic_gbit": nic.gbit_per_s,
        "nic_gbs": nic.gb_per_s,
        "mfu_pct": p["mfu"] * 100,
        "mem_util_pct": p["mem_util"] * 100,
        "weights_gb": weights_gb,
        "pool_gb": pool_gb,
        "hbm_used_gb": p["tp"] * g.hbm_gb * p["mem_util"],
        "act_total_gb": p["tp"] * p["act_reserve_gb"],
        "n_gpus_pair": 2 * tp,
        # intermediates for the solution
        "kappa": kappa,
        "kv_bytes": kv_bytes,
        "kv_gib": kv_bytes / 2**30,
        "linear_flops": linear_flops,
        "attn_flops": attn_flops,
        "attn_pct": attn_flops / linear_flops * 100,
        "prefill_flops": prefill_flops,
        "linear_pflop": linear_flops / 1e15,
        "attn_pflop": attn_flops / 1e15,
        "prefill_pflop": prefill_flops / 1e15,
        "instance_pflops": instance_flops / 1e15,
        "prefill_time_s": prefill_s,
        "prefill_ms": prefill_s * 1e3,
        "emit_instance_gbs": emit_instance / 1e9,
        "emit_gpu_gbs": emit_gpu / 1e9,
        "nic_share_pct": emit_gpu / nic_bps * 100,
        "bytes_per_gpu_mb": bytes_per_gpu / 1e6,
        "wire_ms": wire_s * 1e3,
        "one_nic_ms": one_nic_s * 1e3,
        "wire_vs_prefill_pct": wire_s / prefill_s * 100,
        "blocks": blocks,
        "transfer_count": transfers,
        "kv_gb": kv_gb,
        "transfers_per_instance": transfers * tp,
        "kv_heads_per_gpu": kv_heads_per_gpu,
        "transfer_bytes": transfer_bytes,
        "transfer_kib": transfer_bytes / 1024,
        "transfer_wire_ns": transfer_bytes / nic_bps * 1e9,
        "post_lo_ms": post_lo_s * 1e3,
        "post_hi_ms": post_hi_s * 1e3,
        "post_over_wire_lo": post_lo_s / wire_s,
        "post_over_wire_hi": post_hi_s / wire_s,
        "held_tokens": held_tokens,
        "req_gb": req_bytes / 1e9,
        "hold_s": hold_s,
        "concurrency": concurrency,
        "concurrency_whole": math.floor(concurrency),
        "decode_cap_rps": decode_cap,
        "prefill_hold_s": prefill_hold_s,
        "hold_ratio": hold_s / prefill_hold_s,
        "tpot_ms_floor": tpot_floor_s * 1e3,
        "step_gb_per_gpu": (pool_gb + weights_gb) / tp,
        "prefill_rps": prefill_rps,
        "prefill_side_rps": prefill_side,
        "balance_ratio": balance_ratio,
        "system_rps": system_rps,
        "decode_ingress_gbs": ingress_gpu / 1e9,
        "decode_ingress_pct": ingress_gpu / nic_bps * 100,
        "binding_side": "decode KV memory" if which == "decode" else "prefill compute",
        "other_side": "prefill compute" if which == "decode" else "decode KV memory",
    }
    s["real_problem"] = _model_answer(p, s)
    return s


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"Bandwidth is not the constraint: a prefill GPU emits KV at {s['emit_gpu_gbs']:.2f} GB/s, "
        f"{s['nic_share_pct']:.1f} % of its {s['nic_gbs']:.0f} GB/s NIC, and even shipped after "
        f"prefill the wire time is {s['wire_ms']:.1f} ms. The problem is latency on the critical "
        "path of the first token. Moving the cache block by block means "
        f"{s['transfer_count']:,} writes of {s['transfer_kib']:.0f} KiB per GPU; at "
        f"{p['post_us_lo']}–{p['post_us_hi']} µs of software cost each that is "
        f"{s['post_lo_ms']:.0f}–{s['post_hi_ms']:.0f} ms, {s['post_over_wire_lo']:.0f}–"
        f"{s['post_over_wire_hi']:.0f} times the wire time, and whatever is not hidden adds "
        "straight to TTFT. The fixes: stream each layer's KV while the next layer computes, so the "
        "transfer hides behind prefill; coalesce blocks into large contiguous regions (or register "
        "them as one region and send descriptor lists) and batch the work requests; let the GPU or "
        "an asynchronous engine (NIXL, Mooncake) post them instead of a Python loop; and make the "
        "prefill and decode layouts agree (TP degree, block size), since re-sharding multiplies the "
        "messages. Finally, capacity: the decode pool fills and back-pressures prefill, so "
        "admission has to look at the decode side's free KV, not only the prefill queue."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m, g, tp = deployment(p)
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge=near, merge_floor=1e-9).add

    kv = s["kv_size"].value
    add("kv_size", kv / 2, "Half the reference: you counted K but not V. Each layer caches both.",
        "k_only", kind="k_without_v")
    # No GiB entry here on purpose: the number grader itself names a GB/GiB mix-up and gives it
    # half credit, the house rule; a mistake entry would override that with zero.
    add("kv_size", kv * 2, "Twice the reference: the cache is BF16, 2 bytes per element, not 4.",
        "fp32", kind="wrong_precision")
    add("kv_size", kv / tp,
        f"That is one GPU's share (1/{tp} of the heads). The question asks for the whole prompt.",
        "per_gpu", kind="forgot_tp")
    add("kv_size", kv * m.q_heads / m.kv_heads,
        f"You used the {m.q_heads} query heads. With grouped-query attention only the "
        f"{m.kv_heads} KV heads are cached.", "q_heads", kind="q_vs_kv_heads")
    add("kv_size", kv / m.layers,
        f"That is one layer. Every one of the {m.layers} layers keeps its own K and V.",
        "one_layer", kind="one_layer")

    rate = s["emit_rate"].value
    add("emit_rate", rate * tp,
        f"That is the whole instance. Divide by the {tp} GPUs, each of which sends its own "
        "share over its own NIC.", "per_instance", kind="forgot_tp")
    add("emit_rate", rate * 8,
        "Eight times the reference: that looks like gigabits per second. The part asks GB/s.",
        "gbit", kind="bits_vs_bytes")
    add("emit_rate", s["kv_bytes"] / (s["linear_flops"] / (tp * g.bf16_flops * p["mfu"])) / tp / 1e9,
        f"You left out attention. At {p['prompt']:,} tokens the causal attention FLOPs add "
        f"{s['attn_pct']:.1f} % to the prefill work, so the prefill takes longer and the rate is "
        "lower.", "no_attention", kind="miscounted_term")
    add("emit_rate", rate / 2, "Half the reference: you counted K but not V.", "k_only",
        kind="k_without_v")
    add("emit_rate", rate * 2,
        "Twice the reference: you used the sparse (or the FP8) tensor rate. The prefill runs "
        "dense BF16.", "sparse_rate", kind="peak_vs_achievable")
    add("emit_rate", rate / p["mfu"],
        f"You ran prefill at 100 % of peak. The stated MFU is {s['mfu_pct']:.0f} %.", "no_mfu",
        kind="peak_vs_achievable")

    wire = s["wire_time"].value
    add("wire_time", wire * tp,
        "That is the whole cache through one NIC. Each GPU sends its own share over its own NIC, "
        "in parallel.", "one_nic", kind="forgot_tp")
    add("wire_time", wire / 8,
        f"Eight times too fast: {s['nic_gbit']:.0f} Gb/s is gigabits. In bytes it is "
        f"{s['nic_gbs']:.0f} GB/s.", "bits_as_bytes", kind="bits_vs_bytes")
    add("wire_time", wire / 2, "Half the reference: you sent K but not V.", "k_only",
        kind="k_without_v")
    add("wire_time", wire * 2,
        "Twice the reference: did you read the NIC rate as both directions summed? "
        f"{s['nic_gbit']:.0f} Gb/s is per direction.", "bidirectional", kind="peak_vs_achievable")

    t = s["transfer_count"]
    add("transfers", s["blocks"],
        f"That is the number of {p['block']}-token blocks. Each block is stored per layer, with K "
        "and V in separate tensors, so each needs its own write per layer.", "blocks_only",
        kind="k_without_v")
    add("transfers", t / 2,
        "Half the reference: K and V live in separate tensors, so each block-layer is two writes.",
        "no_kv_split", kind="k_without_v")
    add("transfers", s["blocks"] * 2,
        f"You left out the layers: the cache has {m.layers} layers and each is its own region.",
        "no_layers", kind="one_layer")
    add("transfers", t * tp,
        f"That is the whole instance. The question asks per GPU; each of the {tp} GPUs posts its "
        "own writes.", "per_instance", kind="forgot_tp")
    add("transfers", t * s["kv_heads_per_gpu"],
        "You counted one write per KV head. A block holds all of this GPU's heads side by side, "
        "so one write covers them.", "per_head", kind="q_vs_kv_heads")

    cap = s["decode_cap"].value
    add("decode_cap", s["concurrency"],
        f"That is how many requests fit in the pool at once. Each holds its KV for "
        f"{s['hold_s']:.1f} s, so divide by that time (Little's law).", "concurrency",
        kind="misread_mechanism")
    no_weights = (s["hbm_used_gb"] - s["act_total_gb"]) * 1e9 / (s["req_gb"] * 1e9) / s["hold_s"]
    add("decode_cap", no_weights,
        f"You forgot that the {s['weights_gb']:.1f} GB of weights share the HBM with the KV pool.",
        "no_weights", kind="miscounted_term")
    add("decode_cap", cap * s["held_tokens"] / p["prompt"],
        "You reserved KV for the prompt only. The request grows by one token per step, and the "
        "pool reserves prompt + output for the whole decode.", "prompt_only",
        kind="miscounted_term")
    add("decode_cap", cap / tp,
        f"That is one GPU's share of the pool. At TP{tp} each request's KV is split across all "
        f"{tp} GPUs, so the instance's whole pool counts.", "per_gpu", kind="forgot_tp")
    add("decode_cap", s["prefill_rps"],
        "That is a prefill instance's rate (1 / prefill time). The part asks what the decode "
        "instance's KV pool can sustain.", "prefill_rate", kind="wrong_scope")

    other = "prefill" if s["which_side"] == "decode" else "decode"
    out.append(
        Mistake(
            "which_side",
            other,
            f"Compare the two rates at {p['ratio']}:1. The prefill side sustains {p['ratio']} × "
            f"{s['prefill_rps']:.2f} = {s['prefill_side_rps']:.1f} req/s; the decode instance's "
            f"pool sustains {s['decode_cap_rps']:.1f} req/s. The balance point is "
            f"{s['balance_ratio']:.1f} prefill instances per decode instance.",
            "wrong_side", kind="misread_mechanism"
        )
    )
    out.append(
        Mistake(
            "which_side",
            "nic",
            f"The NICs are not the limit: a prefill GPU needs {s['nic_share_pct']:.1f} % of its "
            f"NIC, and at the system's peak rate a decode GPU takes in "
            f"{s['decode_ingress_pct']:.1f} % of its own.",
            "nic", kind="misread_mechanism"
        )
    )
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    m = model(p["model"])
    seq = p["prompt"] + p["output"]
    return [
        Fits("BF16 weights and one request's KV", p["gpu"], p["tp"],
             m.weight_bytes(2) + m.kv_bytes_for_tokens(seq)),
        Holds(_pool_gb(p) > 0, "the decode instance's KV pool is positive"),
        WithinContext(p["model"], seq, "prompt plus output"),
    ]
