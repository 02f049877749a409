"""A page-level KV ledger: which requests hold how many KV blocks, step by step.

Implement the four functions below. Standard library only. The grader calls them on small
workloads and compares your per-step trace with a reference, so follow the rules exactly.

Vocabulary. A request has a prompt of `prompt_len` tokens and will generate `output_len` tokens
(the scheduler does not use output_len to admit it; it only tells the simulation when the
request ends). `max_tokens` >= output_len is the cap the client sent. The KV pool has
`num_blocks` blocks of `block_size` tokens each.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Policy = Literal["current_length", "reserve_max"]
Mode = Literal["worst", "mean_end", "time_avg"]


@dataclass
class LedgerConfig:
    num_blocks: int
    block_size: int
    max_num_seqs: int  # at most this many requests run at once
    watermark_blocks: int = 0  # admission keeps at least this many blocks free
    policy: Policy = "current_length"


@dataclass
class Req:
    rid: str
    arrival_step: int  # joins the waiting queue at the start of this step
    prompt_len: int  # >= 1
    output_len: int  # >= 1, tokens it generates before it finishes
    max_tokens: int  # >= output_len, the client's cap


@dataclass
class StepRecord:
    step: int  # 0, 1, 2, ...
    used_blocks: int  # blocks held at the end of the step
    running: list[str]  # ids running at the end of the step, oldest admission first
    preempted: list[str]  # ids preempted in this step, in the order they were preempted
    finished: list[str]  # ids that finished in this step, oldest admission first


@dataclass
class LedgerTrace:
    steps: list[StepRecord] = field(default_factory=list)


def blocks_needed(num_tokens: int, block_size: int) -> int:
    """Blocks that hold the KV of `num_tokens` tokens (a partly filled block counts whole).
    blocks_needed(0, 16) == 0, blocks_needed(16, 16) == 1, blocks_needed(17, 16) == 2."""
    raise NotImplementedError


def first_exhaustion_step(n: int, prompt_len: int, block_size: int,
                          num_blocks: int) -> int | None:
    """n requests with prompt_len-token prompts are admitted together at step 0 and never finish.

    At step t (t = 0 is the prefill, t >= 1 the t-th decode step) each holds
    blocks_needed(prompt_len + t) blocks: in step t it writes the KV of the token sampled at
    step t - 1. Return the first t >= 0 at which the n requests together need more than
    num_blocks blocks (0 if the prompts alone do not fit). Return None when n == 0.
    Example: first_exhaustion_step(256, 1500, 16, 26389) == 149.
    """
    raise NotImplementedError


def max_concurrency(num_blocks: int, block_size: int, prompt_len: int, output_len: int,
                    mode: Mode) -> int:
    """How many requests of this shape fit in the pool at once (rounded down), by mode:

    "worst":    each reserves blocks for prompt_len + output_len tokens up front (what
                reserve_max does when max_tokens == output_len): num_blocks // that.
    "mean_end": each is counted at the end of its life, when it holds the KV of
                prompt_len + output_len - 1 tokens (the last sampled token never gets KV).
    "time_avg": each is counted at its average over its output_len steps: at its k-th step
                (k = 0 .. output_len - 1) it holds blocks_needed(prompt_len + k). Return
                num_blocks * output_len // (sum of those blocks), in exact integer arithmetic.
    Examples: (26389, 16, 1500, 4000, "worst") -> 76; (26389, 16, 1500, 2500, "mean_end") -> 105.
    """
    raise NotImplementedError


def simulate(cfg: LedgerConfig, reqs: list[Req]) -> LedgerTrace:
    """Run every request to completion and return one StepRecord per step.

    Each step s = 0, 1, 2, ... does, in this order:

    1. Arrivals. Requests whose arrival_step == s join the tail of the waiting queue, in the
       order they appear in `reqs`.
    2. Growth (policy "current_length" only). Go through the running requests, oldest admission
       first. A request that has generated g tokens must hold blocks_needed(prompt_len + g)
       blocks after this step (it writes the KV of every token it has, including the one
       sampled last step). Take the extra blocks from the free pool. If there are not enough,
       preempt the NEWEST running request (the one admitted last): it frees all its blocks,
       keeps its g, and leaves `running`. Repeat until the extra blocks fit. If the request
       being grown is itself the newest, it preempts itself and the growth pass ends.
       Under "reserve_max" nothing grows and nothing is ever preempted.
    3. Requeue. The requests preempted in this step go back to the HEAD of the waiting queue,
       the oldest admission first, ahead of everyone already waiting.
    4. Admission, only if nobody was preempted in this step. Look at the head of the waiting
       queue: it is admitted if fewer than max_num_seqs requests are running and
       need + watermark_blocks <= free blocks, where need is
       blocks_needed(prompt_len + g) under "current_length" (g = 0 for a new request; a
       preempted request recomputes its prompt and the g tokens it had) and
       blocks_needed(prompt_len + max_tokens) under "reserve_max". An admitted request takes
       `need` blocks and joins the end of `running`; repeat with the new head. Stop at the
       first request that cannot be admitted (never skip ahead).
    5. Sampling. Every running request (grown or admitted in this step) generates one token:
       g += 1. A request with g == output_len finishes: it leaves `running` and frees all its
       blocks.
    6. Record StepRecord(s, used blocks, running ids, preempted ids, finished ids).

    Steps in which nothing runs (waiting for a later arrival) are recorded too. The trace ends
    with the step in which the last request finishes; no requests -> no steps. Inputs are
    valid: unique ids, every request fits an empty pool on its own (with the watermark), and
    max_num_seqs >= 1.
    """
    raise NotImplementedError
