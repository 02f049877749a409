"""The child: the only process that runs the student's kernel code.

Started by run.py (the trusted parent) inside the sandbox as

    python -I -B kernel_child.py CMD_FD REPLY_FD MODE [SOURCE]

It imports submission.py (in Triton's interpreter when MODE is "preview"): the one beside it, or
SOURCE, a batched submission's own submission.py (run.py says when), then answers one
command per line on CMD_FD with one JSON reply per line on REPLY_FD, each carrying the command's
nonce:

    {"op": "case", "in": path, "out": path, "entry": name, "args": [...]}
        load the tensors the parent saved, call entry(*args) on them (moved to the GPU in "gpu"
        mode), save them all back -> {"kind": "done", "seconds": t} or {"kind": "error", ...}
        the reply also lists the torch operations the wrapper itself ran on tensors ("host_ops")
    {"op": "compile"}   compile every kernel the cases launched for sm_90 -> {"kind": "compiled"}
    {"op": "time", ...} (gpu) time the reference kernel and the student's, interleaved

The child never sees an expected output: the parent computes those after the child has answered.
Its stdout and stderr are the parent's stderr, so nothing it prints can pose as a result; a reply
it forges costs it the case at most (the parent checks the tensors it saved, not its claims).
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

    def compile(self) -> dict[str, Any]:
        """Compile the recorded launches in a fresh process without the interpreter (aot.py
        says why); the student's prints there go to our stderr, the report is the AOT line."""
        import subprocess

        path = "/tmp/kernel-launches.json"
        with open(path, "w", encoding="utf-8") as f:
            json.dump([launch.to_json() for launch in self.log.launches.values()], f)
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        report: dict[str, Any] = {"ok": False, "kernels": []}
        done = subprocess.run(
            [sys.executable, "-I", "-B", os.path.join(HERE, "aot.py"),
             self.source, path],
            # No wall-clock timeout of its own: run.py's budget counts this process's CPU
            # time, stops it at its backstop, and one kill ends our whole process group.
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=2, env=env, cwd=HERE)
        lines = [ln for ln in done.stdout.decode("utf-8", "replace").splitlines()
                 if ln.startswith("AOT ")]
        if lines:
            report = json.loads(lines[-1][4:])
        else:
            report["error"] = f"the compiler process ended without a report (exit code " \
                              f"{done.returncode})"
        # A launch that could not be recorded (aot.LaunchRefused) fails the step, even if the
        # wrapper caught the exception.
        return {"kind": "compiled", "report": self.log.finish(report)}

    def time(self, cmd: dict[str, Any]) -> dict[str, Any]:
        from timed_case import time_case

        report = time_case(self.torch, self.module, cmd, self.clock, self.flush)
        return {"kind": "timed", "report": report}


def main() -> None:
    cmd_fd, reply_fd, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    source = sys.argv[4] if len(sys.argv) > 4 else os.path.join(HERE, STUDENT_FILE)
    commands = os.fdopen(cmd_fd, "r", encoding="utf-8")
    replies = os.fdopen(reply_fd, "w", encoding="utf-8")
    sys.path.insert(0, HERE)

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
            if op == "case":
                body = child.case(cmd)
            elif op == "compile":
                body = child.compile()
            elif op == "time":
                body = child.time(cmd)
            else:
                body = {"kind": "error", "report": {"exception": f"unknown op {op!r}"}}
        except BaseException as exc:  # noqa: BLE001 - the harness's own failure, reported
            body = {"kind": "harness_error", "report": _report(exc)}
        reply(cmd["nonce"], body)


if __name__ == "__main__":
    main()
