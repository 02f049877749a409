"""Test cases and checks for the speculation policy (runs in the worker, never in the sandbox).

Two kinds of case (see driver.py): a single call of one of the four functions, and a policy
scenario (a SpecPolicy, then a list of observe / estimate / choose operations). Each result handed
to `check()` is {"output": <driver.run_case dict>} or {"error": "..."}; `expected` holds the
reference's results for the same cases. Every failing check names the smallest case it fails on.
"""
from __future__ import annotations

import json
import random
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from graders import checkkit
from graders.base import Check

REL_TOL = 1e-6
ABS_TOL = 1e-9
RANDOM_FN_CASES = 120
RANDOM_POLICY_CASES = 36

Case = dict[str, Any]

# The notes' worked table: T_mem 20 ms, knee 256 tokens, c = 0.05.
TABLE = {"c": 0.05, "t_mem_ms": 20.0, "n_knee": 256}


def fn_case(case_id: str, fn: str, *args: Any, **kwargs: Any) -> Case:
    return {"id": case_id, "input": {"kind": "fn", "fn": fn, "args": list(args),
                                     "kwargs": dict(kwargs)}}


def policy_case(case_id: str, init: dict[str, Any], ops: list[list[Any]]) -> Case:
    return {"id": case_id, "input": {"kind": "policy", "init": dict(init), "ops": ops}}


def cost_spec(t_mem_ms: float, n_knee: int, draft_ms: float) -> dict[str, Any]:
    return {"t_mem_ms": t_mem_ms, "n_knee": n_knee, "draft_ms": draft_ms}


def size_key(case: Case) -> tuple[int, int, str]:
    """Smaller cases first: function calls before policies, then by number of operations and
    the requests a choose() sees."""
    inp = case["input"]
    if inp["kind"] == "fn":
        return (0, 0, json.dumps(inp, sort_keys=True))
    weight = sum(len(op[1]) if op[0] == "choose" else 1 for op in inp["ops"])
    return (1, weight, json.dumps(inp, sort_keys=True))


def _stream(rng: random.Random, req: str, alpha: float, k: int, steps: int) -> list[list[Any]]:
    """observe ops for `steps` verify steps of a request whose drafts are accepted i.i.d. with
    probability alpha, stopping at the first rejection."""
    ops: list[list[Any]] = []
    for _ in range(steps):
        accepted = 0
        while accepted < k and rng.random() < alpha:
            accepted += 1
        ops.append(["observe", req, k, accepted])
    return ops


def public_cases(params: dict[str, Any]) -> list[Case]:
    """What a student can Run: the statement's numbers and a small policy scenario."""
    b, k = int(params.get("batch", 64)), int(params.get("k", 4))
    c, t, knee = (float(params.get("c", 0.05)), float(params.get("t_mem_ms", 20.0)),
                  int(params.get("n_knee", 256)))
    low = float(params.get("alpha_low", 0.3))
    cost = cost_spec(t, knee, round(c * t, 6))
    return [
        fn_case("example-expected-tokens", "expected_tokens", 0.8, 4),
        fn_case("example-speedup-low-alpha", "speedup", low, k, b, c, t, knee),
        fn_case("example-best-k", "best_k", 0.8, b, c, t, knee),
        policy_case("example-policy", {"k_max": 4, "ewma": 0.5, "prior_alpha": 0.6,
                                       "margin": 0.05},
                    [["observe", "a", 4, 4], ["observe", "b", 4, 0], ["estimate", "a"],
                     ["estimate", "b"], ["estimate", "new"], ["choose", ["a", "b", "new"], cost]]),
    ]


