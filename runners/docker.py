"""Docker backend: production sandboxes through the Docker engine (feasibility §6, §7).

One run is one container, created from the sandbox image (docker/sandbox, or docker/sandbox-gpu
for GPU specs) with the limits of the SandboxSpec mapped onto the engine's own: no network, a
read-only root, a size-capped /tmp and /dev/shm, all capabilities dropped, no-new-privileges,
the seccomp deny list of runners.seccomp, uid 65534, memory = memory+swap, pids, CPU quota and
rlimits. Lifecycle: create -> attach -> start -> feed stdin and read under the shared output
cap and wall deadline -> wait -> inspect (OOM) -> remove, the remove always, in `finally`.

How the job files reach /sandbox (read-only): `put_archive` is refused by the engine for a
read-only root (ErrRootFSReadOnly) and for a read-only volume, and a bind mount of a host
path breaks as soon as the worker itself runs in a container (its paths are not the engine
host's). So each run with files gets a fresh named volume, filled through a *loader*
container that mounts it read-write but is never started (the engine mounts a created
container's volumes for put_archive), then removed; the sandbox container mounts the same
volume read-only. Untrusted code never sees /sandbox writable, and nothing depends on where
the worker runs. Containers and volumes carry labels so `janitor()` finds leftovers.

The Docker socket makes the worker root-equivalent on the engine host: the worker stays
trusted and the socket is never handed into a sandbox (feasibility §6).
"""

from __future__ import annotations

import contextlib
import errno
import io
import math
import os
import selectors
import signal
import socket
import ssl
import tarfile
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

# `from docker.x import` rather than `import docker`: the repository's docker/ folder (image
# definitions, no __init__.py) would otherwise pass for a first-party package with linters;
# at run time the installed SDK, a regular package, always wins over a namespace folder.
import requests
from docker.client import DockerClient
from docker.errors import DockerException, ImageNotFound
from docker.types import DeviceRequest, LogConfig, Ulimit

from runners.base import SandboxUnavailable
from runners.capture import CHUNK, DRAIN_S, Captured
from runners.cgroups import owner_alive, owner_tag
from runners.cpuclock import CPU_FILES_ENV
from runners.sandbox_env import SANDBOX_PYTHON, payload_env
from runners.seccomp import docker_profile_json
from runners.spec import MiB, SandboxResult, SandboxSpec

DEFAULT_IMAGE = "roofline-sandbox:py311"
DEFAULT_GPU_IMAGE = "roofline-sandbox-gpu:cu13"
SANDBOX_DIR = "/sandbox"
# nobody:nogroup in both images (Debian and Ubuntu bases); never root, never a host user.
SANDBOX_USER = "65534:65534"
LABEL = "roofline.sandbox"
OWNER_LABEL = "roofline.owner"
HOST_LABEL = "roofline.host"
CREATED_LABEL = "roofline.created"
# Every API call but `wait` (which gets its own timeout from the wall deadline).
API_TIMEOUT_S = 30
# How long after the wall deadline we keep waiting for a container to report its exit.
WAIT_GRACE_S = 2.0
KILL_WAIT_S = 5.0
# NCCL / DataLoader workers share tensors through /dev/shm (feasibility §7); it is still
# charged to the container's memory limit, so a larger floor does not loosen that limit.
GPU_MIN_SHM_BYTES = 256 * MiB
JANITOR_MAX_AGE_S = 600.0
# Where a container sees its own cgroup's CPU counter: the engine mounts the container's cgroup
# at /sys/fs/cgroup (per controller under cgroup v1, the whole of it under v2).
CONTAINER_CPU_FILES = "/sys/fs/cgroup/cpuacct/cpuacct.usage:/sys/fs/cgroup/cpu.stat"

# Without a TTY the attach stream is multiplexed: 8-byte header [stream, 0, 0, 0, size:u32be].
STDOUT, STDERR = 1, 2
_HEADER = 8

_IO_RETRY = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
# What a failing engine or connection raises; anything else is a bug and should propagate.
_ENGINE_ERRORS = (DockerException, requests.exceptions.RequestException, OSError)


