"""The docker backend without a Docker engine: the SandboxSpec -> container mapping (checked
through the docker SDK's own argument conversion), the run lifecycle against a fake client
that speaks the real attach-stream framing over a socketpair, the janitor, backend
selection, and the image definitions under docker/.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from docker.api.client import APIClient
from docker.errors import APIError, ImageNotFound, NotFound
from docker.models.containers import _create_container_args
from docker.types import DeviceRequest, LogConfig, Ulimit

import runners
from runners import SandboxSpec, SandboxUnavailable, get_backend, runtime_python
from runners import docker as dk
from runners.cgroups import owner_tag
from runners.cpuclock import CPU_FILES_ENV, CPUS_ENV
from runners.sandbox_env import BASE_ENV
from runners.seccomp import docker_profile_json
from tests.deploy.dockerfile import instructions

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
API_VERSION = "1.45"


def backend(**kw: Any) -> dk.DockerBackend:
    kw.setdefault("image", "roofline-sandbox:test")
    kw.setdefault("gpu_image", "roofline-sandbox-gpu:test")
    kw.setdefault("probe", False)
    return dk.DockerBackend(**kw)


def engine_config(kwargs: dict[str, Any]) -> dict[str, Any]:
    """What the SDK would POST to /containers/create for these kwargs (no engine needed)."""
    args = _create_container_args({**kwargs, "version": API_VERSION})
    api = APIClient(base_url="unix:///nonexistent/docker.sock", version=API_VERSION)
    return dict(api.create_container_config(**args))


# -- the mapping ----------------------------------------------------------------------------


def test_is_a_backend() -> None:
    b = backend()
    assert isinstance(b, runners.Backend) and b.name == "docker"


def test_default_spec_mapping() -> None:
    spec = SandboxSpec(argv=[runtime_python(), "main.py", "--x"], files={"main.py": b""})
    kw = backend().container_kwargs(spec, "vol-1")
    assert kw["image"] == "roofline-sandbox:test"
    assert kw["entrypoint"] == [runtime_python()] and kw["command"] == ["main.py", "--x"]
    assert kw["network_disabled"] is True and kw["network_mode"] == "none"
    assert kw["read_only"] is True
    assert kw["tmpfs"] == {"/tmp": f"rw,nosuid,nodev,size={spec.tmpfs_bytes}"}
    assert kw["shm_size"] == spec.shm_bytes and kw["ipc_mode"] == "private"
    assert kw["cap_drop"] == ["ALL"]
    assert kw["security_opt"] == ["no-new-privileges:true", f"seccomp={docker_profile_json()}"]
    assert kw["user"] == "65534:65534"
    assert kw["mem_limit"] == kw["memswap_limit"] == spec.memory_bytes
    assert kw["pids_limit"] == spec.pids
    assert kw["nano_cpus"] == 1_000_000_000
    assert kw["ulimits"] == [
        Ulimit(name="cpu", soft=5, hard=6),
        Ulimit(name="fsize", soft=spec.fsize_bytes, hard=spec.fsize_bytes),
        Ulimit(name="nofile", soft=spec.nofile, hard=spec.nofile),
        Ulimit(name="core", soft=0, hard=0),
    ]
    assert not any(u["Name"] == "as" for u in kw["ulimits"])
    # The allow-list, and where the harness reads the container's own CPU counter.
    assert kw["environment"] == {**BASE_ENV, CPUS_ENV: "1", CPU_FILES_ENV: dk.CONTAINER_CPU_FILES}
    assert kw["working_dir"] == "/sandbox" and kw["hostname"] == "sandbox"
    assert kw["init"] is True
    labels = kw["labels"]
    assert labels["roofline.sandbox"] == "1" and labels["roofline.owner"] == owner_tag()
    assert labels["roofline.host"] == socket.gethostname()
    assert abs(int(labels["roofline.created"]) - time.time()) < 60
    assert kw["log_config"] == LogConfig(type="json-file", config={
        "max-size": str(spec.output_limit_bytes), "max-file": "1"})
    assert kw["volumes"] == {"vol-1": {"bind": "/sandbox", "mode": "ro"}}
    assert kw["stdin_open"] is False and kw["detach"] is True and kw["tty"] is False
    for absent in ("device_requests", "runtime", "privileged", "cap_add", "devices",
                   "pid_mode", "userns_mode", "network", "auto_remove"):
        assert absent not in kw
    # Never the engine's own socket, never a host path.
    assert "docker.sock" not in json.dumps(kw, default=str)


def test_limits_follow_the_spec() -> None:
    spec = SandboxSpec(argv=["x"], memory_bytes=300 * MiB, pids=17, cpus=0.5, cpu_time_s=2.2,
                       nofile=99, fsize_bytes=3 * MiB, tmpfs_bytes=5 * MiB, shm_bytes=7 * MiB,
                       output_limit_bytes=12345)
    kw = backend().container_kwargs(spec)
    assert kw["mem_limit"] == kw["memswap_limit"] == 300 * MiB
    assert kw["pids_limit"] == 17 and kw["nano_cpus"] == 500_000_000
    assert kw["ulimits"][0] == Ulimit(name="cpu", soft=3, hard=4)
    assert kw["ulimits"][1]["Soft"] == 3 * MiB and kw["ulimits"][2]["Hard"] == 99
    assert kw["tmpfs"]["/tmp"].endswith(f"size={5 * MiB}") and kw["shm_size"] == 7 * MiB
    assert kw["log_config"]["Config"]["max-size"] == "12345"
    assert "volumes" not in kw  # no files: the image's empty /sandbox


def test_gpu_spec_mapping() -> None:
    spec = SandboxSpec(argv=["python", "k.py"], gpu=3, shm_bytes=16 * MiB)
    kw = backend().container_kwargs(spec, "vol")
    assert kw["image"] == "roofline-sandbox-gpu:test"
    assert kw["device_requests"] == [
        DeviceRequest(device_ids=["3"], capabilities=[["gpu"]])]
    assert kw["shm_size"] == dk.GPU_MIN_SHM_BYTES > spec.shm_bytes
    assert kw["environment"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert kw["environment"]["NVIDIA_VISIBLE_DEVICES"] == "3"
    assert not any(u["Name"] == "as" for u in kw["ulimits"])
    # Everything else stays as locked down as a CPU run.
    cpu = backend().container_kwargs(SandboxSpec(argv=["python", "k.py"]), "vol")
    for key in ("network_disabled", "network_mode", "read_only", "cap_drop", "security_opt",
                "user", "mem_limit", "memswap_limit", "pids_limit", "nano_cpus", "init",
                "ipc_mode", "tmpfs", "volumes"):
        assert kw[key] == cpu[key], key


def test_sdk_turns_the_kwargs_into_the_expected_host_config() -> None:
    spec = SandboxSpec(argv=["python", "-c", "1"], files={"a.py": b""})
    cfg = engine_config(backend().container_kwargs(spec, "vol"))
    host = cfg["HostConfig"]
    assert cfg["NetworkDisabled"] is True and host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"][0] == "no-new-privileges:true"
    assert host["SecurityOpt"][1].startswith("seccomp=")
    assert json.loads(host["SecurityOpt"][1][len("seccomp="):])["defaultAction"] == "SCMP_ACT_ALLOW"
    assert host["PidsLimit"] == spec.pids
    assert host["Memory"] == host["MemorySwap"] == spec.memory_bytes
    assert host["NanoCpus"] == 1_000_000_000
    assert {u["Name"]: (u["Soft"], u["Hard"]) for u in host["Ulimits"]} == {
        "cpu": (5, 6), "fsize": (spec.fsize_bytes,) * 2, "nofile": (spec.nofile,) * 2,
        "core": (0, 0)}
    assert host["Tmpfs"] == {"/tmp": f"rw,nosuid,nodev,size={spec.tmpfs_bytes}"}
    assert host["ShmSize"] == spec.shm_bytes and host["IpcMode"] == "private"
    assert host["Init"] is True
    assert host["LogConfig"] == {"Type": "json-file", "Config": {
        "max-size": str(spec.output_limit_bytes), "max-file": "1"}}
    assert host["Binds"] == ["vol:/sandbox:ro"]
    assert "DeviceRequests" not in host and "Privileged" not in host
    assert cfg["User"] == "65534:65534" and cfg["WorkingDir"] == "/sandbox"
    assert cfg["Hostname"] == "sandbox" and cfg["Tty"] is False
    assert cfg["Entrypoint"] == ["python"] and cfg["Cmd"] == ["-c", "1"]
    assert cfg["OpenStdin"] is False  # no stdin: the program reads /dev/null


def test_sdk_host_config_for_gpu_and_stdin() -> None:
    spec = SandboxSpec(argv=["python"], stdin=b"data", gpu=0)
    cfg = engine_config(backend().container_kwargs(spec))
    assert cfg["HostConfig"]["DeviceRequests"] == [{
        "Driver": "", "Count": 0, "DeviceIDs": ["0"], "Capabilities": [["gpu"]], "Options": {}}]
    assert cfg["HostConfig"]["ShmSize"] == dk.GPU_MIN_SHM_BYTES
    # StdinOnce: the engine closes the program's stdin when our half-close arrives.
    assert cfg["OpenStdin"] is True and cfg["StdinOnce"] is True and cfg["AttachStdin"] is True


def test_runtime_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFLINE_DOCKER_RUNTIME", "runsc")
    kw = backend().container_kwargs(SandboxSpec(argv=["x"]))
    assert kw["runtime"] == "runsc"
    assert engine_config(kw)["HostConfig"]["Runtime"] == "runsc"


def test_seccomp_off_keeps_the_engine_default_not_unconfined() -> None:
    kw = backend().container_kwargs(SandboxSpec(argv=["x"], seccomp=False))
    assert kw["security_opt"] == ["no-new-privileges:true"]


def test_environment_is_the_allow_list_only(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "django-insecure-do-not-leak-0123456789"
    monkeypatch.setenv("DJANGO_SECRET_KEY", secret)
    monkeypatch.setenv("DATABASE_URL", "postgres://u:pw@db/x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x" * 40)
    spec = SandboxSpec(argv=["x"], env={"SEED": "7"})
    kw = backend().container_kwargs(spec)
    assert kw["environment"] == {**BASE_ENV, CPUS_ENV: "1", CPU_FILES_ENV: dk.CONTAINER_CPU_FILES,
                                 "SEED": "7"}
    blob = json.dumps(engine_config(kw))
    for leaked in (secret, "DJANGO_SECRET_KEY", "DATABASE_URL", "postgres://", "AWS_"):
        assert leaked not in blob
    gpu_env = backend().container_kwargs(SandboxSpec(argv=["x"], gpu=1))["environment"]
    assert set(gpu_env) - set(BASE_ENV) == {
        CPUS_ENV, CPU_FILES_ENV, "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}


def test_job_tar_is_read_only_for_the_sandbox_user() -> None:
    data = dk.job_tar({"main.py": b"print(1)\n", "pkg/sub/mod.py": b"x = 1\n", "pkg/a.txt": "é"})
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"main.py", "pkg", "pkg/sub", "pkg/sub/mod.py", "pkg/a.txt"}
        for m in members.values():
            assert m.uid == 0 and m.gid == 0
            assert m.mode == (0o755 if m.isdir() else 0o644)
            assert not m.name.startswith("/") and ".." not in m.name.split("/")
        assert tar.extractfile("pkg/a.txt").read() == "é".encode()  # type: ignore[union-attr]


def test_demux_splits_frames_at_any_boundary() -> None:
    stream = frame(1, b"hello ") + frame(2, b"oops") + frame(1, b"") + frame(1, b"world")
    for step in (1, 3, 7, len(stream)):
        demux = dk._Demux()
        got: dict[int, bytes] = {1: b"", 2: b""}
        for i in range(0, len(stream), step):
            for sid, piece in demux.feed(stream[i:i + step]):
                got[sid] += piece
        assert got == {1: b"hello world", 2: b"oops"}


# -- a fake engine --------------------------------------------------------------------------


def frame(stream: int, data: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


class Program:
    """The container's side of the attach socket, run in a thread once start() is called."""

    def __init__(self, sock: socket.socket, stdin_attached: bool) -> None:
        self.sock = sock
        self.stdin_attached = stdin_attached
        self.killed = threading.Event()

    def read_stdin(self) -> bytes:
        assert self.stdin_attached
        data = b""
        while chunk := self.sock.recv(65536):
            data += chunk
        return data

    def out(self, data: bytes, stream: int = 1) -> None:
        self.sock.sendall(frame(stream, data))


