"""One case's verdict: the tensors the child gave back against the inputs we made.

Runs in the trusted parent (run.py) after the child answered, in this order: the structure is
what was sent, every input is bitwise unchanged, every output kept its shape and dtype, and then,
only now, the expected outputs are computed in float64 from our own copy of the inputs and
compared elementwise with the task's (rtol, atol). The report names the worst element, so the
student can find the bug.

Outputs start poisoned (`poison`): a NaN with a payload of our own, so an element "never
written" is one whose bits are still exactly the poison's, while any other NaN is one the
kernel computed (0/0, inf - inf, a log of a negative) and is reported as such. A kernel cannot
be told "you never wrote this" for a value it did write. Dtypes too narrow for a payload (FP8)
are poisoned with their one NaN, so there a computed NaN cannot be told from an unwritten one.
"""
from __future__ import annotations

import math
from typing import Any

SHOWN_ELEMENTS = 3
# Quiet NaNs with a payload no arithmetic produces (hardware and numpy make the default NaN,
# 0x7fc00000 / 0xffc00000 in FP32, 0x7fffffff on NVIDIA GPUs), keyed by the dtype's name: the
# sign, all-ones exponent and quiet bit of each format, then a few payload bits.
POISON_BITS = {
    "float64": 0x7FF8_0000_D0D0_0B0E,
    "float32": 0x7FC0_B0E5,
    "float16": 0x7E00 | 0x0B5,
    "bfloat16": 0x7FC0 | 0x25,
}
_INT_VIEW = {"float64": "int64", "float32": "int32", "float16": "int16", "bfloat16": "int16"}


def _int_view(torch: Any, t: Any) -> Any | None:
    name = str(t.dtype).removeprefix("torch.")
    view = _INT_VIEW.get(name)
    return t.view(getattr(torch, view)) if view else None


def poison(torch: Any, t: Any) -> None:
    """Fill an output before the kernel runs: our payload NaN where the dtype has room."""
    name = str(t.dtype).removeprefix("torch.")
    ints = _int_view(torch, t)
    if ints is None:
        t.fill_(float("nan"))
        return
    ints.fill_(POISON_BITS[name])  # sign bit clear: the same value as a signed integer


def poisoned(torch: Any, sent: Any, got: Any) -> Any:
    """Elements of `got` whose bits are still the poison `sent` was filled with (a bool tensor).

    Compared with what was sent, not with the constant, so an output the harness filled some
    other way still counts as unwritten only where it is bitwise untouched."""
    a = _int_view(torch, sent.detach().contiguous())
    b = _int_view(torch, got.detach().contiguous())
    if a is None or b is None:  # no payload: any NaN may be the poison
        return torch.isnan(got.detach().to(torch.float64))
    return (a == b) & torch.isnan(sent.detach().to(torch.float64))


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
    """{"status": "ok" | "structure" | "inputs_changed" | "shape" | "unwritten" | "nan" |
    "mismatch", ...}."""
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
        unwritten = poisoned(torch, sent[name], got[name]) & ~torch.isnan(e)
        computed_nan = torch.isnan(g) & ~unwritten & ~torch.isnan(e)
        err = (g - e).abs()
        bound = atol + rtol * e.abs()
        bad = unwritten | ~(err <= bound)
        total = g.numel()
        n_bad = int(bad.sum())
        finite_err = torch.where(torch.isnan(err), torch.full_like(err, math.inf), err)
        report: dict[str, Any] = {
            "total": total, "mismatched": n_bad, "unwritten": int(unwritten.sum()),
            "nan": int(computed_nan.sum()), "rtol": rtol, "atol": atol,
            "max_abs_err": _number(float(finite_err.max())) if total else 0.0,
        }
        if n_bad:
            # The worst element relative to its bound; NaN (unwritten or computed) counts as
            # worst, and each shown element says which it is.
            excess = torch.where(bad, finite_err / bound.clamp_min(1e-300),
                                 torch.zeros_like(err))
            order = torch.argsort(excess.reshape(-1), descending=True)[:SHOWN_ELEMENTS]
            flat_unwritten, flat_nan = unwritten.reshape(-1), computed_nan.reshape(-1)
            report["worst"] = [
                {"index": _index(tuple(g.shape), int(i)),
                 "expected": _number(float(e.reshape(-1)[i])),
                 "got": _number(float(g.reshape(-1)[i])),
                 **({"why": "unwritten"} if bool(flat_unwritten[i]) else
                    {"why": "nan"} if bool(flat_nan[i]) else {})} for i in order.tolist()]
            first = int(torch.nonzero(bad.reshape(-1))[0])
            report["first_bad"] = _index(tuple(g.shape), first)
            if report["nan"]:
                report["first_nan"] = _index(tuple(g.shape),
                                             int(torch.nonzero(flat_nan)[0]))
            # Elements never written say more than wrong values, and a NaN the kernel computed
            # more than a value out of tolerance: the strongest wins the status.
            if report["unwritten"]:
                outcome["status"] = "unwritten"
            elif report["nan"] and outcome["status"] in ("ok", "mismatch"):
                outcome["status"] = "nan"
            elif outcome["status"] == "ok":
                outcome["status"] = "mismatch"
        outcome["outputs"][name] = report
    return outcome
