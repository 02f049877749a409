"""The children: the only processes that run the student's kernel code.

Forked by run.py's zygote (zygote.py) inside the sandbox, with torch and Triton already
imported, each serves one command per line on CMD_FD with one JSON reply per line on REPLY_FD,
each reply carrying its command's nonce (serve()). MODE is "preview" (the cases in Triton's
interpreter), "gpu" (the cases on the GPU, then timing), or "compile" (the sm_90 compile of
what a case child recorded, in a child that never interpreted a kernel). SOURCE is the
submission.py to load: the one beside this file, or a batched submission's own.

    {"op": "hello"}   load SOURCE (not in "compile" mode) -> {"kind": "ready"} or "import_error"
    {"op": "case", "in": path, "out": path, "entry": name, "args": [...]}
        load the tensors the parent saved, call entry(*args) on them (moved to the GPU in "gpu"
        mode), save them all back -> {"kind": "done", "seconds": t} or {"kind": "error", ...}
        the reply also lists the torch operations the wrapper itself ran on tensors ("host_ops")
    {"op": "launches"}  stop recording; write every launch the cases made to LAUNCHES
        -> {"kind": "launches", "path": LAUNCHES, "summary": what recording saw}
    {"op": "compile", "launches": path}   ("compile" mode) compile each launch for sm_90
        -> {"kind": "compiled", "report": sm90_compile.py's report}
    {"op": "time", ...} (gpu) time the reference kernel and the student's, interleaved

The children never see an expected output: the parent computes those after the child has
answered. Their stdout and stderr are the parent's stderr, so nothing they print can pose as a
result; a reply they forge costs them the case at most (the parent checks the tensors it saved,
not their claims).
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
STUDENT_FILE = "submission.py"
MAX_FRAMES = 30
LAUNCHES = "/tmp/kernel-launches.json"


def _report(exc: BaseException) -> dict[str, Any]:
    """The exception in a form the worker trims to the student's own frames."""
    frames = [[os.path.basename(f.filename), f.lineno, f.name, (f.line or "")[:200]]
              for f in traceback.extract_tb(exc.__traceback__)][-MAX_FRAMES:]
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return {"exception": text[:2000], "frames": frames}


def _load(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# What a wrapper may do with tensors: allocate, ask for sizes and strides, reshape, print.
# Properties (shape, dtype, device, ndim) arrive as their __get__.
HOST_ALLOWED = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "full", "full_like",
    "size", "stride", "numel", "dim", "element_size", "is_contiguous", "contiguous", "view",
    "reshape", "is_floating_point", "__get__", "__repr__", "__str__", "__format__", "__len__",
})


