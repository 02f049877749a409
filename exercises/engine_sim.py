"""A small, seeded, pure-Python simulator of one LLM serving engine and of a request queue.

The scheduling exercises (Q07, Q10, Q12, Q13, Q28, Q30, Q36) use it to compute reference answers
that have no closed form and to draw per-variant timelines (TTFT and inter-token gaps per request).
It is standard-library only and imports nothing else of ours, so a code part's driver can run the
same simulator inside the sandbox around a student's policy function.

Two models:

* `simulate(requests, config, cost, order)`: iteration-level batching as vLLM V1 does it. Each
  step has a token budget; running requests are scheduled first (a decode costs 1 token, a
  partial prefill a chunk), then waiting requests in the order a policy returns, until the
  budget, the sequence cap or the KV pool runs out. KV is paged (`block_size` tokens per block).
  With `admission="current_length"` a request holds the blocks its computed tokens need and,
  when a running request cannot grow, the last admitted running request is preempted by
  recompute (its blocks freed, it goes back to the head of the queue and re-prefills prompt +
  generated tokens); no waiting request is admitted in a step that preempted.
  With `admission="reserve_max"` (TensorRT-LLM's GUARANTEED_NO_EVICT) a request is admitted only
  if blocks for prompt + max_tokens can be reserved, and nothing is ever preempted.
* `simulate_queue(arrivals, service_rate, timeout_s, ...)`: one FIFO queue in front of a server
  with fixed capacity (requests per second), clients that give up after `timeout_s`, and optional
  admission rules (a queue cap, dropping expired requests at dequeue).

Token accounting: a request needs `prompt + generated - computed` tokens of compute. A step that
brings `computed` up to `prompt + generated` samples one token at the step's end (the first one
is the TTFT); a decode step therefore computes exactly one token. The step-time model is additive
(memory-bound decode floor + FLOPs at an effective rate, no overlap); see `StepCost`.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Admission = Literal["current_length", "reserve_max"]
# A policy sees the waiting queue (queue order: preempted requests at the head, then arrivals in
# order) as plain dicts and returns request ids in the order to try them.
Order = Callable[[list[dict[str, Any]], float], Sequence[str]]


class SimulationError(RuntimeError):
    """The configuration cannot make progress (a prompt larger than the pool or the budget), or
    a policy returned something other than a permutation of the waiting ids."""


@dataclass(frozen=True)
class Request:
    rid: str
    arrival: float  # seconds
    prompt: int  # prompt tokens
    output: int  # tokens it will generate (the scheduler does not know this)
    max_tokens: int = 0  # the client's cap, what reserve_max reserves; 0 means `output`

    @property
    def cap(self) -> int:
        return self.max_tokens or self.output


@dataclass(frozen=True)
class StepCost:
    """Time of one engine step.

    step = (decode_step_s + kv_read_s_per_token * sum(decode contexts), if the step carries any
            decode) + prefill FLOPs / flops_per_s

    Prefill FLOPs of a chunk of `n` tokens starting at position `s`:
        flops_per_token * n + attn_coeff * n * (s + n / 2)
    (each new token attends to the tokens before it: causal attention, 4 * layers * q_dim FLOPs per
    attended token, so attn_coeff = 4 * L * d_q and a whole prompt N costs 2 * L * d_q * N^2).
    Decode compute is folded into the memory-bound floor: at decode batch sizes the step is bound
    by reading weights and KV, not by FLOPs.
    """

    flops_per_s: float  # effective: peak x GPUs x MFU
    flops_per_token: float = 0.0  # 2 x parameters
    attn_coeff: float = 0.0  # 4 x layers x q_dim
    decode_step_s: float = 0.0  # weights read per step / effective bandwidth
    kv_read_s_per_token: float = 0.0  # KV bytes per token / effective bandwidth

    def chunk_flops(self, start: int, length: int) -> float:
        return self.flops_per_token * length + self.attn_coeff * length * (start + length / 2)

    def step_time(self, chunks: Sequence[tuple[int, int]], decode_contexts: Sequence[int]) -> float:
        t = sum(self.chunk_flops(s, n) for s, n in chunks) / self.flops_per_s
        if decode_contexts:
            t += self.decode_step_s + self.kv_read_s_per_token * sum(decode_contexts)
        return t


@dataclass(frozen=True)
class EngineConfig:
    token_budget: int  # tokens per step (vLLM max_num_batched_tokens)
    max_seqs: int = 256  # running requests at most (max_num_seqs)
    chunked_prefill: bool = True  # False: a prompt is scheduled whole or not at all
    long_prefill_cap: int = 0  # tokens one request may prefill per step; 0 = no cap
    kv_blocks: int = 0  # blocks in the pool; 0 = unlimited
    block_size: int = 16
    admission: Admission = "current_length"


@dataclass
class Step:
    start: float
    duration: float
    prefill_tokens: int
    decode_tokens: int
    running: int  # requests running after the step's admissions
    waiting: int
    used_blocks: int
    preempted: tuple[str, ...] = ()
    admitted: tuple[str, ...] = ()


@dataclass
class RequestTrace:
    rid: str
    arrival: float
    prompt: int
    output: int
    token_times: list[float] = field(default_factory=list)  # when each output token appeared
    first_scheduled: float | None = None
    preemptions: int = 0

    @property
    def done(self) -> bool:
        return len(self.token_times) >= self.output

    @property
    def ttft(self) -> float:
        return self.token_times[0] - self.arrival

    @property
    def gaps(self) -> list[float]:
        """Inter-token gaps (what a streaming client sees between tokens)."""
        t = self.token_times
        return [b - a for a, b in zip(t, t[1:], strict=False)]

    @property
    def e2e(self) -> float:
        return self.token_times[-1] - self.arrival


@dataclass
class SimResult:
    steps: list[Step]
    requests: dict[str, RequestTrace]

    @property
    def makespan(self) -> float:
        return max(r.token_times[-1] for r in self.requests.values())

    def mean_ttft(self, rids: Sequence[str] | None = None) -> float:
        chosen = [self.requests[r] for r in rids] if rids is not None else self.requests.values()
        values = [r.ttft for r in chosen]
        return sum(values) / len(values)

    @property
    def preemptions(self) -> int:
        return sum(len(s.preempted) for s in self.steps)


# ----------------------------------------------------------------------------------------------
# Policies (orderings of the waiting queue)


def fcfs(waiting: list[dict[str, Any]], now: float) -> list[str]:
    """Queue order: preempted requests first, then arrivals in order."""
    return [w["rid"] for w in waiting]


def shortest_prefill_first(waiting: list[dict[str, Any]], now: float) -> list[str]:
    """Fewest prefill tokens left first; ties in queue order."""
    return [w["rid"] for w in sorted(waiting, key=lambda w: w["prefill_left"])]


def with_aging(tokens_per_s: float) -> Order:
    """Shortest prefill first, but every second of waiting takes `tokens_per_s` tokens off a
    request's key, so a long prompt cannot wait forever."""
    def order(waiting: list[dict[str, Any]], now: float) -> list[str]:
        return [w["rid"] for w in sorted(
            waiting, key=lambda w: w["prefill_left"] - tokens_per_s * (now - w["arrival"]))]
    return order


