"""Which Triton kernels a submission launched, and whether each compiles for a real GPU.

Triton's interpreter accepts things no GPU build does (host Python inside a kernel, any tensor
shape), so a preview that passed in the interpreter is confirmed by compiling every kernel the
submission actually launched, with the argument types it launched with, ahead of time for
sm_90 (H100/H200). Triton compiles to PTX and a cubin without a GPU, using the ptxas bundled in
its wheel (research/anchors-gpu-grading.md §2.3).

Runs inside the sandbox. The child records launches while the cases run; then it starts this
file as a fresh process (`python aot.py SOURCE LAUNCHES.json`) without TRITON_INTERPRET, which
imports the submission so its @triton.jit functions are real JITFunctions, compiles, and prints
one JSON report line. A fresh process because the interpreter patches triton.language in place
(and, for helper calls, never restores it): compiling in the interpreted process fails on
correct kernels that call tl.max or tl.sum. Standard library + triton only; nothing of ours.
"""
from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass, field
from typing import Any

# Launch options, not kernel arguments (triton.Config / launch keywords).
OPTION_NAMES = ("num_warps", "num_stages", "num_ctas", "maxnreg")
# The target the authoritative grade runs on (H100/H200: compute capability 9.0, 32-wide warps).
TARGET = ("cuda", 90, 32)
MAX_SIGNATURES = 8  # distinct signatures kept per kernel: a loop of launches is not a compile farm