Behaviour = Callable[[Program], int]


class FakeContainer:
    def __init__(self, client: FakeClient, kwargs: dict[str, Any], behaviour: Behaviour,
                 oom: bool = False) -> None:
        self.client = client
        self.kwargs = kwargs
        self.behaviour = behaviour
        self.oom = oom
        self.attrs: dict[str, Any] = {}
        self.calls: list[str] = []
        self.archives: list[tuple[str, bytes]] = []
        self.status: int | None = None
        self.program: Program | None = None
        self.thread: threading.Thread | None = None
        self.ours: socket.socket | None = None

    def put_archive(self, path: str, data: bytes) -> bool:
        self.calls.append("put_archive")
        self.archives.append((path, data))
        return True

    def attach_socket(self, params: dict[str, int]) -> Any:
        self.calls.append("attach")
        ours, theirs = socket.socketpair()
        self.ours = ours
        self.program = Program(theirs, bool(params.get("stdin")))
        # As the SDK: the SocketIO of the hijacked connection, the socket under `_sock`.
        return socket.SocketIO(ours, "rwb")

    def start(self) -> None:
        self.calls.append("start")
        if self.client.fail_start:
            raise APIError("start failed")
        assert self.program is not None

        def main() -> None:
            assert self.program is not None
            try:
                self.status = self.behaviour(self.program)
            except OSError:
                self.status = 137
            finally:
                self.program.sock.close()

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()

    def kill(self) -> None:
        self.calls.append("kill")
        assert self.program is not None
        self.program.killed.set()
        # A killed program writes no more: unblock one stuck in a full socket buffer.
        with contextlib.suppress(OSError):
            self.program.sock.shutdown(socket.SHUT_RDWR)

    def wait(self, timeout: float) -> dict[str, Any]:
        self.calls.append("wait")
        assert self.thread is not None
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise requests.exceptions.ReadTimeout("wait timed out")
        return {"StatusCode": self.status, "Error": None}

    def reload(self) -> None:
        self.calls.append("reload")
        self.attrs = {"State": {"OOMKilled": self.oom, "ExitCode": self.status}}

    def remove(self, force: bool = False) -> None:
        self.calls.append("remove")
        assert force
        if self.program is not None:
            self.program.killed.set()
        self.client.removed.append(self)