# ----------------------------------------------------------------------------------------------
# The engine


# Identity equality (eq=False): the queues' `in` and `remove` compare states at every step,
# and each state is one request (its index is unique), so field-by-field equality said the same
# thing at several times the cost. Slots: the step loop reads these fields millions of times.
@dataclass(eq=False, slots=True)
class _State:
    req: Request
    index: int  # arrival order, the tie-break everywhere
    computed: int = 0
    generated: int = 0
    blocks: int = 0
    prompt: int = field(init=False)  # req.prompt, read at every step
    output: int = field(init=False)  # req.output

    def __post_init__(self) -> None:
        self.prompt = self.req.prompt
        self.output = self.req.output

    @property
    def needed(self) -> int:
        return self.prompt + self.generated - self.computed


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def simulate(requests: Sequence[Request], config: EngineConfig, cost: StepCost,
             order: Order = fcfs, *, max_steps: int = 1_000_000) -> SimResult:
    """Run every request to completion; returns the step log and each request's token times."""
    if config.token_budget <= 0 or config.max_seqs <= 0 or config.block_size <= 0:
        raise SimulationError("token_budget, max_seqs and block_size must be positive")
    states = [_State(r, i) for i, r in enumerate(sorted(requests, key=lambda r: r.arrival))]
    if len({s.req.rid for s in states}) != len(states):
        raise SimulationError("request ids must be unique")
    for s in states:
        if s.req.prompt <= 0 or s.req.output <= 0 or s.req.cap < s.req.output:
            raise SimulationError(f"{s.req.rid}: prompt and output must be positive and "
                                  "max_tokens at least the output")
        # Unchunked, a prompt is scheduled whole; a request preempted by recompute re-prefills
        # prompt + generated tokens in one go, which must fit too.
        can_preempt = bool(config.kv_blocks) and config.admission == "current_length"
        longest = s.req.prompt + (s.req.output - 1 if can_preempt else 0)
        if not config.chunked_prefill and longest > config.token_budget:
            raise SimulationError(f"{s.req.rid}: {longest} tokens to prefill at once exceed the "
                                  "token budget and prefill is not chunked")
        if config.kv_blocks and blocks_for(_peak_tokens(s.req, config), config.block_size) \
                > config.kv_blocks:
            raise SimulationError(f"{s.req.rid}: needs more KV blocks than the pool holds")
    traces = {s.req.rid: RequestTrace(s.req.rid, s.req.arrival, s.req.prompt, s.req.output)
              for s in states}
    pending = states  # not yet arrived, by arrival; the next is pending[arrived]
    arrived = 0
    waiting: list[_State] = []
    running: list[_State] = []
    free = config.kv_blocks or math.inf
    steps: list[Step] = []
    now = 0.0
    # The loop below runs once per engine step (tens of thousands per evidence timeline, made
    # while a student waits for the page): the config's fields are read into locals, and a
    # request's tokens to compute (_State.needed) are written out inline.
    budget_per_step, max_seqs = config.token_budget, config.max_seqs
    block_size, chunked = config.block_size, config.chunked_prefill
    cap = config.long_prefill_cap
    grows = config.admission == "current_length"

    while arrived < len(pending) or waiting or running:
        while arrived < len(pending) and pending[arrived].req.arrival <= now:
            waiting.append(pending[arrived])
            arrived += 1
        if not waiting and not running:
            now = pending[arrived].req.arrival
            continue
        if len(steps) >= max_steps:
            raise SimulationError(f"more than {max_steps} steps")

        budget = budget_per_step
        scheduled: list[tuple[_State, int]] = []
        preempted: list[_State] = []
        # 1. Running requests first, in admission order.
        i = 0
        while i < len(running) and budget > 0:
            s = running[i]
            n = _chunk(s.prompt + s.generated - s.computed, budget, cap)
            if grows:
                need = blocks_for(s.computed + n, block_size) - s.blocks
                while need > free:
                    victim = running.pop()
                    free += victim.blocks
                    victim.blocks = 0
                    victim.computed = 0
                    preempted.append(victim)
                    traces[victim.req.rid].preemptions += 1
                    if victim is s:
                        break
                if preempted and s is preempted[-1]:
                    break
                free -= need
                s.blocks += need
            scheduled.append((s, n))
            budget -= n
            i += 1
        for victim in preempted:  # each back to the head: the earliest-admitted ends first
            waiting.insert(0, victim)

        # 2. Waiting requests, in the policy's order, only if nobody was preempted.
        admitted: list[_State] = []
        if not preempted and waiting:
            view = [_view(w, now) for w in waiting]
            ids = list(order(view, now))
            by_id = {w.req.rid: w for w in waiting}
            # A permutation of the waiting ids: as many, and the same set (ids are unique).
            if len(ids) != len(by_id) or set(map(str, ids)) != by_id.keys():
                raise SimulationError("the policy must return each waiting id exactly once")
            for rid in ids:
                s = by_id[rid]
                if budget <= 0 or len(running) >= max_seqs:
                    break
                needed = s.prompt + s.generated - s.computed
                if not chunked and needed > budget:
                    break
                n = _chunk(needed, budget, cap)
                if grows:
                    need = blocks_for(s.computed + n, block_size)
                else:
                    need = blocks_for(_peak_tokens(s.req, config), block_size)
                if need > free:
                    break
                free -= need
                s.blocks += need
                waiting.remove(s)
                running.append(s)
                admitted.append(s)
                scheduled.append((s, n))
                budget -= n
                trace = traces[rid]
                if trace.first_scheduled is None:
                    trace.first_scheduled = now

        if not scheduled:
            raise SimulationError("no request could be scheduled: the pool or the budget is too "
                                  "small for the request at the head of the queue")
        # A scheduled request still prefilling (more than one token to compute, or none sampled
        # yet) is a chunk; the rest are decodes.
        chunks: list[tuple[int, int]] = []
        decodes: list[int] = []
        for s, n in scheduled:
            if s.prompt + s.generated - s.computed > 1 or s.generated == 0:
                chunks.append((s.computed, n))
            else:
                decodes.append(s.computed)
        duration = cost.step_time(chunks, decodes)
        end = now + duration
        for s, n in scheduled:
            s.computed += n
            if s.prompt + s.generated == s.computed:  # caught up: sample at the step's end
                s.generated += 1
                traces[s.req.rid].token_times.append(end)
        finished = [s for s in running if s.generated >= s.output]
        for s in finished:
            running.remove(s)
            free += s.blocks
            s.blocks = 0
        used = (config.kv_blocks - free) if config.kv_blocks else sum(s.blocks for s in running)
        steps.append(Step(now, duration, sum(n for _, n in chunks) if chunks else 0,
                          len(decodes), len(running), len(waiting), int(used),
                          tuple(v.req.rid for v in preempted),
                          tuple(a.req.rid for a in admitted)))
        now = end
    return SimResult(steps, traces)


