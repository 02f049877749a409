"""Q39: an SGLang-style radix prefix cache: edge split, pinning by lock counts, leaf eviction.

The scenario replays one short script on the cache: request A caches a system prompt plus a
question; B shares the system prompt (the match splits A's edge); D re-asks part of A's
question and diverges inside it (another split); C shares part of B's question and is still
running when the scheduler asks the cache to evict k tokens. The number parts ask what C's
match returns, how many nodes the tree then has, how many tokens are evictable while C runs,
and what evict(k) returns. Everything is computed by the reference in code/reference.py played
through code/driver.py, so the statement's numbers and the code checks can never disagree.

No hardware or model figure is needed: the exercise is about the data structure, in tokens and
slots. A variant is a different set of prompt lengths, divergence points, token ids and k.
"""
from __future__ import annotations

import random
from pathlib import Path
from types import ModuleType
from typing import Any

from exercises.feasibility import Claim
from exercises.file_module import load_file
from exercises.registry import expose_shared_modules
from exercises.slips import Slips, negative, tolerances
from exercises.spec import Mistake, Quantity

HERE = Path(__file__).resolve().parent

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# A large pool: the script never has to evict on demand, only when part 4 asks.
POOL = 64

# The canonical script (facts note Q39's proposed trace, made concrete): a 4-token system
# prompt, A's 4-token question, B's 6-token question, D sharing 2 tokens of A's question then
# 3 new ones, C sharing 3 tokens of B's question then 2 new ones, and evict(6) while C runs.
CANONICAL: dict[str, Any] = {
    "sys": [11, 12, 13, 14],
    "qa": [21, 22, 23, 24],
    "qb": [31, 32, 33, 34, 35, 36],
    "d_share": 2,
    "d_new": [41, 42, 43],
    "c_share": 3,
    "c_new": [51, 52],
    "k": 6,
}


def _reference() -> ModuleType:
    return load_file("roofline_radix_prefix_trie_reference", HERE / "code" / "reference.py")


def _driver() -> ModuleType:
    expose_shared_modules(("driver_errors",))  # the driver imports it by its plain name
    return load_file("roofline_radix_prefix_trie_driver", HERE / "code" / "driver.py")


def prompts(p: dict[str, Any]) -> dict[str, list[int]]:
    sys_, qa, qb = list(p["sys"]), list(p["qa"]), list(p["qb"])
    return {
        "A": sys_ + qa,
        "B": sys_ + qb,
        "D": sys_ + qa[: p["d_share"]] + list(p["d_new"]),
        "C": sys_ + qb[: p["c_share"]] + list(p["c_new"]),
    }


def script(p: dict[str, Any]) -> list[list[Any]]:
    """The operations, in the driver's format."""
    pr = prompts(p)
    return [["start", "A", pr["A"]], ["finish", "A"], ["start", "B", pr["B"]], ["finish", "B"],
            ["start", "D", pr["D"]], ["finish", "D"], ["start", "C", pr["C"]],
            ["evict", p["k"]]]


def _with_ops(p: dict[str, Any]) -> dict[str, Any]:
    """Params as generate() returns them: the script and the pool travel with the variant, so
    the code part's public example is this very script."""
    return {**p, "ops": script(p), "pool": POOL}


CANONICAL = _with_ops(CANONICAL)


def _cache_at_c(p: dict[str, Any]) -> Any:
    """The reference cache as the script leaves it when C starts: A, B and D have run and
    finished, and C's matched prefix is locked."""
    ref = _reference()
    cache = ref.RadixCache(1)
    slots = iter(range(10_000))
    pr = prompts(p)
    for name in "ABD":
        m, node = cache.match_prefix(pr[name])
        cache.inc_lock_ref(node)
        own = [next(slots) for _ in range(len(pr[name]) - len(m))]
        cache.insert(pr[name], m + own)
        cache.dec_lock_ref(node)
    _, node = cache.match_prefix(pr["C"])
    cache.inc_lock_ref(node)
    return cache


def _unlocked_leaves(cache: Any) -> list[Any]:
    """The leaves evict() may take (no children, not locked), in a fixed depth-first order."""
    found = []
    stack = [cache.root]
    while stack:
        x = stack.pop()
        stack.extend(x.children.values())
        if x is not cache.root and not x.children and x.lock_ref == 0:
            found.append(x)
    return found


def _eviction_order(p: dict[str, Any]) -> list[tuple[tuple[int, ...], int]]:
    """Replay the script up to C's start on the reference and list the leaves evict() would
    take, in order, with each one's length (without stopping at k)."""
    cache = _cache_at_c(p)
    order: list[tuple[tuple[int, ...], int]] = []
    cache.evict(10_000, lambda s: order.append((tuple(s), len(s))))
    return order


