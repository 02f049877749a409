"""The trusted parent of a kernel grading run, inside the sandbox.

    worker --stdin: key, config--> run.py (this) --fd: one command--> child --> submission.py
           <--stdout: one sealed result line--  <--fd: one reply----
           <--stderr: the student's prints, ours--
                                  run.py --socket: spawn, reap--> zygote --fork--> child

run.py makes every case's inputs from the exercise's kernel/task.py and a seed the worker chose
(never the student), fills the outputs with NaN, and hands the tensors to the child through a file
in the sandbox's /tmp. When the child has answered, it loads the tensors back (weights_only: a
forged file can hold tensors, never code), checks that the inputs are bitwise unchanged and the
outputs kept their shape and dtype, and only then computes the expected outputs in float64 with
task.reference() and compares them with task.tolerance(). So an expected value never exists while
the student's code runs, and the verdict is ours: the child's replies only say when to look.
After the cases, the case child hands over the launches it recorded and a compile child builds
each for sm_90 (compile_step; sm90_compile.py).

This process is non-dumpable before any child exists, imports torch once, and forks the zygote
(zygote.py) before it reads a byte of its stdin; every child is forked from the zygote, so no
child's memory ever held the key, the config or the seed, and each child's stdin is /dev/null.
It writes its result as one line sealed with that key (the same keyed BLAKE2b as
runners/relay.py), so nothing a child writes can pose as the result. Standard library + torch;
imports nothing of ours outside gpu_sandbox.

A batch (graders/kernel.py grade_batch: the selftest's TRUSTED sources, never a student's) is
the config's "batch", a list of submission paths in the sandbox (each named submission.py, in a
folder of its own). Each runs the flow above as if alone: fresh children given that path, the
same per-case seeds, its own time budgets and compile step; only this process's torch import,
the zygote, the sandbox's start and the Triton cache in /tmp are shared. Each submission's
stderr (its prints and ours) goes to a file of its own, returned in its report, so the grader
reads the same output tail as a run of its own. The one sealed line is then
{"batch": [report, ...]}.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import secrets
import select
import shutil
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cpuclock import Budget

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the harness's files sit flat beside this one

from zygote import Zygote, ZygoteGone  # noqa: E402

PR_SET_DUMPABLE = 4
SEAL_BYTES = 16
RESTARTS = 1  # a crash costs its case; the child is restarted once, not more
# Each phase's own limit, in CPU seconds of the child and what it starts (cpuclock.py: a busy
# machine must not fail a correct kernel), each with a wall-clock backstop WALL_FACTOR times
# longer; with the part's time limit for the cases (CPU seconds too) they stay inside the
# sandbox's wall clock (graders/kernel.py).
IMPORT_LIMIT_S = 20.0  # torch + triton + the student's module-level code
COMPILE_LIMIT_S = 20.0  # sm90_compile.py: triton + the submission again, each sm_90 build
MAX_REPLY_BYTES = 1 << 20
WORK = "/tmp/kernel-cases"
BATCH_STDERR = "/tmp/kernel-batch-stderr"
# Of each batched submission's stderr, the end the grader keeps (its tail is 4 KiB at most).
BATCH_STDERR_BYTES = 64 << 10


def seal(key: bytes, body: bytes) -> str:
    return hashlib.blake2b(body, key=key, digest_size=SEAL_BYTES).hexdigest()


def case_seed(seed: int, case_id: str) -> int:
    """Each case's seed, from the worker's seed (secret in submit mode) and the case id."""
    digest = hashlib.blake2b(f"{seed}:{case_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & ((1 << 62) - 1)


class ChildGone(Exception):
    """The child died or broke the protocol; `how` says which, in words."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


class ChildTimeout(Exception):
    """A phase's budget ran out: `busy` when only at the wall-clock backstop, with the child
    starved of a core (the machine's fault, reported as such, never as a time limit)."""

    def __init__(self, busy: bool) -> None:
        super().__init__("busy" if busy else "time")
        self.busy = busy


