"""Q14: batch-1 decode at long context, split-KV (flash-decoding), and the exact merge.

FlashAttention-2 launches one CTA per (batch, KV head, M-block) for decode. With one query token
and a GQA model it first folds the query heads of each group into the M dimension
(`seqlenq_ngroups_swapped` in csrc/flash_attn/flash_api.cpp), so Llama-3.1-8B at batch 1 is
1 x 8 x 1 = 8 CTAs on a GPU with 132 SMs. To fill the machine it cuts the KV sequence into
splits, picks their number with `num_splits_heuristic` (same file), and merges the partial results
exactly with their log-sum-exps.

The heuristic, as implemented here (`num_splits`):
- 1 split when the grid already covers 80 % of the slots;
- for s = 1 .. min(128, slots, n_blocks), skip s when ceil(n_blocks / s) equals
  ceil(n_blocks / (s - 1)) (the same split size as s - 1: not a real option);
- wave efficiency(s) = w / ceil(w), w = CTAs * s / slots;
- take the SMALLEST eligible s whose efficiency is at least 85 % of the best.
n_blocks = ceil(context / block_n) with block_n = 256, 128 or 64 keys for head_dim <= 64,
<= 128 or larger. "Slots" is the SM count times CTAs per SM: upstream FlashAttention-2 passes
2 x SMs (its comment ties that to 128-thread CTAs, two per SM); other builds pass the SM count.
Each variant states which, so the answer is unambiguous (research notes, Appendix E point 5).

The canonical variant is the blurb's: Llama-3.1-8B on H100 SXM, batch 1, 32K context, one CTA
per SM: 8 CTAs, 256 KV blocks, 14 splits (112 CTAs, efficiency 0.848; the best eligible is 16
splits at 0.970; 33 splits would be two full waves but 33 is not eligible).

Parts: the CTA count, the split count, the merged LSE and the merged output of two splits (as
formulas), the kernel (kernel/: task.py, reference.py, starter.py, mutants/), and the judgement
on when splitting pays (merge traffic against the KV read).
"""
from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import UNSTATED_WEIGHT_BYTES, Claim, Fits, WithinContext
from exercises.feasibility import check as infeasible
from exercises.kernel_tolerance import tolerance_table
from exercises.slips import Slips, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# --- FlashAttention-2's split-KV constants (csrc/flash_attn/flash_api.cpp, set_params_splitkv and
# num_splits_heuristic) ----------------------------------------------------------------------------
BLOCK_M = 64  # query rows per CTA in the split-KV kernels: num_m_blocks = ceil(seqlen_q / 64)
MAX_SPLITS = 128  # the heuristic is called with max_splits = 128
FILL_FRACTION = 0.8  # grid >= 80 % of the slots: no split
EFFICIENCY_FRACTION = 0.85  # smallest split count within 85 % of the best efficiency
FP32_BYTES = 4
FP32_MAX = (2 - 2**-23) * 2.0**127  # largest finite float32
KV_BYTES = 2  # BF16 cache

MODELS = ("Llama-3.1-8B", "Qwen3-30B-A3B", "Mixtral-8x7B", "Llama-2-7B")
GPUS = ("A100 SXM 80GB", "H100 SXM", "H200 SXM", "B200")
BATCHES = (1, 1, 2, 4)  # batch 1 is the question's case; drawn twice as often
CONTEXTS = (3000, 4096, 8192, 12000, 16384, 20000, 32768, 40960, 50000, 65536, 100000, 131072)
CTAS_PER_SM = (1, 2)

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-8B",
    "gpu": "H100 SXM",
    "batch": 1,
    "context": 32768,
    "ctas_per_sm": 1,  # the blurb's "eight thread blocks and 132 SMs"
}


# ----------------------------------------------------------------------------------------------
# The arithmetic


def block_n(head_dim: int) -> int:
    """Keys per KV block in FlashAttention-2's split-KV path, by head dimension."""
    if head_dim <= 64:
        return 256
    return 128 if head_dim <= 128 else 64


def eligible(s: int, n_blocks: int) -> bool:
    """A split count is a real option only if it changes the blocks per split: with 256 blocks,
    33 splits give ceil(256/33) = 8 blocks each, like 32 splits (the 33rd would be empty)."""
    return s == 1 or math.ceil(n_blocks / s) != math.ceil(n_blocks / (s - 1))


def efficiency(ctas: int, s: int, slots: int) -> float:
    """Share of the last wave's slots that are busy, over all waves: w / ceil(w)."""
    w = ctas * s / slots
    return w / math.ceil(w)


