"""Reference for the template's code part: the KV-cache blocks a request holds."""
from __future__ import annotations


def blocks_needed(num_tokens: int, block_size: int) -> int:
    """The KV-cache blocks that hold `num_tokens` tokens at `block_size` tokens per block: a
    partly filled block is a whole block. Raise ValueError for a negative `num_tokens` or a
    `block_size` below 1."""
    if num_tokens < 0 or block_size < 1:
        raise ValueError(f"need num_tokens >= 0 and block_size >= 1, got {num_tokens}, "
                         f"{block_size}")
    return -(-num_tokens // block_size)  # the ceiling in integers: no float rounding
