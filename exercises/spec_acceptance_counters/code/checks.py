"""Test cases and checks for the acceptance calculator (runs in the worker, never in the sandbox).

Cases are snapshot series for `acceptance_windows` and argument triples for `infer_steps`. Each
result handed to `check()` is {"output": <driver.run_case dict>} or {"error": "..."}; `expected`
holds the reference's results for the same cases. Every check reports the smallest case it fails
on, with the window, the two snapshots, what was expected and what came back.
"""
from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from graders import checkkit
from graders.base import Check

Case = dict[str, Any]
Snapshot = dict[str, Any]

START = 1_717_000_000.0  # process start time of the first process in a generated series
RESTARTED = 1_717_086_400.0  # ... and of the process after a restart (one day later)
RANDOM_SERIES = 110
RANDOM_STEPS = 40
# Counters are drawn as small integers and scaled here.
SCALE = 100
REL_TOL = 1e-9

EVENTS = ("clean", "clean", "clean", "short", "zero", "tokens_zero", "restart_drop",
          "restart_hidden", "decrease", "mixed_source", "per_pos_increasing", "per_pos_sum",
          "first_pos_zero")


# ---------------------------------------------------------------- building series


def snapshot(t: float, start: float, d: int, tok: int, a: int, per: list[int]) -> Snapshot:
    return {"t": float(t), "start_time": float(start), "drafts": int(d), "draft_tokens": int(tok),
            "accepted": int(a), "accepted_per_pos": [int(x) for x in per]}


def _clean_deltas(k: int, dd: int, conds: list[int]) -> tuple[int, int, list[int]]:
    """dT = k*dD; dA_j from conditional acceptance percentages (non-increasing by construction)."""
    per, prev = [], dd
    for c in conds[:k]:
        prev = prev * c // 100
        per.append(prev)
    per += [0] * (k - len(per))
    return k * dd, sum(per), per


