"""Runs a student's scheduling policy inside the scheduling simulator (the sandbox side).

Input: {"budget": int, "cost": {"flops_per_s", "flops_per_token", "attn_coeff"},
        "requests": [[rid, arrival_s, prompt, cached], ...]}
Output: {"calls": [[now_s, waiting, [rid, ...]], ...]}, one entry per call of order(): the time
        and the number of waiting requests it was shown, and the front of its answer that the
        engine reads (up to and including the first request that no longer fits the step's
        budget; the engine stops there). Or {"policy_error": "..."} when the policy raised or
        returned something that is not a permutation of the waiting ids.

Nothing graded is computed here: this runs in the student's process, where the submission can
replace any of it. The worker replays the recorded answers through its own simulator
(checks.replay), checks at every call that it shows the same time and queue, and takes every
TTFT from its own run.

Each request is followed to its first token. A prefix-cache hit is modelled by giving the engine
only the uncached tokens to compute; the policy still sees the whole prompt and the cached count.
"""
from __future__ import annotations

import os

import engine_sim

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The longest workloads have a few hundred requests; each is admitted once and each call adds at
# most one id that does not fit, so a workload's calls are ~20 KB.
MAX_OUTPUT_BYTES = 64_000
MAX_ERROR_CHARS = 500


class PolicyError(Exception):
    """The policy's answer cannot be used as an order."""


def _frames(exc: BaseException, module: Any) -> str:
    import traceback  # only on an error

    path = getattr(module, "__file__", None)
    if not path:
        return ""
    path = os.path.abspath(path)
    lines = []
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == path:
            text = f'  File "{os.path.basename(path)}", line {frame.lineno}, in {frame.name}'
            if frame.line:
                text += "\n    " + frame.line.strip()[:160]
            lines.append(text)
    return "\n".join(lines[-3:])


def _check_ids(got: Any, waiting: list[dict], now: float) -> list[str]:
    try:
        ids = list(got)
    except TypeError:
        raise PolicyError(f"order() returned {type(got).__name__}, expected a list of ids") \
            from None
    want = [w["rid"] for w in waiting]
    bad = [x for x in ids if not isinstance(x, str)]
    if bad:
        raise PolicyError(f"order() returned {type(bad[0]).__name__} {bad[0]!r:.60} in its "
                          "list; it must return the rid strings")
    if len(ids) == len(want) and set(ids) == set(want):
        return ids  # the usual case, checked in linear time
    seen: dict[str, int] = {}
    for r in ids:
        seen[r] = seen.get(r, 0) + 1
    missing = [r for r in want if r not in seen]
    unknown = [r for r in seen if r not in set(want)]
    dupes = sorted(r for r, n in seen.items() if n > 1)
    if missing or unknown or dupes:
        parts = []
        if missing:
            parts.append(f"missing {missing[:5]}")
        if dupes:
            parts.append(f"repeated {dupes[:5]}")
        if unknown:
            parts.append(f"not waiting {unknown[:5]}")
        raise PolicyError(f"at t = {now:.3f} s, with {len(want)} requests waiting "
                          f"({', '.join(want[:8])}{', ...' if len(want) > 8 else ''}), order() "
                          f"must return each id exactly once, but the answer has "
                          f"{'; '.join(parts)}")
    return ids


def _read_front(ids: list[str], waiting: list[dict], budget: int) -> list[str]:
    """The part of an order the engine reads: it admits from the front while prompts fit the
    step's budget and stops at the first that does not, so what follows never matters."""
    left = {w["rid"]: w["prefill_left"] for w in waiting}
    total = 0
    for i, rid in enumerate(ids):
        total += left[rid]
        if total > budget:
            return ids[:i + 1]
    return ids


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    c = case_input["cost"]
    cost = engine_sim.StepCost(flops_per_s=float(c["flops_per_s"]),
                               flops_per_token=float(c["flops_per_token"]),
                               attn_coeff=float(c["attn_coeff"]))
    budget = int(case_input["budget"])
    config = engine_sim.EngineConfig(token_budget=budget, chunked_prefill=False, max_seqs=100_000)
    full: dict[str, tuple[int, int]] = {}
    requests = []
    for rid, arrival, prompt, cached in case_input["requests"]:
        full[rid] = (int(prompt), int(cached))
        requests.append(engine_sim.Request(rid, float(arrival), int(prompt) - int(cached), 1))

    calls: list[list[Any]] = []

    def policy(waiting: list[dict], now: float) -> list[str]:
        view = [{"rid": w["rid"], "arrival": w["arrival"], "prompt": full[w["rid"]][0],
                 "cached": full[w["rid"]][1], "prefill_left": w["prefill_left"],
                 "generated": w["generated"], "waited": w["waited"]} for w in waiting]
        ids = _check_ids(module.order(view, now), waiting, now)
        calls.append([now, len(waiting), _read_front(ids, waiting, budget)])
        return ids

    try:
        engine_sim.simulate(requests, config, cost, policy)
    except MemoryError:
        raise  # a limit, not an answer
    except PolicyError as exc:
        return {"policy_error": str(exc)[:MAX_ERROR_CHARS]}
    except (Exception, SystemExit) as exc:  # the student's own exception, or sys.exit()
        text = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
        frames = _frames(exc, module)
        return {"policy_error": text + ("\n" + frames if frames else "")}
    return {"calls": calls}
