"""Entry point of a sandboxed worker: a plain `python .../gatekeeper/sandbox/worker.py <fd>`.

Started by `gatekeeper.sandbox.runner.run_job`: fresh, or under bubblewrap forked from
`worker.py --zygote` (an interpreter that has imported torch and never runs job code) into
the job's own sandbox (sandbox/warm_fork.py), then `main()`. Before any untrusted code runs it:
1. reads the per-run secret and the job from stdin (then fd 0 is /dev/null; the rest of
   stdin stays on a private fd for `Channel.receive`);
2. moves the result pipe to a private, non-inheritable fd and keeps only an HMAC object
   keyed by the secret (the secret bytes themselves are dropped);
3. applies the resource limits and installs the audit guard;
4. imports the job function (only from the `gatekeeper` package) and calls it.

The job sends messages through `Channel`; the parent accepts only frames whose HMAC
verifies, and counts the job as finished only when the `done` frame arrives.
"""

from __future__ import annotations

import sys

# The worker runs as a plain `python worker.py` (no -I: issue 22, a submission must not tell
# a checking worker from a user's harness by sys.flags). What -I protected is kept otherwise:
# the script's own folder leaves sys.path before any other import (a module named like the
# standard library there cannot shadow it), the environment is an allowlist built by the
# parent (runner.scrubbed_env: no PYTHONPATH, PYTHONSTARTUP, PYTHONHOME), checked again in
# main(), and HOME is the job's empty working folder, so there is no user site to load.
if sys.path and sys.path[0] == __import__("os").path.dirname(__import__("os").path.abspath(__file__)):
    del sys.path[0]

import hashlib
import hmac
import os
import struct
import traceback


SMALL_FRAME = 1 << 16  # frames up to this size are joined and written in one call


class Channel:
    """What a job gets: `send(kind, **data)` and `phase(name)` (starts that phase's timeout)."""

    def __init__(self, fd: int, mac: "hmac.HMAC", stdin: int) -> None:
        import threading

        self._fd = fd
        self._stdin = stdin
        self._mac = mac
        # One frame at a time: the audit guard reports from whichever thread tripped it, and a
        # frame written in parts must not interleave with another thread's (a broken frame is
        # "forged"). Re-entrant, so a report raised inside a send cannot deadlock it.
        self._sending = threading.RLock()
        self.current_phase = "start"
        self.current_data: dict = {}  # the phase's fields (trial, call index), to announce it again

    def send(self, kind: str, **data) -> None:
        from gatekeeper.sandbox.channel import frame_parts, pack_parts, parts_size

        data["kind"] = kind
        parts = frame_parts(self._mac, pack_parts(data))
        if parts_size(parts) <= SMALL_FRAME:  # one write, as small frames always were
            parts = [b"".join(parts)]
        with self._sending:
            for part in parts:  # a large tensor is written as it is: no joined copy
                buf = memoryview(part)
                while buf:
                    written = os.write(self._fd, buf)
                    buf = buf[written:]

    def receive(self) -> dict:
        """The next message the parent feeds (`Job.feed`), acknowledged with a signed
        'fed-ack' frame (its sequence number and size: the parent checks that every message
        arrived, in order). {} when the parent closed stdin; a short read is reported."""
        from gatekeeper.sandbox.channel import decode

        head = _read_exact(self._stdin, 8)
        if len(head) < 8:
            if head:
                self.send("receive-failed", detail=f"{len(head)} bytes of an 8-byte length header")
            return {}
        (size,) = struct.unpack(">Q", head)
        body = _read_exact(self._stdin, size)
        if len(body) < size:
            self.send("receive-failed", detail=f"{len(body)} of {size} bytes, then end of input")
            return {}
        message = decode(body)
        self.send("fed-ack", seq=message.pop("__seq__", None), bytes=size)
        return message

    def phase(self, name: str, **data) -> None:
        self.current_phase, self.current_data = name, data
        self.send("phase", phase=name, **data)


def _read_exact(fd: int, size: int) -> bytearray:
    """Up to `size` bytes (fewer only at end of input), read straight into one buffer."""
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        count = os.readv(fd, [view[got:]])
        if count <= 0:
            break
        got += count
    del view
    if got < size:
        del buffer[got:]
    return buffer


