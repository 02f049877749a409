"""Q13: a one-minute spike, dead requests, and the rejection rule.

One FIFO queue in front of a server of fixed capacity (mu requests per second). A spike of
lambda_s > mu arrives for D seconds on top of an empty queue, then the baseline lambda_0 < mu
resumes. Clients give up after waiting T seconds for service to start, but the server does not
know and serves them anyway (dead work).

Fluid arithmetic (arrivals and service as continuous flows; the statement says so):
  backlog at the spike's end  B = (lambda_s - mu) D
  wait of the last spike arrival  W = B / mu
  drain after the spike  B / (mu - lambda_0)
  an arrival at spike time tau waits tau (lambda_s - mu) / mu, so arrivals after
  tau* = mu T / (lambda_s - mu) are dead, and after the spike an arrival u seconds later waits
  W - u (mu - lambda_0) / mu, dead until u* = (W - T) mu / (mu - lambda_0).
  dead = lambda_s (D - tau*) + lambda_0 u*
  With "admit iff the predicted wait <= T" the queue fills to mu T at tau* and stays there:
  rejected = (lambda_s - mu)(D - tau*) = B - mu T, no dead work.

The same numbers come out of the discrete simulator (exercises/engine_sim.simulate_queue) to within
a request or two; `evidence()` draws its queue-length and wait timelines with and without the rule.
"""
from __future__ import annotations

import bisect
import math
import random
from typing import Any

from exercises import engine_sim
from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Holds
from exercises.slips import Slips, nonpositive, tolerances
from exercises.spec import Evidence, Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# Variant ranges: whole request rates so the backlog is a whole number of requests.
SERVICE_RATES = (10, 16, 20, 25, 40, 50)
BASE_FRACTIONS = (0.25, 0.4, 0.5, 0.6, 0.75)  # baseline / capacity
SPIKE_FACTORS = (1.5, 2.0, 2.5, 3.0)  # spike / capacity
SPIKE_SECONDS = (30, 45, 60, 90, 120)
TIMEOUTS = (5, 10, 15, 20, 30, 45, 60)

CANONICAL: dict[str, Any] = {
    "service_rate": 20,  # mu, requests per second the pool completes
    "base_rate": 10,  # lambda_0, before and after the spike
    "spike_rate": 40,  # lambda_s, during the spike
    "spike_s": 60,  # D, the spike's length
    "timeout_s": 30,  # T, how long a client waits for its request to start
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any] | None:
        mu = rng.choice(SERVICE_RATES)
        base = mu * rng.choice(BASE_FRACTIONS)
        spike = mu * rng.choice(SPIKE_FACTORS)
        if base != int(base) or spike != int(spike):
            return None
        p = {"service_rate": mu, "base_rate": int(base), "spike_rate": int(spike),
             "spike_s": rng.choice(SPIKE_SECONDS), "timeout_s": rng.choice(TIMEOUTS)}
        return p

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    """Overloaded during the spike, underloaded after it, and a timeout that the spike's wait
    clearly passes (so there are dead requests to count and a queue cap to reach) without
    dwarfing it (so part of the drain is still live)."""
    mu, base, spike = p["service_rate"], p["base_rate"], p["spike_rate"]
    if not (0 < base < mu < spike):
        return False
    wait_end = (spike - mu) * p["spike_s"] / mu
    return 0.2 * wait_end <= p["timeout_s"] <= 0.75 * wait_end and spike * p["spike_s"] <= 15_000


# ----------------------------------------------------------------------------------------------
# The reference (fluid model)