def _peak_tokens(req: Request, config: EngineConfig) -> int:
    # The most KV a request can hold: prompt + all but the last sampled token (never fed back).
    # reserve_max reserves prompt + max_tokens, as GUARANTEED_NO_EVICT does.
    if config.admission == "reserve_max":
        return req.prompt + req.cap
    return req.prompt + req.output - 1


def _chunk(needed: int, budget: int, cap: int) -> int:
    """Tokens a request computes this step: what it needs, within the budget left, and within
    the per-request prefill cap (0 = none) while it is still prefilling."""
    n = needed if needed < budget else budget
    if cap and needed > 1 and cap < n:
        n = cap
    return n


def _view(s: _State, now: float) -> dict[str, Any]:
    return {"rid": s.req.rid, "arrival": s.req.arrival, "prompt": s.req.prompt,
            "prefill_left": s.needed, "generated": s.generated, "waited": now - s.req.arrival}


# ----------------------------------------------------------------------------------------------
# The request queue (Q13): capacity, client timeouts, admission rules


@dataclass
class QueueResult:
    served: list[tuple[float, float, float]]  # (arrival, start of service, end) of live requests
    dead: list[tuple[float, float]]  # (arrival, start): served after the client had given up
    dropped: list[float]  # arrivals dropped at dequeue because they had expired
    rejected: list[float]  # arrivals turned away at once
    busy_on_dead_s: float  # server time spent on requests nobody waits for

    def max_wait(self) -> float:
        waits = [start - a for a, start, _ in self.served]
        return max(waits) if waits else 0.0


