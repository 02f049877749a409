"""Q47: sliding-window layers. The layer ratio sets the saving, the allocator decides whether you
get it.

A model from the catalog mixes sliding-window ("local") layers, which attend to the last W tokens,
with full-attention ("global") layers, which attend to all of them. Per request of L tokens the
ideal cache holds

    KV(L) = b * (n_global * L + n_local * min(W, L))          (b = bytes per token per layer)

against b * layers * L when every layer keeps every token, so the saving is
f * (1 - min(W, L) / L) with f = n_local / layers: it tends to f, the layer ratio, as L grows past
W, and the window only matters while L is a small multiple of W. Whether a server gets it depends
on its allocator: vLLM's hybrid KV cache manager frees blocks that leave the window; with it off
(by flag, or because a KV connector turned it off) every layer gets blocks for every token and the
saving is zero (vllm/v1/kv_cache_interface.py, FullAttentionSpec docstring; the startup warning in
kv_cache_utils.unify_hybrid_kv_cache_specs).

Every model figure (layers, layer pattern, window, KV heads, head dim, context) comes from
exercises/catalog. The ideal per-request figure is the catalog's `kv_bytes_for_tokens`.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, HasFeature, Holds, WithinContext
from exercises.slips import Slips, tolerances
from exercises.spec import Mistake, Quantity

DTYPE_BYTES = 2  # BF16 KV cache, the default for these checkpoints

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml
NUMBER_PARTS = tuple(TOLERANCE)

# Where variants come from: (deployed context L, shorter request L_s) per model family. Contexts
# stay within each model's max_context (checked in is_sensible); Gemma 2's context is only 8K, so
# its "short" request is 6K, still longer than its 4K window (shorter requests save nothing).
MODELS = ("GPT-OSS-120B", "GPT-OSS-20B", "Gemma-2-9B", "Gemma-2-27B", "Gemma-3-12B", "Gemma-3-27B")
LONG_CONTEXTS: dict[str, tuple[int, ...]] = {
    "GPT-OSS": (32768, 65536, 131072),
    "Gemma-2": (8192,),
    "Gemma-3": (32768, 65536, 131072),
}
SHORT_CONTEXTS: dict[str, tuple[int, ...]] = {
    "GPT-OSS": (1024, 2048, 3072, 4096, 6144, 8192),
    "Gemma-2": (5120, 6144, 7168),
    "Gemma-3": (2048, 3072, 4096, 6144, 8192),
}
POOLS_GB = tuple(range(20, 330, 10))  # 20 .. 320 GB: one GPU's spare HBM up to a node's

CANONICAL: dict[str, Any] = {
    "model": "GPT-OSS-120B",
    "context": 131072,  # 128K: the blurb's setting
    "short": 4096,  # a typical chat request (the notes' 48.4 % at 4K)
    "pool_gb": 60,  # the replica's KV pool [A]
}


def family(name: str) -> str:
    return name.rsplit("-", 1)[0]


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw a model, two request lengths and a pool; redraw until the variant is sensible."""
    def draw(rng: random.Random) -> dict[str, Any]:
        name = rng.choice(MODELS)
        fam = family(name)
        return {"model": name, **choose(rng, {"context": LONG_CONTEXTS[fam],
                                              "short": SHORT_CONTEXTS[fam], "pool_gb": POOLS_GB})}

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    m = model(p["model"])
    if m.sliding_window is None or not m.local_layers or not m.global_layers:
        return False
    if m.max_context is not None and p["context"] > m.max_context:
        return False
    # The short request is shorter than the long one but still longer than the window, so both
    # savings are positive and differ.
    if not m.sliding_window < p["short"] < p["context"]:
        return False
    s = solve(p)
    # The pool holds at least two all-full requests (so turning the hybrid manager off hurts
    # without making the model unservable) and not absurdly many windowed ones.
    # ... and the windowed count clear of a whole number by 0.5 % (the tolerance policy's
    # boundary rule: a student working from the printed GB lands on the other side).
    x = s["exact_windowed"]
    clear = x == math.floor(x) or min(x - math.floor(x), math.ceil(x) - x) >= 0.005 * x
    return s["count_all_full"] >= 2 and s["count_windowed"] <= 400 and clear


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    n, n_s, pool_gb = p["context"], p["short"], p["pool_gb"]
    w = m.sliding_window
    assert w is not None
    b = m.kv_bytes_per_token_per_layer(DTYPE_BYTES)
    n_loc, n_glob = m.local_layers, m.global_layers
    f = n_loc / m.layers

    all_full = m.kv_bytes_per_token(DTYPE_BYTES) * n
    windowed = m.kv_bytes_for_tokens(n, DTYPE_BYTES)
    # The same, by hand: the catalog helper and the formula must agree (a test checks it too).
    assert windowed == b * (n_glob * n + n_loc * min(w, n))
    saving = 1 - windowed / all_full
    saving_short = f * (1 - min(w, n_s) / n_s)
    saving_limit = f

    pool_b = pool_gb * 1e9
    count_windowed = math.floor(pool_b / windowed)
    count_all_full = math.floor(pool_b / all_full)

    # What a windowed layer holds in the ideal count vs vLLM's per-request worst case, which also
    # covers a prefill chunk: min(W - 1 + max_num_batched_tokens, max_model_len) tokens plus one
    # block (SlidingWindowSpec.max_memory_usage_bytes). Shown in the solution for 8,192-token
    # chunks and 16-token blocks.
    chunk, block = 8192, 16
    worst_tokens = (math.ceil(min(w - 1 + chunk, n) / block) + 1) * block

    # A table of the saving at several lengths, to show the window matters only near W.
    rows = []
    for length in sorted({2 * w, 8 * w, 32 * w, n_s, n}):
        if length > n:
            continue
        rows.append((length, 100 * f * (1 - w / length)))
    table = "\n".join(f"| {length:,} | {pct:.1f} % |" for length, pct in rows)

    s: dict[str, Any] = {
        # part answers
        "kv_all_full": Quantity(all_full / 1e9, "GB"),
        "kv_windowed": Quantity(windowed / 1e9, "GB"),
        "saving_formula": SAVING_FORMULA,
        "saving_short": Quantity(100 * saving_short, "%"),
        "concurrency": Quantity(count_windowed, ""),
        "concurrency_unrounded": pool_b / windowed,  # before the floor (boundary rule)
        "allocator": list(ALLOCATOR_TRUE),
        # givens the statement prints
        "layers": m.layers,
        "n_local": n_loc,
        "n_global": n_glob,
        "window": w,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "max_context": m.max_context,
        "pattern_words": _pattern_words(m.layer_pattern),
        "ratio_words": _ratio_words(n_loc, n_glob),
        "context_k": n // 1024,
        # intermediates for the solution
        "b": b,
        "f": f,
        "f_pct": 100 * f,
        "all_full_bytes": all_full,
        "windowed_bytes": windowed,
        "global_bytes": b * n_glob * n,
        "local_bytes": b * n_loc * min(w, n),
        "local_mb": b * n_loc * min(w, n) / 1e6,
        "local_share_pct": 100 * b * n_loc * min(w, n) / windowed,
        "all_full_gb": all_full / 1e9,
        "all_full_gib": all_full / 2**30,
        "windowed_gb": windowed / 1e9,
        "saving_pct": 100 * saving,
        "saving_short_pct": 100 * saving_short,
        "saving_limit_pct": 100 * saving_limit,
        "per_token_full": m.kv_bytes_per_token(DTYPE_BYTES),
        "per_token_windowed": windowed / n,
        "per_token_windowed_kib": windowed / n / 1024,
        "per_token_full_kib": m.kv_bytes_per_token(DTYPE_BYTES) / 1024,
        "w_over_l_pct": 100 * w / n,
        "w_over_ls_pct": 100 * w / n_s,
        "count_windowed": count_windowed,
        "count_all_full": count_all_full,
        "count_ratio": all_full / windowed,
        "exact_windowed": pool_b / windowed,
        "exact_all_full": pool_b / all_full,
        "chunk": chunk,
        "block": block,
        "worst_tokens": worst_tokens,
        "worst_over_w": worst_tokens / w,
        "saving_table": table,
        # Halving the window at the deployed length: f * (W/2) / L, in percentage points.
        "halve_pts": 100 * f * (w / 2) / n,
        "window_cost_pts": 100 * (f - saving_short),
    }
    s["why"] = _model_answer(p, s)
    return s