def _private_fd(fd: int) -> int:
    # A high, non-inheritable duplicate, so that code closing "its" fds or a child process
    # does not get the original number.
    import fcntl

    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return private


def _light_package() -> None:
    """Run as a script, the worker registers `gatekeeper` as a bare package, so importing its
    submodules does not execute `gatekeeper/__init__.py` (which pulls in the API, pydantic and
    libcst: half a second per worker). Jobs import submodules explicitly (`gatekeeper.api`)."""
    if "gatekeeper" in sys.modules:
        return
    import types

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    package = types.ModuleType("gatekeeper")
    package.__path__ = [root]  # type: ignore[attr-defined]
    package.__file__ = os.path.join(root, "__init__.py")
    sys.modules["gatekeeper"] = package


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when the thread that started it goes away, so a
    killed or crashed gatekeeper leaves no hung worker behind (the worker has its own
    session, so signals to the parent's group do not reach it)."""
    parent = os.getppid()  # under bwrap --unshare-pid the parent is pid 1 (its init): compare, not test for 1
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the call above
        os._exit(1)


def _keep_freed_memory() -> None:
    """glibc maps every block of 32 MiB or more afresh and unmaps it on free, so a large
    problem's inputs, outputs and temporaries arrive as fresh pages on every call: a page
    fault each, and on a VM with a memory balloon far more (docs/large-tensors.md). The worker
    keeps what it frees and hands it out again; it is short-lived, and its memory goes with it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.mallopt(-4, 0)  # M_MMAP_MAX: no block is mapped on its own
        libc.mallopt(-1, ctypes.c_int(2**31 - 1))  # M_TRIM_THRESHOLD: the heap's top is not given back
    except (OSError, AttributeError):  # not glibc: its allocator's own policy stays
        return


# The only PYTHON* variables a worker may see (runner.scrubbed_env sets them).
_PYTHON_ENV = ("PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")


def _check_environment() -> None:
    stray = sorted(k for k in os.environ if k.startswith("PYTHON") and k not in _PYTHON_ENV)
    if stray:
        raise SystemExit(f"refusing to run: the worker's environment sets {', '.join(stray)}")


def main() -> None:
    _check_environment()
    _die_with_parent()
    _keep_freed_memory()
    _light_package()
    fd = int(sys.argv[1])
    secret = _read_exact(0, 32)
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    del secret
    (size,) = struct.unpack(">Q", _read_exact(0, 8))
    from gatekeeper.sandbox.channel import decode

    spec = decode(_read_exact(0, size))
    # Later messages from the parent arrive on a private copy of stdin; fd 0 becomes /dev/null.
    stdin = _private_fd(0)
    devnull = os.open(os.devnull, os.O_RDONLY)  # lands on fd 0, now free
    if devnull != 0:
        os.dup2(devnull, 0)
        os.close(devnull)
    channel = Channel(_private_fd(fd), mac, stdin)
    del mac
    from gatekeeper.sandbox.guard import apply_limits, install_guard

    apply_limits(spec.get("memory_mb"), spec.get("cap_address_space", True))
    install_guard(spec.get("write_roots", []), channel)
    job = spec["job"]
    module_name, func_name = job.split(":")
    if not module_name.startswith("gatekeeper."):
        raise SystemExit(f"refusing job outside the gatekeeper package: {job}")
    try:
        import importlib

        func = getattr(importlib.import_module(module_name), func_name)
        func(spec.get("params", {}), channel)
    except BaseException as exc:  # the job's own failure, reported and then the worker ends
        try:
            channel.send("error", phase=channel.current_phase, type=type(exc).__name__,
                         message=str(exc)[:4000], traceback=traceback.format_exc()[-8000:])
        except BaseException:
            pass
    try:
        channel.send("done")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def zygote(sock_fd: int) -> None:
    """`worker.py --zygote FD`: import torch once and fork jobs into their sandboxes
    (sandbox/warm_fork.py). Its children continue as `main()`, with this module as
    `__main__`, as a fresh worker has."""
    _check_environment()
    _keep_freed_memory()
    _light_package()
    import torch  # noqa: F401 - the import every job paid for

    from gatekeeper.sandbox import channel, guard, warm_fork  # noqa: F401 - what main() imports

    warm_fork.serve(sock_fd, main)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--zygote"]:
        zygote(int(sys.argv[2]))
    else:
        main()
