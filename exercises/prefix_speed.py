"""The large speed case of the two prefix-cache exercises (Q27 chained_block_hash, Q40
block_pool_hash_chain): the prompts that fill the cache and the prefixes then looked up.

The driver that plays it runs in the student's process, which can replace any of it, so the
workload is drawn from the case's seed (a submission's own: a constant one could be played at
import, before the relay's timed window opens) and nothing in it repeats (a lookup made twice
could be made once and its result copied).

Standard library only: it is copied into the sandbox beside the driver (both parts list it in
`sandbox_modules`), and imported by its plain name there and in the worker.
"""
from __future__ import annotations

import random
import struct

# `typing` costs start-up time in every sandbox run; the annotations are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def speed_workload(spec: dict[str, Any]) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """`fill` distinct prompts of `fill_blocks` full blocks plus one token, and `probes` distinct
    (prompt index, prefix blocks) pairs to look up, all drawn from the spec's seed."""
    rng = random.Random(spec["seed"])
    B, F, P = spec["block_size"], spec["fill_blocks"], spec["fill"]
    n = B * F + 1
    # Token ids from random bytes, decoded in C: drawing them one by one with randrange would
    # cost the reference more than its lookups, and drawing is timed with the rest of the case.
    flat = list(struct.unpack(f"<{n * P}H", rng.randbytes(2 * n * P)))
    prompts = [flat[i * n:(i + 1) * n] for i in range(P)]
    # Without replacement: the same prefix twice would give a lookup whose result can be copied.
    probes = [(x // F, x % F + 1) for x in rng.sample(range(P * F), spec["probes"])]
    return prompts, probes
