"""Test cases and checks for the prefix-boundary exercise (runs in the worker, never in the
sandbox).

A case is one call: {"fn": name, ...arguments}. Each result handed to `check()` is
{"output": {"value": ...} | {"error": ...}} or {"error": "..."}; `expected` holds the reference's
results for the same cases. Every check reports the smallest case it fails on, with the
arguments, what was expected, what came back and, where it helps, the rule that broke.
"""
from __future__ import annotations

import json
from functools import lru_cache
from types import ModuleType
from typing import Any

from hypothesis import strategies as st

from graders import checkkit
from graders.base import Check

Case = dict[str, Any]
HITS = "vllm:prefix_cache_hits_total"
QUERIES = "vllm:prefix_cache_queries_total"
# Counter values are drawn as small integers and scaled after drawing.
SCALE = 1000
N_RANDOM = {"common_prefix_len": 20, "reusable_tokens": 30, "predict_window": 70,
            "predict_capacity": 40, "counter_delta": 15, "observed_hit_rate": 20, "diagnose": 20}
NAMES = ("eviction", "none_changed", "routing", "template_break")


def _reference() -> ModuleType:
    """reference.py next to this file, for the per-request breakdown in failure messages."""
    return checkkit.sibling(__file__, "reference")


# ---------------------------------------------------------------- case builders


def lcp_case(cid: str, a: list[int], b: list[int]) -> Case:
    return {"id": cid, "input": {"fn": "common_prefix_len", "a": list(a), "b": list(b)}}


def reuse_case(cid: str, cached: list[int], new: list[int], block: int) -> Case:
    return {"id": cid, "input": {"fn": "reusable_tokens", "cached": list(cached),
                                 "new": list(new), "block_size": block}}


def window_case(cid: str, trace: list[list[int]], block: int, replicas: int = 1,
                assign: list[int] | None = None, capacity: int | None = None) -> Case:
    return {"id": cid, "input": {"fn": "predict_window", "trace": [list(t) for t in trace],
                                 "block_size": block, "replicas": replicas,
                                 "assign": None if assign is None else list(assign),
                                 "capacity_blocks": capacity}}


def delta_case(cid: str, before: float, after: float, name: str = HITS) -> Case:
    return {"id": cid, "input": {"fn": "counter_delta", "before": {name: before},
                                 "after": {name: after}, "name": name}}


def observed_case(cid: str, before: list[tuple[float, float]],
                  after: list[tuple[float, float]]) -> Case:
    """Per replica (hits, queries) before and after."""
    return {"id": cid, "input": {
        "fn": "observed_hit_rate",
        "before": [{HITS: h, QUERIES: q} for h, q in before],
        "after": [{HITS: h, QUERIES: q} for h, q in after]}}


def diagnose_case(cid: str, observed: float, predictions: dict[str, float],
                  tol: float = 0.05) -> Case:
    return {"id": cid, "input": {"fn": "diagnose", "observed": observed,
                                 "predictions": dict(predictions), "tol": tol}}


# ---------------------------------------------------------------- public and edge cases


