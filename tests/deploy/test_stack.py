"""The stack, end to end, on a real Docker engine: docker-compose.yml's migrate job, web and worker
from the images scripts/docker_images.sh built, through tests/deploy/compose.stack.yml (the
host's network, this machine's PostgreSQL and Redis, a loopback port of its own). A student signs
up and submits a code answer over HTTP; the worker grades it in a sandbox container it starts
through the Docker socket. Everything it made is removed at the end.

Skipped, with the reason, where there is no engine, no images or no Compose; where
scripts/docker_engine.sh brought an engine up (ROOFLINE_REQUIRE_DOCKER=1) a missing piece fails.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import redis
import requests
import yaml

from tests.deploy.test_compose import COMPOSE_FILE, ROOT, compose_cli

OVERRIDE = Path(__file__).with_name("compose.stack.yml")
IMAGES = ("roofline-web:test", "roofline-worker:test", "roofline-sandbox:py311")
POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_DB = 12  # the worker tests take 15 downwards, one per xdist worker
SLUG, PART = "stop_strings_stream", "streamer"
UP_S = 180.0  # first start: gunicorn imports Django, the worker connects and syncs
GRADE_S = 180.0

pytestmark = pytest.mark.django_db(databases=[])


def _missing(reason: str) -> None:
    if os.environ.get("ROOFLINE_REQUIRE_DOCKER") == "1":
        pytest.fail(f"the Docker engine is up, but {reason}")
    pytest.skip(reason)


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Stack:
    cli: list[str]
    env: dict[str, str]
    url: str
    started: str  # the engine's clock at the start, for `docker events --since`
    merged: Path  # docker-compose.yml with the override applied (merge_files)

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.cli, "-f", str(self.merged), "--project-directory",
                               str(ROOT), *args], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT, env=self.env)

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail=60", "web", "worker").stdout


def merge_files(cli: list[str], env: dict[str, str], into: Path) -> Path:
    """docker-compose.yml with compose.stack.yml over it, as Compose merges them, less the web
    service's published port: an override can add but not remove a key (Compose v1 has no
    `!reset`), and a published port is refused on the host's network."""
    merged = subprocess.run([*cli, "-f", str(COMPOSE_FILE), "-f", str(OVERRIDE), "config"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert merged.returncode == 0, merged.stderr
    doc = yaml.safe_load(merged.stdout)
    doc["services"]["web"].pop("ports", None)
    path = into / "docker-compose.stack.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    if _docker("info").returncode != 0:
        pytest.skip("no Docker engine here (scripts/docker_engine.sh starts one as root)")
    absent = [image for image in IMAGES if _docker("image", "inspect", image).returncode != 0]
    if absent:
        _missing(f"images are missing: {', '.join(absent)} (scripts/docker_images.sh)")
    cli = compose_cli()
    if cli is None:
        _missing("no Compose CLI (Debian's docker-compose, or the v2 plugin)")
        raise AssertionError  # unreachable: _missing raised
    database = f"roofline_stack_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(POSTGRES, autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{database}"')
        redis.Redis.from_url(f"redis://127.0.0.1:6379/{REDIS_DB}").flushdb()
    except (psycopg.Error, redis.RedisError) as exc:
        _missing(f"no PostgreSQL or Redis on 127.0.0.1: {exc}")
    port = _free_port()
    project = f"roofline-stack-{uuid.uuid4().hex[:6]}"
    socket_gid = os.stat("/var/run/docker.sock").st_gid
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "ROOFLINE_"))}
    env.update({
        "COMPOSE_PROJECT_NAME": project, "ROOFLINE_TAG": "test", "ROOFLINE_STACK_PORT": str(port),
        "SECRET_KEY": f"stack-test-{uuid.uuid4().hex}", "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{database}",
        "REDIS_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
        # Not used with these URLs, but the file refuses to load without them.
        "POSTGRES_PASSWORD": "unused", "REDIS_PASSWORD": "unused",
        "DOCKER_GID": str(socket_gid), "ROOFLINE_SSL_REDIRECT": "0", "ROOFLINE_HSTS_SECONDS": "0",
    })
    networks_before = set(_docker("network", "ls", "-q").stdout.split())
    started = _docker("info", "--format", "{{.SystemTime}}").stdout.strip()
    made = Stack(cli, env, f"http://127.0.0.1:{port}", started, merge_files(cli, env, tmp_path))
    try:
        yield made
    finally:
        down = made.compose("down", "--volumes", "--remove-orphans", "--timeout", "10")
        assert down.returncode == 0, down.stderr
        with psycopg.connect(POSTGRES, autocommit=True) as db:
            db.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        redis.Redis.from_url(f"redis://127.0.0.1:6379/{REDIS_DB}").flushdb()
        left = _docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={project}")
        assert not left.stdout.split(), "containers left behind"
        # No container network was made (only the engine's own host and none ever exist).
        assert set(_docker("network", "ls", "-q").stdout.split()) == networks_before


