"""Run as a script inside `unshare`'s new mount namespace, before the worker: make every
mount read-only except the worker's writable folders, then exec the worker.

Without bubblewrap the worker runs under `unshare -rn --pid --mount-proc`, which gives it
its own user, network and pid namespaces but the host's file system: as root, native code
(a C++ extension calling fopen, which no audit hook sees) could write anywhere. This closes
that (issue 22 item 6): the mount namespace's propagation is made private (nothing leaks to
the host), each writable folder is bind-mounted onto itself (its own mount), and every other
mount is remounted read-only, keeping the flags the kernel locked for the namespace. /proc,
/dev and /sys stay as they are (device nodes such as /dev/null ignore a read-only mount, and
/proc belongs to the new pid namespace).

Usage: python -I -S readonly_fs.py WRITABLE... -- COMMAND...
On failure it exits with code 97 and a line on stderr that starts with READONLY_FS_FAILED:
the parent reports an infrastructure error rather than run untrusted code undefended.
"""

from __future__ import annotations

import ctypes
import os
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
_OPTION_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                 "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
FAILED_EXIT = 97
KEEP = ("/proc", "/dev", "/sys")


def _mount(libc: ctypes.CDLL, source: bytes | None, target: str, flags: int) -> None:
    if libc.mount(source, target.encode(), None, flags, None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def _mounts() -> list[tuple[str, int]]:
    """(mount point, its per-mount flags) from /proc/self/mountinfo, shallowest first."""
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) < 6:
                continue
            point = parts[4].replace("\\040", " ")
            flags = sum(_OPTION_FLAGS.get(o, 0) for o in parts[5].split(","))
            out.append((point, flags))
    return sorted(set(out), key=lambda m: m[0].count("/"))


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def defend(writable: list[str]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    _mount(libc, None, "/", MS_REC | MS_PRIVATE)
    roots = [os.path.realpath(w) for w in writable if os.path.isdir(w)]
    for root in roots:
        _mount(libc, root.encode(), root, MS_BIND | MS_REC)
    for point, flags in _mounts():
        if _under(point, roots) or _under(point, list(KEEP)):
            continue
        try:
            _mount(libc, None, point, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError as exc:
            if point == "/":
                raise
            # A mount below a read-only one that the namespace cannot change (EPERM, EACCES)
            # or that vanished stays as it is: still unreachable for writes when its parent is
            # a file system the kernel itself mounted read-only, and reported otherwise.
            if exc.errno not in (1, 2, 13, 22):
                raise


def main(argv: list[str]) -> None:
    if "--" not in argv:
        sys.stderr.write("READONLY_FS_FAILED usage: readonly_fs.py WRITABLE... -- COMMAND...\n")
        raise SystemExit(FAILED_EXIT)
    cut = argv.index("--")
    writable, command = argv[:cut], argv[cut + 1:]
    try:
        defend(writable)
    except OSError as exc:
        sys.stderr.write(f"READONLY_FS_FAILED the file system could not be made read-only: {exc}\n")
        raise SystemExit(FAILED_EXIT)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
