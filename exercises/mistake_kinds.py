"""The shared vocabulary of mistake kinds: what sort of slip a known wrong answer is.

Every `Mistake` of every exercise names one of these kinds, and the number grader's built-in
detectors (graders/number.py) name one too, so a student's slips can be counted across exercises
("you read GiB as GB in three exercises") and each count can point at one place to practise it.
The list is short on purpose: a kind that only one mistake uses is a sign it should merge into a
broader one. Ids are stable (stored results keep them); labels and sentences may be reworded.

Standard library only: the registry, the graders and the pages all import it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MistakeKind:
    """One kind of slip: `id` is what a Mistake's `kind` holds, `label` the few words a page
    shows, `slip` one sentence saying what goes wrong, and the drill (`drill_exercise`,
    `drill_part`) the exercise part where a student best practises avoiding it."""

    id: str
    label: str
    slip: str
    drill_exercise: str
    drill_part: str


_ALL = (
    MistakeKind(
        "gb_vs_gib", "GB vs GiB",
        "A decimal size read as binary or back (GB for GiB, TiB for TB, MB for MiB).",
        "kv_page_ledger", "pool_blocks"),
    MistakeKind(
        "bits_vs_bytes", "Bits vs bytes",
        "A bit rate read as bytes or back (400 Gb/s is 50 GB/s): a factor of 8.",
        "kv_transfer_disagg", "wire_time"),
    MistakeKind(
        "wrong_precision", "Number format",
        "The wrong number format: bytes per element or weight (FP32, BF16, FP8, INT8), the "
        "tensor rate of another precision, or another format's range and mantissa.",
        "tp_vs_pp_405b", "bf16_gb"),
    MistakeKind(
        "k_without_v", "K without V",
        "The cache stores K and V for every token and layer: one of the pair left out, or a pair "
        "counted where one row is stored (MLA's latent) or one tensor is touched.",
        "kv_transfer_disagg", "kv_size"),
    MistakeKind(
        "q_vs_kv_heads", "Query vs KV heads",
        "Query heads used where only the KV heads are cached, a KV head split past TP = heads, "
        "or MLA's shared latent treated like GQA heads.",
        "max_concurrency", "kv_gpu"),
    MistakeKind(
        "forgot_tp", "One GPU vs the group",
        "Per GPU and the whole group mixed up: forgetting to divide by TP (or EP, PP, the "
        "replica), dividing twice, or adding up GPUs that each hold the same tokens.",
        "max_concurrency", "kv_budget"),
    MistakeKind(
        "one_layer", "Layer count",
        "One layer's figure where every layer counts, or the wrong set of layers (all layers "
        "where only the MoE, windowed or one stage's layers count).",
        "stranded_prefix_blocks", "block_bytes"),
    MistakeKind(
        "peak_vs_achievable", "Peak vs achievable",
        "A datasheet peak (FLOP/s, bandwidth, memory, a sparse or two-direction figure) where "
        "the engine gets only its achievable share (MFU, efficiency, gpu_memory_utilization).",
        "capacity_cost_split", "prefill_capacity"),
    MistakeKind(
        "flop_counting", "Counting FLOPs",
        "FLOPs miscounted: one per multiply-add instead of two, 6P (training) for a forward "
        "pass, or attention's share halved or doubled.",
        "recompute_vs_fetch", "recompute_us"),
    MistakeKind(
        "miscounted_term", "Missing or extra term",
        "A term left out of a sum (weights, KV, attention, a reserve), counted twice, or added "
        "where it does not belong.",
        "memory_beyond_kv", "kv_pool"),
    MistakeKind(
        "wrong_scope", "Wrong scope",
        "The right kind of figure for the wrong thing: one request, step or sample for all of "
        "them (or back), a total for a share, another phase, window or row than the one asked.",
        "capacity_cost_split", "prefill_share"),
    MistakeKind(
        "unit_slip", "Units and scale",
        "The right figure in the wrong unit: seconds for minutes, a percentage for a fraction, "
        "blocks for tokens, a power of ten.",
        "canary_sample_size", "minutes"),
    MistakeKind(
        "rounding", "Rounding and blocks",
        "Rounded the wrong way or at the wrong moment: a partial block counted as full, a "
        "count rounded up that must round down (or back), off by one.",
        "prefix_boundary_diagnosis", "reusable"),
    MistakeKind(
        "inverted", "Upside down",
        "A ratio or relation turned over: divided where it multiplies, the complement given for "
        "the part, an effect's direction reversed.",
        "recompute_vs_fetch", "ratio"),
    MistakeKind(
        "mean_vs_tail", "Averages and tails",
        "Statistics slips: a mean where the tail or the worst case rules (p99, max), averaged "
        "rates, the wrong tail law or test, samples that are not independent.",
        "utilisation_rule", "rho_max"),
    MistakeKind(
        "misread_mechanism", "How the engine works",
        "A wrong picture of the mechanism: how the scheduler, the cache, the kernel or the "
        "hardware actually behaves, and so which resource or policy decides.",
        "continuous_batching_scheduler", "victim"),
)

KINDS: dict[str, MistakeKind] = {k.id: k for k in _ALL}


def unknown(kind: str) -> list[str]:
    """The ids in a Mistake's `kind` ("a", or "a|b" for coinciding slips) that the vocabulary
    lacks; an empty `kind` gives [""]."""
    return [k for k in kind.split("|") if k not in KINDS]