def solve(p: dict[str, Any]) -> dict[str, Any]:
    mu, lam0, lams = p["service_rate"], p["base_rate"], p["spike_rate"]
    d, t = p["spike_s"], p["timeout_s"]

    backlog = (lams - mu) * d
    wait_end = backlog / mu
    drain = backlog / (mu - lam0)
    # Dead requests without a rule.
    tau_star = mu * t / (lams - mu)  # spike time after which an arrival waits more than T
    dead_spike = lams * (d - tau_star)
    u_star = (wait_end - t) * mu / (mu - lam0)  # seconds after the spike until waits fit again
    dead_after = lam0 * u_star
    dead = dead_spike + dead_after
    dead_start = t * lams / (lams - mu)  # when the server starts the first dead request
    dead_end = d + u_star + t  # when it starts the last one
    # With the rule: admit iff the predicted wait fits the timeout.
    cap = mu * t
    rejected = backlog - cap
    offered = lams * d
    drain_with_rule = cap / (mu - lam0)

    s: dict[str, Any] = {
        "backlog": Quantity(backlog, ""),
        "wait_end": Quantity(wait_end, "s"),
        "drain": Quantity(drain, "s"),
        "dead": Quantity(dead, ""),
        "rejected": Quantity(rejected, ""),
        "admit": "code/reference.py",
        "response": MODEL_RESPONSE,
        # intermediates for the solution
        "service_ms": 1000 / mu,
        "growth": lams - mu,
        "spare": mu - lam0,
        "offered": offered,
        "served_during_spike": mu * d,
        "drain_minutes": drain / 60,
        "busy_after_s": drain,
        "tau_star": tau_star,
        "wait_slope": (lams - mu) / mu,
        "post_slope": (mu - lam0) / mu,
        "dead_spike": dead_spike,
        "dead_after": dead_after,
        "u_star": u_star,
        "dead_start": dead_start,
        "dead_end": dead_end,
        "dead_after_spike_s": dead_end - d,
        "dead_busy_s": dead / mu,
        "dead_share_pct": dead / (offered + lam0 * drain) * 100,
        "cap": cap,
        "admitted_spike": offered - rejected,
        "rejected_share_pct": rejected / offered * 100,
        "drain_with_rule": drain_with_rule,
        "served_live_without": offered + lam0 * drain - dead,
    }
    return s