def efficiencies(ctas: int, slots: int, n_blocks: int, *, check_eligible: bool = True
                 ) -> dict[int, float]:
    """Efficiency of every split count the heuristic considers (eligible ones only, unless told)."""
    top = min(MAX_SPLITS, slots, n_blocks)
    return {s: efficiency(ctas, s, slots) for s in range(1, top + 1)
            if not check_eligible or eligible(s, n_blocks)}


def num_splits(ctas: int, slots: int, n_blocks: int, *, check_eligible: bool = True,
               smallest: bool = True) -> int:
    """FlashAttention-2's num_splits_heuristic. The keyword arguments switch off one rule each,
    to produce the known wrong answers: no eligibility check, or the best split count instead
    of the smallest good-enough one."""
    if ctas >= FILL_FRACTION * slots:
        return 1
    eff = efficiencies(ctas, slots, n_blocks, check_eligible=check_eligible)
    best = max(eff.values())
    if not smallest:
        return min(s for s, e in eff.items() if e == best)
    return min(s for s, e in eff.items() if e >= EFFICIENCY_FRACTION * best)


def grid_ctas(batch: int, kv_heads: int, group: int) -> int:
    """CTAs before splitting: batch x KV heads x M-blocks, the group's query heads folded into M."""
    return batch * kv_heads * math.ceil(group / BLOCK_M)


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    return draw_sensible(rng, lambda rng: choose(rng, {
        "model": MODELS, "gpu": GPUS, "batch": BATCHES, "context": CONTEXTS,
        "ctas_per_sm": CTAS_PER_SM,
    }), is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    """The context fits the model, splitting happens (more than 1 split), no efficiency sits
    within rounding of a threshold (FlashAttention compares in float), and each number part keeps
    two distinct known mistakes."""
    if infeasible(constraints(p)):  # a story that could not happen: see exercises/feasibility.py
        return False
    m = model(p["model"])
    if m.max_context is not None and p["context"] > m.max_context:
        return False
    if p["context"] < 2048:
        return False
    s = solve(p)
    if s["splits"].value <= 1:
        return False
    ctas, slots = s["ctas"].value, s["slots"]
    if abs(ctas - FILL_FRACTION * slots) < 1e-6 * slots:
        return False
    for check in (True, False):
        eff = efficiencies(ctas, slots, s["n_blocks"], check_eligible=check)
        cut = EFFICIENCY_FRACTION * max(eff.values())
        if any(abs(e - cut) < 1e-6 for e in eff.values()):
            return False
    ms = mistakes(p)
    return all(sum(x.part == part for x in ms) >= 2 for part in TOLERANCE)


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    assert m.kv_heads is not None and m.head_dim is not None
    batch, context, cps = p["batch"], p["context"], p["ctas_per_sm"]
    group = m.q_heads // m.kv_heads
    d = m.head_dim
    bn = block_n(d)
    m_blocks = math.ceil(group / BLOCK_M)
    ctas = grid_ctas(batch, m.kv_heads, group)
    slots = g.sms * cps
    n_blocks = math.ceil(context / bn)

    splits = num_splits(ctas, slots, n_blocks)
    eff = efficiencies(ctas, slots, n_blocks)
    best = max(eff.values())
    best_s = num_splits(ctas, slots, n_blocks, smallest=False)
    ctas_after = ctas * splits
    waves = math.ceil(ctas_after / slots)
    per_split = math.ceil(n_blocks / splits)
    used_splits = math.ceil(n_blocks / per_split)
    last_split = n_blocks - (used_splits - 1) * per_split

    # The split count with every rule but eligibility: which "perfect" count the rule rules out.
    loose = efficiencies(ctas, slots, n_blocks, check_eligible=False)
    loose_best_s = min(s for s, e in loose.items() if e == max(loose.values()))

    # Merge traffic: each split writes a D-wide fp32 partial output and one fp32 LSE per query
    # head; the merge kernel reads them back once. Against one layer's K and V read in BF16.
    partial_bytes = splits * batch * m.q_heads * (d + 1) * FP32_BYTES
    kv_bytes = 2 * batch * m.kv_heads * context * d * KV_BYTES

    s: dict[str, Any] = {
        # part answers
        "ctas": Quantity(ctas, ""),
        "splits": Quantity(splits, ""),
        "lse": "log(exp(L1) + exp(L2))",
        "merge": "(exp(L1)*O1 + exp(L2)*O2)/(exp(L1) + exp(L2))",
        "kernel": "kernel/reference.py",
        "judgement": "small_grid",
        # givens the statement prints
        "q_heads": m.q_heads,
        "kv_heads": m.kv_heads,
        "head_dim": d,
        "layers": m.layers,
        "group": group,
        "sms": g.sms,
        "slots": slots,
        "slots_rule": (f"one CTA per SM: **{slots} slots**" if cps == 1 else
                       f"two CTAs per SM (upstream FlashAttention-2's setting for its 128-thread "
                       f"split-KV CTAs): {g.sms} × 2 = **{slots} slots**"),
        "block_n": bn,
        "block_m": BLOCK_M,
        "fill_fraction": FILL_FRACTION,
        "fill_pct": round(FILL_FRACTION * 100),
        "eff_pct": round(EFFICIENCY_FRACTION * 100),
        "max_splits": MAX_SPLITS,
        # intermediates for the solution
        "m_blocks": m_blocks,
        "ctas_unfolded": batch * m.q_heads * math.ceil(1 / BLOCK_M),
        "fill_share": ctas / slots,
        "fill_cut": FILL_FRACTION * slots,
        "n_blocks": n_blocks,
        "split_cap": min(MAX_SPLITS, slots, n_blocks),
        "best_s": best_s,
        "best_eff": best,
        "cut_eff": EFFICIENCY_FRACTION * best,
        "chosen_eff": eff[splits],
        "ctas_after": ctas_after,
        "waves": waves,
        "per_split": per_split,
        "used_splits": used_splits,
        "last_split": last_split,
        "loose_best_s": loose_best_s,
        "loose_best_blocks": math.ceil(n_blocks / loose_best_s),
        "loose_prev_blocks": math.ceil(n_blocks / max(1, loose_best_s - 1)),
        "loose_best_eligible": eligible(loose_best_s, n_blocks),
        "partial_bytes": partial_bytes,
        "partial_kb": partial_bytes / 1e3,
        "kv_bytes": kv_bytes,
        "kv_mb": kv_bytes / 1e6,
        "merge_share_pct": 100 * 2 * partial_bytes / kv_bytes,
        "fp32_bytes": FP32_BYTES,
        # ln of float32's largest value: exp() of anything above this is inf in fp32.
        "exp_limit": math.log(FP32_MAX),
        "wave_table": _wave_table(ctas, slots, n_blocks, splits, best_s, loose_best_s),
    }
    s["loose_note"] = _loose_note(s)
    s.update(_fold_text(p, s))
    # The kernel's tolerances as the harness applies them (kernel/task.py), for the statement.
    s["tolerance_table"] = tolerance_table(Path(__file__).resolve().parent, p)
    return s


def _fold_text(p: dict[str, Any], s: dict[str, Any]) -> dict[str, str]:
    """The solution's account of the GQA fold; an MHA model has nothing to fold."""
    if s["group"] == 1:
        return {
            "fold_text": (f"{p['model']} has as many KV heads as query heads ({s['kv_heads']}), "
                          "so there is no group to fold: each CTA handles one query head's "
                          f"single row, 1 M-block of {s['block_m']}."),
            "fold_trap": ("**Trap.** The layers do not multiply the grid: each layer is its own "
                          "launch. Nor does the context: a CTA walks the whole cache."),
        }
    return {
        "fold_text": (
            "With one query token per request, FlashAttention-2 reshapes the query from "
            f"(batch, 1, {s['q_heads']} heads) to (batch, {s['group']} rows, {s['kv_heads']} "
            f"heads) (`seqlenq_ngroups_swapped`): the {s['group']} query heads of a group become "
            "rows of one tile, because they all read the same K and V. "
            f"{s['group']} rows fit in {s['m_blocks']} M-block of {s['block_m']}."),
        "fold_trap": (
            f"**Trap.** One CTA per query head ({s['ctas_unfolded']}) would read every K/V block "
            f"{s['group']} times and is not what the kernel does; the layers do not multiply the "
            "grid either: each layer is its own launch."),
    }


def _wave_table(ctas: int, slots: int, n_blocks: int, chosen: int, best_s: int,
                loose_best_s: int) -> str:
    """A Markdown table of the split counts worth looking at, with the heuristic's view of each."""
    eff = efficiencies(ctas, slots, n_blocks)
    best = max(eff.values())
    rows = {1, chosen, best_s, loose_best_s}
    rows |= {s for s in (chosen - 1, chosen + 1, best_s + 1) if 1 <= s <= min(MAX_SPLITS, slots,
                                                                            n_blocks)}
    lines = ["| splits s | KV blocks per split | CTAs | waves | efficiency | verdict |",
             "|---:|---:|---:|---:|---:|---|"]
    for s in sorted(rows):
        w = ctas * s / slots
        e = w / math.ceil(w)
        if not eligible(s, n_blocks):
            verdict = f"not eligible: same split size as {s - 1}"
        elif s == chosen:
            verdict = f"**chosen**: smallest at ≥ {EFFICIENCY_FRACTION:.2f} × best"
        elif s == best_s:
            verdict = "best efficiency"
        elif e >= EFFICIENCY_FRACTION * best:
            verdict = "good enough, but not the smallest"
        else:
            verdict = f"below {EFFICIENCY_FRACTION:.2f} × best"
        lines.append(f"| {s} | {math.ceil(n_blocks / s)} | {ctas * s} | {math.ceil(w)} | "
                     f"{e:.3f} | {verdict} |")
    return "\n".join(lines)


def _loose_note(s: dict[str, Any]) -> str:
    # The canonical's s = 33: two perfect waves, yet not a real option.
    k = s["loose_best_s"]
    if s["loose_best_eligible"]:
        return ""
    return (f" A tempting count is {k}: {s['ctas'].value} × {k} = "
            f"{s['ctas'].value * k} CTAs would fill whole waves, but ceil({s['n_blocks']}/{k}) = "
            f"{s['loose_best_blocks']} = ceil({s['n_blocks']}/{k - 1}), so {k} splits hold exactly "
            f"what {k - 1} do, and the last one is empty or a sliver: the rule does not count it.")


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m = model(p["model"])
    assert m.kv_heads is not None
    batch, cps = p["batch"], p["ctas_per_sm"]
    group, ctas, slots = s["group"], s["ctas"].value, s["slots"]
    n_blocks, bn = s["n_blocks"], s["block_n"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, skip=nonpositive, as_float=True).add

    # -- ctas ----------------------------------------------------------------------------------
    if group > 1:
        add("ctas", s["ctas_unfolded"],
            f"You gave every query head its own CTA. For one query token FlashAttention folds the "
            f"{group} query heads that share a KV head into the M dimension of one tile "
            f"(seqlenq_ngroups_swapped), so each KV head is one CTA that reads its K and V once.",
            "no_gqa_fold", kind="q_vs_kv_heads")
    add("ctas", batch * m.kv_heads * n_blocks,
        f"That is one CTA per {bn}-key block, the finest split there is. Before splitting, each "
        "(batch, KV head, M-block) is ONE CTA that walks the whole cache.", "per_block",
        kind="misread_mechanism")
    add("ctas", m.layers * ctas,
        "The layers run one after another, each its own kernel launch: count the grid of one "
        "layer's attention.", "all_layers", kind="one_layer")
    if batch > 1:
        add("ctas", m.kv_heads * s["m_blocks"],
            f"That is one sequence. The grid has a row per request: batch {batch}.", "no_batch",
            kind="wrong_scope")

    # -- splits --------------------------------------------------------------------------------
    best_s = s["best_s"]
    add("splits", best_s,
        f"{best_s} splits have the best efficiency ({s['best_eff']:.3f}), but the rule takes the "
        f"SMALLEST eligible count within {s['eff_pct']} % of the best ({s['cut_eff']:.3f}): fewer "
        "splits mean less merge traffic and longer runs per CTA.", "max_efficiency",
        kind="misread_mechanism")
    if not s["loose_best_eligible"]:
        k = s["loose_best_s"]
        add("splits", k,
            f"{k} splits would fill whole waves, but ceil({n_blocks}/{k}) = ceil({n_blocks}/"
            f"{k - 1}) = {s['loose_best_blocks']}: the split size is the same as with {k - 1}, so "
            "the rule skips it as not a real option.", "ineligible_perfect", kind="rounding")
    add("splits", num_splits(ctas, slots, n_blocks, check_eligible=False),
        "You let ineligible split counts (ones whose blocks per split equal the previous "
        "count's) into the search: they raise the best efficiency and with it the 85 % bar.",
        "no_eligibility", kind="misread_mechanism")
    other = s["sms"] * (3 - cps)
    add("splits", num_splits(ctas, other, n_blocks),
        f"You used {other} slots. This build counts {cps} CTA{'s' if cps > 1 else ''} per SM: "
        f"{s['sms']} × {cps} = {slots} slots.", "other_slots", kind="misread_mechanism")
    if group > 1:
        add("splits", num_splits(s["ctas_unfolded"], slots, n_blocks),
            f"You started from {s['ctas_unfolded']} CTAs (one per query head). With the group "
            f"folded into M the grid is {ctas} CTAs.", "no_gqa_fold", kind="q_vs_kv_heads")
    add("splits", num_splits(ctas, slots, math.ceil(p["context"] / 64)),
        f"You used 64-key blocks. For head_dim {s['head_dim']} the split-KV kernel's blocks "
        f"hold {bn} keys: {n_blocks} blocks.", "block_64", kind="misread_mechanism")
    add("splits", 1,
        f"One split leaves {ctas} CTAs on {slots} slots ({100 * s['fill_share']:.0f} % of one "
        f"wave): the rule splits whenever the grid is under {s['fill_pct']} % of the slots.",
        "no_split", kind="misread_mechanism")

    # -- expressions ---------------------------------------------------------------------------
    out += [
        Mistake("lse", "max(L1, L2)",
                "That keeps only the larger split. The smaller one still adds exp(L_small) to the "
                "denominator; the max is only the shift that keeps exp() finite.", "max_only",
                kind="miscounted_term"),
        Mistake("lse", "L1 + L2",
                "Log-sum-exps do not add: the softmax denominators add, and each is exp(L_i). "
                "Take the log of their sum.", "sum_of_logs", kind="mean_vs_tail"),
        Mistake("lse", "(L1 + L2)/2",
                "An average of the two LSEs is not the LSE of the union: add the denominators "
                "exp(L_i), then take the log.", "mean", kind="mean_vs_tail"),
        Mistake("lse", "log((exp(L1) + exp(L2))/2)",
                "No division by the number of splits: the denominator of the whole row is the "
                "plain sum of the splits' denominators.", "divided_by_splits",
                kind="misread_mechanism"),
        Mistake("merge", "(O1 + O2)/2",
                "A plain average is right only when both splits carry the same softmax mass. "
                "Weight each split's output by its share of the denominator, exp(L_i) / sum.",
                "plain_average", kind="mean_vs_tail"),
        Mistake("merge", "exp(L1)*O1 + exp(L2)*O2",
                "Each O_i is already normalised within its split; weighting by exp(L_i) turns it "
                "back into the unnormalised sum, which you must still divide by the total "
                "denominator exp(L1) + exp(L2).", "not_normalised", kind="misread_mechanism"),
        Mistake("merge", "(exp(L1)*O1 + exp(L2)*O2)/2",
                "Divide by the total softmax denominator, exp(L1) + exp(L2), not by the number of "
                "splits.", "divided_by_splits", kind="misread_mechanism"),
        Mistake("merge", "(L1*O1 + L2*O2)/(L1 + L2)",
                "The weights are the splits' softmax masses exp(L_i), not the log-sum-exps "
                "themselves.", "log_weights", kind="mean_vs_tail"),
        Mistake("merge", "exp(L1 - max(L1, L2))*O1 + exp(L2 - max(L1, L2))*O2",
                "Subtracting the max keeps exp() finite, but the weights must still be divided "
                "by their sum.", "shifted_not_normalised", kind="misread_mechanism"),
    ]

    # -- judgement -----------------------------------------------------------------------------
    numbers = (f"Here the splits write {s['partial_kb']:.0f} KB of partial results per layer "
               f"against {s['kv_mb']:.0f} MB of K and V read.")
    out += [
        Mistake("judgement", "always",
                f"{numbers} The merge is cheap, but once batch × KV heads fills the slots, more "
                "splits add no parallelism: only the partial writes, a second launch and "
                "partial waves.", "always", kind="misread_mechanism"),
        Mistake("judgement", "never",
                f"{numbers} Each split writes one D-wide vector and one LSE per query head, not "
                "another pass over the cache.", "never", kind="misread_mechanism"),
        Mistake("judgement", "large_batch",
                "Backwards. A large batch already gives the GPU batch × KV heads CTAs; split-KV "
                "is for the small grid, where most SMs would idle. " + numbers, "large_batch",
                kind="inverted"),
        Mistake("judgement", "approximate",
                "The merge is exact: with weights exp(L_i − LSE) it reproduces the softmax over "
                "the whole row to rounding. " + numbers, "approximate", kind="misread_mechanism"),
    ]
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    m = model(p["model"])
    return [
        Fits("weights and the batch's BF16 KV", p["gpu"], 1,
             m.weight_bytes(UNSTATED_WEIGHT_BYTES) + p["batch"] * m.kv_bytes_for_tokens(p["context"])),
        WithinContext(p["model"], p["context"] + 1, "the cached context and the new token"),
    ]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    # A split's log-sum-exp is at least the log of its key count; outputs are of order 1.
    s = solve(p)
    l1 = math.log(s["per_split"] * s["block_n"])
    l2 = math.log(s["last_split"] * s["block_n"])
    return {"lse": {"L1": l1, "L2": l2}, "merge": {"O1": 1.0, "O2": 0.5, "L1": l1, "L2": l2}}
