"""Q16: pinning KV in L2. What fits against what a decode step streams.

CUDA (compute capability 8.0 and later) lets a program set aside part of L2 for "persisting"
accesses and mark an address window whose lines should stay there. The KV cache is re-read every
decode step, so pinning it sounds attractive. The parts measure why it is not: a step streams tens
of GB through an L2 of tens of MiB, so nothing survives from one step to the next, pinned or not,
and the set-aside is a fraction of a per cent of the step. The one case that pays is reuse inside
a step: a shared prefix (a system prompt) that every sequence's attention reads again in the same
layer. Even there a kernel that reads the prefix once (cascade / shared-prefix attention) is the
better fix.

Every hardware and model figure comes from exercises/catalog; the workload and the set-aside
share are variant keys the statement prints.
"""
from __future__ import annotations

import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits, WithinContext, check
from exercises.slips import Slips, near, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

MODELS = ("Llama-3.1-8B", "Llama-2-7B")
GPUS = ("A100 SXM 80GB", "H100 SXM", "H200 SXM", "B200")
BATCHES = (16, 24, 32, 48, 64, 96, 128)
CONTEXTS = (2048, 3072, 4096, 6144, 8192)
PREFIXES = (512, 1024, 1536, 2048, 3072, 4096)
SETASIDE_PCTS = (50.0, 62.5, 75.0)

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-8B",
    "gpu": "H100 SXM",
    "batch": 64,  # sequences decoding together
    "context": 4096,  # tokens per sequence, shared prefix included (research notes App. E, 11)
    "prefix": 2048,  # tokens of system prompt every sequence shares
    "setaside_pct": 75.0,  # share of L2 reserved for persisting accesses [A]
}

MIB = 2**20


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    """A sensible variant: the batch fits in HBM, one layer's prefix fits in the set-aside, and the
    redundant prefix reads are a real share of the step."""
    return draw_sensible(rng, lambda rng: {**CANONICAL, **choose(rng, {
        "model": MODELS, "gpu": GPUS, "batch": BATCHES, "context": CONTEXTS,
        "prefix": PREFIXES, "setaside_pct": SETASIDE_PCTS,
    })}, is_sensible, tries=2000)