def _edge_cases() -> list[Case]:
    cases: list[Case] = []
    tab = TABLE
    # The table: speedups at k = 4 for three batches and three acceptance rates, best k at 0.8.
    for b in (1, 64, 128):
        for a in (0.3, 0.5, 0.8):
            cases.append(fn_case(f"edge-table-speedup-b{b}-a{a}", "speedup", a, 4, b, tab["c"],
                                 tab["t_mem_ms"], tab["n_knee"]))
        cases.append(fn_case(f"edge-table-best-k-b{b}", "best_k", 0.8, b, tab["c"],
                             tab["t_mem_ms"], tab["n_knee"]))
        cases.append(fn_case(f"edge-table-step-cost-b{b}", "step_cost", 4, b, tab["c"],
                             tab["t_mem_ms"], tab["n_knee"]))
    cases += [
        fn_case("edge-e-k0", "expected_tokens", 0.7, 0),
        fn_case("edge-e-alpha1", "expected_tokens", 1.0, 5),
        fn_case("edge-e-alpha1-k0", "expected_tokens", 1.0, 0),
        fn_case("edge-e-alpha0", "expected_tokens", 0.0, 6),
        fn_case("edge-e-alpha-0.999", "expected_tokens", 0.999, 8),
        fn_case("edge-speedup-k0", "speedup", 0.4, 0, 64, 0.05, 20.0, 256),
        fn_case("edge-step-cost-k0", "step_cost", 0, 300, 0.05, 20.0, 256),
        fn_case("edge-step-cost-above-knee", "step_cost", 2, 300, 0.05, 20.0, 256),
        fn_case("edge-best-k-margin-forces-zero", "best_k", 0.1, 64, 0.05, 20.0, 256, 8, 0.1),
        fn_case("edge-best-k-margin-keeps", "best_k", 0.8, 1, 0.05, 20.0, 256, 8, 0.5),
        fn_case("edge-best-k-all-tie", "best_k", 0.0, 4, 0.0, 20.0, 256),
        fn_case("edge-best-k-alpha1-free", "best_k", 1.0, 8, 0.0, 20.0, 256, 6),
        fn_case("edge-best-k-kmax0", "best_k", 0.9, 1, 0.05, 20.0, 256, 0),
        fn_case("edge-invalid-alpha-negative", "expected_tokens", -0.1, 3),
        fn_case("edge-invalid-alpha-above-1", "expected_tokens", 1.5, 3),
        fn_case("edge-invalid-k-negative", "expected_tokens", 0.5, -1),
        fn_case("edge-invalid-batch-0", "step_cost", 2, 0, 0.05, 20.0, 256),
        fn_case("edge-invalid-speedup-alpha", "speedup", 2.0, 2, 8, 0.05, 20.0, 256),
        fn_case("edge-invalid-best-k-alpha", "best_k", -0.5, 8, 0.05, 20.0, 256),
    ]
    base = {"k_max": 4, "ewma": 0.2, "prior_alpha": 0.6, "margin": 0.05}
    cost = cost_spec(20.0, 256, 1.0)
    cases += [
        policy_case("edge-policy-empty-batch", base, [["choose", [], cost]]),
        policy_case("edge-policy-cold-start", base,
                    [["estimate", "x"], ["choose", ["x", "y"], cost]]),
        policy_case("edge-policy-drafted-0", base,
                    [["observe", "x", 0, 0], ["estimate", "x"]]),
        policy_case("edge-policy-all-accepted", base,
                    [["observe", "x", 4, 4], ["estimate", "x"]]),
        policy_case("edge-policy-first-rejected", base,
                    [["observe", "x", 4, 0], ["estimate", "x"]]),
        policy_case("edge-policy-partial", base,
                    [["observe", "x", 4, 2], ["estimate", "x"], ["observe", "x", 3, 3],
                     ["estimate", "x"]]),
        policy_case("edge-policy-invalid-accepted", base,
                    [["observe", "x", 2, 1], ["observe", "x", 2, 3]]),
        policy_case("edge-policy-invalid-negative", base, [["observe", "x", 3, -1]]),
        # Goodput alone would give the rejecting request a draft (its 0.3 expected tokens are
        # cheap next to the step); its own speedup would then be below 1 + margin.
        policy_case("edge-policy-guard-drops-low-alpha", dict(base, ewma=0.5),
                    [["observe", "hi", 4, 4], ["observe", "lo", 4, 0], ["estimate", "lo"],
                     ["choose", ["hi", "lo"], cost_spec(20.0, 12, 2.0)]]),
        policy_case("edge-policy-zero-prior", dict(base, prior_alpha=0.0),
                    [["choose", ["x", "y"], cost], ["observe", "x", 4, 4],
                     ["choose", ["x", "y"], cost]]),
    ]
    # Who owns the p99: a batch of 64 where half the requests accept 80 % of drafts and half
    # almost none; the knee makes drafting for everyone expensive.
    rng = random.Random(38)
    ops: list[list[Any]] = []
    ids = [f"r{i:02d}" for i in range(64)]
    for i, r in enumerate(ids):
        ops += _stream(rng, r, 0.8 if i % 2 == 0 else 0.05, 4, 6)
    ops += [["estimate", ids[0]], ["estimate", ids[1]],
            ["choose", ids, cost_spec(20.0, 256, 1.0)]]
    cases.append(policy_case("edge-policy-mixed-batch-64",
                             {"k_max": 4, "ewma": 0.3, "prior_alpha": 0.6, "margin": 0.05}, ops))
    # Convergence: 500 steps at alpha 0.7 with k = 4; the estimate must track 0.7.
    ops = _stream(random.Random(7), "s", 0.7, 4, 500) + [["estimate", "s"]]
    cases.append(policy_case("edge-policy-converges",
                             {"k_max": 4, "ewma": 0.02, "prior_alpha": 0.2, "margin": 0.0}, ops))
    return cases