MODEL_RESPONSE = (
    "Reject at the door, fast and cheaply: the moment the predicted wait passes the deadline, "
    "answer HTTP 429 Too Many Requests (or 503 Service Unavailable when the whole service is "
    "shedding) before any prompt is tokenised or prefilled. Add a Retry-After header sized from "
    "the predicted drain time, with random jitter so the rejected clients do not all come back in "
    "the same second. The client side matters as much: capped exponential backoff with full "
    "jitter, and a retry budget (retries at most ~10 % of requests, per client and per "
    "dependency) so a spike is not multiplied by every layer that retries. Propagate the "
    "client's deadline with the request (a header or gRPC deadline) so every queue can drop work "
    "whose deadline has passed instead of serving it dead, and drop expired requests at dequeue "
    "as a second line of defence. Under sustained overload, serve the freshest requests first "
    "(adaptive LIFO, CoDel-style queue timeouts) and prefer degrading (shorter max_tokens, a "
    "smaller model) for priority traffic over timing everyone out. In a real LLM engine the "
    "rule should count work, not requests: predicted wait = queued prefill tokens / prefill "
    "tokens per second (with the free KV cache as a second limit), because one request can cost "
    "a thousand times another."
)


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    mu, lam0, lams = p["service_rate"], p["base_rate"], p["spike_rate"]
    d, t = p["spike_s"], p["timeout_s"]
    backlog, wait_end, drain = s["backlog"].value, s["wait_end"].value, s["drain"].value
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, accept=_close, merge=_close, merge_floor=1e-9,
                skip=nonpositive).add

    add("backlog", lams * d,
        f"You counted every arrival of the spike. The server keeps completing {mu} requests per "
        "second during it; only the excess, arrivals minus completions, piles up.", "no_service",
        kind="miscounted_term")
    add("backlog", (lams - lam0) * d,
        "You subtracted the baseline rate. During the spike the queue grows at the arrival rate "
        "minus the service rate, not minus the old arrival rate.", "minus_baseline",
        kind="misread_mechanism")

    add("wait_end", backlog / lams,
        f"You divided the backlog by the arrival rate. The queue ahead of the last spike arrival "
        f"is worked off at the service rate, {mu} per second.", "over_arrival_rate",
        kind="misread_mechanism")
    add("wait_end", drain,
        "That is the drain time, how long until the queue is empty. A request arriving at the "
        "spike's end only waits for the backlog ahead of it, which the server clears at its full "
        "rate; later arrivals queue behind it.", "drain_time", kind="wrong_scope")
    add("wait_end", d + wait_end,
        "That is when the last spike arrival starts, counted from the start of the spike. The "
        "wait is counted from its own arrival.", "from_spike_start", kind="misread_mechanism")

    add("drain", wait_end,
        f"You forgot the baseline traffic: new requests keep arriving at {lam0} per second while "
        f"the backlog drains, so it shrinks at {mu} − {lam0} = {mu - lam0} per second, not {mu}.",
        "no_baseline", kind="miscounted_term")
    add("drain", backlog / lam0,
        f"You divided by the baseline rate. The backlog shrinks at the spare capacity, "
        f"{mu} − {lam0} = {mu - lam0} per second.", "over_baseline", kind="misread_mechanism")
    add("drain", d + drain,
        "That counts from the start of the spike. The question asks how long after the spike "
        "ends.", "from_spike_start", kind="misread_mechanism")

    add("dead", s["dead_spike"],
        f"You counted only the spike's arrivals. Requests arriving after the spike still find a "
        f"wait over {t} s until the queue has shrunk below {t} s of work ({mu} × {t} requests): "
        f"count the baseline arrivals of that stretch too.", "spike_only", kind="miscounted_term")
    add("dead", backlog - s["cap"],
        f"That is the part of the backlog beyond {t} s of work at the spike's end, a snapshot. "
        f"Count every arrival whose wait exceeds {t} s: those from {s['tau_star']:.0f} s into "
        f"the spike to its end, and those after it until the queue is back under {t} s of work.",
        "snapshot", kind="misread_mechanism")
    add("dead", mu * drain,
        f"Not everything served while the queue drains is dead: once the queue is back under "
        f"{t} s of work, the requests arriving in the rest of the drain wait less than {t} s.",
        "whole_drain", kind="misread_mechanism")
    add("dead", lams * (d - t),
        f"You treated every arrival after the first {t} s of the spike as dead. An arrival at "
        f"spike time τ waits τ × ({lams} − {mu}) / {mu}, which passes {t} s at "
        f"τ = {s['tau_star']:.0f} s.", "tau_equals_t", kind="misread_mechanism")

    add("rejected", backlog,
        f"The rule does not turn the whole backlog away: it lets the queue fill to {t} s of "
        f"work ({s['cap']:,.0f} requests) and rejects only the excess beyond that.", "whole_backlog",
        kind="misread_mechanism")
    add("rejected", s["dead"].value,
        "That is the number of dead requests without the rule. With it, the server spends that "
        "time on live requests instead, so fewer are turned away than would have died.",
        "dead_count", kind="wrong_scope")
    add("rejected", lams * (d - s["tau_star"]),
        f"Once the queue is at its cap the server still frees {mu} places per second, and the "
        f"rule admits that many: only {lams} − {mu} = {lams - mu} per second are rejected.",
        "all_after_full", kind="misread_mechanism")
    return out


def _close(a: float, b: float, rel: float) -> bool:
    """Relative to `b`; unlike slips.within, a zero tolerance still forgives float noise."""
    if rel == 0:
        return abs(a - b) <= 1e-9 * max(1.0, abs(b))
    return abs(a - b) <= rel * abs(b)


# ----------------------------------------------------------------------------------------------
# Evidence: the simulated timeline, with and without the rule


