"""The one seccomp deny list (feasibility §3.2) compiled to raw BPF for `bwrap --seccomp FD`.

Default ALLOW with targeted denials: a deny list keeps CPython, numpy, torch and (later) CUDA
working, while the syscalls that reach the kernel's riskier surfaces or the network fail cleanly
with an errno the student's code can report. Non-native architectures are killed (libseccomp's
default bad-arch action), which closes the x32 / i386 syscall-number side doors.
"""

from __future__ import annotations

import errno
import functools
import socket
import tempfile

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


class SeccompUnavailable(RuntimeError):
    """libseccomp / pyseccomp is missing, so no filter can be built."""


@functools.cache
def build_bpf() -> bytes:
    """Compile the deny list once per process (about 0.4 ms) and return the BPF program."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError) as exc:  # RuntimeError: libseccomp.so not found
        raise SeccompUnavailable(f"pyseccomp/libseccomp unavailable: {exc}") from exc

    flt = sc.SyscallFilter(sc.ALLOW)

    def add(action: int, name: str, *args: object) -> None:
        # Older kernels/libseccomp may not know every name; resolve_syscall returns a negative
        # number then, and skipping is right because the syscall cannot be called either.
        if sc.resolve_syscall(sc.Arch.NATIVE, name) < 0:
            return
        flt.add_rule(action, name, *args)

    for name in DENY_EPERM:
        add(sc.ERRNO(errno.EPERM), name)
    # Only AF_UNIX sockets (multiprocessing uses socketpair); everything else looks like a
    # kernel built without that family, which libraries handle gracefully.
    add(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.NE, socket.AF_UNIX))
    # clone3 passes flags in a struct seccomp cannot inspect; ENOSYS makes glibc fall back to
    # clone, whose flags we can check.
    add(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in (CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET):
        add(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    # The kernel truncates the ioctl request to 32 bits, so compare only the low 32 bits.
    add(sc.ERRNO(errno.EPERM), "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, TIOCSTI))

    with tempfile.TemporaryFile() as fh:
        flt.export_bpf(fh)
        fh.seek(0)
        return fh.read()
