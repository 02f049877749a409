# Bug: max_concurrency's time_avg uses the continuous footprint prompt_len + output_len / 2 in tokens, ignoring block rounding.
"""Mutant of the reference ledger (see the first line)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Policy = Literal["current_length", "reserve_max"]
Mode = Literal["worst", "mean_end", "time_avg"]


@dataclass
class LedgerConfig:
    num_blocks: int
    block_size: int
    max_num_seqs: int
    watermark_blocks: int = 0
    policy: Policy = "current_length"


@dataclass
class Req:
    rid: str
    arrival_step: int
    prompt_len: int
    output_len: int
    max_tokens: int


@dataclass
class StepRecord:
    step: int
    used_blocks: int
    running: list[str]
    preempted: list[str]
    finished: list[str]


@dataclass
class LedgerTrace:
    steps: list[StepRecord] = field(default_factory=list)


def blocks_needed(num_tokens: int, block_size: int) -> int:
    return -(-num_tokens // block_size)


def first_exhaustion_step(n: int, prompt_len: int, block_size: int,
                          num_blocks: int) -> int | None:
    if n <= 0:
        return None
    # Step t holds blocks_needed(prompt_len + t) per request; the pool overflows once that is
    # more than num_blocks // n, i.e. once prompt_len + t passes block_size * (num_blocks // n).
    return max(0, block_size * (num_blocks // n) - prompt_len + 1)


def max_concurrency(num_blocks: int, block_size: int, prompt_len: int, output_len: int,
                    mode: Mode) -> int:
    if mode == "worst":
        return num_blocks // blocks_needed(prompt_len + output_len, block_size)
    if mode == "mean_end":
        return num_blocks // blocks_needed(prompt_len + output_len - 1, block_size)
    if mode == "time_avg":
        return int(num_blocks * block_size / (prompt_len + output_len / 2))
    raise ValueError(f"unknown mode {mode!r}")


@dataclass
class _Live:
    req: Req
    generated: int = 0
    blocks: int = 0


def simulate(cfg: LedgerConfig, reqs: list[Req]) -> LedgerTrace:
    trace = LedgerTrace()
    if not reqs:
        return trace
    pending = sorted((_Live(r) for r in reqs), key=lambda s: s.req.arrival_step)  # stable
    waiting: list[_Live] = []
    running: list[_Live] = []
    free = cfg.num_blocks
    left = len(reqs)
    step = 0
    while left:
        while pending and pending[0].req.arrival_step <= step:
            waiting.append(pending.pop(0))
        # 1. Running requests grow, oldest first; the newest is preempted when the pool is short.
        preempted: list[_Live] = []
        i = 0
        while i < len(running):
            s = running[i]
            if cfg.policy == "current_length":
                extra = blocks_needed(s.req.prompt_len + s.generated, cfg.block_size) - s.blocks
                while extra > free:
                    victim = running.pop()
                    free += victim.blocks
                    victim.blocks = 0
                    preempted.append(victim)
                    if victim is s:
                        break
                if preempted and preempted[-1] is s:
                    break
                free -= extra
                s.blocks += extra
            i += 1
        waiting[:0] = reversed(preempted)  # back to the head, the oldest of them first
        # 2. Admission from the head of the queue, only in a step that preempted nobody.
        if not preempted:
            while waiting and len(running) < cfg.max_num_seqs:
                s = waiting[0]
                if cfg.policy == "reserve_max":
                    need = blocks_needed(s.req.prompt_len + s.req.max_tokens, cfg.block_size)
                else:
                    need = blocks_needed(s.req.prompt_len + s.generated, cfg.block_size)
                if need + cfg.watermark_blocks > free:
                    break
                waiting.pop(0)
                free -= need
                s.blocks = need
                running.append(s)
        # 3. Every running request samples one token; those that reach output_len finish.
        finished: list[str] = []
        still: list[_Live] = []
        for s in running:
            s.generated += 1
            if s.generated >= s.req.output_len:
                free += s.blocks
                s.blocks = 0
                finished.append(s.req.rid)
                left -= 1
            else:
                still.append(s)
        running = still
        trace.steps.append(StepRecord(step, cfg.num_blocks - free, [s.req.rid for s in running],
                                      [v.req.rid for v in preempted], finished))
        step += 1
    return trace