# ---------------------------------------------------------------- Hypothesis draws
# Values are built from small integers and fixed tuples (no float strategy).

ALPHAS = tuple(i / 20 for i in range(21))  # 0.0, 0.05, ..., 1.0
KNEES = (64, 128, 192, 256, 384, 512)
T_MEMS = (10.0, 15.0, 20.0, 25.0, 30.0)
BATCHES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 256)


@st.composite
def _fn_draw(draw: st.DrawFn) -> dict[str, Any]:
    fn = draw(checkkit.sampled_from(("expected_tokens", "step_cost", "speedup", "best_k")))
    alpha = (draw(checkkit.sampled_from(ALPHAS)) if draw(checkkit.booleans())
             else draw(checkkit.integers(0, 99)) / 99)
    k = draw(checkkit.integers(0, 10))
    batch = draw(checkkit.sampled_from(BATCHES))
    c = draw(checkkit.integers(0, 15)) / 100
    t, knee = draw(checkkit.sampled_from(T_MEMS)), draw(checkkit.sampled_from(KNEES))
    if fn == "expected_tokens":
        args: list[Any] = [alpha, k]
    elif fn == "step_cost":
        args = [k, batch, c, t, knee]
    elif fn == "speedup":
        args = [alpha, k, batch, c, t, knee]
    else:
        args = [alpha, batch, c, t, knee, draw(checkkit.integers(0, 10)),
                draw(checkkit.integers(0, 30)) / 100]
    return {"kind": "fn", "fn": fn, "args": args, "kwargs": {}}


@st.composite
def _policy_draw(draw: st.DrawFn) -> dict[str, Any]:
    k_max = draw(checkkit.integers(1, 6))
    init = {"k_max": k_max, "ewma": draw(checkkit.sampled_from((0.05, 0.1, 0.2, 0.3, 0.5))),
            "prior_alpha": draw(checkkit.sampled_from((0.3, 0.5, 0.6, 0.7))),
            "margin": draw(checkkit.sampled_from((0.0, 0.02, 0.05, 0.1)))}
    n_req = draw(checkkit.integers(1, 24))
    ids = [f"q{i}" for i in range(n_req)]
    true_alpha = [draw(checkkit.sampled_from(ALPHAS[:20])) for _ in ids]  # below 1: no exact-1 ties
    stream_seed = draw(checkkit.integers(0, 99))
    rng = random.Random(stream_seed)
    ops: list[list[Any]] = []
    for _ in range(draw(checkkit.integers(1, 3))):  # rounds of observe, estimate, choose
        for r, a in zip(ids, true_alpha, strict=True):
            if rng.random() < 0.8:  # some requests are new or skipped this round
                ops += _stream(rng, r, a, rng.randint(0, k_max), 1)
        ops.append(["estimate", ids[rng.randrange(n_req)]])
        batch = [r for r in ids if rng.random() < 0.85] or ids[:1]
        t = draw(checkkit.sampled_from(T_MEMS))
        knee = draw(checkkit.sampled_from((8, 16, 24, 32, 48, 64)))
        draft = draw(checkkit.integers(0, 30)) / 10
        ops.append(["choose", batch, cost_spec(t, knee, draft)])
    return {"kind": "policy", "init": init, "ops": ops}


