"""docker-compose.yml, checked without a Docker engine (none exists on dev or CI machines).

- it validates against the Compose Specification's JSON schema (vendored beside this file, see
  COMPOSE_SPEC_SOURCE.md), and through `docker compose config -q` where a Compose v2 CLI exists;
- every variable it sets on our services is one our code reads (found by parsing the code, not
  from a list here), and the ones the settings need are set;
- the Docker socket reaches the workers and nothing else; the gpu-worker sits behind a profile;
  every service has a health check or is a one-shot job; every service has resource limits;
  beat runs in exactly one service.

Each rule is a function returning the problems it finds, so the tests can also show that a rule
fails when the file breaks it (a removed health check, a socket mounted into the web...).
"""
from __future__ import annotations

import ast
import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
SCHEMA_FILE = Path(__file__).resolve().parent / "compose-spec.json"
APP_DOCKERFILE = "docker/app/Dockerfile"
CODE_DIRS = ("practice", "runners", "gpu_sandbox", "graders")
WORKERS = {"worker", "gpu-worker"}
SOCKET = "docker.sock"
# What `docker compose config` needs to interpolate the file (the `:?` variables).
DUMMY_ENV = {"SECRET_KEY": "test-only", "ALLOWED_HOSTS": "roofline.example",
             "POSTGRES_PASSWORD": "pw", "REDIS_PASSWORD": "pw", "DOCKER_GID": "999"}


def load_compose() -> dict[str, Any]:
    with COMPOSE_FILE.open(encoding="utf-8") as f:
        return yaml.safe_load(f)  # resolves the anchors and `<<` merges as Compose does


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose()


