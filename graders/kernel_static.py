"""Static checks on a Triton kernel submission, before anything runs (ast only, stdlib only).

A submission is one Python file: one or more @triton.jit kernels plus a host wrapper named by the
exercise (`entry`). The rules keep the wrapper to "allocate, read shapes, launch", so the math has
to happen in the kernel, and close the usual shortcuts: library calls instead of a kernel, streams
and threads, exec/eval/open, introspection through dunder attributes, state kept between calls
(caches keyed on shapes or pointers), and monkey-patching torch or triton.

Nothing here imports, compiles or executes the submission. Hostile input (deep nesting, huge
files, NUL bytes, lone surrogates) comes back as a Problem, never as an exception.

The rules are conservative on purpose: a wrapper never needs more than the allow-lists below, and
a clear message telling the student what is allowed costs less than a hole. One gap is accepted:
plain arithmetic operators (`a * b`) cannot be told apart from integer grid arithmetic without
types, so they stay allowed; their results can only reach an output through a kernel.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

from graders import python_ast

# Far above any real submission (a few hundred lines), small enough that parsing stays fast.
MAX_SOURCE_CHARS = 200_000
# Real kernels nest 10-25 levels deep; the recursive walk below must stay far from Python's limit.
MAX_DEPTH = 100
MAX_PROBLEMS = 40

ALLOWED_MODULES = ("torch", "triton", "triton.language", "math", "typing", "__future__")

# Builtins that reach the interpreter, the file system or other objects' internals.
FORBIDDEN_NAMES = frozenset({
    "exec", "eval", "compile", "open", "__import__", "getattr", "setattr", "delattr", "hasattr",
    "globals", "locals", "vars", "dir", "breakpoint", "input", "memoryview", "type", "object",
    "super", "id", "hash", "exit", "quit", "help", "classmethod", "staticmethod", "property",
    "bytes", "bytearray",
})

# torch names the wrapper may use: allocation, dtypes and type objects. Nothing that computes.
TORCH_ALLOC = frozenset({"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "full",
                         "full_like"})
TORCH_TYPES = frozenset({
    "Tensor", "dtype", "device", "Size", "finfo", "iinfo",
    "float32", "float", "float64", "double", "float16", "half", "bfloat16",
    "int8", "int16", "short", "int32", "int", "int64", "long", "bool",
    "uint8", "uint16", "uint32", "uint64",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float4_e2m1fn_x2",
})
# torch namespaces that touch the runtime (streams, events, graphs, compilation, custom ops).
TORCH_RUNTIME = ("cuda", "backends", "compile", "library", "ops", "utils", "jit", "distributed",
                 "multiprocessing", "autograd", "profiler", "cpu", "mps", "xpu", "accelerator")
TRITON_HOST = frozenset({"cdiv", "next_power_of_2", "jit", "autotune", "heuristics", "Config"})

# Tensor methods and attributes the wrapper may use: metadata, views and a contiguous copy.
HOST_METHODS = frozenset({"stride", "size", "numel", "dim", "element_size", "is_contiguous",
                          "contiguous", "view", "reshape", "is_floating_point"})
HOST_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "itemsize"})
# Attribute names that are also tensor methods (x.max, x.type) are allowed only on the receiver
# they make sense on: torch.finfo(...)/torch.iinfo(...) and x.device.
FINFO_ATTRS = frozenset({"max", "min", "eps", "tiny", "bits", "resolution", "smallest_normal"})
DEVICE_ATTRS = frozenset({"type", "index"})
DTYPE_ATTRS = frozenset({"itemsize", "is_floating_point", "is_signed", "is_complex"})
HOST_BUILTINS = frozenset({
    "min", "max", "int", "float", "len", "range", "tuple", "abs", "bool", "str", "isinstance",
    "enumerate", "zip", "round", "divmod", "pow", "all", "any", "list", "dict",
    "ValueError", "TypeError", "RuntimeError", "AssertionError", "NotImplementedError",
    "IndexError", "KeyError",
})
# Calls that may build a module-level constant (the result is immutable).
MODULE_CALLS = frozenset({"triton.language.constexpr", "triton.Config", "triton.cdiv",
                          "triton.next_power_of_2", "torch.device", "torch.finfo", "torch.iinfo"})
MODULE_BUILTINS = frozenset({"int", "float", "tuple", "min", "max", "abs", "len", "bool", "str",
                             "round", "pow", "divmod"})

JIT_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "abs"})
# triton.language submodules and the stdlib modules they import (tl.core.builtins is Python's
# builtins module): never needed by a kernel, and in the interpreter a kernel is plain Python.
TL_DENIED = frozenset({"core", "semantic", "standard", "random", "builtins", "inspect", "ir",
                       "knobs", "typing", "pkgutil"})
# Plus attributes that only exist on the interpreter's tensors (`x.handle.data` is a numpy array)
# and string formatting, which reaches attributes by name ("{0.__class__}").
JIT_DENIED_ATTRS = frozenset({"handle", "data", "format", "format_map"}) | TL_DENIED
# The methods a kernel may call on a value: those of Triton's own tensors, dtypes, constexprs and
# tensor descriptors (triton.language.core in the installed Triton; tests/gpu_sandbox/
# test_static.py keeps this list equal to it). In the interpreter a tensor that reached a kernel
# as a constexpr is a torch tensor, whose .copy_(), .matmul() or .double() would compute outside
# Triton; the launch refuses such constexprs (aot.py), and this refuses the calls by name. Names
# both libraries have (.cos(), .sum(), .to()) stay allowed: honest kernels call them.
KERNEL_METHODS = frozenset({
    # triton.language.core.tensor
    "abs", "advance", "argmax", "argmin", "associative_scan", "atomic_add", "atomic_and",
    "atomic_cas", "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor",
    "broadcast_to", "cast", "cdiv", "ceil", "cos", "cumprod", "cumsum", "erf", "exp", "exp2",
    "expand_dims", "flip", "floor", "gather", "histogram", "item", "log", "log2", "logical_and",
    "logical_or", "max", "min", "permute", "ravel", "reduce", "reduce_or", "reshape", "rsqrt",
    "sigmoid", "sin", "softmax", "sort", "split", "sqrt", "sqrt_rn", "store", "sum", "to",
    "trans", "view", "xor_sum",
    # tensor descriptors (tl.make_tensor_descriptor)
    "load", "scatter",
    # dtypes (x.dtype.is_fp8(), ptr.dtype.element_ty.is_floating()...)
    "get_block_shapes", "get_int_max_value", "get_int_min_value", "is_bf16", "is_block",
    "is_bool", "is_const", "is_dtype", "is_floating", "is_fp16", "is_fp32", "is_fp64", "is_fp8",
    "is_fp8e4b15", "is_fp8e4b8", "is_fp8e4nv", "is_fp8e5", "is_fp8e5b16", "is_int", "is_int1",
    "is_int16", "is_int32", "is_int64", "is_int8", "is_int_signed", "is_int_unsigned", "is_ptr",
    "is_standard_floating", "is_uint16", "is_uint32", "is_uint64", "is_uint8", "is_void",
    "with_element_ty",
})
KERNEL_METHODS_MAY = ("A kernel may call tl.* functions and the methods of Triton's tensors "
                      "(.to(), .reshape(), .trans(), .sum(), .exp()...).")

MUTABLE_NODES = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)

WRAPPER_MAY = ("The wrapper may only allocate outputs/scratch (torch.empty...) and launch "
               "kernels.")
METHODS_MAY = ("On tensors the wrapper may call only .stride(), .size(), .numel(), .dim(), "
               ".element_size(), .is_contiguous(), .contiguous(), .view() and .reshape().")


@dataclass(frozen=True)
class Problem:
    line: int  # 1-based; 0 when not tied to a line
    rule: str  # short id, e.g. "torch-compute"
    message: str  # what the student reads


def check(source: str, entry: str) -> list[Problem]:
    """Empty list = the submission may run. Never executes anything: ast only."""
    if isinstance(source, bytes | bytearray):
        try:
            source = bytes(source).decode("utf-8")
        except UnicodeDecodeError:
            return [Problem(0, "syntax", "The file is not valid UTF-8 text.")]
    if not isinstance(source, str):
        return [Problem(0, "syntax", "The submission must be Python source text.")]
    if len(source) > MAX_SOURCE_CHARS:
        return [Problem(0, "syntax", f"The file is {len(source):,} characters long; submissions "
                        f"are limited to {MAX_SOURCE_CHARS:,}.")]
    try:
        tree = python_ast.parse(source)
    except SyntaxError as e:
        line = e.lineno or 0
        return [Problem(line, "syntax", f"The file does not parse: {e.msg}.")]
    except (RecursionError, MemoryError):
        return [Problem(0, "syntax", "The file is too deeply nested to parse.")]
    except ValueError as e:  # NUL bytes, lone surrogates (UnicodeEncodeError is a ValueError)
        reason = "it contains a NUL byte" if "\0" in source else str(e)[:120]
        return [Problem(0, "syntax", f"The file cannot be parsed: {reason}.")]
    if _depth_exceeds(tree, MAX_DEPTH):
        return [Problem(0, "syntax", f"The file nests more than {MAX_DEPTH} levels deep; "
                        "split the expressions up.")]
    try:
        return _Checker(tree, entry, source).run()
    except (RecursionError, MemoryError):  # belt and braces: the depth check should prevent it
        return [Problem(0, "syntax", "The file is too complex to check.")]


def _depth_exceeds(tree: ast.AST, limit: int) -> bool:
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return False


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _module_allowed(name: str) -> bool:
    return name in ALLOWED_MODULES or name.startswith("triton.language.")


class _Checker:
    def __init__(self, tree: ast.Module, entry: str, source: str) -> None:
        self.tree = tree
        # ast counts lines at \n, \r\n and \r only (str.splitlines also splits at \f, \x1c...)
        self.lines = re.split("\r\n|\r|\n", source)
        self.entry = entry
        self.problems: list[Problem] = []
        self.seen: set[tuple[int, str, str]] = set()
        # name -> dotted path it stands for ("tl" -> "triton.language", "empty" -> "torch.empty")
        self.aliases: dict[str, str] = {}
        self.modules: set[str] = set()  # names bound to a module (as opposed to a member)
        self.jit_names: set[str] = set()
        self.host_funcs: set[str] = set()  # plain functions (any level) and lambdas bound to names
        self.lambda_targets: set[int] = set()  # ids of the Name nodes `f = lambda ...` binds
        self.top_defs: dict[str, ast.FunctionDef] = {}
        self.launches: dict[str, set[str]] = {}  # top-level function -> kernels it launches
        self.helper_calls: dict[str, set[str]] = {}  # top-level function -> functions it calls
        self.current: str | None = None  # the top-level function being walked
        self.params: set[str] = set()  # parameters of the jit function being walked

    # --- reporting ----------------------------------------------------------------------------

    def add(self, node: ast.AST | int, rule: str, text: str) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 0)
        # The message leaves the line out: it travels in Problem.line and the grader prints
        # "line N: " in front.
        key = (line, rule, text)
        if key not in self.seen:
            self.seen.add(key)
            self.problems.append(Problem(line, rule, text))

    def show(self, node: ast.AST) -> str:
        """The student's own text for a node, cut to 60 characters. Read from the source line
        rather than ast.unparse, which would cost time proportional to the node's size."""
        line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
        if not 0 < line <= len(self.lines):
            return "this expression"
        raw = self.lines[line - 1].encode("utf-8", "replace")  # ast offsets count UTF-8 bytes
        end = getattr(node, "end_col_offset", None)
        same_line = getattr(node, "end_lineno", line) == line and end is not None
        text = raw[col:end if same_line else None].decode("utf-8", "replace").strip()
        if not same_line:
            text += " ..."
        return text if len(text) <= 60 else text[:57] + "..."

    # --- driver -------------------------------------------------------------------------------

    def run(self) -> list[Problem]:
        self.collect()
        for stmt in self.tree.body:
            self.module_stmt(stmt)
        self.check_structure()
        self.problems.sort(key=lambda p: (p.line == 0, p.line))
        if len(self.problems) > MAX_PROBLEMS:
            extra = len(self.problems) - MAX_PROBLEMS
            self.problems = self.problems[:MAX_PROBLEMS] + [
                Problem(0, "too-many", f"... and {extra} more problems.")]
        return self.problems

    def collect(self) -> None:
        """First pass: import aliases, kernels and plain functions, so uses before definitions
        resolve the same way as uses after them."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    bound = a.asname or a.name.split(".")[0]
                    self.aliases[bound] = a.name if a.asname else bound
                    self.modules.add(bound)
            elif (isinstance(node, ast.ImportFrom) and node.module and not node.level
                  and node.module != "__future__"):
                for a in node.names:
                    if a.name != "*":
                        bound, path = a.asname or a.name, f"{node.module}.{a.name}"
                        self.aliases[bound] = path
                        if path in ALLOWED_MODULES:
                            self.modules.add(bound)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.host_funcs.add(node.name)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                names = [t for t in node.targets if isinstance(t, ast.Name)]
                self.host_funcs.update(t.id for t in names)
                self.lambda_targets.update(id(t) for t in names)
        for stmt in self.tree.body:
            if isinstance(stmt, ast.FunctionDef):
                self.top_defs[stmt.name] = stmt
                if self.jit_position(stmt.decorator_list) is not None:
                    self.jit_names.add(stmt.name)
        self.host_funcs -= self.jit_names

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted path an attribute chain names when its root is an imported name."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        return ".".join([self.aliases[node.id], *reversed(parts)])

    def jit_position(self, decorators: list[ast.expr]) -> int | None:
        for i, d in enumerate(decorators):
            target = d.func if isinstance(d, ast.Call) else d
            if self.resolve(target) == "triton.jit":
                return i
        return None

    def check_structure(self) -> None:
        if not self.jit_names:
            self.add(0, "no-kernel", "No @triton.jit kernel found. Define your kernel at the top "
                     "level of the file with @triton.jit and launch it from "
                     f"{self.entry}() as kernel[grid](...).")
        fn = self.top_defs.get(self.entry)
        if fn is None:
            self.add(0, "no-entry", f"The file must define the wrapper function {self.entry}() "
                     "at the top level (not inside another function or under a condition).")
            return
        if self.entry in self.jit_names:
            self.add(fn, "no-entry", f"{self.entry}() is the host wrapper the grader calls: a plain "
                     "Python function that launches your kernel, not an @triton.jit kernel.")
            return
        if not self.jit_names:
            return
        launched = set(self.launches.get(self.entry, ()))
        for helper in self.helper_calls.get(self.entry, ()):
            launched |= self.launches.get(helper, set())
        if not launched:
            self.add(fn, "not-launched", f"{self.entry}() never launches a @triton.jit kernel. "
                     "Launch it as kernel[grid](...) in the wrapper (or in a plain helper the "
                     "wrapper calls); the work has to happen in the kernel.")

    # --- module level -------------------------------------------------------------------------

    def module_stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            self.check_import(stmt)
        elif isinstance(stmt, ast.FunctionDef):
            self.top_function(stmt)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            if stmt.value is not None:
                self.module_value(stmt.value)
            self.stmt(stmt, jit=False)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            pass  # docstring
        elif isinstance(stmt, ast.Pass):
            pass
        elif isinstance(stmt, ast.If):
            self.expr(stmt.test, jit=False)
            for s in [*stmt.body, *stmt.orelse]:
                self.module_stmt(s)
        else:
            what = type(stmt).__name__.lower()
            self.add(stmt, "module-code", f"A top-level `{what}` statement runs when the file is "
                     "imported. The top level may only hold imports, constants and function "
                     "definitions; put code in your wrapper.")
            self.stmt(stmt, jit=False)

    def module_value(self, value: ast.expr) -> None:
        """A module-level value must be immutable: no containers to cache results in, no
        tensors allocated at import time."""
        stack: list[ast.AST] = [value]
        while stack:
            node = stack.pop()
            if isinstance(node, MUTABLE_NODES):
                self.add(node, "module-state", f"`{self.show(node)}` makes a mutable container at "
                         "module level, which could keep results between calls. Use a tuple for "
                         "constant tables, or write the list inline where it is used (e.g. "
                         "inside @triton.autotune(configs=[...])).")
                continue
            if isinstance(node, ast.Lambda):
                continue
            if isinstance(node, ast.Call):
                name = self.call_name(node.func)
                if name not in MODULE_CALLS and name not in MODULE_BUILTINS and not (
                        name or "").startswith("math."):
                    self.add(node, "module-state", f"`{self.show(node.func)}(...)` runs at module "
                             "level. Module-level values must be constants (numbers, strings, "
                             "tuples, tl.constexpr(...), triton.Config(...)); allocate tensors in "
                             "the wrapper.")
                continue  # the arguments of an allowed call build an immutable result
            stack.extend(ast.iter_child_nodes(node))

    def call_name(self, func: ast.expr) -> str | None:
        if isinstance(func, ast.Name) and func.id not in self.aliases:
            return func.id
        return self.resolve(func)

    def top_function(self, fn: ast.FunctionDef) -> None:
        self.current = fn.name
        pos = self.jit_position(fn.decorator_list)
        for i, d in enumerate(fn.decorator_list):
            target = d.func if isinstance(d, ast.Call) else d
            path = self.resolve(target)
            if path == "triton.jit":
                pass
            elif path in ("triton.autotune", "triton.heuristics") and isinstance(d, ast.Call):
                if pos is None or i > pos:
                    self.add(d, "decorator", f"@{self.show(target)} must sit above @triton.jit "
                             "on a kernel.")
            else:
                self.add(d, "decorator", f"Decorator @{self.show(d)} is not allowed. Kernels take "
                         "@triton.jit (optionally under @triton.autotune / @triton.heuristics); "
                         "plain functions take none.")
            self.expr(d, jit=False)
        jit = pos is not None
        self.function(fn, jit=jit)
        self.current = None

    # --- statements ---------------------------------------------------------------------------

    def function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, jit: bool) -> None:
        if _is_dunder(fn.name):
            self.add(fn, "dunder", f"A function named {fn.name} is not allowed (dunder names "
                     "change how Python treats the module).")
        self.arguments(fn.args)
        if fn.returns is not None:
            self.expr(fn.returns, jit=False)
        saved = self.params
        if jit:
            a = fn.args
            self.params = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
        for s in fn.body:
            self.stmt(s, jit=jit)
        self.params = saved

    def arguments(self, args: ast.arguments) -> None:
        for d in [*args.defaults, *(k for k in args.kw_defaults if k is not None)]:
            bad = next((n for n in ast.walk(d) if isinstance(n, (*MUTABLE_NODES, ast.Call,
                                                                 ast.Lambda))), None)
            if bad is not None:
                self.add(d, "mutable-default", f"Default value `{self.show(d)}` is not allowed: a "
                         "default is built once and shared by every call, so it can keep state. "
                         "Defaults must be numbers, strings, None, dtypes or tuples of those.")
            self.expr(d, jit=False)
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is None:
                continue
            self.rebind(a, a.arg)
            if _is_dunder(a.arg):
                self.add(a, "dunder", f"Parameter `{a.arg}`: dunder names are not allowed.")
            if a.annotation is not None:
                self.expr(a.annotation, jit=False)

    def stmt(self, node: ast.stmt, jit: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if isinstance(node, ast.AsyncFunctionDef):
                self.add(node, "async", "Async functions are not allowed.")
            if jit:
                self.add(node, "kernel-call", f"`def {node.name}` inside a kernel: define helpers "
                         "at the top level with @triton.jit.")
            for d in node.decorator_list:
                self.add(d, "decorator", f"Decorator @{self.show(d)} is not allowed on a nested "
                         "function; kernels are decorated with @triton.jit at the top level.")
                self.expr(d, jit=False)
            self.function(node, jit=jit)
            return
        if isinstance(node, ast.ClassDef):
            self.add(node, "class", f"Class {node.name}: classes are not allowed in a submission "
                     "(class attributes can keep state between calls); use functions.")
            for s in node.body:
                self.stmt(s, jit=jit)
            return
        if isinstance(node, ast.Global | ast.Nonlocal):
            word = "global" if isinstance(node, ast.Global) else "nonlocal"
            self.add(node, "global-statement", f"`{word} {', '.join(node.names)}` is not allowed: "
                     "functions must not write state outside themselves. Pass values in and "
                     "return them.")
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            self.check_import(node)
            return
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.MatMult):
            self.matmul(node, jit)
        if isinstance(node, ast.AugAssign) and not jit:
            self.add(node, "host-inplace", f"`{self.show(node)}` updates in place in the host "
                     "wrapper (on a tensor that would be computing outside your kernel). Write "
                     "`x = x + y` for integers; tensor math belongs in the kernel.")
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for t in targets:
                self.target(t, jit)
        if isinstance(node, ast.For | ast.AsyncFor | ast.With | ast.AsyncWith):
            if isinstance(node, ast.AsyncFor | ast.AsyncWith):
                self.add(node, "async", "Async code is not allowed.")
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                self.stmt(child, jit)
            elif isinstance(child, ast.expr):
                self.expr(child, jit)
            else:
                self.other(child, jit)

    def rebind(self, node: ast.AST, name: str | None) -> None:
        """A function of this file is called by name without further checks, so its name must
        keep meaning that function (or the lambda bound to it)."""
        if name is None or id(node) in self.lambda_targets:
            return
        if name in self.host_funcs or name in self.jit_names:
            self.add(node, "rebind", f"`{name}` names a function of this file; give other values "
                     "another name.")

    def other(self, node: ast.AST, jit: bool) -> None:
        """Nodes that are neither statements nor expressions (handlers, withitems, aliases...)."""
        if isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar):
            self.rebind(node, node.name)
        elif isinstance(node, ast.MatchMapping):
            self.rebind(node, node.rest)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                self.stmt(child, jit)
            elif isinstance(child, ast.expr):
                self.expr(child, jit)
            else:
                self.other(child, jit)

    def target(self, t: ast.expr, jit: bool) -> None:
        """Assignment and deletion targets; rebinding an import is checked in expr()."""
        if isinstance(t, ast.Tuple | ast.List):
            for e in t.elts:
                self.target(e, jit)
        elif isinstance(t, ast.Starred):
            self.target(t.value, jit)
        elif isinstance(t, ast.Attribute):
            self.add(t, "attribute-assign", f"Assigning or deleting `{self.show(t)}` is not "
                     "allowed: a submission must not change attributes of modules, functions or "
                     "tensors (e.g. torch.matmul = ..., out.data = ...).")
        elif isinstance(t, ast.Subscript) and jit:
            self.add(t, "kernel-assign", f"`{self.show(t)} = ...` inside a kernel: Triton "
                     "tensors cannot be assigned into; write results with tl.store.")
        elif isinstance(t, ast.Subscript) and not jit:
            self.add(t, "subscript-assign", f"`{self.show(t)} = ...` writes into a container or "
                     "tensor in the host wrapper. Outputs are written by your kernel (tl.store); "
                     "the wrapper never needs item assignment.")

    def check_import(self, node: ast.Import | ast.ImportFrom) -> None:
        allowed = ", ".join(ALLOWED_MODULES)
        if isinstance(node, ast.Import):
            for a in node.names:
                if not _module_allowed(a.name):
                    self.add(node, "forbidden-import", f"`import {a.name}` is not allowed. A "
                             f"submission may import only {allowed}.")
                if a.asname and _is_dunder(a.asname):
                    self.add(node, "dunder", f"`as {a.asname}`: dunder names are not allowed.")
            return
        module = node.module or ""
        if node.level:
            self.add(node, "forbidden-import", "Relative imports are not allowed. A submission "
                     f"may import only {allowed}.")
            return
        if not _module_allowed(module):
            self.add(node, "forbidden-import", f"`from {module} import ...` is not allowed. A "
                     f"submission may import only {allowed}.")
            return
        for a in node.names:
            if a.name == "*":
                self.add(node, "forbidden-import", f"`from {module} import *` is not allowed; "
                         "import the names you use.")
                continue
            if _is_dunder(a.name) or (a.asname and _is_dunder(a.asname)):
                if module != "__future__":
                    self.add(node, "dunder", f"Importing {a.name}: dunder names are not allowed.")
                continue
            if module == "torch" and a.name not in TORCH_ALLOC | TORCH_TYPES:
                self.add(node, "forbidden-import", f"`from torch import {a.name}` is not allowed. "
                         "From torch a submission may use only allocation (empty, zeros, "
                         "full...) and dtypes. " + WRAPPER_MAY)
            elif module == "triton" and a.name not in TRITON_HOST | {"language"}:
                self.add(node, "forbidden-import", f"`from triton import {a.name}` is not "
                         "allowed. From triton a submission may use jit, autotune, heuristics, "
                         "Config, cdiv, next_power_of_2 and language.")

    # --- expressions --------------------------------------------------------------------------

    def expr(self, node: ast.expr, jit: bool) -> None:
        if isinstance(node, ast.Call):
            self.call(node, jit)
            return
        if isinstance(node, ast.Attribute):
            self.attribute(node, jit, called=False)
            return
        if isinstance(node, ast.Name):
            self.name(node, jit, called=False)
            return
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            self.matmul(node, jit)
        if isinstance(node, ast.Lambda):
            self.arguments(node.args)
            self.expr(node.body, jit)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, jit)
            else:
                self.other(child, jit)

    def matmul(self, node: ast.BinOp | ast.AugAssign, jit: bool) -> None:
        if jit:
            # Triton's tensors have no @: in a kernel it can only reach a torch tensor.
            self.add(node, "kernel-matmul", f"`{self.show(node)}` inside a kernel: Triton "
                     "tensors have no `@`; use tl.dot(a, b).")
        else:
            self.add(node, "torch-compute", f"`{self.show(node)}` multiplies matrices in the host "
                     "wrapper; the math must happen in your @triton.jit kernel (tl.dot there). "
                     + WRAPPER_MAY)

    def name(self, node: ast.Name, jit: bool, called: bool) -> None:
        n = node.id
        if n in FORBIDDEN_NAMES:
            self.add(node, "forbidden-name", f"`{n}` is not allowed in a submission (it can reach "
                     "the interpreter, files or other objects' internals).")
            return
        if _is_dunder(n) and n != "__name__":
            self.add(node, "dunder", f"`{n}` is not allowed: dunder names reach interpreter "
                     "internals.")
            return
        if not isinstance(node.ctx, ast.Load):
            self.rebind(node, n)
        if n not in self.aliases:
            return
        if not isinstance(node.ctx, ast.Load):
            self.add(node, "module-alias", f"`{n}` is an imported name; rebinding it is not "
                     "allowed.")
            return
        if n in self.modules:
            self.add(node, "module-alias", f"The module `{n}` may only be used as `{n}.name`, "
                     "not called, passed around or stored.")
            return
        self.path(self.aliases[n], node, jit, called)

    def attribute(self, node: ast.Attribute, jit: bool, called: bool) -> None:
        path = self.resolve(node)
        if path is not None:
            for part in path.split("."):
                if _is_dunder(part):
                    self.add(node, "dunder", f"`{self.show(node)}`: dunder attributes reach "
                             "interpreter internals and are not allowed.")
                    return
            if not isinstance(node.ctx, ast.Load):
                return  # reported by target()
            self.path(path, node, jit, called)
            return
        if _is_dunder(node.attr):
            self.add(node, "dunder", f"`.{node.attr}`: dunder attributes reach interpreter "
                     "internals and are not allowed.")
        elif isinstance(node.ctx, ast.Load):
            if jit:
                if node.attr in JIT_DENIED_ATTRS or node.attr.startswith("_"):
                    self.add(node, "kernel-call", f"`.{node.attr}` is not allowed in a kernel.")
                elif called and node.attr not in KERNEL_METHODS:
                    self.add(node, "kernel-method", f"`.{node.attr}()` on "
                             f"`{self.show(node.value)}` is not a method of Triton's tensors. "
                             + KERNEL_METHODS_MAY)
            elif called:
                self.host_method(node)
            elif not self.host_attr_ok(node):
                self.add(node, "host-attribute", f"`{self.show(node)}`: the wrapper may read only "
                         ".shape, .dtype, .device, .ndim, .itemsize, torch.finfo(...).max/min/eps "
                         "and x.device.type/index. " + METHODS_MAY)
        self.expr(node.value, jit)

    def host_attr_ok(self, node: ast.Attribute) -> bool:
        if node.attr in HOST_ATTRS:
            return True
        value = node.value
        if node.attr in FINFO_ATTRS:
            return isinstance(value, ast.Call) and self.resolve(value.func) in (
                "torch.finfo", "torch.iinfo")
        if node.attr in DEVICE_ATTRS:
            return isinstance(value, ast.Attribute) and value.attr == "device"
        return False

    def host_method(self, node: ast.Attribute) -> None:
        m = node.attr
        if m in HOST_METHODS:
            return
        if m == "data_ptr":
            self.add(node, "torch-compute", "`.data_ptr()` is not allowed in the wrapper: pass "
                     "tensors to the kernel directly (addresses make cache keys, and the grader "
                     "gives fresh inputs every call).")
            return
        self.add(node, "torch-compute", f"`.{m}()` on `{self.show(node.value)}` runs in the host "
                 "wrapper; the math must happen in your @triton.jit kernel. " + METHODS_MAY)

    def call(self, node: ast.Call, jit: bool) -> None:
        func = node.func
        if isinstance(func, ast.Subscript) and not jit:
            self.launch(node, func)
        elif isinstance(func, ast.Attribute):
            self.attribute(func, jit, called=True)
            path = self.resolve(func)
            if path and path.startswith("torch.") and not jit:
                for kw in node.keywords:
                    if kw.arg == "out":
                        self.add(kw.value, "torch-compute", f"`out=` in `{self.show(func)}` writes "
                                 "into a tensor from the wrapper; outputs are written by your "
                                 "kernel.")
        elif isinstance(func, ast.Name):
            self.name(func, jit, called=True)
            self.bare_call(func, jit)
        else:
            self.expr(func, jit)
        for a in node.args:
            self.expr(a, jit)
        for kw in node.keywords:
            if kw.arg and _is_dunder(kw.arg):
                self.add(kw.value, "dunder", f"Keyword `{kw.arg}=`: dunder names are not allowed.")
            self.expr(kw.value, jit)

    def launch(self, node: ast.Call, func: ast.Subscript) -> None:
        kernel = func.value
        if isinstance(kernel, ast.Name) and kernel.id in self.jit_names:
            if self.current is not None:
                self.launches.setdefault(self.current, set()).add(kernel.id)
        else:
            self.add(node, "host-call", f"`{self.show(func)}(...)`: only @triton.jit kernels "
                     "defined at the top level of this file can be launched with kernel[grid].")
            self.expr(kernel, jit=False)
        self.expr(func.slice, jit=False)

    def bare_call(self, func: ast.Name, jit: bool) -> None:
        n = func.id
        if n in FORBIDDEN_NAMES or _is_dunder(n) or n in self.aliases:
            return  # reported by name()
        if jit:
            if n in self.jit_names or n in self.params or n in JIT_BUILTINS:
                return
            if n in self.host_funcs:
                self.add(func, "kernel-call", f"{n}() is a plain Python function; a kernel may "
                         "call only tl.* functions and other @triton.jit functions (decorate "
                         f"{n} with @triton.jit).")
            elif n == "print":
                self.add(func, "kernel-call", "print() inside a kernel: use tl.device_print or "
                         "tl.static_print.")
            else:
                self.add(func, "kernel-call", f"{n}() cannot be called inside a kernel; kernels "
                         "may call tl.* functions, other @triton.jit functions and range, min, "
                         "max, len, int, float, abs.")
            return
        if n in self.jit_names:
            self.add(func, "host-call", f"{n}(...) calls a kernel like a Python function; launch "
                     f"it as {n}[grid](...).")
            return
        if n in self.host_funcs:
            if self.current is not None:
                self.helper_calls.setdefault(self.current, set()).add(n)
            return
        if n in HOST_BUILTINS:
            return
        self.add(func, "host-call", f"{n}() is not allowed in the wrapper. Besides torch "
                 "allocation, triton.cdiv/next_power_of_2 and math.*, it may call min, max, int, "
                 "float, len, range, tuple, abs, isinstance and the functions of this file.")

    def path(self, path: str, node: ast.expr, jit: bool, called: bool) -> None:
        """A use of an imported module member, by its full dotted path."""
        shown = self.show(node)
        named = shown if shown == path else f"{shown} ({path})"
        root, *rest = path.split(".")
        if root == "triton" and rest[:1] == ["language"]:
            self.tl_path(rest[1:], named, node, jit, called)
            return
        if jit:
            if root == "torch":
                self.add(node, "torch-in-kernel", f"{named} inside a @triton.jit kernel: kernels "
                         "cannot use torch. Use tl.* (tl.float32 for dtypes, tl.exp, tl.dot...).")
            elif root == "math":
                self.add(node, "kernel-call", f"{named} inside a kernel: use tl.* math (tl.sqrt, "
                         "tl.exp2, tl.math.*), or compute the constant in the wrapper and pass it "
                         "in as an argument.")
            elif path == "triton.cdiv":
                self.add(node, "kernel-call", f"{named} inside a kernel: use tl.cdiv.")
            else:
                self.add(node, "kernel-call", f"{named} cannot be used inside a kernel; kernels "
                         "may use tl.* and other @triton.jit functions.")
            return
        first = rest[0] if rest else ""
        if root == "torch":
            if first in TORCH_RUNTIME or first.startswith("_"):
                self.add(node, "torch-runtime", f"{named} is not allowed: torch.{first} reaches "
                         "the runtime (streams, events, graphs, compilation, custom ops) that the "
                         "grader owns. Your code may only allocate tensors and launch kernels.")
            elif first in TORCH_ALLOC or first in TORCH_TYPES:
                if len(rest) > 2 or (len(rest) == 2 and rest[1] not in DTYPE_ATTRS):
                    self.add(node, "torch-compute", f"{named} is not allowed in the wrapper. "
                             + WRAPPER_MAY)
            else:
                verb = "computes" if called else "is a torch operation that would compute"
                self.add(node, "torch-compute", f"{named} {verb} in the host wrapper; the math "
                         "must happen in your @triton.jit kernel. " + WRAPPER_MAY)
        elif root == "triton":
            if first not in TRITON_HOST or len(rest) > 1:
                self.add(node, "triton-host", f"{named} is not allowed; from triton the wrapper "
                         "may use triton.cdiv, triton.next_power_of_2 and the decorators "
                         "(jit, autotune, heuristics, Config).")
        elif root == "math":
            # math.* are pure functions on numbers; deeper chains (math.x.y) are never needed.
            if len(rest) > 1:
                self.add(node, "host-attribute", f"{named}: use math.<name> directly.")
        elif root == "typing":
            # Type names only: typing's lowercase names include the modules it imports
            # (typing.sys) and helpers that evaluate strings (get_type_hints).
            if called or len(rest) > 1 or not first[:1].isupper():
                self.add(node, "host-call", f"{named}: typing is for annotations only "
                         "(Optional, Any, Tuple...).")

    def tl_path(self, rest: list[str], named: str, node: ast.expr, jit: bool,
                called: bool) -> None:
        """triton.language.<rest>: anything public inside kernels; outside them only dtypes and
        tl.constexpr. Some tl submodules import builtins, inspect and Triton's own internals, and
        in the interpreter a kernel is plain Python, so those names are closed everywhere."""
        if any(part in TL_DENIED or part.startswith("_") for part in rest):
            self.add(node, "kernel-call" if jit else "triton-host", f"{named} reaches Triton's "
                     "internals; use the public tl.* functions.")
        elif jit:
            return
        elif len(rest) > 1 or (called and rest != ["constexpr"]):
            self.add(node, "triton-host", f"{named}{'(...)' if called else ''} outside a kernel: "
                     "tl.* functions work only inside @triton.jit code; the wrapper may use tl "
                     "dtypes (tl.float32...) and tl.constexpr.")


def rules(problems: Iterable[Problem]) -> list[str]:
    """The distinct rule ids, in order of first appearance (for logs and result extras)."""
    out: list[str] = []
    for p in problems:
        if p.rule not in out:
            out.append(p.rule)
    return out