def sandbox_image() -> str:
    return os.environ.get("ROOFLINE_SANDBOX_IMAGE") or DEFAULT_IMAGE


def sandbox_gpu_image() -> str:
    return os.environ.get("ROOFLINE_SANDBOX_GPU_IMAGE") or DEFAULT_GPU_IMAGE


def labels() -> dict[str, str]:
    """Labels on every container and volume we create: what janitor() selects and judges by."""
    return {
        LABEL: "1",
        OWNER_LABEL: owner_tag(),
        # The owner tag is `pid.starttime`, meaningful only on the host (pid namespace) that
        # made it, so the janitor checks liveness only for its own host's leftovers.
        HOST_LABEL: socket.gethostname(),
        CREATED_LABEL: str(int(time.time())),
    }


def job_tar(files: dict[str, bytes]) -> bytes:
    """The job files as an uncompressed tar for put_archive: root-owned, files 0644, dirs 0755,
    so uid 65534 can read but never write them. Names were checked by SandboxSpec."""
    buf = io.BytesIO()
    now = int(time.time())
    made: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            parts = name.split("/")
            for depth in range(1, len(parts)):
                parent = "/".join(parts[:depth])
                if parent not in made:
                    made.add(parent)
                    info = tarfile.TarInfo(parent)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
                    tar.addfile(info)
            content = files[name]
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, now
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class _Demux:
    """Splits the attach stream into (stream id, bytes) pieces as they arrive, without waiting
    for a whole frame, so the output cap counts bytes the moment they come in."""

    def __init__(self) -> None:
        self._header = bytearray()
        self._stream = 0
        self._left = 0

    def feed(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        view = memoryview(data)
        pos = 0
        while pos < len(view):
            if self._left == 0:
                take = min(_HEADER - len(self._header), len(view) - pos)
                self._header += view[pos:pos + take]
                pos += take
                if len(self._header) == _HEADER:
                    self._stream = self._header[0]
                    self._left = int.from_bytes(self._header[4:8], "big")
                    self._header.clear()
                continue
            take = min(self._left, len(view) - pos)
            yield self._stream, bytes(view[pos:pos + take])
            pos += take
            self._left -= take


def _raw_socket(sock: Any) -> Any:
    # attach_socket returns the socket.SocketIO of the hijacked HTTP connection on unix/tcp
    # (a bare socket for TLS); the selector and send/recv need the socket itself.
    return getattr(sock, "_sock", sock)


def _close_write(sock: Any) -> None:
    # A half-close is how the engine learns stdin ended (the container has StdinOnce set).
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def pump(sock: Any, stdin: bytes, deadline: float, limit: int,
         kill: Callable[[], None]) -> Captured:
    """Feed `stdin` into the attach socket and read stdout/stderr from it under one shared
    byte cap and one wall deadline (time.monotonic()); the docker twin of capture.capture().

    Returns at end of stream (the container exited), or after kill() plus a short drain on
    timeout, or at once (after kill()) when the cap is exceeded.
    """
    sock.setblocking(False)
    out = {STDOUT: bytearray(), STDERR: bytearray()}
    total = 0
    truncated = timed_out = False
    pending = memoryview(stdin)
    demux = _Demux()
    sel = selectors.DefaultSelector()
    events = selectors.EVENT_READ
    if pending:
        events |= selectors.EVENT_WRITE
    sel.register(sock, events)
    stop_at: float | None = None

    try:
        while True:
            now = time.monotonic()
            if stop_at is None and now >= deadline:
                timed_out = True
                kill()
                stop_at = now + DRAIN_S
            if stop_at is not None and now >= stop_at:
                break
            ready = sel.select(max(0.0, (stop_at if stop_at is not None else deadline) - now))
            eof = False
            for _, mask in ready:
                if mask & selectors.EVENT_WRITE and pending:
                    try:
                        pending = pending[sock.send(pending[:CHUNK]):]
                    except _IO_RETRY:
                        pass
                    except OSError as exc:
                        # The program exited (or closed stdin) before reading it all.
                        if exc.errno not in (errno.EPIPE, errno.ECONNRESET, errno.EBADF):
                            raise
                        pending = memoryview(b"")
                    if not pending:
                        _close_write(sock)
                        sel.modify(sock, selectors.EVENT_READ)
                if not mask & selectors.EVENT_READ:
                    continue
                try:
                    data = sock.recv(CHUNK)
                except _IO_RETRY:
                    continue
                except ConnectionResetError:
                    data = b""
                # TLS may hold decrypted bytes that select() cannot see; take them now (they
                # are already decrypted, so this cannot block or want more input).
                while data and isinstance(sock, ssl.SSLSocket) and sock.pending():
                    data += sock.recv(sock.pending())
                if not data:
                    eof = True
                    continue
                for stream, piece in demux.feed(data):
                    room = limit - total
                    if len(piece) > room:
                        piece = piece[:room]
                        truncated = True
                    # 3 is the engine's own error stream: report it as stderr.
                    out[STDOUT if stream == STDOUT else STDERR] += piece
                    total += len(piece)
                    if truncated:
                        break
            if truncated:
                # Nothing more will be kept, so there is nothing to drain. Hang up before the
                # kill: the engine does not finish killing a container while it still copies
                # output into a stream nobody reads (found on a real engine: the kill call
                # hung for its whole API timeout under a stderr flood).
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                if stop_at is None:
                    kill()
                break
            if eof:
                break
    finally:
        sel.close()
    return Captured(bytes(out[STDOUT]), bytes(out[STDERR]), truncated, timed_out)


def _decode_status(code: int) -> tuple[int | None, int | None]:
    # docker-init (tini, PID 1) exits 128+N when the payload died of signal N, and the engine
    # reports 137 when our kill() SIGKILLed PID 1 itself.
    if 128 < code < 128 + signal.NSIG:
        return None, code - 128
    return code, None


class DockerBackend:
    name = "docker"

    def __init__(self, client: Any = None, image: str | None = None,
                 gpu_image: str | None = None, *, probe: bool = True) -> None:
        self._client = client
        self.image = image or sandbox_image()
        self.gpu_image = gpu_image or sandbox_gpu_image()
        # Run a trivial command at the first available() (as BwrapBackend does): a ping and an
        # image lookup pass on engines that would still refuse our security options.
        self.probe = probe
        self._status: tuple[bool, str] | None = None

    # -- engine -----------------------------------------------------------------------------

    def client(self) -> Any:
        if self._client is None:
            try:
                self._client = DockerClient.from_env(timeout=API_TIMEOUT_S)
            except DockerException as exc:
                raise SandboxUnavailable(f"cannot reach the docker engine: {exc}") from exc
        return self._client

    def available(self) -> tuple[bool, str]:
        """(usable, reason): the engine answers, the sandbox image exists and (with probe) a
        trivial run through the full path succeeds. Never raises; cached."""
        if self._status is None:
            try:
                self._status = self._check()
            except Exception as exc:  # noqa: BLE001 - the contract is "never raises"
                self._status = (False, f"docker check failed: {type(exc).__name__}: {exc}")
        return self._status

    def _check(self) -> tuple[bool, str]:
        try:
            client = self.client()
        except SandboxUnavailable as exc:
            return False, str(exc)
        try:
            client.ping()
        except _ENGINE_ERRORS as exc:
            return False, f"docker engine not answering: {exc}"
        try:
            client.images.get(self.image)
        except ImageNotFound:
            return False, (f"sandbox image {self.image} not found: build it with "
                           f"`docker build -t {self.image} docker/sandbox` "
                           "(or set ROOFLINE_SANDBOX_IMAGE)")
        except _ENGINE_ERRORS as exc:
            return False, f"cannot inspect sandbox image {self.image}: {exc}"
        if self.probe:
            marker = "roofline-sandbox-ok"
            try:
                result = self.run(SandboxSpec(argv=[SANDBOX_PYTHON, "-c", f"print('{marker}')"],
                                              wall_timeout_s=30.0))
            except SandboxUnavailable as exc:
                return False, f"docker probe failed: {exc}"
            if result.verdict != "OK" or result.stdout.strip() != marker.encode():
                tail = result.stderr.decode(errors="replace").strip()[-500:]
                return False, (f"docker probe failed (verdict {result.verdict}, exit "
                               f"{result.exit_code}, signal {result.signal}): {tail}")
        return True, f"docker engine, image {self.image}"

    # -- the mapping ------------------------------------------------------------------------

    def container_kwargs(self, spec: SandboxSpec, volume: str | None = None) -> dict[str, Any]:
        """The SandboxSpec as `client.containers.create(**kwargs)` arguments (feasibility §6).

        Pure: no engine is touched. `volume` names the job-files volume, mounted read-only at
        /sandbox; None when the spec has no files (the image's empty /sandbox is used).
        """
        gpu = spec.gpu is not None
        env = payload_env(spec.cpus, {})
        # The container's own CPU counter, for the harness's CPU-time budgets (cpuclock.py).
        env[CPU_FILES_ENV] = CONTAINER_CPU_FILES
        if gpu:
            # The engine shows the container only the requested GPU, so inside it is device 0.
            # NVIDIA_* repeats what the device request sets, so the image's `all` cannot win.
            env.update({"CUDA_VISIBLE_DEVICES": "0", "NVIDIA_VISIBLE_DEVICES": str(spec.gpu),
                        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"})
        # Containers never inherit the worker's environment: this is all they get (plus the
        # image's own ENV, which the Dockerfiles keep free of anything secret).
        env.update(spec.env)
        cpu_soft = max(1, math.ceil(spec.cpu_time_s))  # same RLIMIT_CPU as the bwrap backend
        security_opt = ["no-new-privileges:true"]
        if spec.seccomp:
            security_opt.append(f"seccomp={docker_profile_json()}")
        # seccomp=False leaves the engine's default profile in force, never "unconfined".
        wants_stdin = bool(spec.stdin)
        kwargs: dict[str, Any] = {
            "image": self.gpu_image if gpu else self.image,
            # Entrypoint set explicitly so an image ENTRYPOINT/CMD can never wrap the command.
            "entrypoint": spec.argv[:1],
            "command": spec.argv[1:],
            "user": SANDBOX_USER,
            "working_dir": SANDBOX_DIR,
            "hostname": "sandbox",
            "environment": env,
            "labels": labels(),
            "network_disabled": True,
            "network_mode": "none",
            # The engine writes /etc/resolv.conf even without a network, by default a copy of
            # the host's (its resolver's address): name the container's own loopback instead.
            "dns": ["127.0.0.1"],
            "read_only": True,
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={spec.tmpfs_bytes}"},
            # "private", not "none": "none" has no /dev/shm, which multiprocessing and torch need.
            "ipc_mode": "private",
            "shm_size": max(spec.shm_bytes, GPU_MIN_SHM_BYTES) if gpu else spec.shm_bytes,
            "cap_drop": ["ALL"],
            "security_opt": security_opt,
            # memory == memory+swap: over the limit the run is OOM-killed, never swapped out.
            "mem_limit": spec.memory_bytes,
            "memswap_limit": spec.memory_bytes,
            # Like the bwrap cgroup's pids.max, this counts the init process (docker-init) too.
            "pids_limit": spec.pids,
            "nano_cpus": int(spec.cpus * 1e9),
            # No RLIMIT_AS: the memory cgroup bounds the whole container, and CUDA (GPU specs)
            # reserves address space far beyond any sane RLIMIT_AS (feasibility §7).
            "ulimits": [
                Ulimit(name="cpu", soft=cpu_soft, hard=cpu_soft + 1),
                Ulimit(name="fsize", soft=spec.fsize_bytes, hard=spec.fsize_bytes),
                Ulimit(name="nofile", soft=spec.nofile, hard=spec.nofile),
                Ulimit(name="core", soft=0, hard=0),
            ],
            # docker-init as PID 1 reaps orphans and forwards signals (bwrap's PID 1 does this).
            "init": True,
            # The daemon copies the output into its log as well; cap that copy so a flood
            # cannot fill the engine host's disk (we read the attach stream, not the log).
            "log_config": LogConfig(type=LogConfig.types.JSON, config={
                "max-size": str(spec.output_limit_bytes), "max-file": "1"}),
            "stdin_open": wants_stdin,
            # The SDK only sets StdinOnce (the engine closes the container's stdin when our
            # half-close arrives) for non-detached configs; `detach` changes nothing else at
            # create time. Without stdin the container gets /dev/null and detach stays True.
            "detach": not wants_stdin,
            "tty": False,
        }
        if volume is not None:
            kwargs["volumes"] = {volume: {"bind": SANDBOX_DIR, "mode": "ro"}}
        if gpu:
            kwargs["device_requests"] = [
                DeviceRequest(device_ids=[str(spec.gpu)], capabilities=[["gpu"]])]
        runtime = os.environ.get("ROOFLINE_DOCKER_RUNTIME")
        if runtime:
            # e.g. "runsc" (gVisor) for a stronger kernel boundary; GPUs then need nvproxy.
            kwargs["runtime"] = runtime
        return kwargs

    # -- running ----------------------------------------------------------------------------

    def _stage_files(self, client: Any, files: dict[str, bytes], image: str) -> Any:
        """A new volume holding the job files (see the module docstring for why)."""
        name = f"roofline-job-{owner_tag()}-{uuid.uuid4().hex[:12]}"
        volume = client.volumes.create(name=name, labels=labels())
        try:
            loader = client.containers.create(
                image=image, entrypoint=["true"], command=[], user=SANDBOX_USER,
                network_disabled=True, network_mode="none", labels=labels(),
                volumes={name: {"bind": SANDBOX_DIR, "mode": "rw"}}, detach=True)
            try:
                accepted = loader.put_archive(SANDBOX_DIR, job_tar(files))
            finally:
                with contextlib.suppress(*_ENGINE_ERRORS):
                    loader.remove(force=True)
            if not accepted:
                raise SandboxUnavailable("docker refused the job files (put_archive)")
        except BaseException:
            with contextlib.suppress(*_ENGINE_ERRORS):
                volume.remove(force=True)
            raise
        return volume

    def run(self, spec: SandboxSpec) -> SandboxResult:
        if spec.network:
            raise SandboxUnavailable("network access is not supported")
        client = self.client()
        volume: Any = None
        container: Any = None
        sock: Any = None
        killed_by_us = False

        def kill() -> None:
            nonlocal killed_by_us
            killed_by_us = True
            # 409 when it already stopped: then there is nothing to kill.
            with contextlib.suppress(*_ENGINE_ERRORS):
                container.kill()

        try:
            try:
                image = self.gpu_image if spec.gpu is not None else self.image
                if spec.files:
                    volume = self._stage_files(client, spec.files, image)
                kwargs = self.container_kwargs(spec, volume.name if volume is not None else None)
                container = client.containers.create(**kwargs)
                # Attach before start, as `docker run` does: no output can be missed, and no
                # output is in flight while the HTTP upgrade is read, so nothing is left
                # behind in the HTTP response's buffer.
                sock = container.attach_socket(params={
                    "stdin": int(bool(spec.stdin)), "stdout": 1, "stderr": 1, "stream": 1})
                raw = _raw_socket(sock)
                if spec.stdin and isinstance(raw, ssl.SSLSocket):
                    # Python cannot half-close TLS (shutdown drops the SSL layer), so the
                    # program would never see end of input.
                    raise SandboxUnavailable("stdin needs the docker engine over a unix socket "
                                             "or plain tcp, not TLS")
                start = time.monotonic()
                container.start()
            except ImageNotFound as exc:
                raise SandboxUnavailable(f"sandbox image missing: {exc}") from exc
            except _ENGINE_ERRORS as exc:
                raise SandboxUnavailable(f"docker could not start the sandbox: {exc}") from exc

            deadline = start + spec.wall_timeout_s
            try:
                out = pump(raw, spec.stdin, deadline, spec.output_limit_bytes, kill)
            except OSError as exc:
                kill()
                raise SandboxUnavailable(f"lost the sandbox's attach stream: {exc}") from exc
            status, late = self._wait(container, deadline, kill)
            wall_s = time.monotonic() - start
            try:
                container.reload()
            except _ENGINE_ERRORS as exc:
                raise SandboxUnavailable(f"cannot inspect the sandbox container: {exc}") from exc
            oom = bool((container.attrs.get("State") or {}).get("OOMKilled"))
        finally:
            # SocketIO.close() leaves the socket under it open: close both.
            for stream in (sock, _raw_socket(sock)) if sock is not None else ():
                with contextlib.suppress(OSError):
                    stream.close()
            if container is not None:
                with contextlib.suppress(*_ENGINE_ERRORS):
                    container.remove(force=True)
            if volume is not None:
                with contextlib.suppress(*_ENGINE_ERRORS):
                    volume.remove(force=True)

        exit_code, sig = _decode_status(status)
        timed_out = out.timed_out or late
        # A payload that ignores SIGXCPU is SIGKILLed at the hard RLIMIT_CPU: still a TLE. The
        # engine reports no CPU time after exit, so wall x cpus (the most CPU it could have
        # had) stands in for the bwrap backend's measured cpu_s.
        if (sig == signal.SIGKILL and not killed_by_us and not oom
                and wall_s * spec.cpus >= spec.cpu_time_s):
            timed_out = True
        return SandboxResult(
            exit_code=exit_code, signal=sig, stdout=out.stdout, stderr=out.stderr,
            # cpu_s: the container's cgroup (its CPU accounting) is gone once it exits, and
            # sampling stats while it runs costs a second per call, so it is not measured.
            wall_s=wall_s, cpu_s=0.0, timed_out=timed_out,
            output_truncated=out.truncated, oom_killed=oom, backend=self.name,
            memory_isolation="cgroup",
        )

    @staticmethod
    def _wait(container: Any, deadline: float, kill: Callable[[], None]) -> tuple[int, bool]:
        """(exit status, killed here for the deadline). The stream usually ends because the
        container exited, so this returns at once; if it ended early, wait out the deadline."""
        late = False
        try:
            result = container.wait(timeout=max(1.0, deadline - time.monotonic() + WAIT_GRACE_S))
        except requests.exceptions.RequestException as exc:
            if time.monotonic() < deadline:
                # Not our timeout: the engine connection failed. Not the student's fault.
                kill()
                raise SandboxUnavailable(f"cannot wait for the sandbox container: {exc}") from exc
            late = True
            kill()
            try:
                result = container.wait(timeout=KILL_WAIT_S)
            except _ENGINE_ERRORS as exc:
                raise SandboxUnavailable(f"sandbox container did not stop: {exc}") from exc
        except _ENGINE_ERRORS as exc:
            raise SandboxUnavailable(f"cannot wait for the sandbox container: {exc}") from exc
        status = result.get("StatusCode") if isinstance(result, dict) else None
        if not isinstance(status, int):
            raise SandboxUnavailable(f"docker reported no exit status: {result!r}")
        return status, late

    # -- cleanup ----------------------------------------------------------------------------

    def janitor(self, max_age_s: float = JANITOR_MAX_AGE_S) -> int:
        """Remove labelled containers (then volumes) older than max_age_s, or made on this host
        by a worker that is gone (kill -9 mid-run). max_age_s must exceed the longest wall
        timeout, or a live run of another host's worker would be removed. Returns the count."""
        client = self.client()
        now = time.time()
        me = socket.gethostname()

        def stale(tags: dict[str, str]) -> bool:
            try:
                created = float(tags.get(CREATED_LABEL, ""))
            except ValueError:
                return True  # ours by label but unreadable: nothing vouches for it
            if now - created > max_age_s:
                return True
            return tags.get(HOST_LABEL) == me and not owner_alive(tags.get(OWNER_LABEL, ""))

        removed = 0
        selector = {"label": f"{LABEL}=1"}
        for container in client.containers.list(all=True, sparse=True, filters=selector):
            if stale(container.attrs.get("Labels") or {}):
                with contextlib.suppress(*_ENGINE_ERRORS):
                    container.remove(force=True)
                    removed += 1
        # After the containers, so no volume is still in use by one of them.
        for volume in client.volumes.list(filters=selector):
            if stale(volume.attrs.get("Labels") or {}):
                with contextlib.suppress(*_ENGINE_ERRORS):
                    volume.remove(force=True)
                    removed += 1
        return removed