class FakeVolume:
    def __init__(self, client: FakeClient, name: str, labels: dict[str, str]) -> None:
        self.client = client
        self.name = name
        self.attrs = {"Name": name, "Labels": labels}

    def remove(self, force: bool = False) -> None:
        self.client.removed.append(self)


class Collection:
    def __init__(self, create: Callable[..., Any], listing: list[Any]) -> None:
        self.create = create
        self.listing = listing

    def list(self, **kw: Any) -> list[Any]:
        assert kw["filters"] == {"label": "roofline.sandbox=1"}
        return list(self.listing)


class FakeClient:
    def __init__(self, behaviour: Behaviour | None = None, oom: bool = False) -> None:
        self.behaviour = behaviour or (lambda p: 0)
        self.oom = oom
        self.created: list[FakeContainer] = []
        self.volumes_made: list[FakeVolume] = []
        self.removed: list[Any] = []
        self.fail_start = False
        self.fail_create = False
        self.ping_error: Exception | None = None
        self.image_missing = False
        self.containers = Collection(self._create_container, [])
        self.volumes = Collection(self._create_volume, [])
        self.images = self

    def ping(self) -> bool:
        if self.ping_error:
            raise self.ping_error
        return True

    def get(self, name: str) -> object:  # images.get
        if self.image_missing:
            raise ImageNotFound(f"no such image: {name}")
        return object()

    def _create_container(self, **kwargs: Any) -> FakeContainer:
        is_loader = kwargs.get("entrypoint") == ["true"]
        if self.fail_create and not is_loader:
            raise APIError("create failed")
        c = FakeContainer(self, kwargs, self.behaviour, self.oom)
        self.created.append(c)
        return c

    def _create_volume(self, name: str, labels: dict[str, str]) -> FakeVolume:
        v = FakeVolume(self, name, labels)
        self.volumes_made.append(v)
        return v

    @property
    def sandbox(self) -> FakeContainer:
        (c,) = [c for c in self.created if c.kwargs.get("entrypoint") != ["true"]]
        return c