def is_sensible(p: dict[str, Any]) -> bool:
    """The checks generate() applies; the tests apply them to every variant too."""
    if check(constraints(p)):  # a story that could not happen: see exercises/feasibility.py
        return False
    if p["context"] - p["prefix"] < 512:  # every sequence has its own suffix to stream
        return False
    s = solve(p)
    return (
        s["step_gb"].value <= 0.9 * s["hbm_gb"]  # weights and the batch's KV fit, with room
        and s["prefix_layer_bytes"] <= s["setaside_bytes"]  # one layer's prefix fits ...
        and s["prefix_all_over_setaside"] >= 2  # ... and all layers' prefix plainly does not
        and s["redundant_share_pct"] >= 10  # the shared prefix is a real share of the step
        and s["setaside_pct"].value < 1  # the set-aside is small against the step
    )


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    bw = g.hbm_bytes_per_s
    batch, n, prefix = p["batch"], p["context"], p["prefix"]

    # -- what one decode step streams ------------------------------------------------------------
    # Every weight the step multiplies by, once (the input embedding is a lookup of one row per
    # sequence, so its table is not streamed), and every sequence's whole KV cache.
    kappa = m.kv_bytes_per_token(2)
    kappa_layer = m.kv_bytes_per_token_per_layer(2)
    weight_bytes = (m.params - m.input_embedding_params) * 2
    kv_bytes = batch * n * kappa
    step_bytes = weight_bytes + kv_bytes
    step_ms = step_bytes / bw * 1e3

    # -- the set-aside ---------------------------------------------------------------------------
    # Device queries report L2 in MiB (the catalog's l2_mb is that figure).
    l2_bytes = g.l2_mb * MIB
    setaside = l2_bytes * p["setaside_pct"] / 100
    setaside_share = setaside / step_bytes * 100

    # -- the shared prefix ----------------------------------------------------------------------
    prefix_layer = prefix * kappa_layer  # one layer's K and V for the prefix
    prefix_all = prefix * kappa  # every layer
    # Paged attention reads each sequence's blocks separately, shared or not: the prefix is read
    # `batch` times per layer per step, once of which is necessary.
    redundant = (batch - 1) * prefix * kappa
    redundant_ms = redundant / bw * 1e3
    # What one layer's attention streams in total, against the L2: between the first and the last
    # read of the prefix in a layer, the other sequences' suffixes go through the cache.
    layer_attn_bytes = batch * n * kappa_layer
    suffix_layer_bytes = batch * (n - prefix) * kappa_layer

    s: dict[str, Any] = {
        # part answers
        "step_gb": Quantity(step_bytes / 1e9, "GB"),
        "setaside_pct": Quantity(setaside_share, "%"),
        "prefix_layer_mb": Quantity(prefix_layer / 1e6, "MB"),
        "redundant_gb": Quantity(redundant / 1e9, "GB"),
        "redundant_ms": Quantity(redundant_ms, "ms"),
        "where_pays": "prefix_layer",
        # givens the statement prints
        "params": m.params,
        "layers": m.layers,
        "hidden": m.hidden,
        "vocab": m.vocab,
        "q_heads": m.q_heads,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "hbm_gb": g.hbm_gb,
        "hbm_tbps": g.hbm_tbps,
        "l2_mib": g.l2_mb,
        "attention_kind": "grouped-query" if m.kv_heads < m.q_heads else "multi-head",
        # intermediates for the solution
        "kappa": kappa,
        "kappa_layer": kappa_layer,
        "embedding_params": m.input_embedding_params,
        "weight_gb": weight_bytes / 1e9,
        "kv_gb": kv_bytes / 1e9,
        "step_ms": step_ms,
        "l2_bytes": l2_bytes,
        "setaside_bytes": setaside,
        "setaside_mib": setaside / MIB,
        "setaside_mb": setaside / 1e6,
        "setaside_saving_us": setaside / bw * 1e6,
        "step_over_l2": step_bytes / l2_bytes,
        "prefix_layer_bytes": prefix_layer,
        "prefix_layer_mib": prefix_layer / MIB,
        "prefix_fill_pct": prefix_layer / setaside * 100,
        "prefix_all_mb": prefix_all / 1e6,
        "prefix_all_over_setaside": prefix_all / setaside,
        "redundant_share_pct": redundant / step_bytes * 100,
        "after_ms": (step_bytes - redundant) / bw * 1e3,
        "speedup": step_bytes / (step_bytes - redundant),
        "layer_attn_mb": layer_attn_bytes / 1e6,
        "suffix_layer_mb": suffix_layer_bytes / 1e6,
        "suffix_over_l2": suffix_layer_bytes / l2_bytes,
        "reads_per_layer": batch,
        "suffix": n - prefix,
        "batch_minus_1": batch - 1,
    }
    s["better_kernel"] = _model_answer(p, s)
    return s


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"Pinning across steps cannot work: a decode step streams {s['step_gb'].value:.1f} GB, "
        f"{s['step_over_l2']:.0f} times the L2, between two reads of the same KV byte, so "
        "nothing survives to the next step, and whatever is pinned is at most the set-aside, "
        f"{s['setaside_pct'].value:.3f} % of the step. The one case that pays is reuse inside a "
        f"step: the {p['prefix']:,}-token shared prefix is read by all {p['batch']} sequences in "
        f"every layer; one layer's copy is {s['prefix_layer_mb'].value:.1f} MB and fits, so "
        "pointing a persisting access-policy window at the current layer's prefix (and moving "
        "it each layer) can turn the repeat reads into L2 hits, up to "
        f"{s['redundant_gb'].value:.1f} GB ({s['redundant_ms'].value:.1f} ms) a step. It is "
        "fragile: the prefix blocks must be one contiguous range per layer, the window is set "
        "per stream or per launch, the gain depends on how the attention blocks are scheduled, "
        "and MIG disables it. The better change is in the kernel: shared-prefix (cascade) "
        "attention computes the prefix part once for all sequences' queries as a real matrix "
        "multiply, reading the prefix from HBM once, computes each suffix separately, and merges "
        "the two partial results with their log-sum-exp. That removes the redundant bytes "
        "deterministically, at any batch and any prefix length, and raises arithmetic "
        "intensity; FlashInfer ships it."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m = model(p["model"])
    batch, n, prefix = p["batch"], p["context"], p["prefix"]
    bw = s["hbm_tbps"] * 1e12
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, accept=near, merge=near).add

    step = s["step_gb"].value
    weights, kv = s["weight_gb"], s["kv_gb"]
    add("step_gb", kv,
        "That is the KV alone. Every step also streams the weights once.", "kv_only",
        kind="miscounted_term")
    add("step_gb", weights + n * s["kappa"] / 1e9,
        f"That is one sequence's KV. All {batch} sequences read their own cache every step.",
        "one_sequence", kind="wrong_scope")
    add("step_gb", weights + (batch * (n - prefix) + prefix) * s["kappa"] / 1e9,
        "You counted the shared prefix once. It is stored once, but the attention kernel reads it "
        "separately for every sequence, so it is streamed once per sequence.", "prefix_once",
        kind="miscounted_term")
    add("step_gb", weights + kv / 2,
        "You counted K but not V: each layer caches both.", "k_only", kind="k_without_v")
    add("step_gb", step + s["embedding_params"] * 2 / 1e9,
        "You counted the input embedding table. A step looks up one row per sequence; only the "
        "LM head streams a vocabulary-sized matrix.", "embedding", kind="miscounted_term")

    share = s["setaside_pct"].value
    add("setaside_pct", share * 100 / p["setaside_pct"],
        f"You used the whole L2. Only the set-aside ({p['setaside_pct']:g} % of it) holds "
        "persisting lines.", "whole_l2", kind="peak_vs_achievable")
    add("setaside_pct", share * 1e6 / MIB,
        f"You read the L2 size as {s['l2_mib']:g} × 10^6 bytes. Device queries report it in MiB "
        "(2^20 bytes).", "mb_for_mib", kind="gb_vs_gib")
    add("setaside_pct", s["setaside_bytes"] / (weights * 1e9) * 100,
        "You compared with the weights alone. The step streams the KV of every sequence too.",
        "weights_only", kind="miscounted_term")

    layer = s["prefix_layer_mb"].value
    add("prefix_layer_mb", layer * m.layers,
        f"That is the prefix across all {m.layers} layers. Attention runs layer by layer; the "
        "part asks for one layer's copy.", "all_layers", kind="one_layer")
    add("prefix_layer_mb", layer / 2, "You counted K but not V.", "k_only", kind="k_without_v")
    add("prefix_layer_mb", layer * batch,
        "The prefix is shared: one copy in memory, whatever the batch.", "per_sequence",
        kind="miscounted_term")

    red = s["redundant_gb"].value
    add("redundant_gb", red / m.layers,
        f"That is one layer. Every one of the {m.layers} layers re-reads its own prefix.",
        "one_layer", kind="one_layer")
    add("redundant_gb", (batch - 1) * n * s["kappa"] / 1e9,
        "You counted each sequence's whole context. Only the shared prefix is read redundantly; "
        "each suffix is different and has to be read.", "whole_context", kind="miscounted_term")
    add("redundant_gb", red / 2, "You counted K but not V.", "k_only", kind="k_without_v")
    add("redundant_gb", batch * prefix * s["kappa"] / 1e9,
        "You counted every read of the prefix. One read per layer is necessary; the other "
        f"{batch - 1} are the redundant ones.", "all_reads", kind="miscounted_term")

    ms = s["redundant_ms"].value
    add("redundant_ms", s["step_ms"],
        "That is the whole step's time at full bandwidth. The part asks what the redundant "
        "prefix reads alone cost.", "step", kind="wrong_scope")
    add("redundant_ms", ms / m.layers, f"That is one layer's share; there are {m.layers}.",
        "one_layer", kind="one_layer")
    add("redundant_ms", (batch - 1) * n * s["kappa"] / bw * 1e3,
        "You counted each sequence's whole context as redundant; only the shared prefix is.",
        "whole_context", kind="miscounted_term")
    add("redundant_ms", ms / 2, "You counted K but not V.", "k_only", kind="k_without_v")

    out.append(Mistake(
        "where_pays", "cross_step",
        "Between two reads of the same KV byte (one step apart) the GPU streams the whole step "
        f"of part 1, {_how_many_times(s['step_over_l2'])} the L2. Whatever you pin stays, but it "
        "is at most the set-aside, the share of part 2, far below 1 % of the step.",
        "cross_step", kind="misread_mechanism"))
    out.append(Mistake(
        "where_pays", "weights",
        "Pinned weights do hit every step, but the set-aside holds only "
        f"{s['setaside_mib']:.1f} MiB, about {s['setaside_saving_us']:.0f} µs of reads: set "
        "against the step of part 1 that is the share of part 2, far below 1 %.",
        "weights", kind="misread_mechanism"))
    out.append(Mistake(
        "where_pays", "prefix_all",
        f"The whole prefix is {s['prefix_all_mb']:.0f} MB across {m.layers} layers, "
        f"{s['prefix_all_over_setaside']:.0f} times the set-aside. Only one layer's copy fits, "
        "and only one layer's attention runs at a time.", "prefix_all", kind="one_layer"))
    return out


def _how_many_times(ratio: float) -> str:
    """A ratio in words, too coarse to read part 1's step bytes back from the L2 size."""
    if ratio >= 1000:
        return "more than a thousand times"
    return "hundreds of times" if ratio >= 100 else "many times"


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    m = model(p["model"])
    # The shared prefix is stored once; each sequence holds its own suffix.
    tokens = p["prefix"] + p["batch"] * (p["context"] - p["prefix"])
    return [
        Fits("BF16 weights and the batch's KV", p["gpu"], 1,
             m.weight_bytes(2) + tokens * m.kv_bytes_per_token(2)),
        WithinContext(p["model"], p["context"], "each sequence's context"),
    ]