def spike_arrivals(base_rate: float, spike_rate: float, spike_start: float, spike_s: float,
                   horizon: float) -> list[float]:
    """Deterministic arrivals, evenly spaced: `base_rate` per second, `spike_rate` during
    [spike_start, spike_start + spike_s)."""
    out: list[float] = []
    t = 0.0
    while t < horizon:
        out.append(t)
        rate = spike_rate if spike_start <= t < spike_start + spike_s else base_rate
        t += 1.0 / rate
    return out


def segment_arrivals(segments: Sequence[Sequence[float]], bursts: Sequence[Sequence[float]] = (),
                     poisson_seed: int | None = None) -> list[float]:
    """Arrival times, sorted: back-to-back segments [duration_s, rate_per_s] from t = 0, evenly
    spaced in each (or exponential gaps drawn from `poisson_seed`), plus bursts [t, n] of n
    simultaneous arrivals. The admission-rule code part builds its workloads with this, in the
    sandbox (to run the rule) and in the worker (to replay the rule's decisions)."""
    out: list[float] = []
    rng = random.Random(poisson_seed) if poisson_seed is not None else None
    start = 0.0
    for duration, rate in segments:
        end = start + duration
        if rate > 0:
            if rng is None:
                k = 0
                while start + k / rate < end:
                    out.append(start + k / rate)
                    k += 1
            else:
                t = start + rng.expovariate(rate)
                while t < end:
                    out.append(t)
                    t += rng.expovariate(rate)
        start = end
    for t, n in bursts:
        out.extend([float(t)] * int(n))
    out.sort()
    return out


