"""One case's verdict: the tensors the child gave back against the inputs we made.

Runs in the trusted parent (run.py) after the child answered, in this order: the structure is
what was sent, every input is bitwise unchanged, every output kept its shape and dtype and was
written everywhere (no NaN left from the poison), and then, only now, the expected outputs are
computed in float64 from our own copy of the inputs and compared elementwise with the task's
(rtol, atol). The report names the worst element, so the student can find the bug.
"""
from __future__ import annotations

import math
from typing import Any

SHOWN_ELEMENTS = 3


def _number(x: float) -> float | str:
    """A float JSON can carry (the result line is strict JSON)."""
    return x if math.isfinite(x) else str(x)


def _same_bytes(torch: Any, a: Any, b: Any) -> bool:
    if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
        return False
    flat_a = a.detach().contiguous().reshape(-1).view(torch.uint8)
    flat_b = b.detach().contiguous().reshape(-1).view(torch.uint8)
    return bool(torch.equal(flat_a, flat_b))


def _index(shape: tuple[int, ...], flat: int) -> list[int]:
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat //= size
    return list(reversed(out))


def compare_case(torch: Any, task: Any, case: dict[str, Any], sent: dict[str, Any],
                 got: Any) -> dict[str, Any]:
    """{"status": "ok" | "structure" | "inputs_changed" | "shape" | "unwritten" | "mismatch", ...}."""
    names = list(task.ARGS)
    outputs = set(task.OUTPUTS)
    if not isinstance(got, dict) or set(got) != set(names):
        return {"status": "structure",
                "message": "the tensors handed back are not the ones the grader sent"}
    for name in names:
        if name in outputs:
            continue
        before, after = sent[name], got[name]
        if isinstance(before, torch.Tensor):
            if not isinstance(after, torch.Tensor) or not _same_bytes(torch, before, after):
                return {"status": "inputs_changed", "tensor": name,
                        "message": f"the input `{name}` was modified; kernels may only write "
                                   "their outputs"}
    for name in task.OUTPUTS:
        before, after = sent[name], got[name]
        if not isinstance(after, torch.Tensor) or after.dtype != before.dtype \
                or tuple(after.shape) != tuple(before.shape):
            return {"status": "shape", "tensor": name,
                    "message": f"the output `{name}` changed shape or dtype: expected "
                               f"{tuple(before.shape)} {before.dtype}, got "
                               f"{tuple(getattr(after, 'shape', ()))} "
                               f"{getattr(after, 'dtype', type(after).__name__)}"}
    # The child is done with this case: only now does an expected value exist.
    expected = task.reference({k: (v.clone() if isinstance(v, torch.Tensor) else v)
                               for k, v in sent.items()}, case, torch)
    outcome: dict[str, Any] = {"status": "ok", "outputs": {}}
    for name in task.OUTPUTS:
        g = got[name].detach().to(torch.float64)
        e = expected[name].detach().to(torch.float64)
        rtol, atol = task.tolerance(case, name)
        unwritten = torch.isnan(g) & ~torch.isnan(e)
        err = (g - e).abs()
        bound = atol + rtol * e.abs()
        bad = unwritten | ~(err <= bound)
        total = g.numel()
        n_bad = int(bad.sum())
        finite_err = torch.where(torch.isnan(err), torch.full_like(err, math.inf), err)
        report: dict[str, Any] = {
            "total": total, "mismatched": n_bad, "unwritten": int(unwritten.sum()),
            "rtol": rtol, "atol": atol,
            "max_abs_err": _number(float(finite_err.max())) if total else 0.0,
        }
        if n_bad:
            # The worst element relative to its bound; NaN (never written) counts as worst.
            excess = torch.where(bad, finite_err / bound.clamp_min(1e-300),
                                 torch.zeros_like(err))
            order = torch.argsort(excess.reshape(-1), descending=True)[:SHOWN_ELEMENTS]
            report["worst"] = [
                {"index": _index(tuple(g.shape), int(i)),
                 "expected": _number(float(e.reshape(-1)[i])),
                 "got": _number(float(g.reshape(-1)[i]))} for i in order.tolist()]
            first = int(torch.nonzero(bad.reshape(-1))[0])
            report["first_bad"] = _index(tuple(g.shape), first)
            # Elements never written say more than wrong values: they win the status.
            if report["unwritten"]:
                outcome["status"] = "unwritten"
            elif outcome["status"] == "ok":
                outcome["status"] = "mismatch"
        outcome["outputs"][name] = report
    return outcome
