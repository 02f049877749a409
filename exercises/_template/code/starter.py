"""Blocks for a request's KV cache. Write blocks_needed below; keep its name and arguments."""
from __future__ import annotations


def blocks_needed(num_tokens: int, block_size: int) -> int:
    """The KV-cache blocks that hold `num_tokens` tokens at `block_size` tokens per block: a
    partly filled block is a whole block. Raise ValueError for a negative `num_tokens` or a
    `block_size` below 1."""
    raise NotImplementedError