def run_fake(behaviour: Behaviour, oom: bool = False, **spec_kw: Any
             ) -> tuple[runners.SandboxResult, FakeClient]:
    client = FakeClient(behaviour, oom)
    spec_kw.setdefault("argv", [runtime_python(), "main.py"])
    result = backend(client=client).run(SandboxSpec(**spec_kw))
    return result, client


# -- run() ----------------------------------------------------------------------------------


def test_run_normal_exit_with_files_and_stdin() -> None:
    def echo(p: Program) -> int:
        data = p.read_stdin()  # returns only once our half-close arrives
        p.out(data.upper())
        p.out(b"warn\n", stream=2)
        return 0

    result, client = run_fake(echo, files={"main.py": b"print(1)"}, stdin=b"hello\n" * 50_000)
    assert result.verdict == "OK", result
    assert result.stdout == b"HELLO\n" * 50_000 and result.stderr == b"warn\n"
    assert result.exit_code == 0 and result.signal is None and result.backend == "docker"
    assert result.memory_isolation == "cgroup" and result.wall_s > 0
    sandbox = client.sandbox
    assert sandbox.calls[:2] == ["attach", "start"] and "kill" not in sandbox.calls
    assert sandbox.calls[-1] == "remove"
    # The files went through a never-started loader into the volume mounted read-only.
    (volume,) = client.volumes_made
    (loader,) = [c for c in client.created if c is not sandbox]
    assert loader.calls == ["put_archive", "remove"]
    assert loader.kwargs["volumes"] == {volume.name: {"bind": "/sandbox", "mode": "rw"}}
    assert loader.archives[0][0] == "/sandbox"
    with tarfile.open(fileobj=io.BytesIO(loader.archives[0][1])) as tar:
        assert tar.extractfile("main.py").read() == b"print(1)"  # type: ignore[union-attr]
    assert sandbox.kwargs["volumes"] == {volume.name: {"bind": "/sandbox", "mode": "ro"}}
    assert volume in client.removed and sandbox in client.removed
    assert volume.attrs["Labels"]["roofline.sandbox"] == "1"