def host_spy(torch: Any, log: Any) -> Any:
    """A TorchFunctionMode around the wrapper call that notes every other torch operation run
    outside a kernel launch. The static check refuses torch calls by name; this also sees what
    no name shows (`z = 2 * x + y` in the wrapper, then a kernel that copies z)."""
    from torch.overrides import TorchFunctionMode

    class HostSpy(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[str] = []

        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            if not log.in_launch:
                name = getattr(func, "__name__", None) or repr(func)
                if name not in HOST_ALLOWED and name not in self.ops:
                    self.ops.append(name)
            return func(*args, **(kwargs or {}))

    return HostSpy()


class Child:
    def __init__(self, mode: str, source: str) -> None:
        import torch
        from aot import LaunchLog

        self.torch = torch
        self.mode = mode
        self.source = source
        self.device = "cuda" if mode == "gpu" else "cpu"
        self.log = LaunchLog()
        if mode != "preview":  # the modes that compile (the interpreter never does)
            from sm90_compile import sandbox_cache_key

            sandbox_cache_key()
        if mode != "compile":
            self.log.install(interpreted=mode == "preview")
        self.module: Any = None
        self.clock: Any = None
        self.flush: Any = None
        if mode == "gpu":
            # Made before the submission is imported, so its code cannot swap what they call.
            from timing import CudaClock, L2Flush

            self.clock = CudaClock(torch)
            self.flush = L2Flush("cuda", torch=torch)

    def load_submission(self) -> dict[str, Any]:
        if self.mode == "compile":  # sm90_compile.compile_launches loads it to compile
            return {"kind": "ready"}
        try:
            self.module = _load(self.source, "submission")
        except BaseException as exc:  # noqa: BLE001 - SystemExit from the student's file too
            return {"kind": "import_error", "report": _report(exc)}
        return {"kind": "ready"}

    def case(self, cmd: dict[str, Any]) -> dict[str, Any]:
        torch = self.torch
        args = torch.load(cmd["in"], weights_only=True)
        if self.device != "cpu":
            args = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v
                    for k, v in args.items()}
        entry = getattr(self.module, cmd["entry"], None)
        if not callable(entry):
            return {"kind": "error", "report": {
                "exception": f"submission.py defines no function {cmd['entry']}()", "frames": []}}
        spy = host_spy(torch, self.log)
        start = time.perf_counter()
        try:
            with spy:
                entry(*[args[name] for name in cmd["args"]])
            if self.device != "cpu":
                torch.cuda.synchronize()
        except BaseException as exc:  # noqa: BLE001
            return {"kind": "error", "report": _report(exc)}
        seconds = time.perf_counter() - start
        back = {k: v.detach().to("cpu") if isinstance(v, torch.Tensor) else v
                for k, v in args.items()}
        torch.save(back, cmd["out"])
        return {"kind": "done", "seconds": round(seconds, 4), "host_ops": spy.ops[:20]}

    def launches(self) -> dict[str, Any]:
        """Recording stops (the GPU timing's launches are Triton's own); the launches go to a
        file for the compile child, with what recording saw."""
        with open(LAUNCHES, "w", encoding="utf-8") as f:
            json.dump([launch.to_json() for launch in self.log.launches.values()], f)
        return {"kind": "launches", "path": LAUNCHES, "summary": self.log.close()}

    def compile(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Compile the recorded launches here, in a child forked from the zygote: Triton's
        interpreter never ran in this process (aot.py says why that matters)."""
        from aot import Launch
        from sm90_compile import compile_launches

        with open(str(cmd["launches"]), encoding="utf-8") as f:
            launches = [Launch.from_json(item) for item in json.load(f)]
        return {"kind": "compiled", "report": compile_launches(self.source, launches)}

    def time(self, cmd: dict[str, Any]) -> dict[str, Any]:
        from timed_case import time_case

        report = time_case(self.torch, self.module, cmd, self.clock, self.flush)
        return {"kind": "timed", "report": report}


def serve(cmd_fd: int, reply_fd: int, mode: str, source: str) -> None:
    """Answer the parent's commands until it closes the pipe (zygote.py forks, then calls this)."""
    commands = os.fdopen(cmd_fd, "r", encoding="utf-8")
    replies = os.fdopen(reply_fd, "w", encoding="utf-8")
    source = source or os.path.join(HERE, STUDENT_FILE)

    def reply(nonce: str, body: dict[str, Any]) -> None:
        replies.write(json.dumps({**body, "nonce": nonce}) + "\n")
        replies.flush()

    hello = json.loads(commands.readline())
    child = Child(mode, source)
    reply(hello["nonce"], child.load_submission())
    for line in commands:
        cmd = json.loads(line)
        op = cmd.get("op")
        try:
            if op == "case" and mode != "compile":
                body = child.case(cmd)
            elif op == "launches" and mode != "compile":
                body = child.launches()
            elif op == "compile" and mode == "compile":
                body = child.compile(cmd)
            elif op == "time" and mode == "gpu":
                body = child.time(cmd)
            else:
                body = {"kind": "error", "report": {"exception": f"unknown op {op!r}"}}
        except BaseException as exc:  # noqa: BLE001 - the harness's own failure, reported
            body = {"kind": "harness_error", "report": _report(exc)}
        reply(cmd["nonce"], body)