def public_cases(params: dict[str, Any]) -> list[Case]:
    """The examples a student can Run: the statement's two prompts, a small replay of the
    template break, the statement's counters, a prompt that fills its blocks exactly, and a
    small replay with a capacity."""
    a = params.get("prompt_a") or [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    b = params.get("prompt_b") or [1, 2, 3, 4, 5, 60, 7, 8, 9, 10]
    block = int(params.get("block", 4))
    cases = [lcp_case("example-1-statement-prompts", a, b),
             reuse_case("example-2-statement-prompts", a, b, block)]
    sys_prompt = list(range(1, 13))
    healthy = [sys_prompt + [50 + i, 60 + i, 70 + i] for i in range(4)]
    broken = [sys_prompt[:5] + [90 + i] + sys_prompt[5:] + [50 + i, 60 + i] for i in range(4)]
    cases.append(window_case("example-3-healthy-replay", healthy, 4))
    cases.append(window_case("example-4-template-break-replay", broken, 4))
    before = params.get("before") or [{HITS: 10.0, QUERIES: 100.0}]
    after = params.get("after") or [{HITS: 30.0, QUERIES: 200.0}]
    cases.append({"id": "example-5-statement-counters",
                  "input": {"fn": "observed_hit_rate", "before": before, "after": after}})
    # A prompt that fills its blocks exactly, sent twice and then extended: the repeat may not
    # reuse the block holding its last token, and the extension finds both blocks cached.
    cases.append(window_case("example-6-full-block-prompt-repeated-then-extended",
                             [sys_prompt[:8], sys_prompt[:8], sys_prompt], 4))
    # Capacity 3 blocks of 2: the third request refreshes the first prompt's chain, so the fourth
    # evicts the other prompt's block (least recently used), then the chain's tail, never its head.
    cases.append(window_case("example-7-capacity-lru-evicts-the-tail",
                             [[1, 2, 3, 4, 5], [6, 7, 8], [1, 2, 3, 4, 5], [9, 10, 11, 12, 13],
                              [1, 2, 3, 4, 5]], 2, capacity=3))
    return cases


def _edge_cases() -> list[Case]:
    sp = list(range(1, 9))  # an 8-token "system prompt"
    return [
        lcp_case("edge-lcp-empty", [], [1, 2]),
        lcp_case("edge-lcp-identical", [4, 5, 6], [4, 5, 6]),
        lcp_case("edge-lcp-one-is-prefix", [4, 5], [4, 5, 6, 7]),
        # The junction trap in miniature: written out as text both read "123", but the token
        # boundaries differ, so not even the first token matches.
        lcp_case("edge-lcp-same-text-other-tokens", [1, 23, 4], [12, 3, 4]),
        lcp_case("edge-lcp-merged-junction", [7, 8, 9, 12], [7, 8, 9, 1, 2, 5]),
        reuse_case("edge-reuse-identical-prompts", [1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7, 8], 4),
        reuse_case("edge-reuse-identical-one-block", [1, 2, 3, 4], [1, 2, 3, 4], 4),
        reuse_case("edge-reuse-not-aligned", [1, 2, 3, 4, 5, 6, 9], [1, 2, 3, 4, 5, 6, 7, 8], 4),
        reuse_case("edge-reuse-empty-prompt", [1, 2], [], 2),
        reuse_case("edge-reuse-block-size-one", [1, 2, 3], [1, 2, 3], 1),
        reuse_case("edge-reuse-cached-longer", [1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 5], 2),
        reuse_case("edge-reuse-same-text-other-tokens", [1, 23, 4, 5], [12, 3, 4, 5], 1),
        window_case("edge-window-empty-trace", [], 4),
        window_case("edge-window-one-prompt", [sp], 4),
        window_case("edge-window-identical-prompts", [sp, sp, sp], 4),
        window_case("edge-window-extends-a-full-block-prompt", [sp, sp + [9, 10, 11, 12, 13]], 4),
        window_case("edge-window-shared-prefix-round-robin",
                    [sp + [20 + i, 30 + i] for i in range(6)], 4, replicas=3),
        window_case("edge-window-route-sticky", [sp + [20], sp + [20, 21, 22, 23, 24],
                                                 sp + [30], sp + [30, 31, 32, 33, 34]],
                    2, replicas=2, assign=[0, 0, 1, 1]),
        window_case("edge-window-route-split", [sp + [20], sp + [20, 21, 22, 23, 24],
                                                sp + [30], sp + [30, 31, 32, 33, 34]],
                    2, replicas=2, assign=[0, 1, 1, 0]),
        window_case("edge-window-unused-replica", [sp, sp], 4, replicas=4, assign=[2, 2]),
        window_case("edge-window-prefix-not-at-start", [[9] + sp, sp, [9] + sp], 4),
        window_case("edge-window-short-prompts", [[1], [1], [1, 2], [1, 2]], 1),
        # Capacity: LRU keeps the recently used prefix; FIFO would keep the older one.
        window_case("edge-capacity-lru-not-fifo",
                    [[1, 2, 3, 4, 9], [5, 6, 7, 8, 9], [1, 2, 3, 4, 8], [10, 11, 12, 13, 9],
                     [1, 2, 3, 4, 7], [5, 6, 7, 8, 7]], 4, capacity=2),
        # Ties inside one request's chain: evict the tail, or the head is gone and the tail
        # can never be reached again.
        window_case("edge-capacity-tail-first",
                    [[1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [1, 2, 3, 4, 5]], 2,
                    capacity=4),
        window_case("edge-capacity-smaller-than-prompt",
                    [[1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 5, 6, 7, 8, 9]], 2, capacity=2),
        window_case("edge-capacity-one", [[1, 2, 3], [1, 2, 3], [4, 5, 6], [1, 2, 3]], 1,
                    capacity=1),
        window_case("edge-capacity-per-replica", [sp, sp, sp, sp], 4, replicas=2, capacity=2),
        delta_case("edge-delta-normal", 1000.0, 4000.0),
        delta_case("edge-delta-unchanged", 5000.0, 5000.0),
        delta_case("edge-delta-reset", 9_000_000.0, 40_000.0),
        delta_case("edge-delta-reset-to-zero", 9_000_000.0, 0.0, QUERIES),
        observed_case("edge-observed-one-replica", [(0.0, 0.0)], [(800.0, 1000.0)]),
        # Replicas with very different traffic: the mean of their rates is not the fleet's rate.
        observed_case("edge-observed-uneven-traffic", [(0.0, 0.0), (0.0, 0.0)],
                      [(9000.0, 10_000.0), (0.0, 100.0)]),
        observed_case("edge-observed-one-replica-restarted",
                      [(1_000_000.0, 2_000_000.0), (50_000.0, 100_000.0)],
                      [(1_010_000.0, 2_100_000.0), (4_000.0, 10_000.0)]),
        observed_case("edge-observed-no-queries", [(5.0, 10.0), (1.0, 2.0)],
                      [(5.0, 10.0), (1.0, 2.0)]),
        diagnose_case("edge-diagnose-closest-not-first",
                      0.40, {"template_break": 0.375, "routing": 0.40625}, 0.0625),
        diagnose_case("edge-diagnose-nothing-close", 0.5, {"routing": 0.25, "eviction": 0.75},
                      0.125),
        diagnose_case("edge-diagnose-exactly-tol", 0.5, {"routing": 0.25}, 0.25),
        diagnose_case("edge-diagnose-tie-sorts-first", 0.5,
                      {"template_break": 0.625, "eviction": 0.375}, 0.125),
        diagnose_case("edge-diagnose-no-hypotheses", 0.5, {}, 0.05),
    ]


EDGE_CASES: tuple[Case, ...] = tuple(_edge_cases())


# ---------------------------------------------------------------- random cases


TOKENS = tuple(range(10))  # token ids of the drawn prompts


@st.composite
def _pair(draw: st.DrawFn) -> tuple[list[int], list[int], int]:
    prefix = draw(checkkit.picks(TOKENS, max_size=12))
    a = prefix + draw(checkkit.picks(TOKENS, max_size=6))
    b = prefix + draw(checkkit.picks(TOKENS, max_size=6))
    return a, b, draw(checkkit.integers(1, 5))


@st.composite
def _trace(draw: st.DrawFn, capacity: bool) -> tuple[list[list[int]], int, int, Any, Any]:
    block = draw(checkkit.integers(1, 5))
    templates = draw(checkkit.lists(checkkit.picks(TOKENS, max_size=14), min_size=1, max_size=3))
    trace: list[list[int]] = []
    for _ in range(draw(checkkit.integers(1, 9))):
        kind = draw(checkkit.sampled_from(("new", "new", "repeat", "extend")))
        if kind == "repeat" and trace:
            trace.append(list(draw(checkkit.sampled_from(trace))))
        elif kind == "extend" and trace:
            trace.append(list(draw(checkkit.sampled_from(trace)))
                         + draw(checkkit.picks(TOKENS, max_size=6)))
        else:
            trace.append(list(draw(checkkit.sampled_from(templates)))
                         + draw(checkkit.picks(TOKENS, max_size=8)))
    replicas = draw(checkkit.integers(1, 3))
    assign = None
    if replicas > 1 and draw(checkkit.booleans()):
        assign = [draw(checkkit.integers(0, replicas - 1)) for _ in trace]
    cap = draw(checkkit.integers(1, 12)) if capacity else None
    return trace, block, replicas, assign, cap


@st.composite
def _deltas(draw: st.DrawFn) -> tuple[float, float]:
    before = draw(checkkit.integers(0, 99)) * SCALE
    after = draw(checkkit.integers(0, 99)) * SCALE
    return float(before), float(after)


@st.composite
def _observed(draw: st.DrawFn) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    before, after = [], []
    for _ in range(draw(checkkit.integers(1, 4))):
        q0 = draw(checkkit.integers(0, 99)) * SCALE
        h0 = q0 * draw(checkkit.integers(0, 9)) // 10
        if draw(checkkit.integers(0, 4)) == 0:  # this replica restarted in the window
            q1 = draw(checkkit.integers(0, 9)) * SCALE // 10
            h1 = q1 * draw(checkkit.integers(0, 9)) // 10
            if q1 >= q0:
                q0 = q1 + SCALE
        else:
            dq = draw(checkkit.integers(0, 99)) * SCALE
            q1 = q0 + dq
            h1 = h0 + dq * draw(checkkit.integers(0, 9)) // 10
        before.append((float(h0), float(q0)))
        after.append((float(h1), float(q1)))
    return before, after


@st.composite
def _diagnosis(draw: st.DrawFn) -> tuple[float, dict[str, float], float]:
    # Multiples of 1/64 and tolerances of 2, 4 or 8 sixty-fourths: exact in binary, so no
    # comparison at the edge of tol depends on rounding.
    observed = draw(checkkit.integers(0, 64)) / 64
    names = draw(checkkit.lists(checkkit.sampled_from(NAMES), unique=True, max_size=4))
    predictions = {n: draw(checkkit.integers(0, 64)) / 64 for n in names}
    return observed, predictions, draw(checkkit.sampled_from((2, 4, 8))) / 64


@lru_cache(maxsize=16)
def _random_inputs(seed: int) -> tuple[str, ...]:
    out: list[Case] = []
    for a, b, block in checkkit.draw(_pair(), seed, N_RANDOM["reusable_tokens"]):
        out.append(reuse_case("", a, b, block))
    for a, b, _ in checkkit.draw(_pair(), seed + 1, N_RANDOM["common_prefix_len"]):
        out.append(lcp_case("", a, b))
    for trace, block, replicas, assign, _ in checkkit.draw(_trace(False), seed + 2,
                                                           N_RANDOM["predict_window"]):
        out.append(window_case("", trace, block, replicas, assign))
    for trace, block, replicas, assign, cap in checkkit.draw(_trace(True), seed + 3,
                                                             N_RANDOM["predict_capacity"]):
        out.append(window_case("", trace, block, replicas, assign, cap))
    for before, after in checkkit.draw(_deltas(), seed + 4, N_RANDOM["counter_delta"]):
        out.append(delta_case("", before, after))
    for before, after in checkkit.draw(_observed(), seed + 5, N_RANDOM["observed_hit_rate"]):
        out.append(observed_case("", before, after))
    for observed, predictions, tol in checkkit.draw(_diagnosis(), seed + 6, N_RANDOM["diagnose"]):
        out.append(diagnose_case("", observed, predictions, tol))
    return tuple(json.dumps(c["input"], sort_keys=True) for c in out)


def size_key(case: Case) -> tuple[int, str]:
    """Smaller cases first: by the length of the arguments written out."""
    text = json.dumps(case["input"], sort_keys=True)
    return (len(text), text)


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """Edge cases plus Hypothesis-generated ones, deterministic for a seed, smallest first."""
    cases = [json.loads(json.dumps(c)) for c in EDGE_CASES]
    return checkkit.with_draws(cases, _random_inputs(int(seed)), size_key)


# ---------------------------------------------------------------- describing cases


def describe(case: Case) -> str:
    inp = case["input"]
    fn = inp["fn"]
    if fn == "common_prefix_len":
        text = f"common_prefix_len({inp['a']}, {inp['b']})"
    elif fn == "reusable_tokens":
        text = f"reusable_tokens(cached={inp['cached']}, new={inp['new']}, block_size={inp['block_size']})"
    elif fn == "predict_window":
        route = "None" if inp["assign"] is None else f"request i -> replica {inp['assign']}[i]"
        text = (f"predict_window(trace={inp['trace']}, block_size={inp['block_size']}, "
                f"replicas={inp['replicas']}, route={route}, "
                f"capacity_blocks={inp['capacity_blocks']})")
    elif fn == "counter_delta":
        text = (f"counter_delta(before={inp['before']}, after={inp['after']}, "
                f"name={inp['name']!r})")
    elif fn == "observed_hit_rate":
        text = f"observed_hit_rate(before={inp['before']}, after={inp['after']})"
    else:
        text = f"diagnose({inp['observed']}, {inp['predictions']}, tol={inp['tol']})"
    return text if len(text) <= 700 else text[:697] + "..."


# ---------------------------------------------------------------- checks


CHECKS: tuple[tuple[str, float, str], ...] = (
    ("no crash", 1.0, "Every function ran on every case without an exception."),
    ("common_prefix_len compares token ids", 1.0, "common_prefix_len matched on every case."),
    ("reusable_tokens: whole blocks, last token recomputed", 1.0,
     "reusable_tokens matched on every case."),
    ("predict_window: queries and hits", 3.0,
     "predict_window matched on every trace without a capacity."),
    ("predict_window with a capacity (LRU, tail first)", 1.0,
     "predict_window matched on every trace with capacity_blocks."),
    ("counter_delta across a restart", 1.0, "counter_delta matched on every case."),
    ("observed_hit_rate sums before dividing", 1.0, "observed_hit_rate matched on every case."),
    ("diagnose picks the closest hypothesis within tol", 1.0, "diagnose matched on every case."),
)


def check_name(inp: dict[str, Any]) -> str:
    fn = inp["fn"]
    if fn == "predict_window":
        return CHECKS[4][0] if inp["capacity_blocks"] is not None else CHECKS[3][0]
    return {"common_prefix_len": CHECKS[1][0], "reusable_tokens": CHECKS[2][0],
            "counter_delta": CHECKS[5][0], "observed_hit_rate": CHECKS[6][0],
            "diagnose": CHECKS[7][0]}[fn]


def _same(got: Any, exp: Any) -> bool:
    if isinstance(exp, list):
        return isinstance(got, list) and len(got) == len(exp) and all(
            _same(g, e) for g, e in zip(got, exp, strict=True))
    if isinstance(exp, str) or isinstance(got, str):
        return got == exp
    if isinstance(got, bool) or not isinstance(got, int | float):
        return False
    return abs(got - exp) <= 1e-9 * max(1.0, abs(exp))


def _per_request_hits(inp: dict[str, Any]) -> list[int]:
    ref = _reference()
    assign = inp["assign"]
    out, prev = [], 0
    for n in range(1, len(inp["trace"]) + 1):
        _, hits = ref.predict_window(inp["trace"][:n], inp["block_size"], inp["replicas"],
                                     None if assign is None else (lambda i, p: assign[i]),
                                     inp["capacity_blocks"])
        out.append(hits - prev)
        prev = hits
    return out


def _hint(inp: dict[str, Any], got: Any, exp: Any) -> str:
    """The rule a wrong answer most likely broke, when the numbers show it."""
    fn = inp["fn"]
    if fn == "reusable_tokens":
        lcp = _reference().common_prefix_len(inp["cached"], inp["new"])
        b, n = inp["block_size"], len(inp["new"])
        if got == b * (min(lcp, n) // b) and lcp >= n:
            return (" (the last prompt token is always recomputed, so at most len(new) - 1 "
                    "tokens can come from the cache)")
        if got == lcp or got == min(lcp, max(n - 1, 0)):
            return (f" (the prompts share {lcp} tokens, but only whole blocks of {b} are reused: "
                    "round down to a multiple of the block size)")
    if fn == "common_prefix_len" and got != exp:
        return " (compare the token ids one by one; equal text can be tokenized differently)"
    if fn == "predict_window" and isinstance(got, list) and len(got) == 2:
        if got[0] != exp[0] and got[0] == len(inp["trace"]):
            return " (queries counts prompt tokens looked up, not requests)"
        if got[0] == exp[0]:
            return (f"; per request the reference finds {_per_request_hits(inp)} cached tokens "
                    "(whole blocks from the first token, stopping at the first miss, never the "
                    "last prompt token)")
    if fn == "counter_delta" and inp["after"][inp["name"]] < inp["before"][inp["name"]]:
        return (" (the counter went down: the process restarted, so the delta is what the new "
                "process counted, the value after)")
    if fn == "observed_hit_rate":
        return (" (take each replica's deltas, restarted ones included, sum hits and queries "
                "over the replicas, then divide once)")
    if fn == "diagnose":
        return (" (the closest prediction within tol wins; ties go to the name that sorts "
                "first; \"none\" when nothing is within tol)")
    return ""


def _well_formed(result: Any) -> bool:
    out = checkkit.envelope(result)
    if not isinstance(out, dict):
        return out is not None  # a run's error text is well formed; any other shape is not
    if "error" in out:
        return isinstance(out["error"], str)
    return "value" in out and isinstance(out["value"], int | float | str | list) \
        and not isinstance(out["value"], bool)


def check(cases: list[Case], got: list[dict[str, Any]], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    """Named checks over all cases; each failure names the smallest case it fails on."""
    v = checkkit.Verdicts(size_key)
    for case, g, e in zip(cases, got, expected, strict=True):
        inp = case["input"]
        name = check_name(inp)
        where = describe(case)
        if not _well_formed(g):
            g = {"error": "the output line for this case is malformed"}
        err = g.get("error") or g["output"].get("error")
        if err is not None:
            msg = f"{err.strip()} — on {where}"
            v.add("no crash", case, False, msg)
            v.add(name, case, False, msg)
            continue
        v.add("no crash", case, True)
        value, want = g["output"]["value"], e["output"]["value"]
        ok = _same(value, want)
        v.add(name, case, ok, "" if ok else (
            f"expected {json.dumps(want)}, got {json.dumps(value)}{_hint(inp, value, want)} "
            f"— on {where}"))
    return v.checks(CHECKS)