def _leaves_now(p: dict[str, Any]) -> list[tuple[int, int, tuple[int, ...]]]:
    """(last_access, length, key) of each unlocked leaf right before evict, oldest first."""
    cache = _cache_at_c(p)
    return sorted((x.last_access, len(x.key), tuple(x.key)) for x in _unlocked_leaves(cache))


# The clock value each call of the script stamps (rule 4): one per match_prefix / insert.
CALLS = ("A's match", "A's insert", "B's match", "B's insert", "D's match", "D's insert",
         "C's match")


def _narrate_evict(p: dict[str, Any]) -> tuple[str, int]:
    """The eviction of step 5 told leaf by leaf (a Markdown list), and the tokens it freed.

    Replays the script on the reference and walks the same loop as its evict(), so the story
    can say when a parent joins the candidates; solve() checks the total against the trace.
    """
    cache = _cache_at_c(p)
    k = int(p["k"])
    cands = _unlocked_leaves(cache)
    lines, freed, n = [], 0, 0
    while freed < k and cands:
        leaf = min(cands, key=lambda x: x.last_access)
        cands.remove(leaf)
        freed += len(leaf.key)
        n += 1
        verdict = f"{freed} ≥ {k}: stop" if freed >= k else f"{freed} < {k}: go on"
        line = (f"{n}. `{toks(list(leaf.key))}`, last touched at call {leaf.last_access}: "
                f"frees {len(leaf.key)} ({verdict}).")
        parent = leaf.parent
        del parent.children[leaf.key[0]]
        if parent is not cache.root and not parent.children:
            if parent.lock_ref == 0:
                cands.append(parent)
                line += (f" Its parent `{toks(list(parent.key))}` is now childless and "
                         f"unlocked, so it joins the candidates (last touched at call "
                         f"{parent.last_access}).")
            else:
                line += (f" Its parent `{toks(list(parent.key))}` is now childless but C "
                         "pins it, so it stays.")
        lines.append(line)
    return "\n".join(lines), freed


def _freed_for(lengths: list[int], k: int) -> int:
    freed = 0
    for n in lengths:
        if freed >= k:
            break
        freed += n
    return freed


def generate(rng: random.Random) -> dict[str, Any]:
    while True:
        s, a, b = rng.randint(3, 6), rng.randint(3, 6), rng.randint(3, 7)
        d_share = rng.randint(0, a - 1)
        c_share = rng.randint(1, b - 1)
        n_d, n_c = rng.randint(1, 4), rng.randint(1, 3)
        # Distinct ids: every divergence point is a real divergence.
        ids = rng.sample(range(1, 100), s + a + b + n_d + n_c)
        p: dict[str, Any] = {
            "sys": ids[:s],
            "qa": ids[s:s + a],
            "qb": ids[s + a:s + a + b],
            "d_share": d_share,
            "d_new": ids[s + a + b:s + a + b + n_d],
            "c_share": c_share,
            "c_new": ids[s + a + b + n_d:],
            "k": 1,
        }
        lengths = [n for _, n in _eviction_order(p)]
        # k lands strictly inside the 2nd or 3rd leaf, so whole-leaf eviction overshoots it.
        choices = [k for i in (1, 2) if i < len(lengths)
                   for k in range(sum(lengths[:i]) + 1, sum(lengths[:i + 1]))]
        if not choices:
            continue
        p["k"] = rng.choice(choices)
        p = _with_ops(p)
        if is_sensible(p):
            return p


def is_sensible(p: dict[str, Any]) -> bool:
    s = solve(p)
    # Whole leaves overshoot k, and C's match stops inside B's question (a split).
    return (s["freed"].value > p["k"] and 0 < p["c_share"] < len(p["qb"])
            and s["pool_used"] <= POOL)


# ------------------------------------------------------------------ display helpers


def toks(tokens: list[int]) -> str:
    return "[" + ", ".join(map(str, tokens)) + "]"


def tree_text(nodes: list[list[Any]]) -> str:
    """A tree snapshot from the driver as indented lines (inside a code block)."""
    depth = [0] * len(nodes)
    lines = []
    for i, (parent, key, value, lock) in enumerate(nodes):
        if parent < 0:
            lines.append("root")
            continue
        depth[i] = depth[parent] + 1
        lock_txt = f"   lock_ref {lock}" if lock else ""
        lines.append("  " * depth[i] + f"{toks(key)}  slots {toks(value)}{lock_txt}")
    return "\n".join(lines)


def _op_label(op: list[Any]) -> str:
    if op[0] == "start":
        return f"start {op[1]}"
    if op[0] == "finish":
        return f"finish {op[1]}"
    return f"evict({op[1]})"