@dataclass
class Launch:
    """One distinct way a kernel was launched: its argument types and constexpr values."""

    kernel: str
    signature: dict[str, str]
    constexprs: dict[str, Any]
    options: dict[str, int]

    def key(self) -> str:
        return repr((self.kernel, sorted(self.signature.items()), sorted(
            (k, repr(v)) for k, v in self.constexprs.items()), sorted(self.options.items())))

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "signature": self.signature, "options": self.options,
                "constexprs": {k: _encode(v) for k, v in self.constexprs.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Launch:
        return cls(data["kernel"], data["signature"],
                   {k: _decode(v) for k, v in data["constexprs"].items()}, data["options"])


def _encode(value: Any) -> Any:
    """A constexpr value as JSON: plain scalars as they are, a tl.dtype by name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    name = getattr(value, "name", None)
    if type(value).__name__ == "dtype" and isinstance(name, str):
        return {"tl_dtype": name}
    raise TypeError(f"a constexpr of type {type(value).__name__} cannot be compiled ahead of time")


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and "tl_dtype" in value:
        import triton.language as tl

        return tl.dtype(value["tl_dtype"])
    return value


@dataclass
class LaunchLog:
    """Records launches made through Triton's launch path (interpreted or compiled)."""

    launches: dict[str, Launch] = field(default_factory=dict)
    count: int = 0
    problems: list[str] = field(default_factory=list)
    # True while a kernel runs: torch operations then belong to Triton (the interpreter moves
    # tensors with torch), not to the student's wrapper (see kchild.host_spy).
    in_launch: bool = False

    def record(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        from triton.runtime.jit import mangle_type

        self.count += 1
        try:
            import inspect

            params = list(inspect.signature(fn).parameters.values())
            names = [p.name for p in params]
            bound: dict[str, Any] = dict(zip(names, args, strict=False))
            options = {k: int(v) for k, v in kwargs.items() if k in OPTION_NAMES}
            bound.update({k: v for k, v in kwargs.items() if k not in OPTION_NAMES})
            signature: dict[str, str] = {}
            constexprs: dict[str, Any] = {}
            for p in params:
                if p.name not in bound:
                    if p.default is inspect.Parameter.empty:
                        continue  # the launch itself fails on this; the interpreter says so
                    bound[p.name] = p.default
                value = bound[p.name]
                if "constexpr" in str(p.annotation) or value is None:
                    signature[p.name] = "constexpr"
                    constexprs[p.name] = value
                else:
                    signature[p.name] = mangle_type(value)
            launch = Launch(fn.__name__, signature, constexprs, options)
            launch.to_json()  # refuse now what could not travel to the compiling process
        except Exception as exc:  # recording must never change what the student's code does
            self.problems.append(f"could not record a launch: {exc!r}"[:300])
            return
        key = launch.key()
        if key not in self.launches and sum(
                1 for other in self.launches.values() if other.kernel == launch.kernel
        ) < MAX_SIGNATURES:
            self.launches[key] = launch

    def install(self, interpreted: bool) -> None:
        """Wrap the launch entry point of Triton's kernels so every launch is seen."""
        if interpreted:
            from triton.runtime.interpreter import InterpretedFunction as Kind
        else:
            from triton.runtime.jit import JITFunction as Kind
        original = Kind.run
        log = self

        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if not warmup:
                log.record(self.fn, args, kwargs)
            outer, log.in_launch = log.in_launch, True
            try:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                log.in_launch = outer

        Kind.run = run  # type: ignore[method-assign]


def _unwrap(obj: Any) -> Any:
    """An Autotuner/Heuristics wrapper holds the JITFunction as .fn (possibly nested)."""
    from triton.runtime.jit import JITFunction

    for _ in range(8):
        if isinstance(obj, JITFunction):
            return obj
        obj = getattr(obj, "fn", None)
        if obj is None:
            return None
    return None


def compile_launches(source_path: str, log: LaunchLog) -> dict[str, Any]:
    """Compile each recorded launch for sm_90. Returns a JSON-able report:
    {"ok", "kernels": [{"kernel", "seconds", "shared", "num_warps", "wgmma", "error"}]}."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location("submission_compiled", source_path)
    if spec is None or spec.loader is None:
        return {"ok": False, "kernels": [], "error": "the submission could not be loaded again"}
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        return {"ok": False, "kernels": [],
                "error": f"loading the submission for compilation failed: {exc!r}"[:1000]}
    jitted = {}
    for value in vars(module).values():
        fn = _unwrap(value)
        if fn is not None:
            jitted[fn.fn.__name__] = fn
    reports: list[dict[str, Any]] = []
    for launch in log.launches.values():
        fn = jitted.get(launch.kernel)
        entry: dict[str, Any] = {"kernel": launch.kernel, "signature": launch.signature}
        if fn is None:
            entry["error"] = ("launched a function that is not a module-level @triton.jit kernel")
            reports.append(entry)
            continue
        start = time.perf_counter()
        try:
            compiled = triton.compile(
                ASTSource(fn=fn, signature=launch.signature, constexprs=launch.constexprs),
                target=GPUTarget(*TARGET), options=launch.options or None)
            ptx = compiled.asm.get("ptx", "")
            entry.update(shared=int(compiled.metadata.shared),
                         num_warps=int(compiled.metadata.num_warps),
                         wgmma=ptx.count("wgmma.mma_async"), mma=ptx.count("mma.sync"))
        except Exception as exc:
            entry["error"] = _first_lines(f"{type(exc).__name__}: {exc}")
        entry["seconds"] = round(time.perf_counter() - start, 3)
        reports.append(entry)
    return {"ok": bool(reports) and all("error" not in r for r in reports), "kernels": reports}


def _first_lines(text: str, lines: int = 12, chars: int = 1500) -> str:
    return "\n".join(text.splitlines()[:lines])[:chars]


def main() -> None:
    """python aot.py SOURCE LAUNCHES_JSON -> one line "AOT <json report>" on stdout."""
    import json
    import sys

    with open(sys.argv[2], encoding="utf-8") as f:
        data = json.load(f)
    log = LaunchLog()
    for item in data:
        launch = Launch.from_json(item)
        log.launches[launch.key()] = launch
    report = compile_launches(sys.argv[1], log)
    sys.stdout.write("AOT " + json.dumps(report, default=str) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
