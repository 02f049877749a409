"""Plays one test case against a prefix-cache module: `run_case(module, case_input)`.

Runs inside the sandbox on the student's `submission.py` and in the worker on the reference.
Standard library only, plus the shared
driver_errors module (listed in the part's sandbox_modules).

Case input, one of:
  {"block_size": B, "num_blocks": N, "hash": "sha256" | "blake2b", "ops": [op, ...]}
  {"speed": {"seed": s, "num_blocks": N, "block_size": B, "fill": P, "fill_blocks": F,
             "probes": Q, "fast_hash": bool}}
Ops:
  ["hash_block", parent_hex_or_null, tokens, extra]   -> hex
  ["request_hashes", tokens, extra]                   -> [hex, ...]
  ["lookup", tokens, extra]                           -> [ids, cached]
  ["allocate", req_id, tokens, extra]                 -> [ids, cached] or null
  ["free", req_id]                                    -> null
Output: {"steps": [{"out": ..., "queue": [...], "owners": [[...], ...]}, ...]}; model ops add the
free queue after the op, allocate adds blocks_for_hash of each of the prompt's full-block hashes
(hashed here, not by the module under test). The first op that raises ends the case with
{"error": "Type: message ..."} as its step. A speed case returns {"speed": {"digest",
"lookups"}}: one fill, then one lookup for each probe. The driver keeps no time: the relay
measures the case's CPU seconds outside the student's reach (runners/relay.py). Every result
enters the digest; the workload, and why nothing in it repeats, is prefix_speed.py's.
"""
from __future__ import annotations

import hashlib
import struct

from driver_errors import describe as _describe
from prefix_speed import block_ids as _ids
from prefix_speed import play_ops, speed_digest, speed_workload
from prefix_speed import play_speed as _play

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_OUTPUT_BYTES = 64_000
NONE_HASH = hashlib.sha256(b"seed").digest()


def _tok_bytes(tokens: tuple[int, ...]) -> bytes:
    return struct.pack(f"<{len(tokens)}i", *tokens)


def _sha256(parent: bytes, tokens: tuple[int, ...], extra: object) -> bytes:
    h = hashlib.sha256(parent)
    h.update(_tok_bytes(tokens))
    h.update(repr(extra).encode("utf-8"))
    return h.digest()


def _blake2b(parent: bytes, tokens: tuple[int, ...], extra: object) -> bytes:
    # A second, equally strong hash: the model must use the function it is given.
    return hashlib.blake2b(parent + _tok_bytes(tokens) + repr(extra).encode("utf-8"),
                           digest_size=32).digest()


def _fast_hash(parent: bytes, tokens: tuple[int, ...], extra: object) -> bytes:
    # The speed case's hash: cheap, so the time measured is the cache's own work. Python salts
    # hash() of bytes per process, but only block ids reach the digest, never hash values, and
    # 64-bit collisions do not happen at this size.
    return hash((parent, tokens, extra)).to_bytes(8, "little", signed=True)


HASHES: dict[str, Callable[[bytes, tuple[int, ...], object], bytes]] = {
    "sha256": _sha256, "blake2b": _blake2b}


def _chain(tokens: list[int], block_size: int, extra: object,
           fn: Callable[[bytes, tuple[int, ...], object], bytes]) -> list[bytes]:
    out, parent = [], NONE_HASH
    for i in range(len(tokens) // block_size):
        parent = fn(parent, tuple(tokens[i * block_size:(i + 1) * block_size]), extra)
        out.append(parent)
    return out


def _hex(value: Any, what: str) -> str:
    if not isinstance(value, bytes | bytearray):
        raise TypeError(f"{what} returned {type(value).__name__}, expected bytes")
    return bytes(value).hex()


def _pair(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise TypeError(f"{what} returned {value!r:.80}, expected (block ids, cached tokens)")
    cached = value[1]
    if not isinstance(cached, int) or isinstance(cached, bool):
        raise TypeError(f"{what} returned cached tokens {cached!r:.40}, expected an int")
    return [_ids(value[0], what), int(cached)]


def _step(module: Any, model: Any, op: list[Any], case: dict[str, Any],
          fn: Callable[[bytes, tuple[int, ...], object], bytes]) -> dict[str, Any]:
    kind = op[0]
    # The default hash is called without hash_fn, so the module's own default is tested too.
    kw = {} if case["hash"] == "sha256" else {"hash_fn": fn}
    if kind == "hash_block":
        parent = None if op[1] is None else bytes.fromhex(op[1])
        return {"out": _hex(module.hash_block_tokens(parent, list(op[2]), op[3], **kw),
                            "hash_block_tokens")}
    if kind == "request_hashes":
        got = module.request_block_hashes(list(op[1]), case["block_size"], op[2], **kw)
        if not isinstance(got, list | tuple):
            raise TypeError(f"request_block_hashes returned {type(got).__name__}, expected a list")
        return {"out": [_hex(h, "request_block_hashes") for h in got]}
    step: dict[str, Any]
    if kind == "lookup":
        step = {"out": _pair(model.lookup(list(op[1]), op[2]), "lookup")}
    elif kind == "allocate":
        got = model.allocate(op[1], list(op[2]), op[3])
        step = {"out": None if got is None else _pair(got, "allocate")}
        hashes = _chain(list(op[2]), case["block_size"], op[3], fn)
        step["owners"] = [_ids(model.blocks_for_hash(h), "blocks_for_hash") for h in hashes]
    elif kind == "free":
        model.free(op[1])
        step = {"out": None}
    else:
        raise ValueError(f"unknown op {kind!r}")
    step["queue"] = _ids(model.free_queue(), "free_queue")
    return step


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    if "speed" in case_input:
        return {"speed": _speed(module, case_input["speed"])}
    fn = HASHES[case_input["hash"]]
    model = None

    def step(op: list[Any]) -> dict[str, Any]:
        nonlocal model
        # Made at the first model op: a script of hash ops alone never builds one.
        if model is None and op[0] in ("lookup", "allocate", "free"):
            if case_input["hash"] == "sha256":
                model = module.PrefixCacheModel(case_input["num_blocks"],
                                                case_input["block_size"])
            else:
                model = module.PrefixCacheModel(case_input["num_blocks"],
                                                case_input["block_size"], fn)
        return _step(module, model, op, case_input, fn)

    return {"steps": play_ops(module, case_input["ops"], step, _describe)}


# ------------------------------------------------------------------ the speed case


def play_speed(module: Any, spec: dict[str, Any], prompts: list[list[int]],
               probes: list[tuple[int, int]]) -> list[Any]:
    """Admit and finish every prompt (filling the cache, evicting as it goes), then look up each
    probe's prefix once. Returns all results."""
    B = spec["block_size"]
    model = (module.PrefixCacheModel(spec["num_blocks"], B) if not spec.get("fast_hash")
             else module.PrefixCacheModel(spec["num_blocks"], B, _fast_hash))
    return _play(model, B, prompts, probes)


def _speed(module: Any, spec: dict[str, Any]) -> dict[str, Any]:
    prompts, probes = speed_workload(spec)
    return speed_digest(play_speed(module, spec, prompts, probes), probes)
