"""One deny list, two encodings: the BPF program bwrap loads and the JSON profile Docker loads.

The BPF is run through a small classic-BPF interpreter and the JSON profile through runc's
matching rules, on the same probes, so the two must agree syscall by syscall; neither engine
nor root is needed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import hashlib
import json
import platform
import socket
import struct

import pytest

from runners.seccomp import (
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWUSER,
    DENY_EPERM,
    RULES,
    TIOCSTI,
    SeccompUnavailable,
    build_bpf,
    docker_profile,
    docker_profile_json,
)

# sha256 of build_bpf() as the pre-refactor code (rules added inline) produced it on x86_64
# with libseccomp 2.5.4 (Debian 12). The bytes depend on libseccomp's code generator, so the
# pin is checked only there; the interpreter tests below hold everywhere.
PINNED_BPF = {("x86_64", (2, 5, 4)):
              "b84fc2d24b0d6c566f8ef63731c9286351901002fe4278899de6974ff3158527"}

SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ACTION_FULL = 0xFFFF0000
SECCOMP_RET_DATA = 0x0000FFFF
AUDIT_ARCH_I386 = 0x40000003
X32_SYSCALL_BIT = 0x40000000
CLONE_VM = 0x00000100
SIGCHLD = 17
TCGETS = 0x5401


def _libseccomp_version() -> tuple[int, int, int] | None:
    path = ctypes.util.find_library("seccomp")
    if not path:
        return None

    class Version(ctypes.Structure):
        _fields_ = [("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint)]

    lib = ctypes.CDLL(path)
    lib.seccomp_version.restype = ctypes.POINTER(Version)
    v = lib.seccomp_version().contents
    return (v.major, v.minor, v.micro)


@pytest.fixture(scope="module")
def bpf() -> bytes:
    try:
        return build_bpf()
    except SeccompUnavailable as exc:
        pytest.skip(f"no libseccomp here: {exc}")


def run_bpf(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """Evaluate a classic-BPF seccomp program on one seccomp_data (what the kernel does)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    insns = [struct.unpack_from("<HBBI", program, off) for off in range(0, len(program), 8)]
    acc = x = 0
    mem = [0] * 16
    pc = 0
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        cls = code & 0x07
        if cls == 0x00:  # LD
            mode = code & 0xE0
            if mode == 0x20 and code & 0x18 == 0x00:  # W ABS
                acc = struct.unpack_from("<I", data, k)[0]
            elif mode == 0x00:
                acc = k
            elif mode == 0x60:
                acc = mem[k]
            else:
                raise AssertionError(f"unsupported load {code:#x}")
        elif cls == 0x01:  # LDX
            x = k if code & 0xE0 == 0x00 else mem[k]
        elif cls == 0x02:
            mem[k] = acc
        elif cls == 0x03:
            mem[k] = x
        elif cls == 0x04:  # ALU
            operand = x if code & 0x08 else k
            op = code & 0xF0
            ops = {0x00: acc + operand, 0x10: acc - operand, 0x40: acc | operand,
                   0x50: acc & operand, 0xA0: acc ^ operand}
            if op not in ops:
                raise AssertionError(f"unsupported alu {code:#x}")
            acc = ops[op] & 0xFFFFFFFF
        elif cls == 0x05:  # JMP
            op = code & 0xF0
            operand = x if code & 0x08 else k
            if op == 0x00:
                pc += k
                continue
            taken = {0x10: acc == operand, 0x20: acc > operand, 0x30: acc >= operand,
                     0x40: bool(acc & operand)}[op]
            pc += jt if taken else jf
        elif cls == 0x06:  # RET
            return k if code & 0x18 == 0x00 else acc
        elif cls == 0x07:  # MISC
            if code & 0xF8 == 0x00:
                x = acc
            else:
                acc = x
        if pc >= len(insns):
            raise AssertionError("ran off the end of the program")


def run_profile(profile: dict, name: str, args: tuple[int, ...] = ()) -> int:
    """The JSON profile's verdict as runc applies it: each entry is its own libseccomp rule
    (rules of one syscall are ORed, the conditions inside one rule ANDed)."""
    full = list(args) + [0] * (6 - len(args))

    def holds(cond: dict) -> bool:
        arg = full[cond["index"]]
        if cond["op"] == "SCMP_CMP_NE":
            return arg != cond["value"]
        if cond["op"] == "SCMP_CMP_MASKED_EQ":
            return arg & cond["value"] == cond["valueTwo"]
        raise AssertionError(f"op not modelled: {cond['op']}")

    for entry in profile["syscalls"]:
        if name in entry["names"] and all(holds(c) for c in entry.get("args", [])):
            assert entry["action"] == "SCMP_ACT_ERRNO"
            return SECCOMP_RET_ERRNO | entry["errnoRet"]
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    return SECCOMP_RET_ALLOW


def probes() -> list[tuple[str, tuple[int, ...], int | None]]:
    """(syscall, args, errno expected or None for allowed)."""
    cases: list[tuple[str, tuple[int, ...], int | None]] = [
        (name, (), errno.EPERM) for name in DENY_EPERM]
    cases += [
        ("socket", (socket.AF_INET, socket.SOCK_STREAM, 0), errno.EAFNOSUPPORT),
        ("socket", (socket.AF_INET6, socket.SOCK_DGRAM, 0), errno.EAFNOSUPPORT),
        ("socket", (socket.AF_NETLINK, socket.SOCK_RAW, 0), errno.EAFNOSUPPORT),
        ("socket", (socket.AF_UNIX, socket.SOCK_STREAM, 0), None),
        ("clone3", (0, 88), errno.ENOSYS),
        ("clone", (CLONE_NEWUSER,), errno.EPERM),
        ("clone", (CLONE_NEWNS | SIGCHLD,), errno.EPERM),
        ("clone", (CLONE_NEWNET | CLONE_VM,), errno.EPERM),
        ("clone", (CLONE_VM | SIGCHLD,), None),  # a plain fork/thread
        ("ioctl", (1, TIOCSTI), errno.EPERM),
        # The kernel ignores the upper 32 bits of the request; so must the filter.
        ("ioctl", (1, (1 << 32) | TIOCSTI), errno.EPERM),
        ("ioctl", (1, TCGETS), None),
        ("read", (0, 0, 0), None),
        ("openat", (0, 0, 0), None),
        ("mmap", (0, 4096, 3, 0x22), None),
    ]
    return cases


