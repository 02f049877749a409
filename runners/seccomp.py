"""The one seccomp deny list (feasibility §3.2), compiled for both backends.

`RULES` is the list itself, as plain data; `build_bpf()` turns it into raw BPF for
`bwrap --seccomp FD` and `docker_profile()` into the JSON profile Docker takes as
`--security-opt seccomp=...`. Keeping one data list is what stops the two backends from
drifting apart.

Default ALLOW with targeted denials: a deny list keeps CPython, numpy, torch and (later) CUDA
working, while the syscalls that reach the kernel's riskier surfaces or the network fail cleanly
with an errno the student's code can report. Non-native architectures are killed (libseccomp's
default bad-arch action), which closes the x32 / i386 syscall-number side doors; Docker's
profile lists no architectures, so runc likewise builds it for the native one only.
"""

from __future__ import annotations

import errno
import functools
import json
import socket
import tempfile
from dataclasses import dataclass
from typing import Any, Literal

# Plain EPERM: no legitimate exercise needs any of these.
DENY_EPERM: tuple[str, ...] = (
    "ptrace", "process_vm_readv", "process_vm_writev", "perf_event_open", "bpf", "userfaultfd",
    "keyctl", "add_key", "request_key", "mount", "umount2", "pivot_root", "chroot", "setns",
    "unshare", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "open_by_handle_at",
    "name_to_handle_at", "iopl", "ioperm", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "fanotify_init", "vhangup", "lookup_dcookie", "fsopen", "fsmount", "fsconfig", "move_mount",
    "open_tree", "mount_setattr",
)

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
TIOCSTI = 0x5412


@dataclass(frozen=True)
class ArgMatch:
    """A condition on one syscall argument. The op names are libseccomp's, which Docker's
    profile format also uses (as SCMP_CMP_<op>)."""

    index: int
    op: Literal["NE", "MASKED_EQ"]
    value: int
    # MASKED_EQ only: the rule matches when (arg & mask) == value.
    mask: int = 0


@dataclass(frozen=True)
class Deny:
    """Fail `syscall` with `errno` (when `arg` matches, if given)."""

    syscall: str
    errno: int
    arg: ArgMatch | None = None


# The order is the order rules are added to the libseccomp filter: build_bpf()'s output (and
# so the test that pins it) depends on it.
RULES: tuple[Deny, ...] = (
    *(Deny(name, errno.EPERM) for name in DENY_EPERM),
    # Only AF_UNIX sockets (multiprocessing uses socketpair); everything else looks like a
    # kernel built without that family, which libraries handle gracefully.
    Deny("socket", errno.EAFNOSUPPORT, ArgMatch(0, "NE", socket.AF_UNIX)),
    # clone3 passes flags in a struct seccomp cannot inspect; ENOSYS makes glibc fall back to
    # clone, whose flags we can check.
    Deny("clone3", errno.ENOSYS),
    *(Deny("clone", errno.EPERM, ArgMatch(0, "MASKED_EQ", flag, mask=flag))
      for flag in (CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET)),
    # The kernel truncates the ioctl request to 32 bits, so compare only the low 32 bits.
    Deny("ioctl", errno.EPERM, ArgMatch(1, "MASKED_EQ", TIOCSTI, mask=0xFFFFFFFF)),
)


class SeccompUnavailable(RuntimeError):
    """libseccomp / pyseccomp is missing, so no filter can be built."""


@functools.cache
def build_bpf() -> bytes:
    """Compile RULES once per process (about 0.4 ms) and return the BPF program."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError) as exc:  # RuntimeError: libseccomp.so not found
        raise SeccompUnavailable(f"pyseccomp/libseccomp unavailable: {exc}") from exc

    flt = sc.SyscallFilter(sc.ALLOW)
    for rule in RULES:
        # Older kernels/libseccomp may not know every name; resolve_syscall returns a negative
        # number then, and skipping is right because the syscall cannot be called either.
        if sc.resolve_syscall(sc.Arch.NATIVE, rule.syscall) < 0:
            continue
        args = []
        if rule.arg is not None:
            a = rule.arg
            # pyseccomp's Arg(index, op, datum_a, datum_b): for MASKED_EQ datum_a is the mask.
            args.append(sc.Arg(a.index, sc.NE, a.value) if a.op == "NE"
                        else sc.Arg(a.index, sc.MASKED_EQ, a.mask, a.value))
        flt.add_rule(sc.ERRNO(rule.errno), rule.syscall, *args)

    with tempfile.TemporaryFile() as fh:
        flt.export_bpf(fh)
        fh.seek(0)
        return fh.read()


def _docker_arg(a: ArgMatch) -> dict[str, Any]:
    # Docker/runc hand (value, valueTwo) to libseccomp's MakeCondition in order, and for
    # MASKED_EQ libseccomp reads the first as the mask and the second as the datum.
    if a.op == "NE":
        return {"index": a.index, "value": a.value, "valueTwo": 0, "op": "SCMP_CMP_NE"}
    return {"index": a.index, "value": a.mask, "valueTwo": a.value, "op": "SCMP_CMP_MASKED_EQ"}


def docker_profile() -> dict[str, Any]:
    """RULES as a Docker seccomp profile (the JSON schema of moby's profiles/seccomp).

    Passing any profile replaces Docker's default one, so this is the whole filter of a
    sandbox container; cap-drop ALL and no-new-privileges cover what the default profile
    gates on capabilities. Rules that share an errno and have no argument condition are
    grouped into one entry; each conditional rule stays its own entry, because runc ORs
    separate entries for the same syscall (clone is denied if ANY of the three flags is set),
    whereas conditions inside one entry would be ANDed.
    """
    syscalls: list[dict[str, Any]] = []
    for rule in RULES:
        last = syscalls[-1] if syscalls else None
        if (rule.arg is None and last is not None and "args" not in last
                and last["errnoRet"] == rule.errno):
            last["names"].append(rule.syscall)
            continue
        entry: dict[str, Any] = {"names": [rule.syscall], "action": "SCMP_ACT_ERRNO",
                                 "errnoRet": rule.errno}
        if rule.arg is not None:
            entry["args"] = [_docker_arg(rule.arg)]
        syscalls.append(entry)
    # No "architectures": runc then builds the filter for the native architecture only, and
    # libseccomp kills any other (as the bwrap filter does). Names the engine's libseccomp does
    # not know are skipped by runc, as build_bpf() skips them.
    return {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": syscalls}


@functools.cache
def docker_profile_json() -> str:
    """The profile as the text `security_opt=["seccomp=<text>"]` carries (compact, stable)."""
    return json.dumps(docker_profile(), separators=(",", ":"), sort_keys=True)
