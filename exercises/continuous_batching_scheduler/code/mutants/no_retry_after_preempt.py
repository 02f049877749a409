"""MUTANT: after preempting a victim the request that needed the blocks is skipped for this step instead of retried."""
from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Model = Callable[[list[list[int]]], list[int]]


@dataclass
class Request:
    rid: str
    prompt: list[int]
    max_new_tokens: int
    eos_id: int = -1
    output: list[int] = field(default_factory=list)
    num_computed: int = 0
    blocks: list[int] = field(default_factory=list)
    status: Literal["WAITING", "RUNNING", "PREEMPTED", "FINISHED"] = "WAITING"

    @property
    def num_tokens(self) -> int:
        return len(self.prompt) + len(self.output)


class BlockAllocator:
    def __init__(self, num_blocks: int) -> None:
        self.free: deque[int] = deque(range(num_blocks))

    def allocate(self, k: int) -> list[int] | None:
        if k > len(self.free):
            return None  # all or nothing: a partial grant would strand blocks
        return [self.free.popleft() for _ in range(k)]

    def release(self, blocks: list[int]) -> None:
        self.free.extend(blocks)


@dataclass
class StepOutput:
    scheduled: dict[str, int] = field(default_factory=dict)
    preempted: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    stream: list[tuple[str, int]] = field(default_factory=list)


class Scheduler:
    def __init__(self, num_blocks: int, block_size: int, max_num_seqs: int,
                 max_num_batched_tokens: int, model: Model) -> None:
        self.allocator = BlockAllocator(num_blocks)
        self.block_size = block_size
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.model = model
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []  # in admission order: the last one is the next victim

    def add_request(self, req: Request) -> None:
        req.status = "WAITING"
        self.waiting.append(req)

    def _blocks_needed(self, req: Request, n: int) -> int:
        # The last block may have free slots: count blocks for the new total, minus those held.
        return -(-(req.num_computed + n) // self.block_size) - len(req.blocks)

    def _preempt(self, req: Request) -> None:
        self.allocator.release(req.blocks)
        req.blocks = []
        req.num_computed = 0  # the KV is gone; the sampled tokens in `output` are kept
        req.status = "PREEMPTED"
        self.waiting.appendleft(req)  # ahead of every later arrival

    def step(self) -> StepOutput:
        out = StepOutput()
        budget = self.max_num_batched_tokens
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            n = min(req.num_tokens - req.num_computed, budget)
            new = self.allocator.allocate(self._blocks_needed(req, n))
            while new is None:
                victim = self.running.pop()  # the most recently admitted
                self._preempt(victim)
                out.preempted.append(victim.rid)
                # Never nonzero here: running requests are scheduled in admission order and the
                # victim is the last admitted, so it cannot have been scheduled yet this step.
                budget += out.scheduled.pop(victim.rid, 0)
                break
            if new is None:
                if req.status == "PREEMPTED":
                    break  # the request was its own victim
                i += 1
                continue
            req.blocks += new
            out.scheduled[req.rid] = n
            budget -= n
            i += 1
        # A step that had to preempt has shown the pool is short: admit nobody.
        while (not out.preempted and self.waiting and budget > 0
               and len(self.running) < self.max_num_seqs):
            req = self.waiting[0]
            n = min(req.num_tokens, budget)
            new = self.allocator.allocate(self._blocks_needed(req, n))
            if new is None:
                break  # FIFO: nobody overtakes the head of the queue
            self.waiting.popleft()
            req.blocks, req.status = new, "RUNNING"
            self.running.append(req)
            out.scheduled[req.rid] = n
            budget -= n
        # "Run the model": the step's tokens now have KV; sample where the sequence is complete.
        ready = []
        for req in self.running:
            if req.rid in out.scheduled:
                req.num_computed += out.scheduled[req.rid]
                if req.num_computed == req.num_tokens:
                    ready.append(req)
        if ready:
            tokens = self.model([r.prompt + r.output for r in ready])
            for req, tok in zip(ready, tokens, strict=True):
                req.output.append(tok)
                out.stream.append((req.rid, tok))
                if tok == req.eos_id or len(req.output) >= req.max_new_tokens:
                    self.allocator.release(req.blocks)
                    req.blocks, req.status = [], "FINISHED"
                    self.running.remove(req)
                    out.finished.append(req.rid)
        return out
