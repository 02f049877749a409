"""What the drivers of the two hash-chain prefix-cache exercises (Q27 chained_block_hash, Q40
block_pool_hash_chain) share: playing a script of operations, reading block ids back, and the
large speed case (the prompts that fill the cache, the prefixes then looked up, the digest of
every result). The checks' side of the same pair is exercises/prefix_scripts.py.

The driver that plays the speed case runs in the student's process, which can replace any of
it, so the workload is drawn from the case's seed (a submission's own: a constant one could be
played at import, before the relay's timed window opens) and nothing in it repeats (a lookup
made twice could be made once and its result copied).

Standard library only: it is copied into the sandbox beside the driver (both parts list it in
`sandbox_modules`), and imported by its plain name there and in the worker.
"""
from __future__ import annotations

import hashlib
import json
import random
import struct

# `typing` costs start-up time in every sandbox run; the annotations are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def play_ops(module: Any, ops: list[list[Any]], step: Callable[[list[Any]], dict[str, Any]],
             describe: Callable[[BaseException, Any], str]) -> list[dict[str, Any]]:
    """`step(op)` for each op in turn. The first op that raises ends the script with
    {"error": describe(exc, module)} as its step, so the checks can say which call raised what;
    a MemoryError propagates (it is the memory limit's verdict, not this case's error)."""
    steps: list[dict[str, Any]] = []
    for op in ops:
        try:
            steps.append(step(op))
        except MemoryError:
            raise
        except (Exception, SystemExit) as exc:  # a student's sys.exit() must not end the run
            steps.append({"error": describe(exc, module)})
            break
    return steps


def block_ids(value: Any, what: str) -> list[int]:
    """A returned list (or tuple) of block ids as plain ints; TypeError naming `what` else."""
    if not isinstance(value, list | tuple) or not all(
            isinstance(b, int) and not isinstance(b, bool) for b in value):
        raise TypeError(f"{what} returned {value!r:.80}, expected a list of block ids (int)")
    return [int(b) for b in value]


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


def play_speed(cache: Any, block_size: int, prompts: list[list[int]],
               probes: list[tuple[int, int]]) -> list[Any]:
    """Admit and finish every prompt on `cache` (filling it, evicting as it goes), then look up
    each probe's prefix once (its blocks plus one token). Returns every result, in order."""
    results: list[Any] = []
    for i, tokens in enumerate(prompts):
        results.append(cache.allocate(f"f{i}", tokens))
        cache.free(f"f{i}")
    lookup = cache.lookup  # bound once: the lookups are the timed work
    results.extend(lookup(prompts[j][: blocks * block_size + 1]) for j, blocks in probes)
    return results


def speed_digest(results: list[Any], probes: list[tuple[int, int]]) -> dict[str, Any]:
    """The speed case's output: a digest of every result (the checks compare it with the
    reference's; the results themselves are too many to send) and the number of lookups."""
    try:
        digest = hashlib.sha256(json.dumps(results).encode()).hexdigest()[:16]
    except (TypeError, ValueError):
        digest = "results not JSON-able"
    return {"digest": digest, "lookups": len(probes)}