def _ratio_words(n_loc: int, n_glob: int) -> str:
    """18:18 -> "1:1", 40:8 -> "5:1", 52:10 -> "52:10, about 5.2:1"."""
    g = math.gcd(n_loc, n_glob)
    if n_glob // g == 1:
        return f"{n_loc // g}:1 local:global"
    return f"{n_loc}:{n_glob} local:global, about {n_loc / n_glob:.1f}:1"


def _pattern_words(pattern: str | None) -> str:
    if pattern == "LG":
        return "alternating, starting with a sliding-window layer"
    if pattern == "LLLLLG":
        return "five sliding-window layers, then one full-attention layer, repeated"
    return f"pattern {pattern}"


SAVING_FORMULA = "f*(1 - W/L)"

ALLOCATOR_TRUE = ("groups_free", "off_no_saving", "prefix_hit", "trt_static")


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"Per request the full-attention layers still grow with every token; only the "
        f"{s['n_local']} windowed layers stop at {s['window']:,} tokens. So the saving is "
        f"f(1 − W/L) = {s['f']:.3f} × (1 − {s['window']:,}/{p['context']:,}) = "
        f"{s['saving_pct']:.2f} %: {s['kv_all_full'].value:.2f} GB becomes "
        f"{s['kv_windowed'].value:.2f} GB at {p['context']:,} tokens. The ceiling is f = "
        f"{s['f_pct']:.1f} %, the share of windowed layers; the window size only matters while L is "
        f"a small multiple of W (at {p['short']:,} tokens the saving is {s['saving_short_pct']:.1f} "
        "%). The further L is beyond W, the less the window matters; the layer ratio sets the "
        "ceiling.\n\n"
        "Getting it needs an allocator that frees a windowed layer's blocks once they leave the "
        "window. vLLM's hybrid KV cache manager does that, with the windowed layers in their own "
        "groups sharing one block pool. Turn it off, by flag or through a KV connector that does "
        "not support it (some releases switch it off whenever --kv-transfer-config is set), and "
        "every layer gets blocks for every token: the compute saving stays, the memory saving is "
        f"zero, and the pool holds {s['count_all_full']} of these requests instead of "
        f"{s['count_windowed']}. Check the startup log for the 'Hybrid KV cache manager is "
        "disabled' warning and compare the reported KV capacity with the arithmetic. Two more "
        "details: vLLM's startup check and concurrency estimate count a prefill chunk's worth of "
        "tokens in each windowed layer (W − 1 + max_num_batched_tokens), so the estimate is "
        "conservative; and TensorRT-LLM gives each window size its own pool with a split fixed at "
        "start-up, so the saving is real only if that split matches the traffic."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m = model(p["model"])
    n, n_s, w = p["context"], p["short"], s["window"]
    b, f = s["b"], s["f"]
    n_loc, n_glob = s["n_local"], s["n_global"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge_floor=1e-9).add

    full = s["kv_all_full"].value
    add("kv_all_full", full / 2,
        "Half the reference: you counted K but not V (or already applied the window). This part "
        "asks for every layer keeping every token, K and V.", "k_only", kind="k_without_v")
    add("kv_all_full", full * 2,
        "Twice the reference: the cache is BF16, 2 bytes per element, not 4.", "fp32",
        kind="wrong_precision")
    add("kv_all_full", full * m.q_heads / m.kv_heads,
        f"You used the {m.q_heads} query heads. With grouped-query attention only the "
        f"{m.kv_heads} KV heads are cached.", "q_heads", kind="q_vs_kv_heads")
    add("kv_all_full", full / m.layers,
        f"That is one layer. Every one of the {m.layers} layers keeps its own K and V.",
        "one_layer", kind="one_layer")

    wind = s["kv_windowed"].value
    add("kv_windowed", full,
        "That is the all-full figure: the windowed layers still keep only the last "
        f"{w:,} tokens.", "no_window", kind="miscounted_term")
    add("kv_windowed", b * m.layers * min(w, n) / 1e9,
        f"You windowed every layer. Only the {n_loc} sliding-window layers stop at {w:,} tokens; "
        f"the {n_glob} full-attention layers keep all {n:,}.", "all_windowed", kind="one_layer")
    add("kv_windowed", wind / 2,
        "Half the reference: you counted K but not V.", "k_only", kind="k_without_v")
    add("kv_windowed", b * (n_loc * n + n_glob * min(w, n)) / 1e9,
        f"You swapped the layer counts: {n_loc} layers are windowed and {n_glob} are full.",
        "swapped", kind="one_layer")
    add("kv_windowed", full * f,
        f"You multiplied the all-full figure by the windowed share f = {f:.3f}. That is roughly "
        "what the windowed layers would have cost, the part you SAVE; the cache keeps the rest.",
        "kept_saving", kind="misread_mechanism")

    add("saving_short", 100 * f,
        f"That is the long-context limit f. At {n_s:,} tokens the windowed layers still keep "
        f"{w:,} of them, {s['w_over_ls_pct']:.1f} %: f × (1 − W/L).", "limit", kind="wrong_scope")
    add("saving_short", 100 * (1 - w / n_s),
        f"You left out the layer ratio: only {n_loc} of {m.layers} layers are windowed, so "
        "multiply by f.", "no_ratio", kind="one_layer")
    add("saving_short", 100 * f * w / n_s,
        "That is what the windowed layers keep, not what they save: f × (1 − W/L).", "kept",
        kind="inverted")
    add("saving_short", s["saving_pct"],
        f"That is the saving at {n:,} tokens. This part asks about a {n_s:,}-token request.",
        "long_context", kind="wrong_scope")
    add("saving_short", 100 * (1 - f) * (1 - w / n_s),
        f"You used the full-attention share (1 − f). The saving comes from the {n_loc} windowed "
        "layers: f × (1 − W/L).", "global_share", kind="one_layer")

    count = s["count_windowed"]
    add("concurrency", s["count_all_full"],
        "That is the count with every layer keeping every token, what you get with the hybrid "
        "KV cache manager off. The question assumes it is on.", "hybrid_off",
        kind="misread_mechanism")
    add("concurrency", count + 1,
        f"You rounded up: {s['exact_windowed']:.2f} requests' worth of memory holds "
        f"{count} whole requests.", "round_up", kind="rounding")
    add("concurrency", math.floor(p["pool_gb"] * 2**30 / s["windowed_bytes"]),
        f"You read the pool as {p['pool_gb']} GiB. It is {p['pool_gb']} GB = "
        f"{p['pool_gb']}×10^9 bytes.", "gib_pool", kind="gb_vs_gib")
    add("concurrency", math.floor(p["pool_gb"] * 1e9 / (b * n_glob * n)),
        "You dropped the windowed layers entirely; they still hold their last "
        f"{w:,} tokens each.", "no_local", kind="miscounted_term")
    add("concurrency", math.floor(p["pool_gb"] * 1e9 / (b * m.layers * min(w, n))),
        "You windowed every layer; the full-attention layers keep every token.", "all_windowed",
        kind="one_layer")

    out += [
        Mistake("saving_formula", "1 - W/L",
                "That is the saving of ONE windowed layer. Only a fraction f of the layers is "
                "windowed: multiply by f.", "no_f", kind="one_layer"),
        Mistake("saving_formula", "f",
                "That is the limit as L grows. At finite L the windowed layers still keep W "
                "tokens: f(1 − W/L).", "limit", kind="wrong_scope"),
        Mistake("saving_formula", "f*W/L",
                "That is what the windowed layers keep, as a share of the all-full cache. The "
                "saving is f(1 − W/L).", "kept", kind="inverted"),
        Mistake("saving_formula", "(1 - f)*(1 - W/L)",
                "1 − f is the share of full-attention layers, which save nothing.", "global_share",
                kind="one_layer"),
    ]
    out += [
        Mistake("allocator", ["groups_free", "prefix_hit", "trt_static"],
                "Turning the hybrid manager off loses the whole memory saving: vLLM then gives "
                "every layer blocks for every token (it warns at start-up). The compute saving "
                "stays.", "missed_off", kind="misread_mechanism"),
        Mistake("allocator", [*ALLOCATOR_TRUE, "ring_buffer"],
                "vLLM does not use a ring buffer: it allocates a new block as tokens arrive and "
                "frees blocks that fall out of the window, which keeps prefix caching working.",
                "ring_buffer", kind="misread_mechanism"),
        Mistake("allocator", [*ALLOCATOR_TRUE, "startup_w_only"],
                "vLLM's per-request worst case for a sliding-window layer is "
                "min(W − 1 + max_num_batched_tokens, max_model_len) tokens plus one block, "
                "because a prefill chunk needs the window before it plus the chunk itself.",
                "startup_w_only", kind="mean_vs_tail"),
        Mistake("allocator", ["groups_free", "off_no_saving", "prefix_hit"],
                "TensorRT-LLM does keep one pool per window size, with a memory split fixed at "
                "start-up (its KV cache docs say so).", "missed_trt", kind="misread_mechanism"),
    ]
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [
        HasFeature(p["model"], "sliding_window"),
        WithinContext(p["model"], p["context"], "a request at the deployed context"),
        Holds(p["short"] < p["context"], "the short request is shorter than the long one"),
    ]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    s = solve(p)
    return {"saving_formula": {"f": s["f"], "W": s["window"], "L": p["context"]}}