def test_run_without_files_or_stdin() -> None:
    def hello(p: Program) -> int:
        assert not p.stdin_attached
        p.out(b"hi\n")
        return 3

    result, client = run_fake(hello)
    assert result.verdict == "RE" and result.exit_code == 3 and result.stdout == b"hi\n"
    assert client.volumes_made == [] and len(client.created) == 1
    assert client.sandbox.kwargs["stdin_open"] is False


def test_run_timeout_kills_and_removes() -> None:
    def sleeper(p: Program) -> int:
        p.out(b"started\n")
        p.killed.wait(30)
        return 137

    t0 = time.monotonic()
    result, client = run_fake(sleeper, wall_timeout_s=0.4)
    assert time.monotonic() - t0 < 5
    assert result.verdict == "TLE" and result.timed_out
    assert result.signal == signal.SIGKILL and result.stdout == b"started\n"
    assert "kill" in client.sandbox.calls and client.sandbox.calls[-1] == "remove"


def test_stream_ending_early_still_honours_the_deadline() -> None:
    def detaches(p: Program) -> int:
        p.sock.shutdown(socket.SHUT_RDWR)  # the stream ends, the program does not
        p.killed.wait(30)
        return 137

    result, client = run_fake(detaches, wall_timeout_s=0.2)
    assert result.verdict == "TLE"
    assert client.sandbox.calls.count("wait") == 2 and "kill" in client.sandbox.calls


def test_engine_connection_lost_while_waiting_is_unavailable() -> None:
    client = FakeClient(lambda p: 0)
    original = FakeContainer.wait

    def broken(self: FakeContainer, timeout: float) -> dict[str, Any]:
        original(self, timeout)
        raise requests.exceptions.ConnectionError("engine went away")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FakeContainer, "wait", broken)
        with pytest.raises(SandboxUnavailable, match="engine went away"):
            backend(client=client).run(SandboxSpec(argv=["x"], wall_timeout_s=30))
    assert client.sandbox.calls[-1] == "remove"


def test_run_oom_is_mle() -> None:
    def hog(p: Program) -> int:
        p.out(b"allocating\n")
        return 137  # docker-init reports the OOM-killed child as 128+SIGKILL

    result, client = run_fake(hog, oom=True)
    assert result.verdict == "MLE" and result.oom_killed and result.signal == signal.SIGKILL
    assert client.sandbox.calls[-1] == "remove"


