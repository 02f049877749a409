"""graders.kernel_static: the AST checks a kernel submission passes before anything runs.

Each rule gets one honest file that passes and a sample that breaks exactly that rule. Hostile
sources (deep nesting, huge files, NUL bytes, lone surrogates) must come back as Problems quickly,
never as exceptions. Nothing here imports torch or triton: the checks are ast only.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from exercises import mutants
from graders.kernel_static import MAX_PROBLEMS, Problem, check

ROOT = Path(__file__).resolve().parents[2]

VECTOR_ADD = '''\
"""out = x + y."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, (x + y).to(out_ptr.dtype.element_ty), mask=mask)


def add(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
    n = x.numel()
    grid = (triton.cdiv(n, BLOCK),)
    _add_kernel[grid](x, y, out, n, BLOCK=BLOCK)
'''

SOFTMAX = '''\
from __future__ import annotations

import math
from typing import Optional

import torch
import triton
import triton.language as tl

NEG = tl.constexpr(-1.0e30)


@triton.jit
def _row_max(x):
    return tl.max(x, axis=0)


@triton.autotune(configs=[triton.Config({"UNROLL": 1}, num_warps=4)], key=["n_cols"])
@triton.heuristics({"EVEN": lambda args: args["n_cols"] % 2 == 0})
@triton.jit
def _softmax_kernel(x_ptr, out_ptr, stride_x, stride_o, n_cols, scale, UNROLL: tl.constexpr,
                    EVEN: tl.constexpr, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float32)
    x = x * scale
    m = _row_max(x)
    e = tl.exp(x - m)
    denom = tl.sum(e, axis=0)
    for _ in tl.static_range(UNROLL):
        e = e / denom
    tl.store(out_ptr + row * stride_o + cols, e.to(out_ptr.dtype.element_ty), mask=mask)


def _launch(x: torch.Tensor, out: torch.Tensor, scale: float) -> None:
    rows, cols = x.shape
    block = max(16, triton.next_power_of_2(cols))
    _softmax_kernel[(rows,)](x, out, x.stride(0), out.stride(0), cols, scale, BLOCK=block)


def softmax(x: torch.Tensor, out: torch.Tensor, dim: Optional[int] = None) -> None:
    """Row softmax of x (rows, cols) into out, with a 1/sqrt(cols) temperature."""
    if x.ndim != 2 or not x.is_contiguous():
        raise ValueError(f"expected a contiguous 2-D tensor, got {tuple(x.shape)}")
    assert out.dtype in (torch.float16, torch.bfloat16, torch.float32)
    scratch = torch.empty_like(out)
    del scratch
    x2 = x.contiguous().view(x.shape[0], -1)
    _launch(x2, out, 1.0 / math.sqrt(x2.size(1)))
'''


def rules_of(source: str, entry: str = "add") -> set[str]:
    return {p.rule for p in check(source, entry)}


def with_wrapper_line(line: str, source: str = VECTOR_ADD) -> str:
    """The vector add with one extra statement at the top of the wrapper."""
    return source.replace("    n = x.numel()\n", f"    {line}\n    n = x.numel()\n")


def with_kernel_line(line: str) -> str:
    return VECTOR_ADD.replace("    mask = offs < n\n", f"    mask = offs < n\n    {line}\n")


# --- honest submissions --------------------------------------------------------------------


def test_vector_add_passes() -> None:
    assert check(VECTOR_ADD, "add") == []


def test_softmax_with_autotune_heuristics_and_a_helper_launch_passes() -> None:
    # The launch sits one level down in _launch; autotune and heuristics stack above jit.
    assert check(SOFTMAX, "softmax") == []


def test_aliases_and_from_imports_pass() -> None:
    source = '''\
from __future__ import annotations

import math as m
import torch as T
import triton.language as language
from torch import empty_like, float32
from triton import cdiv, jit
from triton.language import constexpr


@jit
def k(x_ptr, o_ptr, n, B: constexpr):  # the interpreter only knows "constexpr"/"tl.constexpr"
    offs = language.program_id(0) * B + language.arange(0, B)
    language.store(o_ptr + offs, language.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def entry(x: T.Tensor, out: T.Tensor) -> None:
    tmp = empty_like(x, dtype=float32)
    del tmp
    k[(cdiv(x.numel(), 64),)](x, out, x.numel(), int(m.ceil(64.0)))
'''
    assert check(source, "entry") == []


@pytest.mark.parametrize("path", sorted(
    p for p in (ROOT / "exercises").glob("*/kernel/**/*.py")
    if p.name not in ("task.py", "torch_in_wrapper.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_exercise_kernels_pass(path: Path) -> None:
    """Every reference, starter and mutant (except the torch-in-the-wrapper one) obeys the
    rules, as the kernel contract requires."""
    task = (path.parent if path.parent.name == "kernel" else path.parent.parent) / "task.py"
    entry = next(line.split("=", 1)[1].strip().strip("\"'")
                 for line in task.read_text(encoding="utf-8").splitlines()
                 if line.startswith("ENTRY"))
    assert check(path.read_text(encoding="utf-8"), entry) == []


@pytest.mark.parametrize("kernel", sorted((ROOT / "exercises").glob("*/kernel/mutants.toml")),
                         ids=lambda p: p.parent.parent.name)
def test_exercise_torch_in_wrapper_mutants_fail(kernel: Path) -> None:
    task = kernel.parent / "task.py"
    entry = next(line.split("=", 1)[1].strip().strip("\"'")
                 for line in task.read_text(encoding="utf-8").splitlines()
                 if line.startswith("ENTRY"))
    assert "torch-compute" in rules_of(mutants.source(kernel.parent, "torch_in_wrapper"), entry)


# --- structure -----------------------------------------------------------------------------


def test_missing_entry() -> None:
    problems = check(VECTOR_ADD, "vector_add")
    assert [p.rule for p in problems] == ["no-entry"]
    assert "vector_add()" in problems[0].message


def test_entry_inside_a_condition_is_not_top_level() -> None:
    source = VECTOR_ADD.replace("def add(", "if True:\n  def add(")
    assert rules_of(source) == {"no-entry"}


def test_entry_that_is_a_kernel() -> None:
    assert "no-entry" in rules_of(VECTOR_ADD, "_add_kernel")


def test_no_kernel() -> None:
    source = VECTOR_ADD.replace("@triton.jit\n", "")
    assert "no-kernel" in rules_of(source)


def test_kernel_defined_but_never_launched() -> None:
    source = VECTOR_ADD.replace("    _add_kernel[grid](x, y, out, n, BLOCK=BLOCK)\n", "    pass\n")
    problems = check(source, "add")
    assert [p.rule for p in problems] == ["not-launched"]
    assert "kernel[grid]" in problems[0].message


def test_launch_two_levels_down_is_not_counted() -> None:
    source = VECTOR_ADD.replace("def add(", "def _inner(").replace(
        "    _add_kernel[grid](x, y, out, n, BLOCK=BLOCK)\n",
        "    _add_kernel[grid](x, y, out, n, BLOCK=BLOCK)\n\n\n"
        "def _middle(x, y, out):\n    _inner(x, y, out)\n\n\n"
        "def add(x, y, out):\n    _middle(x, y, out)\n")
    assert rules_of(source) == {"not-launched"}


def test_kernel_called_without_a_grid() -> None:
    source = VECTOR_ADD.replace("_add_kernel[grid](", "_add_kernel(")
    assert {"host-call", "not-launched"} <= rules_of(source)


def test_launch_of_something_that_is_not_a_kernel() -> None:
    assert "host-call" in rules_of(with_wrapper_line("table = {}; table[0][(1,)](x)"))


def test_unknown_decorator() -> None:
    source = VECTOR_ADD.replace("def add(", "@staticmethod\ndef add(")
    assert "decorator" in rules_of(source)


def test_autotune_below_jit_is_rejected() -> None:
    source = VECTOR_ADD.replace(
        "@triton.jit\n", "@triton.jit\n@triton.autotune(configs=[], key=['n'])\n")
    assert "decorator" in rules_of(source)


# --- imports -------------------------------------------------------------------------------


@pytest.mark.parametrize("statement", [
    "import os", "import sys", "import subprocess", "import ctypes", "import threading",
    "import multiprocessing", "import importlib", "import gc", "import inspect", "import builtins",
    "import io", "import pickle", "import signal", "import socket", "import time",
    "import functools", "import numpy as np", "import torch.nn.functional as F",
    "from torch.nn import functional as F", "from os import path", "from . import sibling",
    "import triton.testing", "from triton import testing", "from torch import softmax",
    "from torch import cuda", "from math import *",
])
def test_forbidden_imports(statement: str) -> None:
    source = VECTOR_ADD.replace("import torch\n", f"import torch\n{statement}\n")
    problems = [p for p in check(source, "add") if p.rule == "forbidden-import"]
    assert problems, statement
    assert problems[0].line == 5


def test_forbidden_import_inside_a_function() -> None:
    assert "forbidden-import" in rules_of(with_wrapper_line("import os"))


def test_allowed_imports() -> None:
    extra = ("import math\nimport typing\nfrom typing import Any\nimport triton.language\n"
             "from triton import language as tl2\nfrom triton.language import constexpr\n"
             "from math import sqrt\n")
    assert check(VECTOR_ADD.replace("import torch\n", f"import torch\n{extra}"), "add") == []


def test_aliased_softmax_is_still_torch_compute() -> None:
    source = VECTOR_ADD.replace("import torch\n", "import torch as t\nimport torch\n")
    problems = check(with_wrapper_line("s = t.softmax(x, 0)", source), "add")
    assert [p.rule for p in problems] == ["torch-compute"]
    assert "torch.softmax" in problems[0].message


def test_from_torch_import_softmax() -> None:
    source = VECTOR_ADD.replace("import torch\n", "import torch\nfrom torch import softmax\n")
    source = with_wrapper_line("s = softmax(x, 0)", source)
    assert {"forbidden-import", "torch-compute"} <= rules_of(source)


# --- forbidden names, dunders, state -------------------------------------------------------


@pytest.mark.parametrize("name", [
    "exec('1')", "eval('1')", "compile('1', 'f', 'eval')", "open('/etc/passwd')",
    "__import__('os')", "getattr(x, 'sum')", "setattr(x, 'a', 1)", "delattr(x, 'a')",
    "globals()", "locals()", "vars(x)", "breakpoint()", "input()", "memoryview(b'')",
    "f = eval", "type(x)", "id(x)",
])
def test_forbidden_names(name: str) -> None:
    assert "forbidden-name" in rules_of(with_wrapper_line(name))


@pytest.mark.parametrize("line", [
    "c = x.__class__", "g = add.__globals__", "d = torch.__dict__", "b = __builtins__",
    "f'{x.__dict__}'", "s = x.shape.__class__.__base__", "s = __loader__",
])
def test_dunder_access(line: str) -> None:
    assert "dunder" in rules_of(with_wrapper_line(line)), line


def test_format_string_method_is_not_allowed() -> None:
    # str.format reaches attributes by name ("{0.__class__}") without an ast Attribute node.
    assert "torch-compute" in rules_of(with_wrapper_line("s = '{0.__class__}'.format(x)"))


def test_dunder_attribute_is_its_own_rule() -> None:
    assert rules_of(with_wrapper_line("c = x.__class__")) == {"dunder"}


def test_module_getattr_hook() -> None:
    source = VECTOR_ADD + "\n\ndef __getattr__(name):\n    return 1\n"
    assert "dunder" in rules_of(source)


def test_main_guard_name_is_allowed_but_its_code_is_not() -> None:
    source = VECTOR_ADD + '\n\nif __name__ == "__main__":\n    add(1, 2, 3)\n'
    assert rules_of(source) == {"module-code"}


@pytest.mark.parametrize("line", ["global BLOCK", "nonlocal n"])
def test_global_and_nonlocal(line: str) -> None:
    assert "global-statement" in rules_of(with_wrapper_line(line))


@pytest.mark.parametrize("line", [
    "torch.matmul = lambda a, b: a", "tl.x = 1", "add.cache = 1", "out.data = x",
    "del torch.softmax",
])
def test_attribute_assignment(line: str) -> None:
    assert "attribute-assign" in rules_of(with_wrapper_line(line))


def test_module_level_attribute_assignment() -> None:
    source = VECTOR_ADD + "\ntorch.matmul = None\n"
    assert "attribute-assign" in rules_of(source)


@pytest.mark.parametrize("line", ["out[:] = x", "out[0] = 1", "x[0] += 1"])
def test_subscript_assignment_in_the_wrapper(line: str) -> None:
    assert "subscript-assign" in rules_of(with_wrapper_line(line))


@pytest.mark.parametrize("line", ["out += x", "out *= 2", "n2 = 1; n2 -= 1"])
def test_augmented_assignment_in_the_wrapper(line: str) -> None:
    assert "host-inplace" in rules_of(with_wrapper_line(line))


def test_augmented_assignment_in_a_kernel_is_fine() -> None:
    assert check(with_kernel_line("x2 = offs; x2 += 1"), "add") == []


@pytest.mark.parametrize("statement", [
    "CACHE = {}", "CACHE = []", "CACHE = set()", "CACHE = dict()", "CACHE = [1, 2]",
    "CACHE: dict = {}", "CACHE = {k: k for k in range(3)}", "CACHE = ([],)",
    "BUF = torch.empty(10)", "CACHE = make()",
])
def test_module_level_state(statement: str) -> None:
    source = VECTOR_ADD.replace("BLOCK = 1024\n", f"BLOCK = 1024\n{statement}\n")
    assert "module-state" in rules_of(source), statement


@pytest.mark.parametrize("statement", [
    "TABLE = (1, 2, 3)", "SCALE = 1.0 / math.sqrt(64)", "NAME: str = 'x'",
    "C = tl.constexpr(4)", "CONFIGS = (triton.Config({'B': 64}, num_warps=4),)",
    "DT = torch.float16", "N = max(1, 2)", "grid_fn = lambda meta: (meta['B'],)",
])
def test_module_level_constants_are_fine(statement: str) -> None:
    source = VECTOR_ADD.replace("import torch\n", "import math\n\nimport torch\n")
    source = source.replace("BLOCK = 1024\n", f"BLOCK = 1024\n{statement}\n")
    assert check(source, "add") == [], statement


@pytest.mark.parametrize("statement", [
    "for i in range(3):\n    pass", "while False:\n    pass", "print('hi')",
    "try:\n    pass\nexcept Exception:\n    pass",
])
def test_module_level_code(statement: str) -> None:
    assert "module-code" in rules_of(VECTOR_ADD + "\n" + statement + "\n")


@pytest.mark.parametrize("signature", [
    "def add(x, y, out, _cache={}):", "def add(x, y, out, _cache=[]):",
    "def add(x, y, out, *, _buf=torch.empty(4)):",
])
def test_mutable_defaults(signature: str) -> None:
    source = VECTOR_ADD.replace(
        "def add(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:", signature)
    assert "mutable-default" in rules_of(source)


def test_class_is_rejected() -> None:
    source = VECTOR_ADD + "\n\nclass Cache:\n    store = {}\n"
    assert "class" in rules_of(source)


# --- torch in the wrapper ------------------------------------------------------------------


@pytest.mark.parametrize("line", [
    "s = torch.softmax(x, 0)", "s = torch.matmul(x, y)", "s = x @ y", "s = x.float()",
    "s = x.sum()", "s = x.matmul(y)", "s = x.to(torch.float32)", "out.copy_(x)", "s = x.item()",
    "s = x.cpu()", "s = x.numpy()", "s = x.tolist()", "s = torch.empty_like(x).fill_(0)",
    "s = torch.add(x, y, out=out)", "s = torch.full((4,), 1.0, out=out)", "s = torch.cat([x, y])",
    "s = x.data_ptr()", "s = torch.nn.functional.softmax(x, 0)",
])
def test_torch_compute_in_the_wrapper(line: str) -> None:
    assert "torch-compute" in rules_of(with_wrapper_line(line)), line


def test_message_names_the_call_and_says_what_is_allowed() -> None:
    problems = check(with_wrapper_line("s = torch.softmax(x, 0)"), "add")
    assert problems == [Problem(
        21, "torch-compute",
        "torch.softmax computes in the host wrapper; the math must happen in your @triton.jit "
        "kernel. The wrapper may only allocate outputs/scratch (torch.empty...) and launch "
        "kernels.")]


def test_torch_function_stored_then_called() -> None:
    assert "torch-compute" in rules_of(with_wrapper_line("f = torch.softmax; f(x, 0)"))


def test_tensor_method_stored_then_called() -> None:
    assert "host-attribute" in rules_of(with_wrapper_line("f = x.add_; f(y)"))


@pytest.mark.parametrize("line", [
    "s = torch.cuda.Stream()", "torch.cuda.synchronize()", "e = torch.cuda.Event()",
    "f = torch.compile(add)", "b = torch.backends.cuda.matmul.allow_tf32",
    "torch.library.define('x')", "f = torch.ops.aten.mm", "u = torch.utils.dlpack",
    "c = torch._C",
])
def test_torch_runtime(line: str) -> None:
    assert "torch-runtime" in rules_of(with_wrapper_line(line)), line


@pytest.mark.parametrize("line", [
    "torch.Tensor.add_(out, x)", "f = torch.Tensor.sum", "b = torch.float16.to_complex",
])
def test_methods_reached_through_torch_types(line: str) -> None:
    assert "torch-compute" in rules_of(with_wrapper_line(line)), line


@pytest.mark.parametrize("line", [
    "m = x.max", "fi = torch.finfo(x.dtype); e = fi.eps", "t = x.type",
    "_add_kernel[(1,)](x, y, out, n, BLOCK=BLOCK, FN=x.min)",
])
def test_attributes_that_are_also_tensor_methods(line: str) -> None:
    # .max/.min/.type are metadata on finfo and devices but compute on tensors: allowed only
    # where the receiver shows which one it is.
    assert "host-attribute" in rules_of(with_wrapper_line(line)), line


def test_metadata_attributes_on_the_right_receivers() -> None:
    line = ("e = torch.finfo(x.dtype).eps + torch.iinfo(torch.int32).max + x.itemsize; "
            "d = x.device.type, x.device.index, torch.float16.itemsize")
    assert check(with_wrapper_line(line), "add") == []


@pytest.mark.parametrize("line", [
    "add = 1", "def helper(add=1):\n        pass", "_add_kernel = x",
    "for add in range(2):\n        pass",
    "try:\n        pass\n    except Exception as add:\n        pass",
])
def test_rebinding_a_function_name(line: str) -> None:
    # A call of a function of this file is trusted by name, so the name must keep meaning it.
    assert "rebind" in rules_of(with_wrapper_line(line)), line


def test_typing_is_for_type_names_only() -> None:
    source = VECTOR_ADD.replace("import torch\n", "import typing\n\nimport torch\n")
    assert check(with_wrapper_line("t: typing.Optional[int] = None", source), "add") == []
    for line in ("s = typing.sys", "h = typing.get_type_hints(add)", "c = typing.cast(int, 1)"):
        assert "host-call" in rules_of(with_wrapper_line(line, source)), line


@pytest.mark.parametrize("line", ["c = tl.core.builtins.exec", "c = triton.language.core",
                                  "f = tl.float32.to_ir"])
def test_triton_internals_from_the_wrapper(line: str) -> None:
    assert "triton-host" in rules_of(with_wrapper_line(line)), line


@pytest.mark.parametrize("line", [
    "z = tl.core.builtins.exec('1')", "c = tl.math\n    z = c.core", "z = tl.standard.core",
    "z = x_ptr.handle.data", "z = '{0}'.format(offs)",
])
def test_triton_internals_from_a_kernel(line: str) -> None:
    # Under the interpreter a kernel is plain Python: tl.core.builtins is the builtins module.
    assert "kernel-call" in rules_of(with_kernel_line(line)), line


def test_kernel_may_call_a_jit_function_passed_as_a_parameter() -> None:
    source = VECTOR_ADD.replace("n, BLOCK: tl.constexpr)", "n, FN: tl.constexpr, "
                                "BLOCK: tl.constexpr)")
    source = source.replace("mask = offs < n\n", "mask = offs < n\n    offs = FN(offs)\n")
    source = source.replace("out, n, BLOCK=BLOCK)", "out, n, FN=_ident, BLOCK=BLOCK)")
    source += "\n\n@triton.jit\ndef _ident(v):\n    return v\n"
    assert check(source, "add") == []


def test_names_in_messages_come_from_the_source_text() -> None:
    problems = check(with_wrapper_line('s = "é ü"; t = x.sum()'), "add")
    assert [p.rule for p in problems] == ["torch-compute"]
    assert "`.sum()` on `x`" in problems[0].message


def test_module_used_as_a_value() -> None:
    assert "module-alias" in rules_of(with_wrapper_line("t = torch; t.softmax(x, 0)"))


def test_rebinding_an_import() -> None:
    assert "module-alias" in rules_of(with_wrapper_line("triton = None"))


@pytest.mark.parametrize("line", [
    "s = triton.testing.do_bench(lambda: 0)", "d = triton.runtime.driver",
    "s = tl.load(x)", "k = triton.knobs",
])
def test_triton_outside_the_allowed_helpers(line: str) -> None:
    assert "triton-host" in rules_of(with_wrapper_line(line)), line


@pytest.mark.parametrize("line", ["print(n)", "s = sorted([1])", "s = sum([x, y])",
                                  "s = typing_helper()"])
def test_unknown_calls_in_the_wrapper(line: str) -> None:
    assert "host-call" in rules_of(with_wrapper_line(line)), line


def test_grid_arithmetic_stays_allowed() -> None:
    source = VECTOR_ADD.replace("import torch\n", "import math\n\nimport torch\n")
    lines = ["a = triton.cdiv(x.numel(), 128) * 2 + x.shape[0] // 2",
             "b = min(max(int(1.0 / math.sqrt(x.shape[-1])), 1), len(x.shape))",
             "c = tuple(range(abs(-3))) + (float(2), math.log2(8))",
             "d = x.stride(0) * x.size(1) + x.dim() + x.element_size() + x.ndim",
             "e = x.view(-1).reshape(x.shape).contiguous().is_contiguous()",
             "f = torch.empty((4, 4), dtype=x.dtype, device=x.device)",
             "g = torch.zeros_like(x), torch.full_like(x, 0.0), torch.empty_strided((1,), (1,))",
             "h = torch.finfo(torch.bfloat16).max, torch.iinfo(torch.int32).min",
             "i = triton.next_power_of_2(x.shape[0]) if x.is_cuda else 1",
             "grid2 = lambda meta: (triton.cdiv(n, meta['BLOCK']),)"]
    for line in lines:
        source = with_wrapper_line(line, source)
    assert check(source, "add") == []


# --- inside kernels ------------------------------------------------------------------------


@pytest.mark.parametrize("line, rule", [
    ("z = torch.exp(x_ptr)", "torch-in-kernel"),
    ("z = math.sqrt(2.0)", "kernel-call"),
    ("z = helper(offs)", "kernel-call"),
    ("print(offs)", "kernel-call"),
    ("z = sorted(offs)", "kernel-call"),
    ("z = triton.cdiv(n, 2)", "kernel-call"),
    ("z = x_ptr.handle.data", "kernel-call"),
    ("z = eval('1')", "forbidden-name"),
])
def test_kernel_body_rules(line: str, rule: str) -> None:
    source = with_kernel_line(line).replace("import torch\n", "import math\n\nimport torch\n")
    source += "\n\ndef helper(v):\n    return v\n"
    assert rule in rules_of(source), line


def test_kernel_may_call_tl_jit_helpers_and_allowed_builtins() -> None:
    source = with_kernel_line(
        "z = tl.minimum(offs, n) + min(BLOCK, 4) + tl.cdiv(n, 2) + _twice(offs)\n"
        "    w = float('-inf')\n"
        "    for i in range(0, 2):\n        z = z + i\n"
        "    for j in tl.static_range(2):\n        z = z + j\n"
        "    v = tl.math.exp2(offs.to(tl.float32)).reshape(BLOCK)")
    source += "\n\n@triton.jit\ndef _twice(v):\n    return v * 2\n"
    assert check(source, "add") == []


def test_nested_def_in_kernel() -> None:
    assert "kernel-call" in rules_of(with_kernel_line("def inner():\n        return 1"))


# --- hostile input -------------------------------------------------------------------------


HOSTILE = {
    "nested parentheses": "(" * 100_000,
    "balanced brackets": "x = " + "[" * 50_000 + "]" * 50_000,
    "unary chain": "x = " + "-" * 100_000 + "1",
    "attribute chain": "x = a" + ".b" * 30_000,
    "long sum": "x = " + "+".join(["1"] * 30_000),
    "not chain": "x = " + "not " * 25_000 + "y",
    "nested lists just under the parser limit": "x = " + "[" * 190 + "]" * 190,
    "nested ifs": "".join(" " * i + "if x:\n" for i in range(90)) + " " * 90 + "pass\n",
    "NUL byte": VECTOR_ADD + "\0\n",
    "lone surrogate": VECTOR_ADD + "s = '\ud800'\n",
    "too long": "x = 1\n" * 60_000,
    "empty": "",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_sources_return_problems_quickly(name: str) -> None:
    start = time.perf_counter()
    problems = check(HOSTILE[name], "add")
    assert time.perf_counter() - start < 2.0
    assert problems and all(isinstance(p, Problem) for p in problems)


def test_syntax_error_names_the_line() -> None:
    problems = check("import torch\n\ndef add(:\n", "add")
    assert [(p.line, p.rule) for p in problems] == [(3, "syntax")]


def test_bytes_that_are_not_utf8() -> None:
    assert [p.rule for p in check(b"\xff\xfe", "add")] == ["syntax"]  # type: ignore[arg-type]


def test_many_problems_are_capped() -> None:
    source = with_wrapper_line("; ".join(f"s{i} = x{i}.sum()" for i in range(MAX_PROBLEMS + 20)))
    problems = check(source, "add")
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[-1].rule == "too-many"