class Child:
    """One child forked by the zygote (kernel_child.py's serve) and its two pipes."""

    def __init__(self, zygote: Zygote, mode: str, source: str | None = None) -> None:
        cmd_r, self.cmd_w = os.pipe()
        self.reply_r, reply_w = os.pipe()
        self.zygote = zygote
        self.pid: int | None = None
        try:
            # Its stdout and stderr are this process's stderr as it is now (a batch's file).
            self.pid = zygote.spawn(mode, source or "", cmd_r, reply_w, 2)
        except ZygoteGone:
            pass  # the first ask() says the child is gone
        finally:
            os.close(cmd_r)
            os.close(reply_w)
        self.buffer = b""

    def ask(self, body: dict[str, Any], budget: Budget) -> dict[str, Any]:
        nonce = secrets.token_hex(8)
        try:
            os.write(self.cmd_w, (json.dumps({**body, "nonce": nonce}) + "\n").encode())
        except OSError:
            raise ChildGone(self._how()) from None
        while True:
            # Replies with another nonce (written by the student's code) are skipped.
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                try:
                    reply = json.loads(line)
                except ValueError:
                    continue
                if isinstance(reply, dict) and reply.get("nonce") == nonce:
                    return reply
            left = budget.wait_s()
            if left <= 0:
                raise ChildTimeout(budget.outcome == "busy")
            ready, _, _ = select.select([self.reply_r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.reply_r, 65536)
            if not chunk:
                raise ChildGone(self._how())
            self.buffer += chunk
            if len(self.buffer) > MAX_REPLY_BYTES:
                raise ChildGone("wrote an oversized reply to the grader's channel")

    def _how(self) -> str:
        if self.pid is None:
            return "could not be started"
        try:
            code = self.zygote.reap(self.pid, 5.0)
        except ZygoteGone:
            return "could not be waited for"
        if code is None:
            return "closed the grader's channel"
        self.pid = None  # reaped: kill() must not signal a pid that may be reused
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was ended by {name}"
        return f"exited with code {code}"

    def kill(self) -> None:
        if self.pid is not None:
            try:
                os.killpg(self.pid, signal.SIGKILL)  # its session: the compiler's processes too
            except OSError:
                pass
            try:
                self.zygote.reap(self.pid, 5.0)
            except ZygoteGone:
                pass
            self.pid = None
        for fd in (self.cmd_w, self.reply_r):
            try:
                os.close(fd)
            except OSError:
                pass


def _load_task(torch: Any) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("task", os.path.join(HERE, "task.py"))
    assert spec is not None and spec.loader is not None
    task = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(task)
    return task


def run(config: dict[str, Any], zygote: Zygote, source: str | None = None) -> dict[str, Any]:
    """One submission's report: `source` (a batch's) or submission.py beside this file; its
    children forked by `zygote`."""
    import torch
    from compare import compare_case, poison
    from cpuclock import WALL_FACTOR, Budget

    mode = config["mode"]
    device = "cuda" if mode == "gpu" else "cpu"
    torch.manual_seed(0)
    task = _load_task(torch)
    cases = list(task.cases(config["params"], mode))
    # "busy": a phase was stopped only at its wall-clock backstop, starved of a core; the worker
    # runs the whole grade again rather than count it (graders/kernel.py).
    result: dict[str, Any] = {"mode": mode, "device": device, "cases": [], "compile": None,
                              "import": None, "timing": None, "busy": False}
    if device == "cuda":
        result["device"] = torch.cuda.get_device_name(0)
    os.makedirs(WORK, exist_ok=True)
    # The part's time limit is for the cases alone: start-up (and a restart after a crash) and
    # the compile step have limits of their own. All are CPU seconds; the cases share one
    # wall-clock backstop, set when the first case is sent.
    time_left = float(config["time_limit_s"])
    cases_deadline: float | None = None
    restarts = 0

    def start() -> tuple[Child | None, dict[str, Any]]:
        child = Child(zygote, mode, source)
        try:
            reply = child.ask({"op": "hello"}, Budget(IMPORT_LIMIT_S))
        except ChildTimeout as timeout:
            child.kill()
            result["busy"] = result.get("busy") or timeout.busy
            return None, {"kind": "import_busy" if timeout.busy else "import_timeout"}
        except ChildGone as gone:
            child.kill()
            return None, {"kind": "import_crash", "how": gone.how}
        if reply.get("kind") != "ready":
            child.kill()
            return None, reply
        return child, reply

    child, hello = start()
    result["import"] = {k: v for k, v in hello.items() if k != "nonce"}
    if child is None:
        return result
    names = list(task.ARGS)
    outputs = list(task.OUTPUTS)
    for index, case in enumerate(cases):
        entry: dict[str, Any] = {"id": case["id"], "label": case["label"]}
        if hasattr(task, "describe"):
            entry["describe"] = str(task.describe(case))[:300]
        result["cases"].append(entry)
        if child is None:
            entry["status"] = "not_run"
            continue
        seed = case_seed(int(config["seed"]), str(case["id"]))
        args = task.make(case, seed, torch, "cpu")
        for name in outputs:
            poison(torch, args[name])  # NaN with our payload (compare.py)
        in_path = os.path.join(WORK, f"in-{index}.pt")
        out_path = os.path.join(WORK, f"out-{index}.pt")
        torch.save({n: args[n] for n in names}, in_path)
        if cases_deadline is None:
            cases_deadline = time.monotonic() + WALL_FACTOR * time_left
        budget = Budget(time_left, cases_deadline)
        try:
            reply = child.ask({"op": "case", "in": in_path, "out": out_path, "entry": task.ENTRY,
                               "args": names}, budget)
        except ChildTimeout as timeout:
            time_left = 0.0
            entry["status"] = "busy" if timeout.busy else "timeout"
            result["busy"] = result.get("busy") or timeout.busy
            child.kill()
            child = None
            continue
        except ChildGone as gone:
            time_left -= budget.used()
            entry.update(status="crash", message=gone.how)
            child.kill()
            child = None
            if restarts < RESTARTS:
                restarts += 1
                child, _ = start()
            continue
        time_left -= budget.used()
        kind = reply.get("kind")
        if kind == "harness_error":
            raise RuntimeError(f"kernel_child failed: {reply.get('report')}")
        if kind == "error":
            entry.update(status="error", report=reply.get("report"))
            continue
        entry["seconds"] = reply.get("seconds")
        try:
            got = torch.load(out_path, weights_only=True)
        except Exception as exc:  # a file the child's code replaced or broke
            entry.update(status="error", report={
                "exception": f"the tensors could not be read back ({type(exc).__name__})",
                "frames": []})
            continue
        entry.update(compare_case(torch, task, case, args, got))
        if entry["status"] == "ok" and reply.get("host_ops"):
            ops = ", ".join(str(op) for op in reply["host_ops"][:5])
            entry.update(status="host_compute", message=(
                f"your wrapper ran torch operations on tensors ({ops}): the math must happen in "
                "your @triton.jit kernel; the wrapper may only allocate, reshape and launch"))
    if child is not None:
        result["compile"], busy = compile_step(zygote, child, source)
        result["busy"] = result.get("busy") or busy
        if result["compile"].get("child_gone"):
            child = None
    if child is not None and mode == "gpu" and all(
            c.get("status") == "ok" for c in result["cases"]):
        from timed_case import time_all

        timed = child
        result["timing"] = time_all(torch, task, config,
                                    lambda body, limit: timed.ask(body, Budget(limit)))
    if child is not None:
        child.kill()
    return result


def compile_step(zygote: Zygote, child: Child, source: str | None
                 ) -> tuple[dict[str, Any], bool]:
    """(the compile report, whether the machine was too busy): the case child hands over what
    it recorded, and a compile child (forked from the zygote, never interpreted) compiles it,
    within one COMPILE_LIMIT_S budget. The report says "child_gone" when the case child
    stopped (it is then killed)."""
    from cpuclock import Budget
    from sm90_compile import finish_report

    budget = Budget(COMPILE_LIMIT_S)
    compiler: Child | None = None
    try:
        summary = child.ask({"op": "launches"}, budget)
        compiler = Child(zygote, "compile", source)
        compiler.ask({"op": "hello"}, budget)
        reply = compiler.ask({"op": "compile", "launches": summary.get("path")}, budget)
    except ChildTimeout as timeout:
        child.kill()
        return {"ok": False, "kernels": [], "busy": timeout.busy, "child_gone": True,
                "error": "the machine was too busy to compile in time" if timeout.busy
                else f"compiling took more than {COMPILE_LIMIT_S:g} s of CPU time"
                }, timeout.busy
    except ChildGone as gone:
        if compiler is None:  # the case child stopped
            child.kill()
            return {"ok": False, "kernels": [], "child_gone": True,
                    "error": f"the process {gone.how} while compiling"}, False
        return {"ok": False, "kernels": [],
                "error": f"the compile step's process {gone.how}"}, False
    finally:
        if compiler is not None:
            compiler.kill()
    report = reply.get("report")
    if not isinstance(report, dict):
        report = {"ok": False, "kernels": [], "error": "the compiler process ended without a "
                  "report"}
    return finish_report(report, summary.get("summary") or {}), False


def run_batch(config: dict[str, Any], zygote: Zygote) -> dict[str, Any]:
    """Each submission of config["batch"] run as by run(), one after another, each with its own
    stderr file; one submission's harness failure is its own report ("internal")."""
    reports = []
    for source in config["batch"]:
        shutil.rmtree(WORK, ignore_errors=True)  # no case file of the previous one is left
        sys.stderr.flush()
        saved = os.dup(2)
        fd = os.open(BATCH_STDERR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 2)  # the child inherits it as its stdout and stderr
        os.close(fd)
        start = time.monotonic()
        try:
            report = run(config, zygote, os.path.join(HERE, source))
        except Exception as exc:
            import traceback

            report = {"internal": "".join(traceback.format_exception(exc))[-3000:]}
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        with open(BATCH_STDERR, "rb") as f:
            f.seek(max(0, os.path.getsize(BATCH_STDERR) - BATCH_STDERR_BYTES))
            # latin-1: every byte survives JSON and comes back as itself (graders/kernel.py).
            report["stderr"] = f.read().decode("latin-1")
        report["wall_s"] = round(time.monotonic() - start, 3)
        reports.append(report)
    return {"batch": reports}


def main() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.stderr.write("run.py: prctl(PR_SET_DUMPABLE, 0) failed\n")
        return 3
    # torch once per run, in this process: the zygote is forked from it, before a byte of
    # stdin is read, and every child from the zygote (zygote.py).
    import torch  # noqa: F401

    zygote = Zygote()
    key = bytes.fromhex(sys.stdin.readline().strip())
    config = json.loads(sys.stdin.readline())
    try:
        result = run_batch(config, zygote) if "batch" in config else run(config, zygote)
    except Exception as exc:
        import traceback

        result = {"internal": "".join(traceback.format_exception(exc))[-3000:]}
    finally:
        zygote.close()
    body = json.dumps(result, allow_nan=False, default=str).encode()
    sys.stdout.buffer.write(b"RESULT " + seal(key, body).encode() + b" " + body + b"\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    # The sealed line is written and flushed: skip the interpreter's teardown, which after
    # importing torch takes a third of a second of the student's wait and nothing else.
    os._exit(code)
