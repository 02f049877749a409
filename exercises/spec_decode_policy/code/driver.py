"""Plays one test case against a speculation-policy module: `run_case(module, case_input)`.

Runs inside the sandbox against the student's `submission.py` and in the worker against the
reference. Standard library only, and nothing of ours.

Case input, one of:
  {"kind": "fn", "fn": "expected_tokens" | "step_cost" | "speedup" | "best_k",
   "args": [...], "kwargs": {...}}
      -> {"value": <number>} or {"error": "Type: message"}
  {"kind": "policy", "init": {...SpecPolicy kwargs}, "ops": [op, ...]} where op is
      ["observe", req_id, drafted, accepted] | ["estimate", req_id]
      | ["choose", [req_id, ...], {"t_mem_ms": x, "n_knee": n, "draft_ms": d}]
      -> {"results": [None | number | {req_id: k}, ...]}, plus "error": "Type: message" and "error_op": i when an op raised (the case stops there)

For "choose" the driver passes batch_cost(n) = t_mem_ms * max(1, n / n_knee) + draft_ms * (n - B) / B,
B = len(req_ids): a roofline verify pass plus drafting, which runs batched over the requests and
costs draft_ms per draft position (so (n - B) / B positions on average). It raises ValueError for
an n that is not an int in [B, B * (k_max + 1)].
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_OUTPUT_BYTES = 64_000
MAX_ERROR_CHARS = 300
FUNCTIONS = ("expected_tokens", "step_cost", "speedup", "best_k")


def _describe(exc: BaseException) -> str:
    try:
        detail = str(exc)
    except Exception:  # a student's exception class can break __str__
        detail = "<str() of the exception failed>"
    text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def _number(value: Any, what: str) -> float | int:
    # bool is an int in Python; a True from best_k is a bug, not a 1.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} returned {type(value).__name__}, expected a number")
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{what} returned {value}")
    return value


def _batch_cost(b: int, k_max: int, spec: dict[str, Any]) -> Any:
    t_mem, knee, draft = float(spec["t_mem_ms"]), int(spec["n_knee"]), float(spec["draft_ms"])

    def batch_cost(n: int) -> float:
        if isinstance(n, bool) or not isinstance(n, int) or not b <= n <= b * (k_max + 1):
            raise ValueError(f"batch_cost({n!r}): n must be an int from {b} (len(req_ids)) to "
                             f"{b * (k_max + 1)} (every request drafting k_max)")
        return t_mem * max(1.0, n / knee) + draft * (n - b) / b

    return batch_cost


def _choose(policy: Any, ids: list[str], spec: dict[str, Any], k_max: int) -> dict[str, int]:
    got = policy.choose(list(ids), _batch_cost(len(ids), k_max, spec))
    if not isinstance(got, dict):
        raise TypeError(f"choose() returned {type(got).__name__}, expected a dict")
    out: dict[str, int] = {}
    for key, k in got.items():
        if not isinstance(key, str):
            raise TypeError(f"choose() returned a key {key!r}, expected the request ids")
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"choose() gave {key!r} a {type(k).__name__}, expected an int")
        out[key] = k
    return out


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    if case_input["kind"] == "fn":
        name = case_input["fn"]
        if name not in FUNCTIONS:
            raise ValueError(f"unknown function {name}")
        try:
            value = getattr(module, name)(*case_input["args"], **case_input.get("kwargs", {}))
            return {"value": _number(value, f"{name}()")}
        except MemoryError:
            raise
        except (Exception, SystemExit) as exc:
            return {"error": _describe(exc)}

    init = dict(case_input["init"])
    k_max = int(init.get("k_max", 8))
    results: list[Any] = []
    out: dict[str, Any] = {"results": results}
    try:
        policy = module.SpecPolicy(**init)
    except MemoryError:
        raise
    except (Exception, SystemExit) as exc:
        out.update(error=_describe(exc), error_op=-1)
        return out
    for i, op in enumerate(case_input["ops"]):
        try:
            if op[0] == "observe":
                policy.observe(op[1], op[2], op[3])
                results.append(None)
            elif op[0] == "estimate":
                results.append(_number(policy.estimate(op[1]), "estimate()"))
            else:
                results.append(_choose(policy, op[1], op[2], k_max))
        except MemoryError:
            raise
        except (Exception, SystemExit) as exc:
            out.update(error=_describe(exc), error_op=i)
            return out
    return out