def test_run_output_overflow_is_ole() -> None:
    def flood(p: Program) -> int:
        while not p.killed.is_set():
            p.out(b"x" * 65536)
        return 137

    result, client = run_fake(flood, output_limit_bytes=100_000)
    assert result.verdict == "OLE" and result.output_truncated
    assert len(result.stdout) + len(result.stderr) == 100_000
    assert "kill" in client.sandbox.calls and client.sandbox.calls[-1] == "remove"


class CopyingContainer(FakeContainer):
    """As a real engine: a kill completes only once the container's output has been copied
    into the attach stream, so against a reader that stopped reading it hangs (a real one
    until its API timeout; this one records that it would have)."""

    stuck: bool | None = None

    def kill(self) -> None:
        self.calls.append("kill")
        assert self.program is not None and self.thread is not None
        self.program.killed.set()
        self.thread.join(10.0)
        self.stuck = self.thread.is_alive()
        if self.stuck:  # let the run end: the test has what it needs
            with contextlib.suppress(OSError):
                self.program.sock.shutdown(socket.SHUT_RDWR)


def test_an_overflow_hangs_up_before_the_kill() -> None:
    def flood(p: Program) -> int:
        while True:  # killed, but the engine still copies what it wrote: until we hang up
            p.out(b"x" * 65536)

    client = FakeClient(flood)
    client.containers = Collection(
        lambda **kw: _made(client, CopyingContainer(client, kw, client.behaviour)), [])
    result = backend(client=client).run(SandboxSpec(argv=[runtime_python(), "main.py"],
                                                    output_limit_bytes=100_000))
    assert result.verdict == "OLE" and "kill" in client.sandbox.calls
    assert client.sandbox.stuck is False  # type: ignore[attr-defined]


def _made(client: FakeClient, container: FakeContainer) -> FakeContainer:
    client.created.append(container)
    return container


def test_output_cap_is_shared_by_stdout_and_stderr() -> None:
    def both(p: Program) -> int:
        p.out(b"o" * 600)
        p.out(b"e" * 600, stream=2)
        p.killed.wait(5)
        return 137

    result, _ = run_fake(both, output_limit_bytes=1000)
    assert result.verdict == "OLE"
    assert result.stdout == b"o" * 600 and result.stderr == b"e" * 400


@pytest.mark.parametrize(("status", "verdict", "sig"), [
    (128 + signal.SIGXCPU, "TLE", signal.SIGXCPU),
    (128 + signal.SIGSEGV, "RE", signal.SIGSEGV),
    (1, "RE", None),
])
def test_exit_status_decoding(status: int, verdict: str, sig: int | None) -> None:
    result, _ = run_fake(lambda p: status)
    assert result.verdict == verdict and result.signal == sig


def test_program_that_never_reads_stdin() -> None:
    result, _ = run_fake(lambda p: 0, stdin=b"z" * (4 * MiB))
    assert result.verdict == "OK"


@pytest.mark.parametrize("where", ["create", "start"])
def test_engine_failure_is_unavailable_and_cleans_up(where: str) -> None:
    client = FakeClient()
    setattr(client, f"fail_{where}", True)
    with pytest.raises(SandboxUnavailable):
        backend(client=client).run(SandboxSpec(argv=["x"], files={"a": b"1"}))
    assert all(c in client.removed for c in client.created)
    assert all(v in client.removed for v in client.volumes_made) and client.volumes_made


def test_no_engine_means_unavailable_never_a_local_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    b = dk.DockerBackend(probe=False)
    with pytest.raises(SandboxUnavailable, match="docker engine"):
        b.run(SandboxSpec(argv=["/bin/true"]))
    ok, reason = b.available()
    assert not ok and "docker engine" in reason


# -- available() ----------------------------------------------------------------------------


def test_available_reports_why_not() -> None:
    client = FakeClient()
    client.ping_error = requests.exceptions.ConnectionError("refused")
    ok, reason = backend(client=client).available()
    assert not ok and "not answering" in reason

    client = FakeClient()
    client.image_missing = True
    ok, reason = backend(client=client).available()
    assert not ok and "docker build -t roofline-sandbox:test docker/sandbox" in reason


def test_available_probe_runs_the_sandbox() -> None:
    def marker(p: Program) -> int:
        p.out(b"roofline-sandbox-ok\n")
        return 0

    ok, reason = backend(client=FakeClient(marker), probe=True).available()
    assert ok, reason
    ok, reason = backend(client=FakeClient(lambda p: 1), probe=True).available()
    assert not ok and "probe failed" in reason


