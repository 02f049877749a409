"""Plays one test case against a ledger module: `run_case(module, case_input)`.

Runs inside the sandbox against the student's `submission.py` (under `runners/case_loop.py`) and in
the worker against the reference. Standard library only, plus the shared
driver_errors module (listed in the part's sandbox_modules).

Case inputs:
  {"kind": "functions", "blocks_needed": [[tokens, B], ...],
   "first_exhaustion_step": [[n, P, B, N], ...], "max_concurrency": [[N, B, P, O, mode], ...]}
    -> {"blocks_needed": [...], "first_exhaustion_step": [...], "max_concurrency": [...]},
       each entry a value or {"error": "..."}
  {"kind": "simulate", "config": {num_blocks, block_size, max_num_seqs, watermark_blocks,
   policy}, "reqs": [{rid, arrival_step, prompt_len, output_len, max_tokens}, ...]}
    -> {"steps": [[step, used_blocks, running, preempted, finished], ...]} or {"error": "..."}
"""
from __future__ import annotations

from driver_errors import describe as _describe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A hidden trace is at most ~120 steps of a few ids each (a few kB); this only stops a runaway
# submission from flooding the result channel.
MAX_OUTPUT_BYTES = 120_000
MAX_STEPS_KEPT = 2_000


def _int(value: Any, what: str) -> int:
    # bool is an int in Python; True for a block count is a bug worth naming.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} returned {type(value).__name__} {value!r:.40}, expected int")
    return value


def _field(record: Any, name: str) -> Any:
    # A StepRecord as the starter defines it; a dict with the same keys is accepted too.
    if isinstance(record, dict):
        return record[name]
    return getattr(record, name)


def _ids(value: Any, what: str) -> list[str]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"{what} is {type(value).__name__}, expected a list of request ids")
    return [v if isinstance(v, str) else f"<{type(v).__name__}: {v!r:.30}>" for v in value]


def _call(fn: Any, args: list[Any], module: Any, what: str, none_ok: bool = False) -> Any:
    try:
        value = fn(*args)
        if none_ok and value is None:
            return None
        return _int(value, what)
    except MemoryError:
        raise  # a limit, not an answer: case_loop.py reports it as one
    except (Exception, SystemExit) as exc:  # a student's sys.exit() must not end the run
        return {"error": _describe(exc, module)}


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    if case_input["kind"] == "functions":
        return {
            "blocks_needed": [_call(module.blocks_needed, list(a), module, "blocks_needed")
                              for a in case_input["blocks_needed"]],
            "first_exhaustion_step": [
                _call(module.first_exhaustion_step, list(a), module, "first_exhaustion_step",
                      none_ok=True) for a in case_input["first_exhaustion_step"]],
            "max_concurrency": [_call(module.max_concurrency, list(a), module, "max_concurrency")
                                for a in case_input["max_concurrency"]],
        }
    c = case_input["config"]
    try:
        cfg = module.LedgerConfig(c["num_blocks"], c["block_size"], c["max_num_seqs"],
                                  c["watermark_blocks"], c["policy"])
        reqs = [module.Req(r["rid"], r["arrival_step"], r["prompt_len"], r["output_len"],
                           r["max_tokens"]) for r in case_input["reqs"]]
        trace = module.simulate(cfg, reqs)
        records = trace.steps if hasattr(trace, "steps") else trace
        steps = []
        for i, rec in enumerate(records):
            if i == MAX_STEPS_KEPT:
                break
            steps.append([_int(_field(rec, "step"), f"step record {i}: step"),
                          _int(_field(rec, "used_blocks"), f"step record {i}: used_blocks"),
                          _ids(_field(rec, "running"), f"step record {i}: running"),
                          _ids(_field(rec, "preempted"), f"step record {i}: preempted"),
                          _ids(_field(rec, "finished"), f"step record {i}: finished")])
        return {"steps": steps}
    except MemoryError:
        raise
    except (Exception, SystemExit) as exc:
        return {"error": _describe(exc, module)}
