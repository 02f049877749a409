"""Q48: block sharing for parallel sampling, when it pays and when the copy fires.

n samples of one prompt (P tokens), each generating O tokens, in blocks of B tokens. Without
sharing every sample holds its own copy of the whole sequence: n * ceil((P + O)/B) blocks. With
block sharing and copy-on-write (the PagedAttention design, vLLM v0) the prompt's full blocks are
held once, and each sample owns its blocks from the partly filled last prompt block on:
floor(P/B) + n * ceil((P mod B + O)/B). The copy fires on the first write into a shared block whose
reference count is above 1: that is the partly filled last prompt block, on the first decode step;
n - 1 samples copy it and the last writes in place. An aligned prompt (P mod B = 0) has no partial
block and needs no copy. Ignoring whole-block rounding the saving is (n - 1)P / (n(P + O)): at
most (n - 1)/n, and close to nothing when outputs dwarf the prompt.

The canonical variant is the facts notes' table (facts-q26-q49.md, Q48): n = 4, P = 1,000, O = 200,
B = 16 (300 vs 114 blocks, 62.0 %, 3 copies) and the reasoning workload P = 100, O = 2,000
(528 vs 510 blocks, 3.4 %). The model only turns blocks into bytes in the worked solution.
"""
from __future__ import annotations

import random
from typing import Any

from exercises.catalog import model
from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, WithinContext
from exercises.slips import Slips, near, negative, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# Full-attention models in the catalog (GQA or MHA, no sliding window, no MLA); only their KV
# bytes per token are used.
MODELS = ("Llama-3.1-8B", "Llama-3.1-70B", "Qwen2.5-72B", "Llama-3.1-405B", "Llama-2-7B",
          "Mixtral-8x7B", "Qwen3-30B-A3B")
SAMPLES = (2, 3, 4, 5, 6, 8, 10, 16)
BLOCKS = (16, 32)
PROMPT = (300, 6000)  # chat or RAG prompt, tokens
OUTPUT = (100, 800)  # short samples, tokens
R_PROMPT = (40, 400)  # reasoning workload: short prompt ...
R_OUTPUT = (1500, 12000)  # ... and long samples

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "n": 4,
    "block": 16,
    "prompt": 1000,
    "output": 200,
    "r_prompt": 100,
    "r_output": 2000,
}

FORMULA = "(n-1)*P/(n*(P+O))"
WHEN = "first_write"


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def no_share(n: int, prompt: int, output: int, block: int) -> int:
    """Every sample holds its own copy of prompt and output."""
    return n * ceil_div(prompt + output, block)


def shared(n: int, prompt: int, output: int, block: int) -> int:
    """Full prompt blocks once; each sample's own blocks from the partial prompt block on."""
    return prompt // block + n * ceil_div(prompt % block + output, block)


def copies(n: int, prompt: int, block: int) -> int:
    """Copy-on-write copies: one per sample but the last, only if a partial prompt block exists."""
    return n - 1 if prompt % block else 0


# ----------------------------------------------------------------------------------------------
# Variants


