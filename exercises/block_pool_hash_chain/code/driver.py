"""Plays one test case against a BlockPool module: `run_case(module, case_input)`.

Runs inside the sandbox on the student's `submission.py` and in the worker on the reference.
Standard library only, plus the shared
driver_errors module (listed in the part's sandbox_modules).

Case input, one of:
  {"block_size": B, "num_blocks": N, "hash": "sha256" | "const" | "mod3", "ops": [op, ...]}
  {"speed": {"seed", "num_blocks", "block_size", "fill", "fill_blocks", "probes"}}
Ops:
  ["hashes", tokens, extra]              -> [hex, ...]           (pool.block_hashes)
  ["lookup", tokens, extra]              -> [ids]
  ["allocate", req_id, tokens, extra]    -> [ids, cached] or null
  ["free", req_id, tail_first]           -> null
Output: {"steps": [{"out": ..., "queue": [...], "num_free": n}, ...]}: every step records the
free queue (head first) and num_free() after it. The first op that raises ends the case with
{"error": "Type: message ..."} as its step. A speed case returns {"speed": {"digest",
"lookups"}}: one fill, then one lookup for each probe. The driver keeps no time: the relay
measures the case's CPU seconds outside the student's reach (runners/relay.py). Every result
enters the digest; the workload, and why nothing in it repeats, is prefix_speed.py's.
"""
from __future__ import annotations

from driver_errors import describe as _describe
from prefix_speed import block_ids as _ids
from prefix_speed import play_ops, speed_digest, speed_workload
from prefix_speed import play_speed as _play

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_OUTPUT_BYTES = 64_000


def _const(parent: bytes, tokens: tuple[int, ...], extra: object) -> bytes:
    # Every block of every prompt collides.
    return bytes(32)


def _mod3(parent: bytes, tokens: tuple[int, ...], extra: object) -> bytes:
    # Three buckets, chained through the parent's first byte: collisions at every level.
    return bytes([(sum(tokens) + parent[0]) % 3])


def _fast(parent: bytes, tokens: tuple[int, ...], extra: object) -> bytes:
    # The speed case's hash: cheap, so the time measured is the pool's own work. hash() of bytes
    # is salted per process, but only block ids reach the digest, and 64-bit collisions do not
    # occur at this size (a collision would only cost a verification anyway).
    return hash((parent, tokens, extra)).to_bytes(8, "little", signed=True)


HASHES: dict[str, Callable[[bytes, tuple[int, ...], object], bytes]] = {
    "const": _const, "mod3": _mod3}


def _count(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} returned {value!r:.40}, expected an int")
    return int(value)


def _step(pool: Any, op: list[Any]) -> dict[str, Any]:
    kind = op[0]
    step: dict[str, Any]
    if kind == "hashes":
        got = pool.block_hashes(list(op[1]), op[2])
        if not isinstance(got, list | tuple) or not all(isinstance(h, bytes | bytearray)
                                                        for h in got):
            raise TypeError(f"block_hashes returned {got!r:.80}, expected a list of bytes")
        step = {"out": [bytes(h).hex() for h in got]}
    elif kind == "lookup":
        step = {"out": _ids(pool.lookup(list(op[1]), op[2]), "lookup")}
    elif kind == "allocate":
        got = pool.allocate(op[1], list(op[2]), op[3])
        if got is None:
            step = {"out": None}
        else:
            if not isinstance(got, list | tuple) or len(got) != 2:
                raise TypeError(f"allocate returned {got!r:.80}, expected (block ids, cached "
                                "tokens) or None")
            step = {"out": [_ids(got[0], "allocate"), _count(got[1], "allocate (cached tokens)")]}
    elif kind == "free":
        if op[2]:
            pool.free(op[1])  # the default must be tail first
        else:
            pool.free(op[1], tail_first=False)
        step = {"out": None}
    else:
        raise ValueError(f"unknown op {kind!r}")
    step["queue"] = _ids(pool.free_order(), "free_order")
    step["num_free"] = _count(pool.num_free(), "num_free")
    return step


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    if "speed" in case_input:
        return {"speed": _speed(module, case_input["speed"])}
    try:
        if case_input["hash"] == "sha256":
            pool = module.BlockPool(case_input["num_blocks"], case_input["block_size"])
        else:
            pool = module.BlockPool(case_input["num_blocks"], case_input["block_size"],
                                    HASHES[case_input["hash"]])
    except MemoryError:
        raise
    except (Exception, SystemExit) as exc:
        return {"steps": [{"error": _describe(exc, module)}]}
    return {"steps": play_ops(module, case_input["ops"], lambda op: _step(pool, op), _describe)}


# ------------------------------------------------------------------ the speed case


def play_speed(module: Any, spec: dict[str, Any], prompts: list[list[int]],
               probes: list[tuple[int, int]]) -> list[Any]:
    """Admit and finish every prompt (filling the cache), then look up each probe's prefix once.
    Returns all results."""
    B = spec["block_size"]
    return _play(module.BlockPool(spec["num_blocks"], B, _fast), B, prompts, probes)


def _speed(module: Any, spec: dict[str, Any]) -> dict[str, Any]:
    prompts, probes = speed_workload(spec)
    return speed_digest(play_speed(module, spec, prompts, probes), probes)