def app_services(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Services built from our application Dockerfile (web, workers, beat, migrate)."""
    return {name: svc for name, svc in doc["services"].items()
            if isinstance(svc.get("build"), dict)
            and svc["build"].get("dockerfile") == APP_DOCKERFILE}


def environment(svc: dict[str, Any]) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def command(svc: dict[str, Any]) -> list[str]:
    cmd = svc.get("command") or []
    return cmd.split() if isinstance(cmd, str) else [str(c) for c in cmd]


# -- what the code reads ---------------------------------------------------------------------


def _is_os_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ"
            and isinstance(node.value, ast.Name) and node.value.id == "os")


def env_names_read(dirs: tuple[str, ...] = CODE_DIRS) -> set[str]:
    """Names passed to os.environ.get/setdefault/pop, os.getenv or read as os.environ["X"]
    anywhere in our code (parsed with ast, so comments and strings elsewhere do not count)."""
    names: set[str] = set()
    for folder in dirs:
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                key: ast.AST | None = None
                if isinstance(node, ast.Call) and node.args:
                    func = node.func
                    if (isinstance(func, ast.Attribute) and _is_os_environ(func.value)
                            and func.attr in ("get", "setdefault", "pop")):
                        key = node.args[0]
                    elif (isinstance(func, ast.Attribute) and func.attr == "getenv"
                          and isinstance(func.value, ast.Name) and func.value.id == "os"):
                        key = node.args[0]
                elif (isinstance(node, ast.Subscript) and _is_os_environ(node.value)
                      and isinstance(node.ctx, ast.Load)):
                    key = node.slice
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    names.add(key.value)
    return names


def test_env_names_are_found_by_parsing() -> None:
    # The parser sees the reads we know of, in each of the folders, and nothing invented.
    names = env_names_read()
    assert {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS",  # practice/settings
            "DJANGO_SETTINGS_MODULE",                                    # practice/celery.py
            "ROOFLINE_SANDBOX_BACKEND", "ROOFLINE_SANDBOX_IMAGE",        # runners/
            "ROOFLINE_KERNEL_DEVICE"} <= names                           # graders/kernel.py
    assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", n) for n in names)


# -- the rules -------------------------------------------------------------------------------

REQUIRED_APP_ENV = ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS",
                    "DJANGO_SETTINGS_MODULE")
REQUIRED_WORKER_ENV = ("ROOFLINE_SANDBOX_BACKEND", "ROOFLINE_SANDBOX_IMAGE",
                       "ROOFLINE_SANDBOX_GPU_IMAGE")


def env_problems(doc: dict[str, Any], read: set[str]) -> list[str]:
    problems = []
    services = app_services(doc)
    if not services:
        problems.append(f"no service is built from {APP_DOCKERFILE}")
    for name, svc in services.items():
        env = environment(svc)
        problems += [f"{name}: sets {var}, which no code reads" for var in sorted(set(env) - read)]
        problems += [f"{name}: {var} not set" for var in REQUIRED_APP_ENV if not env.get(var)]
        if env.get("DJANGO_SETTINGS_MODULE") != "practice.settings.prod":
            problems.append(f"{name}: not on the production settings")
        if name in WORKERS:
            problems += [f"{name}: {var} not set" for var in REQUIRED_WORKER_ENV
                         if not env.get(var)]
            if env.get("ROOFLINE_SANDBOX_BACKEND") != "docker":
                problems.append(f"{name}: not on the docker sandbox backend")
    # Web and every worker must route kernel parts the same way, or they go where nobody reads.
    routes = {environment(svc).get("ROOFLINE_KERNEL_QUEUE") for svc in services.values()}
    if len(routes) != 1 or None in routes:
        problems.append(f"ROOFLINE_KERNEL_QUEUE differs between services: {routes}")
    return problems


def mounts(svc: dict[str, Any]) -> list[str]:
    out = []
    for vol in svc.get("volumes") or []:
        if isinstance(vol, dict):
            out.append(f"{vol.get('source', '')}:{vol.get('target', '')}")
        else:
            out.append(str(vol))
    return out


def socket_problems(doc: dict[str, Any]) -> list[str]:
    problems = []
    for name, svc in doc["services"].items():
        has = any(SOCKET in m for m in mounts(svc))
        if has and name not in WORKERS:
            problems.append(f"{name}: has the Docker socket (workers only)")
        if not has and name in WORKERS:
            problems.append(f"{name}: no Docker socket, so it cannot start sandboxes")
        if any(SOCKET in str(v) for v in environment(svc).values()):
            problems.append(f"{name}: names the socket in its environment")
    return problems


def is_one_shot(svc: dict[str, Any]) -> bool:
    return str(svc.get("restart", "no")) == "no"


def health_problems(doc: dict[str, Any]) -> list[str]:
    problems = []
    waited_for = {dep for svc in doc["services"].values()
                  for dep, how in (svc.get("depends_on") or {}).items()
                  if isinstance(how, dict)
                  and how.get("condition") == "service_completed_successfully"}
    for name, svc in doc["services"].items():
        check = svc.get("healthcheck")
        if is_one_shot(svc):
            if name not in waited_for:
                problems.append(f"{name}: a one-shot job nothing waits for")
            continue
        if not check or check.get("disable") or check.get("test") in (["NONE"], "NONE", None):
            problems.append(f"{name}: long-running without a health check")
    return problems


def limit_problems(doc: dict[str, Any]) -> list[str]:
    problems = []
    for name, svc in doc["services"].items():
        limits = ((svc.get("deploy") or {}).get("resources") or {}).get("limits") or {}
        # Processes: the service-level pids_limit, which Compose v1 (Debian's docker-compose
        # 1.29) reads too; deploy.resources.limits.pids is v2's alone.
        limits = {**limits, **({"pids": svc["pids_limit"]} if "pids_limit" in svc else {})}
        problems += [f"{name}: no {key} limit" for key in ("cpus", "memory", "pids")
                     if key not in limits]
    return problems


def gpu_problems(doc: dict[str, Any]) -> list[str]:
    problems = []
    services = doc["services"]
    gpu = services.get("gpu-worker")
    if gpu is None:
        return ["no gpu-worker service"]
    if "gpu" not in (gpu.get("profiles") or []):
        problems.append("gpu-worker: not behind the `gpu` profile")
    cmd = command(gpu)
    if "-Q" not in cmd or cmd[cmd.index("-Q") + 1] != "gpu":
        problems.append("gpu-worker: does not consume exactly the `gpu` queue")
    if environment(gpu).get("ROOFLINE_KERNEL_DEVICE") != "gpu":
        problems.append("gpu-worker: ROOFLINE_KERNEL_DEVICE is not gpu")
    worker_cmd = command(services.get("worker", {}))
    if "-Q" not in worker_cmd or worker_cmd[worker_cmd.index("-Q") + 1] != "grade":
        problems.append("worker: does not consume the `grade` queue")
    # Whatever gpu-worker depends on is either always there or in its profile too.
    for dep in gpu.get("depends_on") or {}:
        profiles = services[dep].get("profiles")
        if profiles and "gpu" not in profiles:
            problems.append(f"gpu-worker: depends on {dep}, which the gpu profile does not start")
    # Nothing outside the profile needs a GPU.
    for name, svc in services.items():
        if "gpu" in (svc.get("profiles") or []):
            continue
        if "nvidia" in json.dumps(svc.get("deploy") or {}) or svc.get("runtime") == "nvidia":
            problems.append(f"{name}: asks for a GPU outside the gpu profile")
    return problems


def beat_problems(doc: dict[str, Any]) -> list[str]:
    runners = [name for name, svc in doc["services"].items()
               if "beat" in command(svc) or "-B" in command(svc) or "--beat" in command(svc)]
    problems = [] if len(runners) == 1 else [f"beat runs in {runners or 'no service'}"]
    for name in runners:
        if ((doc["services"][name].get("deploy") or {}).get("replicas") or 1) != 1:
            problems.append(f"{name}: runs beat with several replicas")
    return problems


def scaling_problems(doc: dict[str, Any]) -> list[str]:
    # The docker janitor tells its own leftovers from another worker's by hostname, and
    # `--scale worker=N` needs distinct container names: no fixed hostname or name on workers.
    return [f"{name}: fixed {key}" for name in WORKERS
            for key in ("hostname", "container_name")
            if key in doc["services"].get(name, {})]


RULES = {"env": lambda d: env_problems(d, env_names_read()), "socket": socket_problems,
         "health": health_problems, "limits": limit_problems, "gpu": gpu_problems,
         "beat": beat_problems, "scaling": scaling_problems}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_compose_follows_rule(compose: dict[str, Any], rule: str) -> None:
    assert RULES[rule](compose) == []


# Each break applied to a copy of the real file, and the rule that must then complain.
def _drop_web_healthcheck(d: dict[str, Any]) -> None:
    del d["services"]["web"]["healthcheck"]


def _socket_into_web(d: dict[str, Any]) -> None:
    d["services"]["web"].setdefault("volumes", []).append("/var/run/docker.sock:/var/run/docker.sock")


def _socket_into_sandbox(d: dict[str, Any]) -> None:
    d["services"]["sandbox-image"]["volumes"] = ["/var/run/docker.sock:/var/run/docker.sock"]


def _unknown_env(d: dict[str, Any]) -> None:
    d["services"]["worker"]["environment"]["ROOFLINE_NO_SUCH_KNOB"] = "1"


def _no_secret_key(d: dict[str, Any]) -> None:
    del d["services"]["web"]["environment"]["SECRET_KEY"]


def _queue_mismatch(d: dict[str, Any]) -> None:
    d["services"]["web"]["environment"]["ROOFLINE_KERNEL_QUEUE"] = "gpu"


def _gpu_without_profile(d: dict[str, Any]) -> None:
    del d["services"]["gpu-worker"]["profiles"]


def _no_memory_limit(d: dict[str, Any]) -> None:
    del d["services"]["redis"]["deploy"]["resources"]["limits"]["memory"]


def _second_beat(d: dict[str, Any]) -> None:
    d["services"]["worker"]["command"] = [*command(d["services"]["worker"]), "-B"]


def _fixed_hostname(d: dict[str, Any]) -> None:
    d["services"]["worker"]["hostname"] = "worker"


BREAKS = [(_drop_web_healthcheck, "health"), (_socket_into_web, "socket"),
          (_socket_into_sandbox, "socket"), (_unknown_env, "env"), (_no_secret_key, "env"),
          (_queue_mismatch, "env"), (_gpu_without_profile, "gpu"), (_no_memory_limit, "limits"),
          (_second_beat, "beat"), (_fixed_hostname, "scaling")]


@pytest.mark.parametrize(("breaks", "rule"), BREAKS, ids=[b.__name__.strip("_") for b, _ in BREAKS])
def test_rule_catches_a_broken_file(compose: dict[str, Any], breaks: Any, rule: str) -> None:
    broken = copy.deepcopy(compose)
    breaks(broken)
    assert RULES[rule](broken), f"rule {rule!r} missed {breaks.__name__}"


# -- the Compose Specification ---------------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> Draft7Validator:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    Draft7Validator.check_schema(schema)
    return Draft7Validator(schema)


def schema_errors(validator: Draft7Validator, doc: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(doc)]


def test_compose_file_matches_the_compose_specification(
        validator: Draft7Validator, compose: dict[str, Any]) -> None:
    assert schema_errors(validator, compose) == []


def test_schema_rejects_what_compose_rejects(validator: Draft7Validator,
                                            compose: dict[str, Any]) -> None:
    typo = copy.deepcopy(compose)
    typo["services"]["web"]["helthcheck"] = typo["services"]["web"].pop("healthcheck")
    assert schema_errors(validator, typo)
    bad_condition = copy.deepcopy(compose)
    bad_condition["services"]["web"]["depends_on"]["migrate"]["condition"] = "service_done"
    assert schema_errors(validator, bad_condition)


def test_sandbox_images_match_the_backend_defaults(compose: dict[str, Any]) -> None:
    from runners.docker import DEFAULT_GPU_IMAGE, DEFAULT_IMAGE

    services = compose["services"]
    worker_env = environment(services["worker"])
    assert worker_env["ROOFLINE_SANDBOX_IMAGE"] == f"${{ROOFLINE_SANDBOX_IMAGE:-{DEFAULT_IMAGE}}}"
    assert worker_env["ROOFLINE_SANDBOX_GPU_IMAGE"] == (
        f"${{ROOFLINE_SANDBOX_GPU_IMAGE:-{DEFAULT_GPU_IMAGE}}}")
    # The one-shot jobs build and tag exactly the images the workers will ask the engine for.
    assert services["sandbox-image"]["image"] == worker_env["ROOFLINE_SANDBOX_IMAGE"]
    assert services["sandbox-gpu-image"]["image"] == worker_env["ROOFLINE_SANDBOX_GPU_IMAGE"]
    assert services["sandbox-image"]["build"]["context"] == "docker/sandbox"
    assert services["sandbox-gpu-image"]["build"]["context"] == "docker/sandbox-gpu"
    for name in ("sandbox-image", "sandbox-gpu-image"):
        assert services[name]["network_mode"] == "none"
        assert services[name]["user"] == "65534:65534"


def test_data_services_keep_their_data(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert "pgdata:/var/lib/postgresql/data" in mounts(services["postgres"])
    assert "redisdata:/data" in mounts(services["redis"])
    assert {"pgdata", "redisdata"} <= set(compose["volumes"])
    redis_cmd = command(services["redis"])
    assert redis_cmd[redis_cmd.index("--appendonly") + 1] == "yes"
    assert redis_cmd[redis_cmd.index("--maxmemory-policy") + 1] == "noeviction"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert "redis-cli ping" in " ".join(services["redis"]["healthcheck"]["test"])


def test_web_runs_gunicorn_on_the_wsgi_app(compose: dict[str, Any]) -> None:
    web = compose["services"]["web"]
    assert command(web)[:2] == ["gunicorn", "practice.wsgi:application"]
    assert (ROOT / "practice" / "wsgi.py").exists()
    assert "/healthz/" in (ROOT / "docker/app/healthcheck.py").read_text()
    # Published on loopback unless the operator says otherwise (the proxy sits in front).
    assert all(str(p).startswith("${WEB_BIND:-127.0.0.1}:") for p in web["ports"])


# -- the real Compose CLI, where there is one ------------------------------------------------


def compose_cli() -> list[str] | None:
    """`docker compose` (the plugin), or a `docker-compose` that is Compose v2 or v1.29 (Debian
    bookworm's, the one installable here: it reads the Compose Specification), else None."""
    candidates = []
    if shutil.which("docker"):
        candidates.append(["docker", "compose"])
    if shutil.which("docker-compose"):
        candidates.append(["docker-compose"])
    for cli in candidates:
        try:
            out = subprocess.run([*cli, "version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and re.search(r"v?2\.\d+|\b1\.29\.\d+", out.stdout):
            return cli
    return None


@pytest.mark.parametrize("profiles", [[], ["--profile", "gpu"]], ids=["default", "gpu"])
def test_docker_compose_config_accepts_the_file(profiles: list[str]) -> None:
    cli = compose_cli()
    if cli is None:
        pytest.skip("no Compose CLI here (neither the `docker compose` plugin nor a "
                    "`docker-compose` of v2 or 1.29); the schema test above still validates "
                    "the file")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "ROOFLINE_"))}
    env.update(DUMMY_ENV)
    result = subprocess.run([*cli, "-f", str(COMPOSE_FILE), *profiles, "config", "-q"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert result.returncode == 0, result.stderr
    # And the `:?` guards stop a deploy that forgot a secret.
    env.pop("SECRET_KEY")
    result = subprocess.run([*cli, "-f", str(COMPOSE_FILE), *profiles, "config", "-q"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert result.returncode != 0 and "SECRET_KEY" in result.stderr


def test_env_example_covers_the_compose_variables() -> None:
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    used = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", text))
    required = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*):\?", text))
    # COMPOSE_* lines set Compose itself (the project name), not a variable of the file.
    example = {m.group(1) for m in re.finditer(r"^#?([A-Z][A-Z0-9_]*)=",
                                               (ROOT / ".env.example").read_text(),
                                               re.MULTILINE) if not m.group(1).startswith("COMPOSE_")}
    assert required == set(DUMMY_ENV)
    # Required ones are live lines to fill in; every knob the file reads is listed there.
    assert required <= {m.group(1) for m in re.finditer(
        r"^([A-Z][A-Z0-9_]*)=", (ROOT / ".env.example").read_text(), re.MULTILINE)}
    assert used == example, f"only in compose: {used - example}; only in .env.example: {example - used}"
    deploy_doc = (ROOT / "docs/deploy.md").read_text(encoding="utf-8")
    assert not [v for v in used if f"`{v}`" not in deploy_doc], "a variable docs/deploy.md omits"