def test_available_never_raises() -> None:
    client = FakeClient()
    client.ping = None  # type: ignore[assignment,method-assign]  # a bug deep inside
    ok, reason = backend(client=client).available()
    assert not ok and "TypeError" in reason


# -- janitor --------------------------------------------------------------------------------


class Listed:
    def __init__(self, client: FakeClient, labels: dict[str, str]) -> None:
        self.client = client
        self.attrs = {"Labels": labels}

    def remove(self, force: bool = False) -> None:
        assert force
        self.client.removed.append(self)


def test_janitor_removes_old_and_orphaned_only() -> None:
    client = FakeClient()
    now = int(time.time())
    me = socket.gethostname()

    def tags(owner: str, host: str, age: float) -> dict[str, str]:
        return {"roofline.sandbox": "1", "roofline.owner": owner, "roofline.host": host,
                "roofline.created": str(int(now - age))}

    live, dead = owner_tag(), "999999999.1"
    keep = [Listed(client, tags(live, me, 5)), Listed(client, tags(dead, "other-host", 5))]
    drop = [Listed(client, tags(live, me, 3600)), Listed(client, tags(dead, me, 5)),
            Listed(client, {"roofline.sandbox": "1"})]
    client.containers.listing = keep[:1] + drop[:2]
    client.volumes.listing = keep[1:] + drop[2:]
    assert backend(client=client).janitor(max_age_s=600) == 3
    assert client.removed == [drop[0], drop[1], drop[2]]


def test_janitor_survives_a_vanished_container() -> None:
    client = FakeClient()
    gone = Listed(client, {"roofline.sandbox": "1", "roofline.created": "0"})
    gone.remove = lambda force=False: (_ for _ in ()).throw(NotFound("gone"))  # type: ignore[method-assign]
    client.containers.listing = [gone]
    assert backend(client=client).janitor() == 0


# -- backend selection ----------------------------------------------------------------------


@pytest.fixture
def fresh_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runners, "_backends", {})
    monkeypatch.setattr(runners, "_docker_janitor_done", set())


def test_docker_selected_without_engine_raises(monkeypatch: pytest.MonkeyPatch,
                                               fresh_selection: None) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setenv("ROOFLINE_SANDBOX_BACKEND", "docker")
    with pytest.raises(SandboxUnavailable, match="docker sandbox backend unavailable: "
                                                  "cannot reach the docker engine"):
        get_backend()


def test_unknown_backend_name_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFLINE_SANDBOX_BACKEND", "podman")
    with pytest.raises(SandboxUnavailable, match="expected auto|bwrap|docker"):
        get_backend()


def test_auto_picks_bwrap_without_an_engine(monkeypatch: pytest.MonkeyPatch,
                                            fresh_selection: None) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setenv("ROOFLINE_SANDBOX_BACKEND", "auto")
    try:
        chosen = get_backend()
    except SandboxUnavailable as exc:
        # No bwrap either (a bare developer machine): the reason names both backends.
        assert "docker: " in str(exc) and "bwrap: " in str(exc)
        return
    assert chosen.name == "bwrap"


class StubBackend:
    def __init__(self, name: str, ok: bool) -> None:
        self.name = name
        self.ok = ok
        self.janitor_runs = 0

    def available(self) -> tuple[bool, str]:
        return self.ok, f"{self.name} {'ready' if self.ok else 'missing'}"

    def run(self, spec: SandboxSpec) -> runners.SandboxResult:
        raise AssertionError("not in these tests")

    def janitor(self) -> int:
        self.janitor_runs += 1
        return 0


@pytest.mark.parametrize(("docker_ok", "bwrap_ok", "want"), [
    (True, True, "docker"), (False, True, "bwrap"), (True, False, "docker"), (False, False, None),
])
def test_auto_order(monkeypatch: pytest.MonkeyPatch, fresh_selection: None,
                    docker_ok: bool, bwrap_ok: bool, want: str | None) -> None:
    stub_docker, stub_bwrap = StubBackend("docker", docker_ok), StubBackend("bwrap", bwrap_ok)
    monkeypatch.setattr(dk, "DockerBackend", lambda: stub_docker)
    monkeypatch.setattr(runners, "BwrapBackend", lambda: stub_bwrap)
    if want is None:
        with pytest.raises(SandboxUnavailable, match="docker: docker missing; bwrap: bwrap"):
            get_backend("auto")
        return
    assert get_backend("auto").name == want
    get_backend("auto")  # cached: the janitor runs once per process
    assert stub_docker.janitor_runs == (1 if want == "docker" else 0)