def build_series(k: int, big_base: bool, events: list[tuple[str, int, int, list[int]]]
                 ) -> list[Snapshot]:
    """Cumulative snapshots for a list of window events (kind, x, y, conditional percentages)."""
    base_d = 1_000_000 if big_base else 2_000
    tok, per = _clean_deltas(k, base_d, [80, 75, 70, 65, 60])[0::2]
    d, start, t = base_d, START, 0.0
    a = sum(per)
    series = [snapshot(t, start, d, tok, a, per)]
    for kind, x, y, conds in events:
        t += 600.0
        dd = max(1, x) * SCALE
        dt, da, dper = _clean_deltas(k, dd, conds)
        if kind == "zero":
            dd = dt = da = 0
            dper = [0] * k
        elif kind == "tokens_zero":
            dt, da, dper = 0, 0, [0] * k
        elif kind == "short" and k > 1:
            dt -= min(y * SCALE // 10 + 1, (k - 1) * dd)
        elif kind == "mixed_source":
            dt += y * SCALE // 10 + 1
            da = dt + y  # more accepted than drafted: only possible with mixed sources
            dper = [da] + [0] * (k - 1)  # keeps the per-position sum equal to dA
        elif kind == "per_pos_increasing" and k > 1:
            dper[0], dper[1] = dper[1], dper[0] + 1
            da = sum(dper)
        elif kind == "per_pos_sum":
            da += y + 1
        elif kind == "first_pos_zero":
            dper = [0] * k
            da = 0
        if kind == "restart_drop":
            start = RESTARTED if start == START else START
            d, tok, a = dd, dt, da
            per = list(dper)
            if d >= series[-1]["drafts"]:  # keep it a real drop: the old process was busy
                d = max(1, series[-1]["drafts"] // 2)
        elif kind == "restart_hidden":
            # The new process has already drafted more than the old one had: only start_time
            # shows the restart.
            start = RESTARTED if start == START else START
            d, tok, a = d + dd, tok + dt, a + da
            per = [p + q for p, q in zip(per, dper, strict=True)]
        elif kind == "decrease":
            d, tok, a = d + dd, tok + dt, a + da
            per = [p + q for p, q in zip(per, dper, strict=True)]
            which = y % (3 + k)
            drop = y + 1
            if which == 0:
                d -= dd + drop
            elif which == 1:
                tok -= dt + drop
            elif which == 2:
                a -= da + drop
            else:
                per[which - 3] -= dper[which - 3] + drop
        else:
            d, tok, a = d + dd, tok + dt, a + da
            per = [p + q for p, q in zip(per, dper, strict=True)]
        series.append(snapshot(t, start, d, tok, a, per))
    return series


def windows_case(case_id: str, snapshots: list[Snapshot], k: int) -> Case:
    return {"id": case_id, "input": {"fn": "windows", "k": int(k), "snapshots": snapshots}}


def steps_case(case_id: str, emitted: int, accept_length: float, eos_discard: int) -> Case:
    return {"id": case_id, "input": {"fn": "infer_steps", "emitted": emitted,
                                     "accept_length": accept_length, "eos_discard": eos_discard}}


# ---------------------------------------------------------------- public and edge cases


def _params_series(params: dict[str, Any]) -> tuple[list[Snapshot], int]:
    if "snapshots" in params and "k" in params:
        return [dict(s) for s in params["snapshots"]], int(params["k"])
    # A variant without a series (never for this exercise's own variants): the canonical shape.
    return build_series(3, True, [("clean", 100, 0, [75, 80, 75]),
                                  ("short", 100, 60, [70, 80, 75]),
                                  ("zero", 1, 0, [0, 0, 0]),
                                  ("restart_drop", 10, 0, [75, 80, 75])]), 3


def public_cases(params: dict[str, Any]) -> list[Case]:
    """The examples a student can Run: the variant's series, a restart hidden behind rising
    counters, and the request of the statement's part 4 through infer_steps."""
    series, k = _params_series(params)
    cases = [windows_case("example-1-statement-series", series, k)]
    hidden = [snapshot(0, START, 2_000, 6_000, 3_300, [1_500, 1_100, 700]),
              snapshot(600, RESTARTED, 9_000, 27_000, 15_000, [6_800, 5_000, 3_200]),
              snapshot(1200, RESTARTED, 19_000, 57_000, 31_500, [14_000, 10_500, 7_000])]
    cases.append(windows_case("example-2-restart-with-rising-counters", hidden, 3))
    ex = params.get("request_example") or {"emitted": 12, "accept_length": 2.6, "eos_discard": 2}
    cases.append(steps_case("example-3-infer-steps", int(ex["emitted"]),
                            float(ex["accept_length"]), int(ex["eos_discard"])))
    return cases


def _edge_cases() -> list[Case]:
    s = snapshot
    out = [
        windows_case("edge-empty-series", [], 3),
        windows_case("edge-one-snapshot", [s(0, START, 10, 30, 18, [8, 6, 4])], 3),
        windows_case("edge-clean-k1", [s(0, START, 100, 100, 60, [60]),
                                       s(60, START, 300, 300, 150, [150])], 1),
        windows_case("edge-no-drafts", [s(0, START, 500, 1500, 900, [400, 300, 200]),
                                        s(60, START, 500, 1500, 900, [400, 300, 200])], 3),
        windows_case("edge-drafts-but-no-draft-tokens",
                     [s(0, START, 500, 1500, 900, [400, 300, 200]),
                      s(60, START, 520, 1500, 900, [400, 300, 200])], 3),
        windows_case("edge-restart-counters-drop",
                     [s(0, START, 1_200_000, 3_600_000, 2_000_000, [800_000, 660_000, 540_000]),
                      s(600, RESTARTED, 40_000, 120_000, 70_000, [28_000, 23_000, 19_000])], 3),
        windows_case("edge-restart-counters-rise",
                     [s(0, START, 200, 600, 300, [150, 100, 50]),
                      s(600, RESTARTED, 900, 2700, 1500, [700, 500, 300])], 3),
        windows_case("edge-restart-same-values",
                     [s(0, START, 200, 600, 300, [150, 100, 50]),
                      s(600, RESTARTED, 200, 600, 300, [150, 100, 50])], 3),
        windows_case("edge-only-one-position-counter-drops",
                     [s(0, START, 1000, 3000, 1800, [750, 600, 450]),
                      s(600, START, 2000, 6000, 3500, [1500, 1200, 440])], 3),
        windows_case("edge-accepted-drops",
                     [s(0, START, 1000, 3000, 1800, [750, 600, 450]),
                      s(600, START, 2000, 6000, 1700, [750, 600, 450])], 3),
        windows_case("edge-short-drafts",
                     [s(0, START, 0, 0, 0, [0, 0, 0]),
                      s(600, START, 10_000, 29_400, 18_000, [7_500, 6_000, 4_500])], 3),
        windows_case("edge-too-many-draft-tokens",
                     [s(0, START, 0, 0, 0, [0, 0]),
                      s(600, START, 1_000, 3_000, 1_200, [700, 500])], 2),
        windows_case("edge-accepted-exceeds-drafted",
                     [s(0, START, 0, 0, 0, [0, 0, 0]),
                      s(600, START, 100, 300, 310, [100, 100, 110])], 3),
        windows_case("edge-per-position-increasing",
                     [s(0, START, 0, 0, 0, [0, 0, 0]),
                      s(600, START, 100, 300, 150, [40, 60, 50])], 3),
        windows_case("edge-per-position-sum",
                     [s(0, START, 0, 0, 0, [0, 0, 0]),
                      s(600, START, 100, 300, 170, [70, 50, 30])], 3),
        windows_case("edge-zero-denominator-per-position",
                     [s(0, START, 0, 0, 0, [0, 0, 0]),
                      s(600, START, 100, 300, 0, [0, 0, 0])], 3),
        windows_case("edge-mixed-series",
                     build_series(3, True, [("clean", 90, 0, [80, 75, 70]),
                                            ("zero", 1, 0, [0, 0, 0]),
                                            ("restart_drop", 5, 0, [70, 70, 70]),
                                            ("clean", 60, 0, [60, 50, 40]),
                                            ("short", 60, 30, [60, 50, 40])]), 3),
        windows_case("edge-two-restarts-back",
                     build_series(2, False, [("restart_hidden", 50, 0, [80, 60]),
                                             ("clean", 30, 0, [70, 60]),
                                             ("restart_drop", 5, 0, [70, 60])]), 2),
        steps_case("edge-infer-only-prefill-token", 1, 2.5, 0),
        steps_case("edge-infer-no-discard", 29, 2.8, 0),
        steps_case("edge-infer-with-discard", 12, 2.6, 2),
        steps_case("edge-infer-no-speculation-gain", 11, 1.0, 0),
        steps_case("edge-infer-rejects-zero-emitted", 0, 2.0, 0),
        steps_case("edge-infer-rejects-accept-length-below-one", 10, 0.5, 0),
        steps_case("edge-infer-rejects-negative-discard", 10, 2.0, -1),
    ]
    return out


EDGE_CASES: tuple[Case, ...] = tuple(_edge_cases())


# ---------------------------------------------------------------- random cases


@st.composite
def _series_plan(draw: st.DrawFn) -> tuple[int, bool, list[tuple[str, int, int, list[int]]]]:
    k = draw(checkkit.integers(1, 5))
    big = draw(checkkit.booleans())
    n = draw(checkkit.integers(1, 6))
    events = []
    for _ in range(n):
        kind = draw(checkkit.sampled_from(EVENTS))
        x = draw(checkkit.integers(1, 99))
        y = draw(checkkit.integers(0, 99))
        conds = draw(checkkit.lists(checkkit.integers(0, 99), min_size=k, max_size=k))
        events.append((kind, x, y, conds))
    return k, big, events


@st.composite
def _steps_args(draw: st.DrawFn) -> tuple[int, float, int]:
    bad = draw(checkkit.sampled_from((False, False, False, False, True)))
    emitted = draw(checkkit.integers(1, 99))
    length = 1 + draw(checkkit.integers(0, 40)) / 10
    eos = draw(checkkit.integers(0, 5))
    if bad:
        which = draw(checkkit.integers(0, 2))
        if which == 0:
            emitted = 0
        elif which == 1:
            length = draw(checkkit.integers(0, 9)) / 10
        else:
            eos = -draw(checkkit.integers(1, 5))
    return emitted, length, eos


@lru_cache(maxsize=16)
def _random_inputs(seed: int) -> tuple[str, ...]:
    """The random cases for a seed, as JSON strings (hashable, and copied on every use)."""
    out = []
    for k, big, events in checkkit.draw(_series_plan(), seed, RANDOM_SERIES):
        out.append(json.dumps(windows_case("", build_series(k, big, events), k)["input"],
                              sort_keys=True))
    for emitted, length, eos in checkkit.draw(_steps_args(), seed + 1, RANDOM_STEPS):
        out.append(json.dumps(steps_case("", emitted, length, eos)["input"], sort_keys=True))
    return tuple(out)


def size_key(case: Case) -> tuple[int, int, str]:
    """Smaller cases first: infer_steps calls, then series by number of snapshots and k."""
    inp = case["input"]
    if inp["fn"] == "infer_steps":
        return (0, 0, json.dumps(inp, sort_keys=True))
    return (len(inp["snapshots"]), inp["k"], json.dumps(inp, sort_keys=True))


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """Edge cases plus Hypothesis-generated ones, deterministic for a seed, smallest first."""
    cases = [json.loads(json.dumps(c)) for c in EDGE_CASES]
    return checkkit.with_draws(cases, _random_inputs(int(seed)), size_key)


# ---------------------------------------------------------------- describing cases


def _snap(s: Snapshot) -> str:
    return (f"{{t={s['t']:g}, start_time={s['start_time']:.0f}, drafts={s['drafts']}, "
            f"draft_tokens={s['draft_tokens']}, accepted={s['accepted']}, "
            f"accepted_per_pos={s['accepted_per_pos']}}}")


def describe(case: Case) -> str:
    inp = case["input"]
    if inp["fn"] == "infer_steps":
        return (f"infer_steps(emitted={inp['emitted']}, accept_length={inp['accept_length']}, "
                f"eos_discard={inp['eos_discard']})")
    text = f"acceptance_windows(k={inp['k']}, {len(inp['snapshots'])} snapshots: " + \
        "; ".join(_snap(s) for s in inp["snapshots"]) + ")"
    return text if len(text) <= 700 else text[:697] + "..."


def _window_where(inp: dict[str, Any], i: int) -> str:
    snaps = inp["snapshots"]
    return (f"window {i} (snapshots {i} -> {i + 1}: {_snap(snaps[i])} -> {_snap(snaps[i + 1])}, "
            f"k={inp['k']})")


def discard_reason(a: Snapshot, b: Snapshot) -> str | None:
    """Why the rules drop the window a -> b, in words; None when they keep it."""
    if a["start_time"] != b["start_time"]:
        return (f"start_time changed from {a['start_time']:.0f} to {b['start_time']:.0f}: the "
                "process restarted, so the later counters count a different process")
    for name in ("drafts", "draft_tokens", "accepted"):
        if b[name] < a[name]:
            return f"{name} went down from {a[name]} to {b[name]} (a reset or another replica)"
    for j, (x, y) in enumerate(zip(a["accepted_per_pos"], b["accepted_per_pos"], strict=True)):
        if y < x:
            return (f"accepted_per_pos[{j}] went down from {x} to {y} (a reset or another "
                    "replica)")
    if b["drafts"] == a["drafts"]:
        return "no drafts in the window (dD = 0): acceptance is undefined, not 0"
    if b["draft_tokens"] == a["draft_tokens"]:
        return "no draft tokens in the window (dT = 0): acceptance is undefined"
    return None


# ---------------------------------------------------------------- checks


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if not (isinstance(a, int | float) and isinstance(b, int | float)):
        return False
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b
    return abs(a - b) <= REL_TOL * max(1.0, abs(b))


CHECKS: tuple[tuple[str, float, str], ...] = (
    ("no crash", 1.0, "acceptance_windows and infer_steps ran on every case without an "
                      "unexpected exception."),
    ("discards exactly the windows the rules drop", 2.0,
     "None exactly for windows across a restart, with a counter going down, or with nothing "
     "drafted; a result for every other window."),
    ("counts and rates of kept windows", 3.0,
     "drafts, draft_tokens, accepted, acceptance_rate and accept_length matched on every kept "
     "window."),
    ("per-position conditional rates", 1.0, "per_position matched on every kept window."),
    ("flags and missing draft tokens", 1.0,
     "missing_draft_tokens and flags matched on every kept window."),
    ("infer_steps", 1.0, "infer_steps matched (and rejected bad arguments) on every case."),
)
WINDOW_CHECKS = [name for name, _, _ in CHECKS[1:5]]


def well_formed(result: Any, fn: str) -> bool:
    """Whether a result has the shape the driver writes."""
    out = checkkit.envelope(result)
    if not isinstance(out, dict):
        return out is not None  # a run's error text is well formed; any other shape is not
    if "error" in out:
        return isinstance(out["error"], str)
    if fn == "infer_steps":
        v = out.get("value")
        return isinstance(v, int | float) and not isinstance(v, bool)
    wins = out.get("windows")
    if not isinstance(wins, list):
        return False
    for w in wins:
        if w is None:
            continue
        if not isinstance(w, dict) or not isinstance(w.get("per_position"), list) \
                or not isinstance(w.get("flags"), list):
            return False
        # The messages format these with :g and sort the flags: a str among the rates or an
        # int among the flags (a forged output) must fail here, not crash the checks.
        if not all(_number(w.get(key)) for key in
                   ("drafts", "draft_tokens", "accepted", "missing_draft_tokens",
                    "acceptance_rate", "accept_length")):
            return False
        if not all(x is None or _number(x) for x in w["per_position"]) \
                or not all(isinstance(f, str) for f in w["flags"]):
            return False
    return True


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _error_type(message: str) -> str:
    return message.split(":", 1)[0].strip()


def _judge_steps(case: Case, got: dict[str, Any], exp: dict[str, Any],
                 v: checkkit.Verdicts) -> None:
    where = describe(case)
    e_out = exp["output"]
    g_out = got.get("output", {})
    if "error" in got:
        v.add("no crash", case, False, f"{got['error']} — on {where}")
        v.add("infer_steps", case, False, f"{got['error']} — on {where}")
        return
    if "error" in e_out:
        want = _error_type(e_out["error"])
        err = g_out.get("error")
        ok = err is not None and _error_type(err) == want
        v.add("infer_steps", case, ok, "" if ok else (
            f"expected {want} (emitted must be >= 1, accept_length >= 1, eos_discard >= 0), but "
            f"it {'raised ' + err.strip() if err else 'returned ' + _short(g_out.get('value'))}"
            f" — on {where}"))
        return
    if "error" in g_out:
        v.add("no crash", case, False, f"{g_out['error'].strip()} — on {where}")
        v.add("infer_steps", case, False, f"raised {g_out['error'].strip()} — on {where}")
        return
    v.add("no crash", case, True)
    ok = _close(g_out["value"], e_out["value"])
    inp = case["input"]
    v.add("infer_steps", case, ok, "" if ok else (
        f"expected {e_out['value']:.6g} = ({inp['emitted']} - 1 + {inp['eos_discard']}) / "
        f"{inp['accept_length']} (the first token comes from prefill; the discarded tokens were "
        f"counted as accepted), got {_short(g_out['value'])} — on {where}"))


def _judge_windows(case: Case, got: dict[str, Any], exp: dict[str, Any],
                   v: checkkit.Verdicts) -> None:
    inp = case["input"]
    where = describe(case)
    if "error" in got or "error" in got.get("output", {}):
        err = got.get("error") or got["output"]["error"]
        msg = f"{err.strip()} — on {where}"
        v.add("no crash", case, False, msg)
        for name in WINDOW_CHECKS:
            v.add(name, case, False, msg)
        return
    v.add("no crash", case, True)
    g_wins = got["output"]["windows"]
    e_wins = exp["output"]["windows"]
    if len(g_wins) != len(e_wins):
        msg = (f"returned {len(g_wins)} windows for {len(inp['snapshots'])} snapshots; expected "
               f"{len(e_wins)} (one per pair of consecutive snapshots) — on {where}")
        for name in WINDOW_CHECKS:
            v.add(name, case, False, msg)
        return
    problems: dict[str, str] = {}
    snaps = inp["snapshots"]
    for i, (g, e) in enumerate(zip(g_wins, e_wins, strict=True)):
        at = _window_where(inp, i)
        if (g is None) != (e is None):
            if e is None and "discard" not in problems:
                problems["discard"] = (f"{at}: expected None because "
                                       f"{discard_reason(snaps[i], snaps[i + 1])}, but got a "
                                       f"result {_short(g)}")
            elif e is not None and "discard" not in problems:
                problems["discard"] = (f"{at}: expected a result (no restart, no counter went "
                                       "down, something was drafted), but got None")
        if e is None:
            continue
        if g is None:
            problems.setdefault("counts", f"{at}: expected {_counts(e)}, got None")
            continue
        if not (all(g[key] == e[key] for key in ("drafts", "draft_tokens", "accepted"))
                and _close(g["acceptance_rate"], e["acceptance_rate"])
                and _close(g["accept_length"], e["accept_length"])):
            problems.setdefault("counts", f"{at}: expected {_counts(e)}, got {_counts(g)}"
                                + _counts_hint(g, e))
        g_per, e_per = g["per_position"], e["per_position"]
        if len(g_per) != len(e_per) or not all(_close(x, y) for x, y in zip(g_per, e_per,
                                                                            strict=False)):
            problems.setdefault("per", (
                f"{at}: expected per_position {_rates(e_per)} (dA_j / dA_(j-1), with dA_(-1) = "
                f"dD, None where the denominator is 0), got {_rates(g_per)}"))
        if g["missing_draft_tokens"] != e["missing_draft_tokens"] \
                or sorted(g["flags"]) != e["flags"]:
            problems.setdefault("flags", (
                f"{at}: expected missing_draft_tokens={e['missing_draft_tokens']}, "
                f"flags={e['flags']}; got missing_draft_tokens={g['missing_draft_tokens']}, "
                f"flags={sorted(g['flags'])}"))
    for name, key in zip(WINDOW_CHECKS, ("discard", "counts", "per", "flags"), strict=True):
        msg = problems.get(key, "")
        v.add(name, case, not msg, f"{msg} — in {where}" if msg else "")


def _counts(w: dict[str, Any]) -> str:
    return (f"drafts={w['drafts']}, draft_tokens={w['draft_tokens']}, accepted={w['accepted']}, "
            f"acceptance_rate={w['acceptance_rate']:.6g}, accept_length={w['accept_length']:.6g}")


def _counts_hint(g: dict[str, Any], e: dict[str, Any]) -> str:
    """Name the likely slip when the numbers show one."""
    if _close(g["accept_length"], e["accept_length"] - 1):
        return " (accept_length counts the bonus token: 1 + dA/dD)"
    if g["drafts"] != e["drafts"] and not _close(g["acceptance_rate"], e["acceptance_rate"]):
        return " (use the differences between the two snapshots, not the totals)"
    if all(g[key] == e[key] for key in ("drafts", "draft_tokens", "accepted")):
        return " (the counts are right; check how the rates are computed)"
    return ""


def _rates(xs: list[Any]) -> str:
    return "[" + ", ".join("None" if x is None else f"{x:.6g}" for x in xs) + "]"


def check(cases: list[Case], got: list[dict[str, Any]], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    """Named checks over all cases; each failure names the smallest case it fails on."""
    v = checkkit.Verdicts(size_key)
    for case, g, e in zip(cases, got, expected, strict=True):
        fn = case["input"]["fn"]
        if not well_formed(g, fn):
            g = {"error": "the output line for this case is malformed"}
        if fn == "infer_steps":
            _judge_steps(case, g, e, v)
        else:
            _judge_windows(case, g, e, v)
    return v.checks(CHECKS)
