"""Raw system calls that act on the calling thread alone.

glibc's setresuid() & co. change every thread of the process (its "setxid broadcast"); the raw
system calls change only the calling thread's credentials (and setns only its namespace), which
is what the identity switch (runners/identity.py) and the lane checks (runners/lanes.py) need.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

SYSCALL_NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": {"setgroups": 116, "setresuid": 117, "getresuid": 118, "setresgid": 119,
               "setns": 308},
    "aarch64": {"setgroups": 159, "setresuid": 147, "getresuid": 148, "setresgid": 149,
                "setns": 268},
}
CLONE_NEWNET = 0x40000000


class ThreadSyscallError(OSError):
    pass


@functools.cache
def libc() -> ctypes.CDLL:
    lib = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    lib.syscall.restype = ctypes.c_long
    return lib


def syscall(name: str, *args: int | ctypes.Array[ctypes.c_uint]) -> None:
    nr = SYSCALL_NUMBERS[os.uname().machine][name]
    cargs = [a if isinstance(a, ctypes.Array) else ctypes.c_long(a) for a in args]
    if libc().syscall(ctypes.c_long(nr), *cargs) != 0:
        err = ctypes.get_errno()
        raise ThreadSyscallError(err, f"{name}: {os.strerror(err)}")


def thread_resuid() -> tuple[int, int, int]:
    ids = [ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()]
    syscall("getresuid", *[ctypes.addressof(i) for i in ids])  # type: ignore[arg-type]
    return ids[0].value, ids[1].value, ids[2].value