@lru_cache(maxsize=16)
def _random_inputs(seed: int) -> tuple[str, ...]:
    """The random inputs for a seed, as JSON strings (hashable, and copied on every use)."""
    drawn = (checkkit.draw(_fn_draw(), seed, RANDOM_FN_CASES)
             + checkkit.draw(_policy_draw(), seed + 1, RANDOM_POLICY_CASES))
    return tuple(json.dumps(d, sort_keys=True) for d in drawn)


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """Edge cases plus Hypothesis-drawn ones, deterministic for a seed, smallest first."""
    cases = _edge_cases()
    return checkkit.with_draws(cases, _random_inputs(int(seed)), size_key)


# ---------------------------------------------------------------- checks


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(case: Case) -> str:
    inp = case["input"]
    if inp["kind"] == "fn":
        args = ", ".join(repr(a) for a in inp["args"])
        return f"{inp['fn']}({args})"
    ops = inp["ops"]
    shown = "; ".join(_op_text(op) for op in ops[:6])
    more = f"; ... ({len(ops)} operations in all)" if len(ops) > 6 else ""
    return f"SpecPolicy({_kwargs(inp['init'])}) then {shown}{more}"


def _kwargs(d: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in d.items())


def _op_text(op: list[Any]) -> str:
    if op[0] == "observe":
        return f"observe({op[1]!r}, drafted={op[2]}, accepted={op[3]})"
    if op[0] == "estimate":
        return f"estimate({op[1]!r})"
    spec = op[2]
    return (f"choose({_short(op[1], 80)}, batch_cost(n) = {spec['t_mem_ms']:g}·max(1, n/"
            f"{spec['n_knee']}) + {spec['draft_ms']:g}·(n − B)/B, B = {len(op[1])})")


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return False
    return abs(a - b) <= max(REL_TOL * abs(b), ABS_TOL)


def _error_type(message: str) -> str:
    return message.split(":", 1)[0].strip()


CHECKS: tuple[tuple[str, float, str], ...] = (
    ("no crash", 1.0, "Every call ran without an unexpected exception."),
    ("expected_tokens values", 1.0, "expected_tokens matched on every case (rel. 1e-6)."),
    ("step_cost and speedup values", 1.0, "step_cost and speedup matched on every case."),
    ("best_k choices", 1.0, "best_k picked the reference's k on every case."),
    ("rejects invalid inputs", 0.5, "Invalid alpha, k, batch and observations raised ValueError."),
    ("estimate() after every observe", 1.5,
     "The acceptance estimates matched the reference after every observation."),
    ("choose() assignments", 2.0, "choose() gave every request the reference's draft length."),
    ("choose() never drafts at a predicted slowdown", 1.0,
     "No request was given k > 0 while its own predicted speedup was below 1 + margin."),
    ("choose() covers exactly the batch", 0.5,
     "choose() returned one k in 0..k_max for every request id, and nothing else."),
)

FN_CHECK = {"expected_tokens": "expected_tokens values", "step_cost": "step_cost and speedup values",
            "speedup": "step_cost and speedup values", "best_k": "best_k choices"}


def _well_formed(result: Any, inp: dict[str, Any]) -> bool:
    out = checkkit.envelope(result)
    if not isinstance(out, dict):
        return out is not None  # a run's error text is well formed; any other shape is not
    if inp["kind"] == "fn":
        return ("value" in out and _close(out["value"], out["value"])) or \
            isinstance(out.get("error"), str)
    res = out.get("results")
    if not isinstance(res, list) or len(res) > len(inp["ops"]):
        return False
    if "error" in out and not (isinstance(out["error"], str) and isinstance(out.get("error_op"), int)):
        return False
    if "error" not in out and len(res) != len(inp["ops"]):
        return False
    for op, r in zip(inp["ops"], res, strict=False):
        if op[0] == "observe" and r is not None:
            return False
        if op[0] == "estimate" and not _close(r, r):
            return False
        if op[0] == "choose" and not (isinstance(r, dict) and all(
                isinstance(v, int) and not isinstance(v, bool) for v in r.values())):
            return False
    return True


