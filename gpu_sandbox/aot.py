"""Which Triton kernels a submission launched, and whether each compiles for a real GPU.

Triton's interpreter accepts things no GPU build does (host Python inside a kernel, any tensor
shape), so a preview that passed in the interpreter is confirmed by compiling every kernel the
submission actually launched, ahead of time for sm_90 (H100/H200). Triton compiles to PTX and a
cubin without a GPU, using the ptxas bundled in its wheel (research/anchors-gpu-grading.md §2.3).

What is compiled is what Triton's launcher would compile for that launch: each launch goes
through the JIT's own binder (`create_function_from_signature`) and `JITFunction._pack_args`
with the sm_90 backend, so an integer argument equal to 1 becomes a constexpr, integers and
pointers that are multiples of 16 get `tt.divisibility = 16`, and the options are the launch's.
That is what decides vectorised loads and software pipelining, and so the shared memory a kernel
needs; the report gives the shared memory, registers and threads of that compile, and a kernel
over sm_90's per-block limits fails as it would at launch.

Every launch must be recorded, or the launch is refused (LaunchRefused, raised in the student's
wrapper) and the compile step fails: a launch that cannot be described cannot be compiled, and
an uncompiled kernel is one the interpreter alone vouched for. A constexpr argument must be a
Python scalar, string or dtype: in the interpreter a tensor passed as a constexpr arrives as the
torch tensor itself, and the kernel body could compute the answer with torch.

Runs inside the sandbox. The case child records launches while the cases run and writes them
to a file; a compile child, forked from the zygote (zygote.py) without TRITON_INTERPRET, imports
the submission so its @triton.jit functions are real JITFunctions and compiles them
(sm90_compile.py). Another process because the interpreter patches triton.language in place
(and, for helper calls, never restores it): compiling in the interpreted process fails on
correct kernels that call tl.max or tl.sum. Standard library + triton only; nothing of ours.

The fresh import must build the kernels the cases ran, and a submission can tell the two
imports apart (`__name__`, sys.argv, TRITON_INTERPRET) and define another kernel under the same
name for the compile. So each launch carries a fingerprint of what decides the kernel (the code
of the kernel and of every @jit function it calls, and the constexpr globals they read, with
their values), and a kernel whose fingerprint differs in the compile process fails the compile
check: what was compiled is not what ran. Triton's own cache_key cannot serve: in the
interpreter it refuses the interpreted helpers a kernel calls.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, NoReturn

# The target the authoritative grade runs on (H100/H200: compute capability 9.0, 32-wide warps).
TARGET = ("cuda", 90, 32)
# Distinct specialisations compiled per kernel, and in all: a loop of launches is not a compile
# farm. A run that launches more is refused, never compiled in part (an uncompiled
# specialisation could hide host Python behind a constexpr branch). The references' preview
# cases make at most 10 (split_kv_decode: 16 launches of two kernels); run.py's CPU budget for
# the compile step bounds the number in practice well before these do.
MAX_PER_KERNEL = 16
MAX_LAUNCHES = 32
# sm_90's per-block limits, as a launch enforces them (Triton raises OutOfResources for shared
# memory and threads before launching; the driver refuses a block whose registers do not fit).
# NVIDIA CUDA C++ Programming Guide, "Technical Specifications per Compute Capability", column
# 9.0: maximum shared memory per thread block 227 KB (232,448 B, with the opt-in Triton does),
# maximum 32-bit registers per thread 255, per thread block 64 K, maximum threads per block
# 1,024; the NVIDIA Hopper Tuning Guide gives the same 227 KB per block (228 KB per SM).
SM90_LIMITS = {
    "shared": (232_448, "shared memory per block", "B"),
    "registers": (255, "registers per thread", ""),
    "block_registers": (65_536, "registers per block (registers per thread x threads)", ""),
    "threads": (1_024, "threads per block (num_warps x 32)", ""),
}
MAX_CONSTEXPR_INT = 2**64  # Triton's widest integer; JSON and the compiler take nothing wider
MAX_CONSTEXPR_STR = 200


class LaunchRefused(TypeError):
    """A launch the harness cannot record (and so will not run): the student reads why."""


@dataclass
class Launch:
    """One distinct specialisation of a kernel, as Triton's launcher would compile it: the
    signature by parameter name, constexpr values and attributes by argument path (a tuple of
    indices), and the launch's compile options."""

    kernel: str
    signature: dict[str, Any]
    constexprs: dict[tuple[int, ...], Any]
    attrs: dict[tuple[int, ...], Any]
    options: dict[str, Any]
    fingerprint: str  # kernel_fingerprint() at the launch

    def key(self) -> str:
        return repr((self.kernel, sorted(self.signature.items()),
                     sorted((k, repr(v)) for k, v in self.constexprs.items()),
                     sorted(self.attrs.items()), sorted(self.options.items()), self.fingerprint))

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "signature": self.signature, "options": self.options,
                "constexprs": [[list(k), _encode(v)] for k, v in self.constexprs.items()],
                "attrs": [[list(k), v] for k, v in self.attrs.items()],
                "fingerprint": self.fingerprint}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Launch:
        return cls(data["kernel"], {k: _tuples(v) for k, v in data["signature"].items()},
                   {tuple(k): _decode(v) for k, v in data["constexprs"]},
                   {tuple(k): v for k, v in data["attrs"]}, data["options"],
                   data["fingerprint"])