def simulate(p: dict[str, Any]) -> dict[str, Any]:
    """Both runs of the discrete simulator for this variant: evenly spaced arrivals, the spike
    from t = 0, then the baseline until well after the queue has drained."""
    s = solve(p)
    horizon = p["spike_s"] + s["drain"].value + 60
    arrivals = engine_sim.spike_arrivals(p["base_rate"], p["spike_rate"], 0.0, p["spike_s"],
                                         horizon)
    mu, t = p["service_rate"], p["timeout_s"]
    everyone = engine_sim.simulate_queue(arrivals, mu, t)
    ruled = engine_sim.simulate_queue(arrivals, mu, t,
                                      admit=lambda st: st["predicted_wait_s"] <= st["timeout_s"])
    return {"arrivals": arrivals, "horizon": horizon, "everyone": everyone, "ruled": ruled}


# As in the code part's driver: a start within a microsecond of the timeout is in time (evenly
# spaced arrivals put waits exactly on it, and float sums land a few ulps either side).
GRACE_S = 1e-6


def really_dead(res: engine_sim.QueueResult, timeout_s: float) -> list[tuple[float, float]]:
    """(arrival, start) of the requests that started more than the timeout (plus the grace)
    after they arrived."""
    return [(a, st) for a, st in res.dead if st - a > timeout_s + GRACE_S]


def _per_second(times: list[float], grid: list[float], step: float) -> list[float]:
    """How many of `times` fall in each bin [g, g + step) of the grid, per second."""
    ordered = sorted(times)
    return [round((bisect.bisect_left(ordered, g + step) - bisect.bisect_left(ordered, g)) / step,
                  3) for g in grid]


def evidence(p: dict[str, Any]) -> dict[str, Evidence]:
    """Flows per second, not stocks: arrivals, starts in time, dead starts and rejections.

    The parts ask for the backlog, the wait, the drain time and two counts; each is an area or
    a crossing on these curves that the student works out. Plotting the queue length, the wait
    or a running count of dead requests instead would print parts 1, 2 and 4 as a peak or a
    last point (exercises/evidence_leaks.py)."""
    sim = simulate(p)
    horizon = sim["horizon"]
    step = max(1.0, math.ceil(horizon / 300))
    grid = [k * step for k in range(int(horizon // step))]
    timeout = p["timeout_s"]
    everyone, ruled = sim["everyone"], sim["ruled"]
    dead_all = really_dead(everyone, timeout)
    dead_set = set(dead_all)
    in_time_all = [st for a, st, _ in everyone.served] + [
        st for a, st in everyone.dead if (a, st) not in dead_set]
    in_time_rule = [st for _, st, _ in ruled.served] + [st for _, st in ruled.dead]

    def pts(ys: list[float]) -> list[list[float]]:
        return [[g, y] for g, y in zip(grid, ys, strict=True)]

    data = {
        "x": {"label": "time since the spike began", "unit": "s"},
        "series": [
            {"label": "arrivals", "unit": "requests/s",
             "points": pts(_per_second(sim["arrivals"], grid, step))},
            {"label": "services started in time, accept everything", "unit": "requests/s",
             "points": pts(_per_second(in_time_all, grid, step))},
            {"label": "services started after the client gave up, accept everything",
             "unit": "requests/s",
             "points": pts(_per_second([st for _, st in dead_all], grid, step))},
            {"label": "services started, admit iff predicted wait ≤ timeout",
             "unit": "requests/s", "points": pts(_per_second(in_time_rule, grid, step))},
            {"label": "rejections, admit iff predicted wait ≤ timeout", "unit": "requests/s",
             "points": pts(_per_second(ruled.rejected, grid, step))},
        ],
    }
    caption = (
        f"The discrete simulator (engine_sim.simulate_queue) on this variant: evenly spaced "
        f"arrivals at {p['spike_rate']}/s for {p['spike_s']} s from t = 0, then {p['base_rate']}/s; "
        f"one server at {p['service_rate']} requests/s; clients give up after "
        f"{timeout} s. Each point counts the events in the {step:g} s from its time, per second: "
        "a service is counted when it starts.")
    return {"timeline": Evidence("Arrivals, services and rejections per second, with and "
                                 "without the rule", "overload_timeline.json", "series", data,
                                 caption)}


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [Holds(p["base_rate"] < p["service_rate"] < p["spike_rate"],
                  "underloaded before and after the spike, overloaded during it")]