def _judge_fn(case: Case, got: dict[str, Any], exp: dict[str, Any], v: checkkit.Verdicts) -> None:
    inp = case["input"]
    where = describe(case)
    name = FN_CHECK[inp["fn"]]
    if "error" in exp:
        want = _error_type(exp["error"])
        ok = "error" in got and _error_type(got["error"]) == want
        what = f"raised {got['error']}" if "error" in got else f"returned {_short(got.get('value'))}"
        v.add("rejects invalid inputs", case, ok,
              "" if ok else f"{where} should raise {want} (the input is outside the model), but "
                            f"it {what}")
        return
    if "error" in got:
        v.add("no crash", case, False, f"{where} raised {got['error']}; expected "
                                       f"{_short(exp['value'])}")
        v.add(name, case, False, f"{where} raised {got['error']}")
        return
    v.add("no crash", case, True)
    g, e = got["value"], exp["value"]
    if inp["fn"] == "best_k":
        ok = isinstance(g, int) and g == e
        msg = "" if ok else (f"{where} returned {g!r}, expected {e} (speedups of k = {e} and "
                             f"{g!r} differ, or the tie/margin rule picked differently)")
    else:
        ok = _close(g, e)
        msg = "" if ok else f"{where} returned {_short(g)}, expected {e!r}"
    v.add(name, case, ok, msg)


def _expected_tokens(a: float, k: int) -> float:
    return float(k + 1) if a == 1.0 else (1 - a ** (k + 1)) / (1 - a)