def test_build_bpf_bytes_unchanged_by_refactor(bpf: bytes) -> None:
    key = (platform.machine(), _libseccomp_version())
    if key not in PINNED_BPF:
        pytest.skip(f"BPF bytes pinned for {sorted(PINNED_BPF)}, this is {key}")
    assert hashlib.sha256(bpf).hexdigest() == PINNED_BPF[key]


def test_bpf_and_docker_profile_give_the_same_verdicts(bpf: bytes) -> None:
    import pyseccomp as sc

    arch = sc.system_arch()
    profile = docker_profile()
    for name, args, want in probes():
        nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
        if nr < 0:
            continue  # not on this architecture: neither filter can see it
        expected = SECCOMP_RET_ALLOW if want is None else SECCOMP_RET_ERRNO | want
        got_bpf = run_bpf(bpf, nr, arch, args)
        assert (got_bpf, name, args) == (expected, name, args)
        assert (run_profile(profile, name, args), name, args) == (expected, name, args)


def test_bpf_kills_foreign_architectures(bpf: bytes) -> None:
    # i386 syscall numbers differ (and x32's are offset): the filter must not ALLOW them.
    import pyseccomp as sc

    cases = [(26, AUDIT_ARCH_I386)]  # 26 = ptrace on i386
    if platform.machine() == "x86_64":
        cases.append((X32_SYSCALL_BIT | 101, sc.system_arch()))  # x32 ptrace: native arch value
    for nr, arch in cases:
        action = run_bpf(bpf, nr, arch)
        assert action & SECCOMP_RET_ACTION_FULL not in (SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO)


def test_profile_is_a_docker_seccomp_profile() -> None:
    profile = docker_profile()
    assert set(profile) == {"defaultAction", "syscalls"}
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    # runc then builds for the native architecture only, like the bwrap filter.
    assert "architectures" not in profile and "archMap" not in profile
    for entry in profile["syscalls"]:
        assert set(entry) <= {"names", "action", "errnoRet", "args"}
        assert entry["names"] and all(isinstance(n, str) and n for n in entry["names"])
        assert entry["action"] == "SCMP_ACT_ERRNO"
        assert isinstance(entry["errnoRet"], int) and 0 < entry["errnoRet"] < 4096
        for cond in entry.get("args", []):
            assert set(cond) == {"index", "value", "valueTwo", "op"}
            assert 0 <= cond["index"] < 6
            assert cond["op"] in ("SCMP_CMP_NE", "SCMP_CMP_MASKED_EQ")
            assert 0 <= cond["value"] < 1 << 64 and 0 <= cond["valueTwo"] < 1 << 64
    assert json.loads(docker_profile_json()) == profile


def test_profile_rules_in_detail() -> None:
    entries = docker_profile()["syscalls"]

    def find(name: str) -> list[dict]:
        return [e for e in entries if name in e["names"]]

    (sock,) = find("socket")
    assert sock["errnoRet"] == errno.EAFNOSUPPORT
    assert sock["args"] == [{"index": 0, "value": socket.AF_UNIX, "valueTwo": 0,
                             "op": "SCMP_CMP_NE"}]
    (clone3,) = find("clone3")
    assert clone3["errnoRet"] == errno.ENOSYS and "args" not in clone3
    clones = find("clone")
    # One entry per flag: runc ORs entries, so any one flag denies the call.
    assert sorted(e["args"][0]["value"] for e in clones) == sorted(
        [CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET])
    for e in clones:
        (cond,) = e["args"]
        assert cond["op"] == "SCMP_CMP_MASKED_EQ" and cond["value"] == cond["valueTwo"]
        assert e["errnoRet"] == errno.EPERM
    (ioctl,) = find("ioctl")
    assert ioctl["args"] == [{"index": 1, "value": 0xFFFFFFFF, "valueTwo": TIOCSTI,
                              "op": "SCMP_CMP_MASKED_EQ"}]


def test_profile_is_generated_from_the_one_list() -> None:
    profile = docker_profile()
    named = [n for e in profile["syscalls"] for n in e["names"]]
    # Every denied name appears, nothing else does, and each rule once.
    assert set(named) == {rule.syscall for rule in RULES}
    assert set(DENY_EPERM) <= set(named)
    assert len(named) == len(RULES)
    # Flattened back into (name, errno, condition), the profile is RULES, in order.
    flat = [(n, e["errnoRet"], json.dumps(e.get("args"), sort_keys=True))
            for e in profile["syscalls"] for n in e["names"]]
    assert [(f[0], f[1]) for f in flat] == [(r.syscall, r.errno) for r in RULES]
    assert [f[2] != "null" for f in flat] == [r.arg is not None for r in RULES]


def test_profile_json_is_stable() -> None:
    text = docker_profile_json()
    assert text == json.dumps(docker_profile(), separators=(",", ":"), sort_keys=True)
    assert "\n" not in text  # it travels inside one security_opt string
