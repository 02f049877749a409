from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Iterator

import pytest

from runners import Backend, SandboxUnavailable, get_backend
from runners.identity import SLOTS, real_uid, try_lock

# Every backend the hostile suite attacks. A backend that cannot run here is skipped with its
# reason, except bwrap on CI, which must run: the sandbox is part of what CI proves; and docker
# wherever scripts/docker_engine.sh has an engine up (it sets ROOFLINE_REQUIRE_DOCKER=1), so an
# image that failed to build is a failure, not a skip.
BACKENDS = ("bwrap", "docker")
# Slots the tests give themselves: above the range a process without $ROOFLINE_SANDBOX_SLOT claims
# (runners.identity.claimed_slot), so a run of ours never shares its uid with another process's.
TEST_SLOTS = range(SLOTS, 2 * SLOTS)
REQUIRED_ON_CI = ("bwrap",)


def required(name: str) -> bool:
    if name == "docker" and os.environ.get("ROOFLINE_REQUIRE_DOCKER") == "1":
        return True
    return on_ci() and name in REQUIRED_ON_CI


def on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def sandbox() -> Backend:
    """The configured backend. Unavailable: a failure on CI (the sandbox is part of what CI
    proves), a skip with the reason on a developer machine without bwrap/userns."""
    try:
        return get_backend()
    except SandboxUnavailable as exc:
        if on_ci():
            pytest.fail(f"sandbox unavailable on CI: {exc}")
        pytest.skip(f"sandbox unavailable: {exc}")


def _unused_test_slots() -> list[int]:
    """The slots of TEST_SLOTS whose uid no process uses right now."""
    from runners.identity import SLOT_UID_BASE

    busy = {real_uid(pid) for pid in os.listdir("/proc") if pid.isdigit()}
    return [s for s in TEST_SLOTS if SLOT_UID_BASE + s not in busy]


def unused_test_slot() -> int:
    """A slot of TEST_SLOTS whose uid no process uses right now."""
    return _unused_test_slots()[0]


@pytest.fixture(scope="session")
def free_slot() -> Iterator[int]:
    """Give this test session a worker slot whose uid no process uses right now, so "no process
    of the slot uid survives" checks our runs only, and a run's RLIMIT_NPROC counts its own
    processes only. Drawn from TEST_SLOTS, which no process without an explicit slot (another
    test process grading through the sandbox claims one of 0..31) can take."""
    candidates = _unused_test_slots() or list(TEST_SLOTS)
    random.shuffle(candidates)
    # A lock per slot keeps two test sessions running at once (CI and a developer, or two
    # helpers) from drawing the same one.
    lock_fd, free = None, candidates[0]
    for candidate in candidates:
        lock_fd = try_lock(f"{tempfile.gettempdir()}/roofline-test-slot-{candidate}.lock")
        if lock_fd is not None:
            free = candidate
            break
    saved = os.environ.get("ROOFLINE_SANDBOX_SLOT")
    os.environ["ROOFLINE_SANDBOX_SLOT"] = str(free)
    yield free
    if lock_fd is not None:
        os.close(lock_fd)
    if saved is None:
        os.environ.pop("ROOFLINE_SANDBOX_SLOT", None)
    else:
        os.environ["ROOFLINE_SANDBOX_SLOT"] = saved


@pytest.fixture(scope="module", params=BACKENDS)
def hostile_backend(request: pytest.FixtureRequest, free_slot: int) -> Backend:
    """Each backend in turn; skipped with the reason when it is not available here."""
    name: str = request.param
    try:
        return get_backend(name)
    except SandboxUnavailable as exc:
        if required(name):
            pytest.fail(f"{name} sandbox unavailable here: {exc}")
        pytest.skip(f"{name} sandbox unavailable: {exc}")
