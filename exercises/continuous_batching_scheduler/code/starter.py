"""A continuous-batching scheduler: admit, chunk, preempt, sample, stream.

Fill in BlockAllocator and Scheduler. The grader builds `Scheduler(...)` with a fake model, adds
each request at its arrival step (before that step's `step()` call), calls `step()` until every
request has finished, and after every step reads `scheduler.running`, `scheduler.waiting`, each
request's fields and the calls made to `scheduler.allocator`. Standard library only.

The rules, in the order one step applies them (the statement has them with examples):

1. Budget. A step computes at most `max_num_batched_tokens` tokens in total.
2. Running requests first, in admission order (`running[0]` first). Each one gets
   n = min(len(prompt) + len(output) - num_computed, budget left) tokens: a decode step is 1,
   a prefill (or a recompute after preemption) goes in chunks. When the budget is 0, stop.
3. Blocks. A request that computes n more tokens needs
   ceil((num_computed + n) / block_size) - len(blocks) new blocks (its last block may have room).
   Get them with ONE `self.allocator.allocate(k)` call (only when k > 0).
4. Preemption. If allocate returns None, preempt the most recently admitted running request
   (`running[-1]`): release its blocks, set blocks = [], num_computed = 0, status
   "PREEMPTED", keep its output, and put it at the HEAD of `waiting`. Then try the allocation
   again; repeat. If the victim is the request being scheduled itself, stop scheduling running
   requests for this step. (Running requests go in admission order and the victim is always the
   last admitted, so a victim was never scheduled earlier in the same step.)
5. Admission, only if this step preempted nobody: take requests from the head of `waiting`
   while budget is left and len(running) < max_num_seqs. Each gets n = min(len(prompt) +
   len(output), budget left) tokens and needs ceil(n / block_size) blocks; if allocate returns
   None, stop admitting (no later request overtakes the head). An admitted request gets status
   "RUNNING" and is appended to `running`.
6. Run. Add each scheduled request's n to its num_computed. Every scheduled request whose
   num_computed now equals len(prompt) + len(output) samples: call the model ONCE with their
   sequences (prompt + output), in scheduling order, and append each returned token to its
   request's output and to the step's stream. Do not call the model if nobody samples.
7. Finish. A request that sampled eos_id, or now has max_new_tokens tokens of output, finishes:
   release its blocks (blocks = []), status "FINISHED", remove it from `running`.

Blocks: BlockAllocator keeps a first-in-first-out free list that starts as 0, 1, ...,
num_blocks - 1. allocate(k) takes the first k ids from the front; release(ids) appends them to
the back in the order given. A request's blocks are always released with one
release(req.blocks) call, in the order the request got them.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

# The model: given the sequences that sample this step, the next token for each one.
Model = Callable[[list[list[int]]], list[int]]


@dataclass
class Request:
    rid: str
    prompt: list[int]
    max_new_tokens: int
    eos_id: int = -1  # -1: no EOS token, finish only at max_new_tokens
    output: list[int] = field(default_factory=list)  # sampled tokens, kept across preemption
    num_computed: int = 0  # tokens (prompt first, then output) whose KV is in `blocks`
    blocks: list[int] = field(default_factory=list)  # block ids, in the order obtained
    status: Literal["WAITING", "RUNNING", "PREEMPTED", "FINISHED"] = "WAITING"


class BlockAllocator:
    def __init__(self, num_blocks: int) -> None:
        """A free list holding block ids 0 .. num_blocks - 1, in that order."""
        raise NotImplementedError

    def allocate(self, k: int) -> list[int] | None:
        """All or nothing: the first k free ids (from the front), or None if fewer are free."""
        raise NotImplementedError

    def release(self, blocks: list[int]) -> None:
        """Return blocks to the back of the free list, in the order given."""
        raise NotImplementedError


@dataclass
class StepOutput:
    scheduled: dict[str, int] = field(default_factory=dict)  # rid -> tokens computed, in order
    preempted: list[str] = field(default_factory=list)  # in the order preempted
    finished: list[str] = field(default_factory=list)  # in scheduling order
    stream: list[tuple[str, int]] = field(default_factory=list)  # (rid, token) sampled this step


class Scheduler:
    def __init__(self, num_blocks: int, block_size: int, max_num_seqs: int,
                 max_num_batched_tokens: int, model: Model) -> None:
        self.allocator = BlockAllocator(num_blocks)  # every block goes through this object
        self.waiting: deque[Request] = deque()  # queue order: the head is admitted first
        self.running: list[Request] = []  # admission order: the last one is the next victim
        raise NotImplementedError

    def add_request(self, req: Request) -> None:
        """Append a new request to the tail of `waiting` (status "WAITING")."""
        raise NotImplementedError

    def step(self) -> StepOutput:
        """One engine step: schedule (rules 1-5), run and sample (6), finish (7)."""
        raise NotImplementedError