def is_sensible(p: dict[str, Any]) -> bool:
    """The checks generate() applies; the tests apply them to every variant too."""
    s = solve(p)
    context = model(p["model"]).max_context
    return (
        # both workloads' sequences fit in the model's context window
        (context is None or max(p["prompt"] + p["output"], p["r_prompt"] + p["r_output"])
         <= context)
        # the chat workload shows a large saving, the reasoning one a small one: the lesson
        and s["saving_pct"] >= 25.0
        and 0.3 <= s["reasoning_saving"].value <= 10.0
        # the reasoning prompt spans at least two blocks, so something is shared at all
        and p["r_prompt"] >= 2 * p["block"]
    )


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw samples, block size and the two workloads; about one variant in four has a prompt
    that is a whole number of blocks (no copy fires)."""
    def draw(rng: random.Random) -> dict[str, Any]:
        block = rng.choice(BLOCKS)
        prompt = rng.randint(*PROMPT)
        if rng.random() < 0.25:
            prompt = prompt // block * block  # aligned: the lesson that no copy fires
        p = {
            "model": rng.choice(MODELS),
            "n": rng.choice(SAMPLES),
            "block": block,
            "prompt": prompt,
            "output": rng.randint(*OUTPUT),
            "r_prompt": rng.randint(*R_PROMPT),
            "r_output": 100 * rng.randint(R_OUTPUT[0] // 100, R_OUTPUT[1] // 100),
        }
        return p

    return draw_sensible(rng, draw, is_sensible, tries=10_000,
                         message="no sensible variant in 10,000 draws; the ranges above are inconsistent")


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    n, block, prompt, output = p["n"], p["block"], p["prompt"], p["output"]
    rp, ro = p["r_prompt"], p["r_output"]
    kappa = model(p["model"]).kv_bytes_per_token(2)
    block_bytes = block * kappa

    a = no_share(n, prompt, output, block)
    b = shared(n, prompt, output, block)
    c = copies(n, prompt, block)
    ra = no_share(n, rp, ro, block)
    rb = shared(n, rp, ro, block)
    rem = prompt % block
    r_rem = rp % block
    s: dict[str, Any] = {
        # part answers
        "blocks_no_share": Quantity(a, ""),
        "blocks_shared": Quantity(b, ""),
        "cow_copies": Quantity(c, ""),
        "saving_formula": FORMULA,
        "reasoning_saving": Quantity((ra - rb) / ra * 100, "%"),
        "when_copy": WHEN,
        # intermediates for the solution
        "per_sample_blocks": ceil_div(prompt + output, block),
        "seq_tokens": prompt + output,
        "full_prompt_blocks": prompt // block,
        "rem": rem,
        "aligned": rem == 0,
        "own_tokens": rem + output,
        "own_blocks": ceil_div(rem + output, block),
        "saved_blocks": a - b,
        "saving_pct": (a - b) / a * 100,
        "saving_cont_pct": (n - 1) * prompt / (n * (prompt + output)) * 100,
        "saving_cap_pct": (n - 1) / n * 100,
        "kappa": kappa,
        "block_mb": block_bytes / 1e6,
        "saved_gb": (a - b) * block_bytes / 1e9,
        "no_share_gb": a * block_bytes / 1e9,
        "shared_gb": b * block_bytes / 1e9,
        "copy_mb": c * block_bytes / 1e6,
        "n_minus_1": n - 1,
        "r_seq_tokens": rp + ro,
        "r_per_sample_blocks": ceil_div(rp + ro, block),
        "r_no_share": ra,
        "r_full_prompt_blocks": rp // block,
        "r_rem": r_rem,
        "r_own_tokens": r_rem + ro,
        "r_own_blocks": ceil_div(r_rem + ro, block),
        "r_shared": rb,
        "r_saved_blocks": ra - rb,
        "r_saving_cont_pct": (n - 1) * rp / (n * (rp + ro)) * 100,
        "r_saved_gb": (ra - rb) * block_bytes / 1e9,
        "r_copies": copies(n, rp, block),
    }
    s["v1_and_beams"] = _model_answer(p, s)
    s["copy_story"] = _copy_story(p, s)
    s["v1_story"] = _v1_story(p, s)
    return s


def _v1_story(p: dict[str, Any], s: dict[str, Any]) -> str:
    """What vLLM V1 does with this prompt: no copy, but duplicated prefill work."""
    n, block = p["n"], p["block"]
    if s["aligned"]:
        return (
            "This prompt is aligned, which is V1's bad case: the cache may serve at most P − 1 "
            "tokens (the last prompt token must be recomputed to get its logits), and hits come "
            f"in whole blocks, so each child after the first recomputes its whole last prompt "
            f"block ({block} tokens) and holds a duplicate of it: {n - 1} more blocks than "
            "copy-on-write needs, plus that prefill work."
        )
    return (
        f"Each child computes and stores its own partial last block (the {s['rem']} leftover "
        "prompt tokens), so memory ends up the same as with copy-on-write; the difference is "
        f"a little duplicated prefill work ({n - 1} × {s['rem']} tokens) instead of {n - 1} "
        "block copies. With an aligned prompt V1 is worse: the cache may serve at most P − 1 "
        "tokens (the last token must be recomputed to get its logits) and hits come in whole "
        f"blocks, so each child after the first recomputes and duplicates its whole last prompt "
        f"block: {n - 1} more blocks than copy-on-write."
    )


def _copy_story(p: dict[str, Any], s: dict[str, Any]) -> str:
    """The copy-count paragraph of the solution, which differs for aligned prompts."""
    n, block = p["n"], p["block"]
    if s["aligned"]:
        return (
            f"Here {p['prompt']:,} = {s['full_prompt_blocks']} × {block} exactly: every prompt "
            "block is full. No sample ever writes into a block another sample holds, because each "
            "sample's first token opens a fresh private block. **0 copies.** Had the prompt been "
            f"one token longer, the last prompt block would hold 1 token and {n - 1} copies would "
            "fire."
        )
    return (
        f"Here {p['prompt']:,} = {s['full_prompt_blocks']} × {block} + {s['rem']}: the last "
        f"prompt block holds {s['rem']} tokens and is shared by all {n} samples (reference count "
        f"{n}). On the first decode step each sample writes its first token into it. The first "
        f"{n - 1} find the count above 1, copy the block and drop their reference; the last finds "
        f"the count at 1 and writes in place. **{n - 1} copies**, each of one block "
        f"({s['block_mb']:.2f} MB), {s['copy_mb']:.1f} MB in all, once per request. Full blocks "
        "are never written again, so they are never copied."
    )


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    if s["aligned"]:
        alignment = (
            f"This prompt is aligned ({p['prompt']:,} = {s['full_prompt_blocks']} × "
            f"{p['block']}): every prompt block is full, each sample's first token opens a fresh "
            "private block, and no copy fires. A misaligned prompt would leave its last block "
            f"partly full and shared by all {p['n']} samples; on the first decode step each sample "
            "would find its reference count above 1 and copy it, except the last one, which "
            f"writes in place: {s['n_minus_1']} copies of one block, once. "
        )
    else:
        alignment = (
            f"This prompt is misaligned ({p['prompt']:,} = {s['full_prompt_blocks']} × "
            f"{p['block']} + {s['rem']}): the last prompt block is partly full and shared by all "
            f"{p['n']} samples. Nothing is copied at fork time; on the first decode step each "
            "sample writes its first token into that block, finds its reference count above 1 and "
            "copies it, except the last one, which writes in place: "
            f"{s['n_minus_1']} copies of one block, once. An aligned prompt has no partial block, "
            "so no copy ever fires. "
        )
    cost = (
        "The copy is cheap; what a misaligned prompt really costs is that its partial block ends "
        "up private to each sample, so only the full prompt blocks "
        f"({s['full_prompt_blocks']} here) are shared. "
    )
    return alignment + cost + (
        "The saving is the duplicated prompt, about "
        "(n − 1)P/(n(P + O)), so it is large for long prompts and short samples and "
        f"almost nothing for the reasoning workload ({s['reasoning_saving'].value:.1f} %): the "
        "private output blocks dominate. Beam search shares more, because beams also share "
        "generated prefixes and fork mid-generation, each fork copying a partial block; pruned "
        "beams free theirs. vLLM V1 has no copy-on-write: a request with n > 1 becomes n child "
        "requests that share the prompt's full blocks through the prefix cache, and each child "
        "computes and stores its own partial last block; with an aligned prompt the last-token "
        "rule makes every child after the first recompute its whole last prompt block."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    n, block, prompt, output = p["n"], p["block"], p["prompt"], p["output"]
    out: list[Mistake] = [
        Mistake("saving_formula", "P/(P+O)",
                "That is the prompt's share of one sample. With n samples one prompt copy is "
                "kept and n − 1 are saved, out of n whole sequences.", "prompt_share",
                kind="wrong_scope"),
        Mistake("saving_formula", "(n-1)/n",
                "That assumes everything is shared. Each sample's output is private, so the "
                "saving is only the duplicated prompts: (n − 1)P out of n(P + O).", "all_shared",
                kind="misread_mechanism"),
        Mistake("saving_formula", "(n-1)*P/(P+n*O)",
                "You divided by the shared total, P + nO. The saving is a share of what the "
                "samples would take without sharing, n(P + O).", "over_shared", kind="inverted"),
        Mistake("saving_formula", "(n-1)*P/(n*P+O)",
                "Each of the n samples generates its own O tokens: without sharing the total is "
                "n(P + O), not nP + O.", "one_output", kind="miscounted_term"),
        Mistake("when_copy", "at_fork",
                "Copying at fork time would throw the sharing away. The copy is lazy: it happens "
                "only when a sample writes into a block someone else still holds.", "at_fork",
                kind="misread_mechanism"),
        Mistake("when_copy", "aligned",
                "Backwards: an aligned prompt has no partly filled block, so no sample ever "
                "writes into a shared block and no copy fires.", "aligned", kind="inverted"),
        Mistake("when_copy", "every_step",
                "Full blocks are never written again, so they stay shared until the samples "
                "finish. Only the partial last prompt block is written, once, on the first "
                "decode step.", "every_step", kind="misread_mechanism"),
    ]

    add = Slips(s, TOLERANCE, out, merge=near, skip=negative).add

    a = s["blocks_no_share"].value
    b = s["blocks_shared"].value
    add("blocks_no_share", ceil_div(n * (prompt + output), block),
        "You pooled all samples' tokens and then rounded up once. Each sample has its own blocks, "
        "so round up per sample, then multiply by n.", "pooled", kind="rounding")
    add("blocks_no_share", s["per_sample_blocks"],
        f"That is one sample. Without sharing, each of the {n} samples holds its own copy.",
        "one_sample", kind="wrong_scope")
    add("blocks_no_share", n * ceil_div(prompt, block),
        "You left out the generated tokens: each sample's KV grows by its output too.",
        "prompt_only", kind="miscounted_term")
    add("blocks_no_share", n * (prompt // block + ceil_div(output, block)),
        "You put the output in fresh blocks after the prompt's. Prompt and output are one "
        "sequence: the output continues in the prompt's last, partly filled block.",
        "separate_output", kind="rounding")

    add("blocks_shared", -(-prompt // block) + n * ceil_div(output, block),
        "You kept the partly filled prompt block shared and started each sample's output in "
        "fresh blocks. Each sample's first token goes into that block, so each needs its own "
        "copy of it, and its output continues there.", "partial_shared", kind="rounding")
    add("blocks_shared", -(-prompt // block) + n * s["own_blocks"],
        "You counted the partly filled prompt block once as shared and again in every sample. "
        "After the copies it belongs to the samples only.", "partial_twice", kind="miscounted_term")
    add("blocks_shared", ceil_div(prompt + n * output, block),
        "That shares at token level across samples. Blocks belong to one sample once it writes "
        "into them: count full prompt blocks once, then each sample's own blocks.", "token_level",
        kind="rounding")
    add("blocks_shared", n * s["own_blocks"],
        "You left out the shared prompt blocks: they are held once, but they are held.",
        "no_prompt", kind="miscounted_term")
    add("blocks_shared", a - b,
        "That is the number of blocks sharing saves. The part asks how many blocks are held "
        "with sharing.", "saved", kind="wrong_scope")

    if s["aligned"]:
        add("cow_copies", n - 1,
            f"{prompt:,} is a whole number of {block}-token blocks: the last prompt block is full, "
            "so every sample's first token opens a fresh private block and nothing is copied.",
            "aligned_copies", kind="rounding")
        add("cow_copies", n,
            "No copy fires: the prompt fills its blocks exactly, so no sample ever writes into a "
            "shared block.", "aligned_n", kind="rounding")
    else:
        add("cow_copies", n,
            "The last sample to write finds the block's reference count down to 1 and writes in "
            f"place: {n - 1} copies, not {n}.", "n_copies", kind="rounding")
        add("cow_copies", 0,
            f"{prompt:,} = {s['full_prompt_blocks']} × {block} + {s['rem']}: the last prompt block "
            "is partly full and shared, and the first decode step writes into it.", "no_copies",
            kind="rounding")
        add("cow_copies", (n - 1) * s["full_prompt_blocks"],
            "Full blocks are never written again, so they are never copied. Only the partly "
            "filled last block is.", "all_blocks", kind="misread_mechanism")

    ra, rb = s["r_no_share"], s["r_shared"]
    add("reasoning_saving", s["r_saving_cont_pct"],
        "That is the continuous estimate from the formula. Counted in whole blocks the saving "
        "is smaller: only the full prompt blocks are shared, and each sample still holds its "
        "own copy of the partial one.", "continuous", kind="rounding")
    add("reasoning_saving", (ra - rb) / rb * 100,
        "You divided the blocks saved by the blocks held with sharing. The saving is a share "
        "of the blocks needed without sharing.", "over_shared", kind="inverted")
    add("reasoning_saving", rb / ra * 100,
        "That is the share of blocks still needed with sharing. The saving is one minus it.",
        "remaining", kind="inverted")
    add("reasoning_saving", (n - 1) / n * 100,
        "That assumes everything is shared. Here the outputs are private and dwarf the prompt.",
        "all_shared", kind="misread_mechanism")
    add("reasoning_saving", s["saving_pct"],
        "That is the saving for the chat workload. The part asks about the reasoning one.",
        "wrong_workload", kind="wrong_scope")
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    # No GPU is named: the model only turns blocks into bytes. Each sample is one sequence.
    return [
        WithinContext(p["model"], p["prompt"] + p["output"], "a chat sample"),
        WithinContext(p["model"], p["r_prompt"] + p["r_output"], "a reasoning sample"),
    ]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {"saving_formula": {"n": p["n"], "P": p["prompt"], "O": p["output"]}}