def solve(p: dict[str, Any]) -> dict[str, Any]:
    ops = script(p)
    trace = _driver().run_case(_reference(), {"page_size": 1, "pool": POOL, "mode": "trace",
                                               "ops": ops})
    steps = trace["steps"]
    pr = prompts(p)
    c_step, e_step = steps[6], steps[7]
    matched = len(c_step["m"])
    tree_c = c_step["tree"]
    nodes = len(tree_c) - 1
    evictable, protected, total = c_step["sizes"]
    calls = e_step.get("calls", [])
    freed = int(e_step["ret"])
    order = _eviction_order(p)
    lengths = [n for _, n in order]
    leaves = _leaves_now(p)
    story, story_freed = _narrate_evict(p)
    assert story_freed == freed, (story_freed, freed)
    owner = {sl: n for n in tree_c for sl in n[2]}
    # Keys of the evicted leaves, in order, as the solution names them.
    evicted_keys = [toks(owner[c[0]][1]) for c in calls]
    all_keys = [toks(owner[sl[0]][1]) for sl, _ in order]

    rows = ["| # | operation | match returns | insert returns | nodes after | evictable / "
            "protected / total |", "|---|---|---|---|---|---|"]
    for i, (op, st) in enumerate(zip(ops, steps, strict=True)):
        m = f"{len(st['m'])} tokens" if "m" in st else ""
        n = str(st["n"]) if "n" in st else ""
        if op[0] == "evict":
            m = f"frees {st['ret']} tokens"
        e, pr_, t = st["sizes"]
        rows.append(f"| {i + 1} | {_op_label(op)} | {m} | {n} | {len(st['tree']) - 1} | "
                    f"{e} / {pr_} / {t} |")

    script_rows = ["| step | request | prompt tokens | length |", "|---|---|---|---|"]
    for name in "ABDC":
        script_rows.append(f"| {'ABDC'.index(name) + 1} | {name} | `{toks(pr[name])}` | "
                           f"{len(pr[name])} |")

    qb_len = len(p["qb"])
    s_len = len(p["sys"])
    return {
        # Part answers.
        "matched": Quantity(matched, ""),
        "nodes": Quantity(nodes, ""),
        "evictable": Quantity(evictable, ""),
        "freed": Quantity(freed, ""),
        "eviction_loop": "leaf_heap",
        "trie": "code/reference.py",
        "why": MODEL_ANSWER,
        # Given in the statement.
        "script_table": "\n".join(script_rows),
        "prompt_c": toks(pr["C"]),
        "sys_len": s_len,
        "qa_len": len(p["qa"]),
        "qb_len": qb_len,
        "len_c": len(pr["C"]),
        # Worked solution.
        "trace_table": "\n".join(rows),
        "tree_before_c": tree_text(steps[5]["tree"]),
        "tree_after_c": tree_text(tree_c),
        "tree_after_evict": tree_text(e_step["tree"]),
        "protected": protected,
        "total": total,
        "leaves_total": sum(n for _, n, _ in leaves),
        "leaf_stamps": "; ".join(f"`{toks(list(key))}` (last touched by {CALLS[t - 1]}, call {t})"
                                 for t, _, key in leaves),
        "evicted_keys": ", then ".join(evicted_keys),
        "evict_order_all": ", ".join(all_keys),
        "n_evicted": len(calls),
        "evict_story": story,
        "first_leaf": evicted_keys[0] if evicted_keys else "",
        "first_len": lengths[0] if lengths else 0,
        "c_share": p["c_share"],
        "d_share": p["d_share"],
        "pool_used": max(POOL - st_["free"] for st_ in steps),
        "split_by_d": p["d_share"] > 0,
        "d_note": (f"D diverges {p['d_share']} tokens into A's question, so its match splits "
                   "that edge too, and its insert hangs D's new tokens under the upper half."
                   if p["d_share"] > 0 else
                   "D diverges right at the end of the system prompt, so its match ends on an "
                   "existing node (no split) and its insert hangs D's tokens under the system "
                   "prompt's node."),
    }


