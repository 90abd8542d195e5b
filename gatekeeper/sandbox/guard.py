"""Limits and an audit guard applied inside a worker before untrusted code runs.

- RLIMIT_AS caps the address space (skipped when CUDA is in use: the driver reserves far
  more virtual memory than it touches; the parent then polls the resident set instead).
- RLIMIT_CORE 0: a crash leaves no core file.
- A `sys.addaudithook` guard refuses writes outside the allowed roots (the private
  working directory and the build cache) and outgoing network connections, and reports
  each refusal to the parent. Audit hooks cannot be removed from Python; code that calls
  libc directly (ctypes) bypasses them, which is why OS isolation comes first.
"""

from __future__ import annotations

import os
import resource
import sys
from typing import Any

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_REPORTED: set[str] = set()


def apply_limits(memory_mb: int | None, cap_address_space: bool) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_mb and cap_address_space:
        limit = int(memory_mb) * 1024 * 1024
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _is_write(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    if isinstance(flags, int):
        return bool(flags & _WRITE_FLAGS)
    return False


def install_guard(write_roots: list[str], channel: Any) -> None:
    roots = tuple(os.path.realpath(r) for r in write_roots) + ("/dev/null", "/dev/shm", "/proc/self")

    def allowed(path: Any) -> bool:
        if isinstance(path, int):
            return True
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return True
        return any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots)

    def refuse(event: str, target: str) -> None:
        key = f"{event}:{target}"
        if key not in _REPORTED and len(_REPORTED) < 50:
            _REPORTED.add(key)
            try:
                channel.send("violation", event=event, target=target, phase=channel.current_phase)
            except Exception:
                pass
        raise PermissionError(f"gatekeeper sandbox: {event} {target} is not allowed")

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            if _is_write(mode, flags) and not allowed(path):
                refuse("write", str(path))
        elif event in ("os.remove", "os.rename", "os.rmdir", "shutil.rmtree", "os.truncate"):
            if args and not allowed(args[0]):
                refuse(event, str(args[0]))
        elif event == "socket.connect" and len(args) > 1:
            address = args[1]
            if not (isinstance(address, (str, bytes))):  # AF_UNIX paths pass; IP connections do not
                refuse("connect", str(address))
        elif event in ("os.kill", "os.killpg") and len(args) > 1:
            # A signal to any other process (the parent, the harness, a process group) is an
            # attempt, even where the pid namespace makes it miss: contained is not allowed.
            pid, sig = args[0], args[1]
            if sig != 0 and pid not in (os.getpid(),):
                refuse(event, f"pid {pid} signal {sig}")
        elif event == "ctypes.dlsym" and len(args) > 1:
            name = args[1]
            name = name.decode("ascii", "replace") if isinstance(name, bytes) else str(name)
            if name in ESCAPE_SYMBOLS:
                refuse("ctypes.dlsym", name)

    sys.addaudithook(hook)
    _STATE["allowed"], _STATE["refuse"] = allowed, refuse


# libc entry points that reach past the audit hook when called through ctypes: files,
# processes, signals, memory protection, raw system calls. Honest ctypes use calls its own
# library's functions, never these.
ESCAPE_SYMBOLS = frozenset({
    "open", "open64", "openat", "openat64", "creat", "creat64", "fopen", "fopen64", "freopen", "write", "pwrite",
    "pwrite64", "unlink", "unlinkat", "rename", "renameat", "renameat2", "truncate", "ftruncate", "mkdir",
    "rmdir", "symlink", "link", "chmod", "chown", "kill", "killpg", "tgkill", "tkill", "ptrace", "fork", "vfork",
    "clone", "execve", "execv", "execvp", "execl", "system", "popen", "posix_spawn", "syscall", "mprotect",
    "mmap", "mmap64", "socket", "connect", "setns", "unshare", "prctl", "process_vm_writev",
})


_STATE: dict[str, Any] = {}


def guard_torch_files() -> None:
    """`torch.from_file(..., shared=True)` maps a file for writing from C++, past the audit
    hook: the same write rule applies to it. Called by a job once it has imported torch,
    before any submission code (every phase of every worker alike)."""
    torch = sys.modules.get("torch")
    if torch is None or "allowed" not in _STATE:
        return
    allowed, refuse = _STATE["allowed"], _STATE["refuse"]

    def wrap(owner: Any, name: str, shared_at: int) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return

        def guarded(filename: Any, *args: Any, **kwargs: Any) -> Any:
            shared = kwargs.get("shared", args[shared_at] if len(args) > shared_at else False)
            if shared and not allowed(filename):
                refuse("write", f"{filename} (torch {name}, shared)")
            return original(filename, *args, **kwargs)

        try:
            setattr(owner, name, staticmethod(guarded) if isinstance(owner, type) else guarded)
        except (AttributeError, TypeError):
            pass

    wrap(torch, "from_file", 0)
    for storage in (getattr(torch, "UntypedStorage", None),):
        if storage is not None:
            wrap(storage, "from_file", 0)