def _python_function(obj: Any) -> Any:
    """The Python function under a @triton.jit object of either kind (JITFunction, or the
    interpreter's InterpretedFunction; Autotuner/Heuristics wrappers hold either as .fn), or
    None when `obj` is not one."""
    for _ in range(8):
        fn = getattr(obj, "fn", None)
        if fn is None:
            return None
        if hasattr(fn, "__code__"):
            return fn
        obj = fn
    return None


def kernel_fingerprint(kernel: Any) -> str:
    """A digest of what decides the kernel a compile builds, the same in the interpreter and in
    the compile process for the same code and values: the code objects of the kernel and of
    every @jit function it reaches by name, and the scalar and constexpr values of the globals
    (and closure cells) they read. Modules and other objects count by type only: Triton refuses
    any other global in a kernel body anyway."""
    import triton.language as tl

    digest = hashlib.sha256()
    seen: set[int] = set()

    def code(co: Any) -> list[str]:
        digest.update(co.co_code)
        digest.update(repr(co.co_names).encode())
        names = list(co.co_names)
        for const in co.co_consts:
            if hasattr(const, "co_code"):
                names += code(const)
            else:
                digest.update(repr(const).encode())
        return names

    def visit(fn: Any) -> None:
        if id(fn) in seen:
            return
        seen.add(id(fn))
        scope = dict(fn.__globals__)
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
            try:
                scope[name] = cell.cell_contents
            except ValueError:  # an empty cell
                pass
        for name in sorted(set(code(fn.__code__)) | set(fn.__code__.co_freevars)):
            if name not in scope:
                continue
            value = scope[name]
            inner = _python_function(value)
            if inner is not None:
                digest.update(f"{name}:jit;".encode())
                visit(inner)
            elif isinstance(value, tl.constexpr):
                digest.update(f"{name}={value.value!r};".encode())
            elif value is None or isinstance(value, (bool, int, float, str, tl.dtype)):
                digest.update(f"{name}={value!r};".encode())
            else:
                digest.update(f"{name}:{type(value).__module__}.{type(value).__name__};".encode())

    fn = _python_function(kernel)
    if fn is None:
        return ""
    visit(fn)
    return digest.hexdigest()


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples Triton uses (a tuple argument's signature)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _encode(value: Any) -> Any:
    """A checked constexpr value (see _constexpr_problem) as JSON."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    import triton.language as tl

    if isinstance(value, tl.dtype):
        return {"tl_dtype": value.name}
    return {"torch_dtype": str(value).removeprefix("torch.")}


def _decode(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    if "tuple" in value:
        return tuple(_decode(v) for v in value["tuple"])
    if "tl_dtype" in value:
        import triton.language as tl

        return tl.dtype(value["tl_dtype"])
    import torch

    dtype = getattr(torch, value["torch_dtype"])
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"not a torch dtype: {value['torch_dtype']!r}")
    return dtype


def _constexpr_problem(value: Any, depth: int = 0) -> str | None:
    """Why a constexpr value is refused, or None. Exact types: a subclass of int or a tensor
    wrapped in tl.constexpr is still not a scalar."""
    import torch
    import triton.language as tl

    if type(value) is tl.constexpr:
        value = value.value
    if value is None or type(value) in (bool, float):
        return None
    if type(value) is int:
        return None if -MAX_CONSTEXPR_INT < value < MAX_CONSTEXPR_INT else "an integer wider " \
            "than 64 bits"
    if type(value) is str:
        return None if len(value) <= MAX_CONSTEXPR_STR else "a string over " \
            f"{MAX_CONSTEXPR_STR} characters"
    if type(value) is tl.dtype or type(value) is torch.dtype:
        return None
    if type(value) is tuple and depth < 2 and len(value) <= 16:
        return next((p for v in value if (p := _constexpr_problem(v, depth + 1))), None)
    if isinstance(value, torch.Tensor):
        return f"a tensor ({type(value).__name__})"
    return f"a {type(value).__name__}"


def _param_name(params: list[Any], path: tuple[int, ...]) -> str:
    return params[path[0]].name + "".join(f"[{i}]" for i in path[1:])


@dataclass
class LaunchLog:
    """Records launches made through Triton's launch path (interpreted or compiled)."""

    launches: dict[str, Launch] = field(default_factory=dict)
    count: int = 0
    problems: list[str] = field(default_factory=list)
    # True while a kernel runs: torch operations then belong to Triton (the interpreter moves
    # tensors with torch), not to the student's wrapper (see kernel_child.host_spy). Recording reads
    # data_ptr() for the alignment, so it counts as part of the launch too.
    in_launch: bool = False
    # Set by close(): launches after the compile step (the GPU timing's, reference kernel
    # included) are compiled by Triton itself on the GPU and not recorded.
    closed: bool = False
    _backend: Any = None
    _binders: dict[int, tuple[Any, Any, Any]] = field(default_factory=dict)

    def _jit(self, kernel: Any) -> tuple[Any, Any]:
        """(the JITFunction, its binder for the sm_90 backend). In the interpreter the kernel is
        an InterpretedFunction: a JITFunction is built from the same function and decorator
        arguments, for its parameters (constexpr, do_not_specialize) and _pack_args."""
        from triton.backends.compiler import GPUTarget
        from triton.compiler import make_backend
        from triton.runtime.jit import JITFunction, create_function_from_signature

        cached = self._binders.get(id(kernel))
        if cached is not None and cached[0] is kernel:
            return cached[1], cached[2]
        if self._backend is None:
            self._backend = make_backend(GPUTarget(*TARGET))
        jit = kernel if isinstance(kernel, JITFunction) else JITFunction(
            kernel.fn, **getattr(kernel, "kwargs", {}))
        binder = create_function_from_signature(jit.signature, jit.params, self._backend)
        self._binders[id(kernel)] = (kernel, jit, binder)
        return jit, binder

    def specialise(self, kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Launch:
        """The launch as JITFunction.run would compile it (same binder, same _pack_args)."""
        from triton import knobs

        jit, binder = self._jit(kernel)
        name = jit.fn.__name__
        kwargs = dict(kwargs)
        # As JITFunction.run sets them before binding.
        kwargs["debug"] = kwargs.get("debug", jit.debug) or knobs.runtime.debug
        kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        try:
            bound, specialization, options = binder(*args, **kwargs)
            options, signature, constexprs, attrs = jit._pack_args(
                self._backend, kwargs, bound, specialization, options)
        except Exception as exc:
            raise LaunchRefused(f"{name}[grid](...) cannot be launched as Triton would launch "
                                f"it: {type(exc).__name__}: {exc}"[:500]) from None
        for path, value in constexprs.items():
            problem = _constexpr_problem(value)
            if problem is not None:
                raise LaunchRefused(
                    f"{name}[grid](...): the constexpr argument `{_param_name(jit.params, path)}`"
                    f" is {problem}. A tl.constexpr argument must be an int, float, bool, str or "
                    "dtype, never a tensor: pass tensors as ordinary (pointer) arguments and "
                    "tl.load them in the kernel.")
        fields = set(vars(options))
        launch_options = {k: v for k, v in kwargs.items() if k in fields}
        for k, v in launch_options.items():
            if not (v is None or type(v) in (bool, int, float, str)):
                raise LaunchRefused(f"{name}[grid](...): the launch option {k}= must be a plain "
                                    f"number or string, not a {type(v).__name__}.")
        return Launch(name, dict(signature), dict(constexprs), dict(attrs), launch_options,
                      kernel_fingerprint(kernel))

    def record(self, kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Record one launch, or raise LaunchRefused (and remember why: the compile step fails
        even if the student's wrapper catches the exception)."""
        if self.closed:
            return
        self.count += 1
        try:
            launch = self.specialise(kernel, args, kwargs)
        except LaunchRefused as exc:
            self._refuse(str(exc))
        except Exception as exc:  # our own failure to describe it: refused all the same
            self._refuse(f"a kernel launch could not be recorded for the sm_90 compile "
                         f"({type(exc).__name__}: {exc})"[:500])
        key = launch.key()
        if key in self.launches:
            return
        same = sum(1 for other in self.launches.values() if other.kernel == launch.kernel)
        if same >= MAX_PER_KERNEL or len(self.launches) >= MAX_LAUNCHES:
            self._refuse(f"{launch.kernel}[grid](...): more than {MAX_PER_KERNEL} distinct "
                         f"specialisations of one kernel (or {MAX_LAUNCHES} in all) were "
                         "launched; each is compiled for sm_90, so launch fewer variants "
                         "(constexprs, options, or argument alignment and values 1 / multiples "
                         "of 16, which Triton specialises on).")
        self.launches[key] = launch

    def _refuse(self, message: str) -> NoReturn:
        if message not in self.problems:
            self.problems.append(message)
        raise LaunchRefused(message)

    def close(self) -> dict[str, Any]:
        """Stop recording; what it saw, for finish_report()."""
        self.closed = True
        return {"launches": self.count, "problems": self.problems[:5]}

    def install(self, interpreted: bool) -> None:
        """Wrap the launch entry point of Triton's kernels so every launch is seen."""
        if interpreted:
            from triton.runtime.interpreter import InterpretedFunction as Kind
        else:
            from triton.runtime.jit import JITFunction as Kind
        original = Kind.run
        log = self

        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            outer, log.in_launch = log.in_launch, True
            try:
                if not warmup:
                    log.record(self, args, kwargs)
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                log.in_launch = outer

        Kind.run = run  # type: ignore[method-assign]


def unwrap_jit(obj: Any) -> Any:
    """An Autotuner/Heuristics wrapper holds the JITFunction as .fn (possibly nested)."""
    from triton.runtime.jit import JITFunction

    for _ in range(8):
        if isinstance(obj, JITFunction):
            return obj
        obj = getattr(obj, "fn", None)
        if obj is None:
            return None
    return None


def over_limits(entry: dict[str, Any]) -> list[str]:
    """The sm_90 per-block limits this compiled kernel exceeds, in words."""
    regs, threads = entry.get("registers"), entry.get("threads")
    used = {"shared": entry.get("shared"), "registers": regs, "threads": threads,
            "block_registers": regs * threads if regs is not None and threads else None}
    out = []
    for key, (limit, what, unit) in SM90_LIMITS.items():
        value = used[key]
        if value is not None and value > limit:
            out.append(f"needs {value:,}{' ' + unit if unit else ''} of {what}; sm_90 "
                       f"(H100/H200) allows at most {limit:,}{' ' + unit if unit else ''}")
    return out