# An admission rule sees one arrival's situation and says whether to queue it.
Admit = Callable[[dict[str, float]], bool]


def simulate_queue(arrivals: Sequence[float], service_rate: float, timeout_s: float, *,
                   queue_cap: int | None = None, drop_expired: bool = False,
                   admit: Admit | None = None) -> QueueResult:
    """A single FIFO server completing `service_rate` requests per second (service time
    1/service_rate each). A client waits `timeout_s` for service to start, then gives up; without
    `drop_expired` the server still serves its request (dead work). `queue_cap` rejects an
    arrival that finds that many requests already waiting; `admit`, if given, is asked for every
    arrival with {"now", "queue_len", "predicted_wait_s" (until its service would start),
    "service_rate", "timeout_s"} and rejects it by returning False."""
    service = 1.0 / service_rate
    served: list[tuple[float, float, float]] = []
    dead: list[tuple[float, float]] = []
    dropped: list[float] = []
    rejected: list[float] = []
    queue: list[float] = []
    busy_until = 0.0
    busy_on_dead = 0.0
    arrivals = sorted(arrivals)
    i = 0
    while i < len(arrivals) or queue:
        # The next event: an arrival, or the server freeing up while someone waits.
        next_arrival = arrivals[i] if i < len(arrivals) else math.inf
        if queue and busy_until <= next_arrival:
            now = max(busy_until, queue[0])
            a = queue.pop(0)
            expired = now - a > timeout_s
            if expired and drop_expired:
                dropped.append(a)
                continue
            busy_until = now + service
            if expired:
                dead.append((a, now))
                busy_on_dead += service
            else:
                served.append((a, now, busy_until))
            continue
        a = next_arrival
        i += 1
        waiting_now = len(queue)
        if queue_cap is not None and waiting_now >= queue_cap:
            rejected.append(a)
            continue
        if admit is not None:
            wait = max(busy_until - a, 0.0) + waiting_now * service
            if not admit({"now": a, "queue_len": float(waiting_now), "predicted_wait_s": wait,
                          "service_rate": float(service_rate), "timeout_s": float(timeout_s)}):
                rejected.append(a)
                continue
        queue.append(a)
    return QueueResult(served, dead, dropped, rejected, busy_on_dead)
