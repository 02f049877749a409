"""Plays one trace against a scheduler module: `run_case(module, case_input)`.

Runs inside the sandbox against the student's `submission.py` (under `runners/case_loop.py`) and in
the worker against the reference. Standard library only, plus the shared
driver_errors module (listed in the part's sandbox_modules).

Case input: {"num_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "max_steps",
"requests": [{"rid", "prompt", "max_new_tokens", "eos_id", "arrival"}, ...]}.

Before step k the driver adds every request whose arrival is k, then calls `step()` once. It
stops when every request has been reported finished (and all have arrived), after `max_steps`
steps, or at the first exception. Each step's record holds what `step()` returned, the
scheduler's `running` and `waiting` queues, every request's status / num_computed / blocks, and
the allocator calls the step made (the driver wraps `scheduler.allocator` to watch them).
Output: {"steps": [...], "outputs": {rid: tokens}, "error": "...", "error_step": k} (the last two
only when something raised).
"""
from __future__ import annotations

from driver_errors import describe as _describe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A trace of ~100 steps with five requests is ~40 kB; this only stops a runaway submission.
MAX_OUTPUT_BYTES = 200_000
VOCAB = 7


def fake_model(seqs: list[list[int]]) -> list[int]:
    """The deterministic stand-in for the model: the next token depends only on the sequence."""
    if not isinstance(seqs, list | tuple):
        raise TypeError(f"the model takes a list of token lists, got {type(seqs).__name__}")
    out = []
    for seq in seqs:
        if not isinstance(seq, list | tuple) or not all(_is_int(t) for t in seq):
            raise TypeError("the model takes a list of token lists (prompt + output so far); "
                            f"one entry was {seq!r:.80}")
        out.append((31 * sum(seq) + len(seq)) % VOCAB)
    return out


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _rid(x: Any, what: str) -> str:
    if not isinstance(x, str):
        raise TypeError(f"{what} should hold request ids (str), found {x!r:.60}")
    return x


def _int(x: Any, what: str) -> int:
    if not _is_int(x):
        raise TypeError(f"{what} should be an int, found {x!r:.60}")
    return int(x)


def _step_record(out: Any) -> dict[str, Any]:
    """What step() returned, checked for shape and made JSON-able (dict order kept)."""
    scheduled = getattr(out, "scheduled", None)
    if not isinstance(scheduled, dict):
        raise TypeError(f"step() must return a StepOutput whose `scheduled` is a dict, got "
                        f"{type(scheduled).__name__}")
    rec: dict[str, Any] = {"scheduled": [[_rid(k, "scheduled"), _int(v, f"scheduled[{k!r}]")]
                                         for k, v in scheduled.items()]}
    for name in ("preempted", "finished"):
        value = getattr(out, name, None)
        if not isinstance(value, list | tuple):
            raise TypeError(f"StepOutput.{name} must be a list of request ids")
        rec[name] = [_rid(x, name) for x in value]
    stream = getattr(out, "stream", None)
    if not isinstance(stream, list | tuple):
        raise TypeError("StepOutput.stream must be a list of (rid, token) pairs")
    pairs = []
    for item in stream:
        if not isinstance(item, list | tuple) or len(item) != 2:
            raise TypeError(f"StepOutput.stream must hold (rid, token) pairs, found {item!r:.60}")
        pairs.append([_rid(item[0], "stream"), _int(item[1], "a streamed token")])
    rec["stream"] = pairs
    return rec


def _status(value: Any) -> str:
    if isinstance(value, str):
        return value
    inner = getattr(value, "value", None)  # an Enum whose values are the strings
    return inner if isinstance(inner, str) else repr(value)[:40]


def _watch(allocator: Any, calls: list[list[Any]]) -> None:
    """Record every allocation that hands out blocks and every release that returns some."""
    allocate, release = allocator.allocate, allocator.release

    def watched_allocate(k: int) -> Any:
        got = allocate(k)
        if got:
            calls.append(["allocate", [_int(b, "a block id") for b in got]])
        return got

    def watched_release(blocks: Any) -> Any:
        ids = [_int(b, "a block id") for b in blocks]
        result = release(blocks)
        if ids:
            calls.append(["release", ids])
        return result

    allocator.allocate = watched_allocate
    allocator.release = watched_release


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    result: dict[str, Any] = {"steps": steps, "outputs": {}}
    specs = case_input["requests"]
    reqs: dict[str, Any] = {}
    step = -1
    try:
        sched = module.Scheduler(case_input["num_blocks"], case_input["block_size"],
                                 case_input["max_num_seqs"],
                                 case_input["max_num_batched_tokens"], fake_model)
        calls: list[list[Any]] = []
        _watch(sched.allocator, calls)
        finished: set[str] = set()
        everyone = {r["rid"] for r in specs}
        last_arrival = max(r["arrival"] for r in specs)
        for step in range(case_input["max_steps"]):
            if step > last_arrival and everyone <= finished:
                break
            for r in specs:
                if r["arrival"] == step:
                    req = module.Request(rid=r["rid"], prompt=list(r["prompt"]),
                                         max_new_tokens=r["max_new_tokens"], eos_id=r["eos_id"])
                    reqs[r["rid"]] = req
                    sched.add_request(req)
            rec = _step_record(sched.step())
            finished.update(rec["finished"])
            rec["running"] = [_rid(r.rid, "running") for r in sched.running]
            rec["waiting"] = [_rid(r.rid, "waiting") for r in sched.waiting]
            rec["state"] = {rid: [_status(r.status), _int(r.num_computed, "num_computed"),
                                  [_int(b, "a block id") for b in r.blocks]]
                            for rid, r in reqs.items()}
            rec["calls"] = list(calls)
            calls.clear()
            steps.append(rec)
    except MemoryError:
        raise  # a limit, not an answer: case_loop.py reports it as one
    except (Exception, SystemExit) as exc:  # a student's sys.exit() must not end the run
        result["error"] = _describe(exc, module)
        result["error_step"] = step
    try:
        result["outputs"] = {rid: [_int(t, "an output token") for t in r.output]
                             for rid, r in reqs.items()}
    except (Exception, SystemExit) as exc:
        result.setdefault("error", _describe(exc, module))
        result.setdefault("error_step", step)
    return result