def _judge_policy(case: Case, got: dict[str, Any], exp: dict[str, Any],
                  v: checkkit.Verdicts) -> None:
    inp = case["input"]
    where = describe(case)
    ops = inp["ops"]
    init = inp["init"]
    k_max, margin = int(init.get("k_max", 8)), float(init.get("margin", 0.05))
    e_res, g_res = exp["results"], got["results"]
    e_err_op = exp.get("error_op")
    g_err_op = got.get("error_op")

    # Invalid observations: the reference raises at some op; the student must raise there too.
    if e_err_op is not None:
        want = _error_type(exp["error"])
        ok = g_err_op == e_err_op and _error_type(got.get("error", "")) == want
        op = _op_text(ops[e_err_op])
        if ok:
            msg = ""
        elif g_err_op is None:
            msg = f"{op} should raise {want} (need 0 <= accepted <= drafted), but it was accepted"
        elif g_err_op < e_err_op:
            msg = f"{_op_text(ops[g_err_op])} raised {got['error']}, but it is a valid observation"
        else:
            msg = f"{op} should raise {want}, but it raised {got.get('error')}"
        v.add("rejects invalid inputs", case, ok, msg + f" — in {where}" if msg else "")
        return

    if g_err_op is not None:
        msg = f"{_op_text(ops[g_err_op]) if g_err_op >= 0 else 'SpecPolicy(...)'} raised " \
              f"{got.get('error')} — in {where}"
        v.add("no crash", case, False, msg)
        names = {"estimate() after every observe" if op[0] == "estimate" else
                 "choose() assignments" for op in ops[max(g_err_op, 0):] if op[0] != "observe"}
        for name in sorted(names):
            v.add(name, case, False, msg)
        return
    v.add("no crash", case, True)

    est_fail = choose_fail = guard_fail = cover_fail = ""
    has_est = has_choose = False
    # The reference's estimates, replayed, give the a_i the guard uses.
    alphas: dict[str, float] = {}
    ewma, prior = float(init.get("ewma", 0.1)), float(init.get("prior_alpha", 0.6))
    for i, op in enumerate(ops):
        if op[0] == "observe":
            est = alphas.get(op[1], prior)
            for j in range(1, min(op[3] + 1, op[2]) + 1):
                est = (1 - ewma) * est + ewma * (1.0 if j <= op[3] else 0.0)
            if op[2] > 0:
                alphas[op[1]] = est
            continue
        if op[0] == "estimate":
            has_est = True
            if not est_fail and not _close(g_res[i], e_res[i]):
                est_fail = (f"after {_history(ops[:i], op[1])}, estimate({op[1]!r}) returned "
                            f"{_short(g_res[i])}, expected {e_res[i]!r}")
            continue
        has_choose = True
        ids, spec = op[1], op[2]
        g, e = g_res[i], e_res[i]
        if not cover_fail:
            extra = sorted(set(g) - set(ids))
            missing = [r for r in ids if r not in g]
            bad = {r: k for r, k in g.items() if not 0 <= k <= k_max}
            if extra or missing or bad:
                cover_fail = (f"{_op_text(op)} returned keys/values that break the contract: "
                              + "; ".join(x for x in (
                                  f"missing {missing[:5]}" if missing else "",
                                  f"unknown ids {extra[:5]}" if extra else "",
                                  f"k outside 0..{k_max}: {_short(bad, 80)}" if bad else "")
                                  if x))
        if not choose_fail and g != e:
            diff = [f"{r}: got {g.get(r)}, expected {e[r]} (estimate {alphas.get(r, prior):.4f})"
                    for r in ids if g.get(r) != e[r]][:4]
            n_g = len(ids) + sum(k for r, k in g.items() if r in ids and isinstance(k, int))
            n_e = len(ids) + sum(e.values())
            choose_fail = (f"{_op_text(op)} (operation {i + 1}) differs: {'; '.join(diff)}. "
                           f"Your plan feeds {n_g} tokens to the target, the reference's {n_e}")
        if not guard_fail and not cover_fail:
            b = len(ids)
            t, knee, d = float(spec["t_mem_ms"]), int(spec["n_knee"]), float(spec["draft_ms"])

            def cost(n: int, b: int = b, t: float = t, knee: int = knee, d: float = d) -> float:
                return t * max(1.0, n / knee) + d * (n - b) / b
            n_tok = b + sum(g[r] for r in ids)
            for r in ids:
                k = g[r]
                if k > 0:
                    s = _expected_tokens(alphas.get(r, prior), k) * cost(b) / cost(n_tok)
                    if s < (1 + margin) * (1 - 1e-9):
                        guard_fail = (f"{_op_text(op)} gave {r!r} k = {k}, but with its estimate "
                                      f"{alphas.get(r, prior):.4f} and a step of {n_tok} tokens "
                                      f"its predicted speedup is {s:.4f} < 1 + margin = "
                                      f"{1 + margin:g}: that request would be slowed down")
                        break
    if has_est:
        v.add("estimate() after every observe", case, not est_fail,
              est_fail + f" — in {where}" if est_fail else "")
    if has_choose:
        v.add("choose() assignments", case, not choose_fail,
              choose_fail + f" — in {where}" if choose_fail else "")
        v.add("choose() covers exactly the batch", case, not cover_fail,
              cover_fail + f" — in {where}" if cover_fail else "")
        if not cover_fail:
            v.add("choose() never drafts at a predicted slowdown", case, not guard_fail,
                  guard_fail + f" — in {where}" if guard_fail else "")


def _history(ops: list[list[Any]], req: str) -> str:
    mine = [op for op in ops if op[0] == "observe" and op[1] == req]
    if not mine:
        return f"no observation of {req!r}"
    shown = ", ".join(f"({op[2]} drafted, {op[3]} accepted)" for op in mine[-4:])
    lead = f"{len(mine)} observations of {req!r}, the last {min(4, len(mine))} " if len(mine) > 4 \
        else f"observations of {req!r} "
    return lead + shown


def check(cases: list[Case], got: list[dict[str, Any]], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    v = checkkit.Verdicts(size_key)
    for case, g, e in zip(cases, got, expected, strict=True):
        inp = case["input"]
        e_out = e["output"]
        if not _well_formed(g, inp):
            g = {"error": "the output line for this case is malformed"}
        if "error" in g:
            msg = f"{g['error']} — on {describe(case)}"
            v.add("no crash", case, False, msg)
            if inp["kind"] == "fn":
                v.add("rejects invalid inputs" if "error" in e_out else FN_CHECK[inp["fn"]],
                      case, False, msg)
            else:
                for name in ("estimate() after every observe", "choose() assignments"):
                    v.add(name, case, False, msg)
            continue
        if inp["kind"] == "fn":
            _judge_fn(case, g["output"], e_out, v)
        else:
            _judge_policy(case, g["output"], e_out, v)
    return v.checks(CHECKS)