class Browser:
    """A student's HTTP client. The stack's cookies are Secure (prod settings) and the TLS
    proxy in front is this client: it says https in X-Forwarded-Proto, as the proxy would,
    and sends the cookies back itself (requests keeps Secure cookies for https URLs only)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, **kw: object) -> requests.Response:
        # The proxy keeps the Host header; the page the form came from is https on it.
        headers = {"X-Forwarded-Proto": "https",
                   "Referer": self.base.replace("http://", "https://", 1) + path,
                   "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        response = requests.request(method, self.base + path, headers=headers,
                                    allow_redirects=False, timeout=30, **kw)  # type: ignore[arg-type]
        self.cookies.update(response.cookies.get_dict())
        return response

    def form(self, path: str, data: dict[str, str]) -> requests.Response:
        self.request("GET", path)
        return self.request("POST", path, data={**data,
                                                "csrfmiddlewaretoken": self.cookies["csrftoken"]})


def _wait_up(stack: Stack) -> None:
    deadline = time.monotonic() + UP_S
    while time.monotonic() < deadline:
        try:
            if requests.get(stack.url + "/healthz/", timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(1)
    pytest.fail(f"web did not answer /healthz/ in {UP_S:.0f} s\n{stack.logs()}")


def test_a_code_answer_is_graded_in_a_sandbox_container(stack: Stack) -> None:
    migrate = stack.compose("run", "--rm", "--no-deps", "migrate")
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    up = stack.compose("up", "-d", "--no-deps", "web", "worker")
    assert up.returncode == 0, up.stderr
    _wait_up(stack)

    student = Browser(stack.url)
    signed_up = student.form("/signup/", {"username": "stack-student",
                                          "password1": "a-long-pass-4242",
                                          "password2": "a-long-pass-4242"})
    assert signed_up.status_code == 302, signed_up.text[:2000]
    reference = (ROOT / "exercises" / SLUG / "code" / "reference.py").read_text()
    page = student.request("GET", f"/ex/{SLUG}/")
    assert page.status_code == 200
    sent = student.request("POST", f"/ex/{SLUG}/{PART}/submit/",
                           data={"answer": reference, "mode": "submit",
                                 "csrfmiddlewaretoken": student.cookies["csrftoken"]})
    assert sent.status_code == 302, sent.text[:2000]
    page = student.request("GET", f"/ex/{SLUG}/")
    found = re.search(r'id="sub-(\d+)"', page.text)
    assert found, page.text[:2000]

    deadline = time.monotonic() + GRADE_S
    status = ""
    while time.monotonic() < deadline:
        status = student.request("GET", f"/submissions/{found.group(1)}/status/").text
        if "badge graded" in status or "badge error" in status:
            break
        time.sleep(1)
    assert "badge correct" in status, f"{status[:3000]}\n{stack.logs()}"
    # Graded in a sandbox container that the worker started through the engine's socket.
    events = _docker("events", "--since", stack.started, "--until", "0s", "--filter",
                     "label=roofline.sandbox=1", "--filter", "event=start",
                     "--format", "{{.Actor.Attributes.image}}")
    assert "roofline-sandbox:py311" in events.stdout.split(), events.stdout + events.stderr
