"""Q09: which KV tiers deserve to exist, and the SSD that wears out in a week.

A tier is worth, per token it serves, the prefill it avoids minus the fetch it costs:

    value = 2P / (N * F * MFU)  -  kappa / B

with P the active parameters, N the replica's GPUs, F one GPU's dense BF16 rate, kappa the KV bytes
per token and B the tier bandwidth the replica actually gets. The value is positive exactly when the
bandwidth per GPU beats kappa * F * MFU / (2P), the same rate at which prefill emits KV (Q08), so a
tier that pays for a big dense model can be a loss for a small one on the same drives.

The scenario: one 8-GPU node runs either the big model as one TP8 replica or the small model as
eight single-GPU replicas, and three tiers are on offer: host DRAM (each GPU over its own PCIe
link), local NVMe drives (shared by the node's GPUs) and a shared NVMe store over the network (a
per-node bandwidth, also shared). The parts: the DRAM tier's value for the big model, the local
NVMe tier's (signed) value for the big model, which model x tier pairs pay, how many drives the
small model would need, how many days a drive lasts if every prefill's KV is written to it, and
what fixes the wear.

Hardware figures come from exercises/catalog (GPU, PCIe link, drive); the MFU, the shared store's
bandwidth, the installed drive count and the write amplification are keys of the variant.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import drive, gpu, link, model
from exercises.coinciding import coinciding
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits
from exercises.slips import Slips, join_kinds, near, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

NODE_GPUS = 8  # an HGX board: eight GPUs, each with its own PCIe Gen5 x16 link to the host
HOST_LINK = "PCIe Gen5 x16"
SECONDS_PER_DAY = 86_400

BIG_MODELS = ("Llama-3.1-70B", "Qwen2.5-72B", "Llama-3.1-405B")
SMALL_MODELS = ("Llama-3.1-8B", "Llama-2-7B", "Qwen3-30B-A3B")
GPUS = ("H100 SXM", "H200 SXM", "B200")
DRIVES = ("Micron 7450 PRO 3.84TB", "Micron 7450 PRO 7.68TB", "Micron 7450 MAX 3.2TB")
MFUS = (0.4, 0.45, 0.5, 0.55, 0.6)
INSTALLED = (1, 2, 3, 4)
SHARED_GBS = (5, 10, 15, 20, 25, 30, 40)
WAFS = (1.5, 2.0, 2.5, 3.0)

TIER_IDS = ("dram", "local", "shared")
PAIR_IDS = tuple(f"{who}_{tier}" for who in ("big", "small") for tier in TIER_IDS)
FIXES = ("admit_reuse", "dedupe", "rate_limit", "high_dwpd", "large_writes")

CANONICAL: dict[str, Any] = {
    "big": "Llama-3.1-70B",
    "small": "Llama-3.1-8B",
    "gpu": "H100 SXM",
    "mfu": 0.5,  # prefill MFU [A]
    "drive": "Micron 7450 PRO 3.84TB",
    "drives": 1,  # local NVMe drives in the node
    "shared_gbs": 20,  # the shared NVMe store's guaranteed read bandwidth per node, GB/s [A]
    "waf": 2.0,  # write amplification of small random block writes [A]
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    return draw_sensible(rng, lambda rng: choose(rng, {
        "big": BIG_MODELS, "small": SMALL_MODELS, "gpu": GPUS, "mfu": MFUS, "drive": DRIVES,
        "drives": INSTALLED, "shared_gbs": SHARED_GBS, "waf": WAFS,
    }), is_sensible, tries=5000)


def is_sensible(p: dict[str, Any]) -> bool:
    """Both models fit the node in BF16 with room for KV; no tier's verdict is a coin toss (value at
    least 15 % of the recompute time either way); the small model's local tier loses as installed
    (the tier that should not exist) and the drive count it needs is not a rounding question."""
    g = gpu(p["gpu"])
    if model(p["big"]).weight_bytes(2) > 0.7 * NODE_GPUS * g.hbm_bytes:
        return False
    if model(p["small"]).weight_bytes(2) > 0.85 * g.hbm_bytes:
        return False
    s = solve(p)
    for pair in s["pairs"].values():
        if abs(pair["value_us"]) < 0.15 * pair["recompute_us"]:
            return False
    if s["pairs"]["small_local"]["value_us"] >= 0:
        return False
    need = s["small_node_need_gbs"] / s["drive_read_gbs"]
    if need - math.floor(need) < 0.1 or need - math.floor(need) > 0.9:
        return False
    return s["drives_small"].value <= 16 and s["ssd_days"].value < 120


# ----------------------------------------------------------------------------------------------
# The reference


def _per_token_us(m_name: str, p: dict[str, Any], n_gpus: int) -> float:
    """Recompute time per token on a replica of n_gpus GPUs, in microseconds."""
    m, g = model(m_name), gpu(p["gpu"])
    return 2 * m.active_params / (n_gpus * g.bf16_flops * p["mfu"]) * 1e6


def solve(p: dict[str, Any]) -> dict[str, Any]:
    g = gpu(p["gpu"])
    host = link(HOST_LINK)
    assert host.effective_gb_per_s is not None
    d = drive(p["drive"])
    big, small = model(p["big"]), model(p["small"])
    mfu = p["mfu"]

    # Bandwidth each tier gives ONE GPU when every GPU of the node fetches at once (B/s).
    per_gpu_bps = {
        "dram": host.effective_gb_per_s * 1e9,
        "local": p["drives"] * d.seq_read_gb_per_s * 1e9 / NODE_GPUS,
        "shared": p["shared_gbs"] * 1e9 / NODE_GPUS,
    }
    # (model, GPUs per replica): the big model on the whole node, the small one on one GPU each.
    replicas = {"big": (big, NODE_GPUS), "small": (small, 1)}
    pairs: dict[str, dict[str, Any]] = {}
    for who, (m, n) in replicas.items():
        recompute = 2 * m.active_params / (n * g.bf16_flops * mfu) * 1e6
        kappa = m.kv_bytes_per_token(2)
        for tier in TIER_IDS:
            fetch = kappa / (n * per_gpu_bps[tier]) * 1e6
            pairs[f"{who}_{tier}"] = {
                "recompute_us": recompute,
                "fetch_us": fetch,
                "value_us": recompute - fetch,
                "replica_gbs": n * per_gpu_bps[tier] / 1e9,
            }
    worth = [pid for pid in PAIR_IDS if pairs[pid]["value_us"] > 0]

    # Break-even bandwidth per GPU: kappa * F * MFU / (2P), the Q08 emission rate.
    def breakeven(m: Any) -> float:
        return m.kv_bytes_per_token(2) * g.bf16_flops * mfu / (2 * m.active_params)

    be_big, be_small = breakeven(big), breakeven(small)
    small_node_need = NODE_GPUS * be_small  # what the node's drives must deliver together
    read_bps = d.seq_read_gb_per_s * 1e9
    drives_small = math.floor(small_node_need / read_bps) + 1  # strictly more than break-even
    drives_big = math.floor(NODE_GPUS * be_big / read_bps) + 1

    # -- wear: every block the big-model node prefills is written to its local drives ----------
    emit_node = NODE_GPUS * be_big  # the node prefilling flat out, attention ignored
    ceiling = d.seq_write_gb_per_s * 1e9
    per_drive = min(emit_node / p["drives"], ceiling)
    saturated = emit_node / p["drives"] >= ceiling
    tbw = d.tbw_bytes
    life_s = tbw / (per_drive * p["waf"])
    days = life_s / SECONDS_PER_DAY
    days_waf1 = days * p["waf"]

    b_dram, b_local = pairs["big_dram"], pairs["big_local"]
    s: dict[str, Any] = {
        "dram_value": Quantity(b_dram["value_us"], "us"),
        "nvme_value": Quantity(b_local["value_us"], "us"),
        "tiers": worth,
        "drives_small": Quantity(drives_small, ""),
        "drives_small_unrounded": small_node_need / read_bps,  # floor + 1 of this (boundary)
        "ssd_days": Quantity(days, "day"),
        "wear_fixes": list(FIXES),
        # givens the statement prints
        "big_active_b": big.active_params / 1e9,
        "small_active_b": small.active_params / 1e9,
        "small_total_b": small.params / 1e9,
        "small_is_moe": small.is_moe,
        "small_moe_note": (f" ({small.params / 1e9:.2f} B in total, mixture-of-experts)"
                           if small.is_moe else ""),
        "big_kappa": big.kv_bytes_per_token(2),
        "small_kappa": small.kv_bytes_per_token(2),
        "bf16_tflops": g.bf16_dense_tflops,
        "mfu_pct": mfu * 100,
        "host_gbs": host.effective_gb_per_s,
        "host_raw_gbs": host.gb_per_s,
        "drive_cap_tb": d.capacity_tb,
        "drive_dwpd": d.dwpd,
        "drive_years": d.warranty_years,
        "drive_read_gbs": d.seq_read_gb_per_s,
        "drive_write_gbs": d.seq_write_gb_per_s,
        "node_gpus": NODE_GPUS,
        "drives_word": "drive" if p["drives"] == 1 else "drives",
        "drives_read_verb": "reads" if p["drives"] == 1 else "read",
        # intermediates for the solution
        "pairs": pairs,
        "pair_table": _pair_table(pairs, p),
        "big_recompute_us": b_dram["recompute_us"],
        "big_dram_fetch_us": b_dram["fetch_us"],
        "big_local_fetch_us": b_local["fetch_us"],
        "big_local_gbs": b_local["replica_gbs"],
        "local_node_gbs": p["drives"] * d.seq_read_gb_per_s,
        "local_per_gpu_gbs": per_gpu_bps["local"] / 1e9,
        "shared_per_gpu_gbs": per_gpu_bps["shared"] / 1e9,
        "nvme_verdict": "saves" if b_local["value_us"] > 0 else "loses",
        "nvme_abs": abs(b_local["value_us"]),
        "be_big_gbs": be_big / 1e9,
        "be_small_gbs": be_small / 1e9,
        "small_recompute_us": pairs["small_dram"]["recompute_us"],
        "small_local_fetch_us": pairs["small_local"]["fetch_us"],
        "small_node_need_gbs": small_node_need / 1e9,
        "drives_needed_exact": small_node_need / read_bps,
        "drives_big": drives_big,
        "worth_text": _pairs_text(worth),
        "not_worth_text": _pairs_text([pid for pid in PAIR_IDS if pid not in worth]),
        "emit_node_gbs": emit_node / 1e9,
        "emit_per_drive_gbs": emit_node / p["drives"] / 1e9,
        "per_drive_gbs": per_drive / 1e9,
        "saturated": saturated,
        "write_note": (
            f"more than the drive's {d.seq_write_gb_per_s:g} GB/s write ceiling, so the "
            "drive writes flat out at its ceiling (the rest of the KV is dropped or queued)"
            if saturated else
            f"below the drive's {d.seq_write_gb_per_s:g} GB/s write ceiling, so the drive "
            "takes all of it"),
        "tbw_tb": tbw / 1e12,
        "tb_per_day": per_drive * SECONDS_PER_DAY / 1e12,
        "nand_tb_per_day": per_drive * p["waf"] * SECONDS_PER_DAY / 1e12,
        "days_waf1": days_waf1,
        "writes_per_day": per_drive * SECONDS_PER_DAY / d.capacity_bytes,
        "warranty_days": d.warranty_years * 365,
        "life_fraction_pct": days / (d.warranty_years * 365) * 100,
        "dram_tokens_m_per_tb": 1e12 / big.kv_bytes_per_token(2) / 1e6,
    }
    return s


_PAIR_NAMES = {
    "big_dram": "big model / host DRAM",
    "big_local": "big model / local NVMe",
    "big_shared": "big model / shared NVMe",
    "small_dram": "small model / host DRAM",
    "small_local": "small model / local NVMe",
    "small_shared": "small model / shared NVMe",
}


def _pairs_text(ids: list[str]) -> str:
    return "; ".join(_PAIR_NAMES[i] for i in ids) if ids else "none"


def _pair_table(pairs: dict[str, dict[str, Any]], p: dict[str, Any]) -> str:
    lines = [
        "| Model / tier | Bandwidth for the replica | Recompute per token | Fetch per token | "
        "Value per token |",
        "|---|---|---|---|---|",
    ]
    for pid in PAIR_IDS:
        r = pairs[pid]
        lines.append(
            f"| {_PAIR_NAMES[pid]} | {r['replica_gbs']:.3g} GB/s | {r['recompute_us']:.3g} µs | "
            f"{r['fetch_us']:.3g} µs | **{r['value_us']:+.3g} µs** |"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    d = drive(p["drive"])
    big = model(p["big"])
    mfu = p["mfu"]
    out: list[Mistake] = []

    # Only zero or a non-finite value is no slip: a value below zero can be a real one.
    add = Slips(s, TOLERANCE, out, accept=near, merge=near, merge_floor=1e-9,
                skip=lambda v: not math.isfinite(v) or v == 0).add

    rc, fe = s["big_recompute_us"], s["big_dram_fetch_us"]
    add("dram_value", rc * NODE_GPUS - fe,
        f"You priced the recompute on one GPU. The replica's {NODE_GPUS} GPUs share it.",
        "one_gpu", kind="forgot_tp")
    add("dram_value", rc - fe * NODE_GPUS,
        f"You pushed the whole token's KV through one PCIe link. Each of the {NODE_GPUS} GPUs "
        "fetches its own shard over its own link.", "one_link", kind="forgot_tp")
    add("dram_value", rc * mfu - fe,
        f"You ran the recompute at 100 % of peak; the stated MFU is {s['mfu_pct']:.0f} %.",
        "no_mfu", kind="peak_vs_achievable")
    add("dram_value", rc - fe * s["host_gbs"] / s["host_raw_gbs"],
        f"You used the raw {s['host_raw_gbs']:g} GB/s of PCIe; the statement plans copies at "
        f"{s['host_gbs']:g} GB/s.", "raw_pcie", kind="peak_vs_achievable")
    add("dram_value", fe - rc,
        "The sign is reversed: value = recompute avoided minus fetch cost, positive when the "
        "tier pays.", "sign", kind="inverted")
    add("dram_value", rc / 2 - fe,
        "You used P FLOPs per token; a forward pass costs 2P.", "one_flop", kind="flop_counting")

    nv = s["nvme_value"].value
    lf = s["big_local_fetch_us"]
    add("nvme_value", -nv,
        "The sign is reversed: value = recompute avoided minus fetch cost (negative means the "
        "tier loses).", "sign", kind="inverted")
    add("nvme_value", rc - lf / NODE_GPUS,
        f"You gave every GPU the node's whole {s['local_node_gbs']:g} GB/s. The "
        f"{s['drives_word']} {'is' if p['drives'] == 1 else 'are'} shared by all "
        f"{NODE_GPUS} GPUs, so the replica gets {s['local_node_gbs']:g} GB/s in total, not per GPU.",
        "per_gpu_drive", kind="forgot_tp")
    add("nvme_value", rc - big.kv_bytes_per_token(2) / (p["drives"] * d.seq_write_gb_per_s * 1e9)
        * 1e6,
        f"You used the drive's write speed ({d.seq_write_gb_per_s:g} GB/s). A fetch reads: "
        f"{d.seq_read_gb_per_s:g} GB/s.", "write_speed", kind="misread_mechanism")
    add("nvme_value", rc * NODE_GPUS - lf,
        f"You priced the recompute on one GPU; the replica's {NODE_GPUS} GPUs share it.",
        "one_gpu", kind="forgot_tp")
    add("nvme_value", rc * mfu - lf,
        f"You ran the recompute at 100 % of peak; the stated MFU is {s['mfu_pct']:.0f} %.",
        "no_mfu", kind="peak_vs_achievable")
    add("nvme_value", rc - lf / 2, "You fetched K but not V.", "k_only", kind="k_without_v")

    need = s["small_node_need_gbs"] * 1e9
    read = d.seq_read_gb_per_s * 1e9
    ref_d = int(s["drives_small"].value)
    add("drives_small", math.floor(need / NODE_GPUS / read) + 1,
        f"You let every GPU read the drives at their full rate. The node's {NODE_GPUS} "
        "small-model replicas fetch at once and share the drives: the drives must deliver "
        f"{NODE_GPUS} × the break-even rate together.", "no_share", kind="forgot_tp")
    add("drives_small", math.floor(need / (d.seq_write_gb_per_s * 1e9)) + 1,
        f"You sized by the write speed ({d.seq_write_gb_per_s:g} GB/s). Fetching reads: "
        f"{d.seq_read_gb_per_s:g} GB/s per drive.", "write_speed", kind="misread_mechanism")
    add("drives_small", s["drives_big"],
        "That is what the big model needs. The small model does far less work per byte of KV, "
        "so its break-even bandwidth is higher.", "big_model", kind="misread_mechanism")
    add("drives_small", ref_d - 1,
        "One short: that many drives still deliver less than break-even. Round up.", "round_down",
        kind="rounding")
    add("drives_small", math.floor(need / mfu / read) + 1,
        f"You ran the recompute at 100 % of peak; at {s['mfu_pct']:.0f} % MFU recomputing is "
        "slower, so fewer drives suffice.", "no_mfu", kind="peak_vs_achievable")

    days = s["ssd_days"].value
    add("ssd_days", s["days_waf1"],
        f"You left out write amplification. Small random block writes cost the flash "
        f"{p['waf']:g} times the bytes written.", "no_waf", kind="miscounted_term")
    if s["saturated"]:
        add("ssd_days", days * s["per_drive_gbs"] / s["emit_per_drive_gbs"],
            f"The drive cannot take {s['emit_per_drive_gbs']:.3g} GB/s: it writes at most "
            f"{s['drive_write_gbs']:g} GB/s, and that is the rate that wears it.",
            "above_ceiling", kind="misread_mechanism")
    add("ssd_days", days / d.warranty_years,
        f"TBW covers the whole {d.warranty_years:g}-year warranty: capacity × DWPD × 365 × "
        f"{d.warranty_years:g}.", "one_year", kind="wrong_scope")
    add("ssd_days", days * 2**40 / 1e12,
        "You read the capacity as TiB. Drive capacities are decimal: 10^12 bytes per TB.", "tib",
        kind="gb_vs_gib")
    add("ssd_days", days * p["waf"] ** 2,
        f"You multiplied by the WAF of {p['waf']:g} instead of dividing: amplification wears "
        "the drive faster.", "waf_inverted", kind="inverted")
    add("ssd_days", days * NODE_GPUS,
        "You used one GPU's emission. All eight GPUs of the node prefill and write.", "one_gpu",
        kind="forgot_tp")

    # -- which pairs pay --------------------------------------------------------------------------
    ref_set = set(s["tiers"])

    def add_set(ids: list[str], feedback: str, name: str, kind: str) -> None:
        if not ids or set(ids) == ref_set:
            return
        for i, old in enumerate(out):
            if old.part == "tiers" and set(old.answer) == set(ids):
                out[i] = Mistake("tiers", old.answer, coinciding(old.feedback, feedback), old.name,
                                 join_kinds(old.kind, kind))
                return
        out.append(Mistake("tiers", ids, feedback, name, kind))

    pairs = s["pairs"]
    # Shared tiers priced as if each GPU got the node's whole bandwidth.
    no_share = []
    for pid in PAIR_IDS:
        r = pairs[pid]
        fetch = r["fetch_us"] / (NODE_GPUS if pid.endswith(("local", "shared")) else 1)
        if r["recompute_us"] - fetch > 0:
            no_share.append(pid)
    add_set(no_share,
            "You gave each GPU the node's whole NVMe bandwidth. The drives and the store's "
            f"per-node bandwidth are shared by all {NODE_GPUS} GPUs, which fetch at once.",
            "no_share", "forgot_tp")
    add_set(list(PAIR_IDS),
            "Not every tier pays. Holding the KV is not enough: a fetch must be faster than the "
            "recompute it replaces, and that is a bandwidth question, not a capacity one.", "all",
            "misread_mechanism")
    add_set(["big_dram", "small_dram"],
            "Flash can pay too: where a model does a lot of work per byte of KV (a big dense "
            "model), a few GB/s per GPU beats recomputing.", "dram_only", "misread_mechanism")
    add_set([pid for pid in PAIR_IDS if pid.startswith("big")],
            "Host DRAM pays for the small model too: 50 GB/s per GPU is far above its break-even "
            "bandwidth.", "big_only", "misread_mechanism")

    # -- wear fixes -------------------------------------------------------------------------------
    out += [
        Mistake("wear_fixes", [*FIXES, "warranty"],
                "The warranty ends at the rated TBW: a drive written past it is worn out and not "
                "replaced for free.", "warranty", kind="misread_mechanism"),
        Mistake("wear_fixes", [*FIXES, "raid1"],
                "Mirroring writes every block twice: it doubles the wear instead of reducing it.",
                "raid1", kind="misread_mechanism"),
        Mistake("wear_fixes", [*FIXES, "write_all"],
                "Writing everything is what wears the drive out in days. Most blocks are never "
                "read again; admit the ones that will be.", "write_all", kind="misread_mechanism"),
    ]
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [
        Fits("the big model's BF16 weights on the node", p["gpu"], NODE_GPUS,
             model(p["big"]).weight_bytes(2)),
        Fits("the small model's BF16 weights on one GPU", p["gpu"], 1,
             model(p["small"]).weight_bytes(2)),
    ]