# One sentence per line: the key-point matcher cuts answers at line breaks.
MODEL_ANSWER = """\
**Why only leaves.** A radix cache can only ever hit from the root forward: a prefix is reusable only if every node above it is still there.
Evicting an internal node would leave its descendants resident but unreachable (their KV can never be matched again, and unless you walk and free them you leak their slots), so eviction removes leaves, and a parent becomes a candidate only once its last child is gone and no running request pins it.
That is also why a lock walks from the node up to the root: a running request depends on the whole path, every node from the root down to where its match ended, and a split copies the lock count to the new upper node for the same reason.
Eviction pops the least recently used leaf, frees all of its slots, and repeats until it has freed at least k tokens, so it may overshoot; it never frees a locked node, and each slot is freed exactly once because free_fn only gets slots the tree owns.

**Radix tree vs vLLM's hash chain.** The radix tree shares at token granularity (any common prefix, split exactly where two prompts diverge) and finds the longest prefix in one walk whose cost is linear in the prompt; the price is pointer-chasing, splits and a tree to keep consistent. vLLM hashes each full block together with its parent's hash, so lookup is one dictionary probe per block and eviction is a free-block queue with no structure to maintain, but sharing is block-granular (a partial last block never hits) and correctness rests on the hash.
Tail-first freeing there plays the role that leaf-only eviction plays here.
"""


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, skip=negative, as_float=True).add

    s_len, qb_len, c_share = len(p["sys"]), len(p["qb"]), p["c_share"]
    add("matched", s_len,
        "That stops at the end of the system prompt's node. A match can end inside an edge: C "
        f"also shares the first {c_share} tokens of B's question, and the cache splits that "
        "edge to return exactly those.", "node_boundary", kind="misread_mechanism")
    add("matched", s_len + qb_len,
        "That counts the whole of B's question edge, but C only shares its first "
        f"{c_share} tokens; the rest of the edge differs from C's prompt.", "whole_edge",
        kind="rounding")
    add("matched", s["len_c"],
        "That is C's whole prompt. Only the cached prefix comes back from match_prefix; C's "
        "new tokens still have to be computed.", "whole_prompt", kind="wrong_scope")

    nodes = int(s["nodes"].value)
    add("nodes", nodes - 1,
        "That is the tree if only insert splits edges. match_prefix splits too: C's match ends "
        "inside B's question, so that edge becomes two nodes even though C has inserted "
        "nothing yet.", "no_match_split", kind="misread_mechanism")
    add("nodes", nodes + 1, "That counts the root, which holds no tokens.", "root_counted",
        kind="miscounted_term")
    add("nodes", s["total"],
        "That is one node per token (a plain trie). A radix tree keeps a run of tokens on one "
        "edge and only splits where prompts diverge.", "per_token", kind="misread_mechanism")

    ev, total, prot = int(s["evictable"].value), int(s["total"]), int(s["protected"])
    add("evictable", total,
        f"That is every token in the tree. C pins its matched path ({prot} tokens from the root "
        "down to the node where its match ends), and pinned tokens are protected, not "
        "evictable.", "counted_pinned", kind="miscounted_term")
    add("evictable", total - s_len - qb_len,
        "That pins the whole of B's question edge. C's match ends inside it, so the edge is "
        f"split and only the first {c_share} tokens are pinned; the rest is an unlocked leaf.",
        "pinned_whole_edge", kind="rounding")
    add("evictable", prot, "That is the protected size (the pinned path), not the evictable one.",
        "swapped", kind="inverted")
    add("evictable", s["leaves_total"],
        "That counts only the current leaves. Every unlocked node counts as evictable, "
        "including an internal one whose children are unlocked: it becomes a leaf, and goes, "
        "once they do.", "leaves_only", kind="misread_mechanism")

    k = int(p["k"])
    lengths = [n for _, n in _eviction_order(p)]
    leaves = [n for _, n, _ in _leaves_now(p)]
    add("freed", k,
        f"That frees exactly k = {k}. evict frees whole leaves, so it stops at the first leaf "
        "boundary at or past k and can return more.", "exact_k", kind="rounding")
    add("freed", lengths[0],
        "That stops after the first leaf. evict keeps going until at least k tokens are freed.",
        "one_leaf", kind="misread_mechanism")
    add("freed", ev,
        "That frees everything evictable. evict stops as soon as it has freed at least k "
        "tokens.", "all_evictable", kind="misread_mechanism")
    add("freed", _freed_for(leaves, k),
        "That only takes leaves that existed when evict was called. When a leaf goes and its "
        "parent is left childless and unlocked, the parent joins the candidates, and here it "
        "is older than the remaining leaves.", "no_parent_queue", kind="misread_mechanism")

    out += [
        Mistake("eviction_loop", "lru_any_node",
                "Evicting an internal node strands its descendants: they stay resident but can "
                "never be matched (a prefix hits only from the root), and their slots leak "
                "unless you free them too.", "internal_node", kind="misread_mechanism"),
        Mistake("eviction_loop", "push_parent_unlocked",
                "The parent may still have other children. Queue it only when its last child is "
                "gone, or it is freed as an internal node and its remaining children are "
                "stranded.", "parent_with_children", kind="misread_mechanism"),
        Mistake("eviction_loop", "push_parent_childless",
                "A childless parent can still be pinned by a running request whose match ended "
                "there. Evicting it frees KV that request is about to read.", "locked_parent",
                kind="misread_mechanism"),
    ]
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    # No model, GPU or context in this story: is_sensible() already keeps the trace coherent.
    return []