def test_image_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFLINE_SANDBOX_IMAGE", "registry.example/sbx:1")
    monkeypatch.setenv("ROOFLINE_SANDBOX_GPU_IMAGE", "registry.example/sbx-gpu:1")
    b = dk.DockerBackend(client=FakeClient(), probe=False)
    assert b.image == "registry.example/sbx:1" and b.gpu_image == "registry.example/sbx-gpu:1"
    monkeypatch.delenv("ROOFLINE_SANDBOX_IMAGE")
    assert dk.sandbox_image() == "roofline-sandbox:py311"


# -- image definitions ----------------------------------------------------------------------


def dockerfile(path: str) -> list[tuple[str, str]]:
    return instructions(ROOT / path)


@pytest.mark.parametrize("path", ["docker/sandbox/Dockerfile", "docker/sandbox-gpu/Dockerfile"])
def test_dockerfile_shape(path: str) -> None:
    # `docker build` needs an engine; this checks the parts the backend relies on.
    insns = dockerfile(path)
    known = {"ARG", "FROM", "RUN", "COPY", "ENV", "WORKDIR", "USER", "CMD", "LABEL"}
    assert {i for i, _ in insns} <= known
    froms = [a for i, a in insns if i == "FROM"]
    assert len(froms) == 2 and froms[0].endswith(" AS build") and froms[1] == "${BASE}"
    (base,) = [a for i, a in insns if i == "ARG" and a.startswith("BASE=")]
    tag = base.split("=", 1)[1]
    assert ":" in tag and not tag.endswith(":latest")  # an exact tag (digest at deploy)
    # The last stage runs as nobody, from /sandbox, with the venv the backend's argv names.
    final = insns[[i for i, _ in insns].index("FROM", 1):]
    users = [a for i, a in final if i == "USER"]
    assert users == ["65534:65534"]
    assert [a for i, a in final if i == "WORKDIR"] == ["/sandbox"]
    assert ("COPY", "--from=build /opt/venv /opt/venv") in final
    assert json.loads(next(a for i, a in final if i == "CMD")) == [runtime_python()]
    assert runtime_python() == "/opt/venv/bin/python"
    envs = " ".join(a for i, a in insns if i == "ENV")
    assert not re.search(r"SECRET|PASSWORD|TOKEN|_KEY", envs)
    for i, a in insns:
        if i == "RUN":  # each RUN body is valid sh
            subprocess.run(["sh", "-n", "-c", a], check=True)
            assert "chmod 0755 /sandbox" in a or "venv" in a or "apt-get" in a
    run_final = " ".join(a for i, a in final if i == "RUN")
    assert "a+rX" in run_final and "chmod 0755 /sandbox" in run_final


@pytest.mark.parametrize(("path", "pins"), [
    ("docker/sandbox/requirements.txt",
     {"numpy": "2.2.6", "torch": "2.13.0+cpu", "triton": "3.7.1"}),
    ("docker/sandbox-gpu/requirements.txt",
     {"torch": "2.13.0", "triton": "3.7.1", "numpy": "2.2.6"}),
])
def test_image_requirements_are_pinned(path: str, pins: dict[str, str]) -> None:
    reqs = [line.split("#")[0].strip() for line in (ROOT / path).read_text().splitlines()]
    # Option lines (an extra index for torch's CPU wheels) pin nothing.
    found = dict(line.split("==") for line in reqs if line and not line.startswith("--"))
    assert found == pins


def test_backend_default_image_matches_the_build_instructions() -> None:
    text = (ROOT / "docker/sandbox/Dockerfile").read_text()
    assert f"docker build -t {dk.DEFAULT_IMAGE} docker/sandbox" in text
    gpu = (ROOT / "docker/sandbox-gpu/Dockerfile").read_text()
    assert f"docker build -t {dk.DEFAULT_GPU_IMAGE} docker/sandbox-gpu" in gpu


def test_runners_never_imports_django() -> None:
    code = ("import sys, runners, runners.docker; "
            "assert not [m for m in sys.modules if m.split('.')[0] == 'django'], 'django'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
