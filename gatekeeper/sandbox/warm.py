"""The warm worker, parent side: start a job in its bubblewrap sandbox without a fresh
interpreter importing torch (docs/design-warm-worker.md; the zygote is sandbox/warm_fork.py).

For each job, bubblewrap is started exactly as for a classic worker (same view, namespaces,
capability drop, new session, dies with the parent), but it runs a holder (`/bin/sh`, a few
milliseconds) instead of Python. The zygote forks a child that joins that sandbox and runs
the job in it. bubblewrap stays the process the runner watches and kills: its exit status is
the job's (the holder exits with what the zygote's child reports), and killing it ends the
sandbox's pid namespace and with it the job.

Anything unexpected on the way (no zygote, a holder that does not start, a child that cannot
join or acknowledge) ends this path before the job is sent, and the job runs classically; the
reason is kept (`last_failure`; three failures in a row, or a zygote that does not start,
switch the path off for the process: `disabled_reason`). `GATEKEEPER_WARM_WORKER=0` turns
the path off.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable, Optional

from gatekeeper.sandbox.isolation import Isolation, bwrap_args
from gatekeeper.sandbox.process_tree import kill_job

WORKER_SCRIPT = str(Path(__file__).resolve().with_name("worker.py"))
# The holder: says it started, then exits with the status the zygote's child writes (1 when
# that child is gone without a word).
_HOLDER = 'echo ready; read -r code; exit "${code:-1}"'
_START_S = 30.0  # a holder or a fork that takes longer is not waited for

_lock = threading.Lock()
# One zygote per distinct environment (less the per-job variables), at most _MAX_ZYGOTES: a
# long-lived process whose environment changed after its first job (a library caller that
# set a variable, a test's monkeypatch) would otherwise run every later job fresh.
_zygotes: dict[tuple[tuple[str, str], ...], "_Zygote"] = {}
_MAX_ZYGOTES = 3
disabled_reason: Optional[str] = None
last_failure: list[Optional[str]] = [None]  # why the last warm start failed, for diagnosis


@dataclass
class Launched:
    proc: subprocess.Popen  # bubblewrap running the holder: its exit status is the job's
    stdin: IO[bytes]
    stdout: IO[bytes]
    stderr: IO[bytes]
    child_pid: int  # the zygote's child, outside the sandbox: the job is its child
    zygote_pid: int  # the zygote it was forked from


def enabled() -> bool:
    return (os.environ.get("GATEKEEPER_WARM_WORKER", "1").strip() != "0" and sys.platform.startswith("linux")
            and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds") and disabled_reason is None)


_failures = 0  # in a row; a success resets it
_MAX_FAILURES = 3


def _succeeded() -> None:
    global _failures
    _failures = 0


def _disable(why: str) -> None:
    global disabled_reason
    disabled_reason = why


def _failed(why: str) -> None:
    """One job could not start warm (it runs fresh). A machine under load can miss a start-up
    deadline once; three in a row switch the path off for this process."""
    global _failures
    _failures += 1
    last_failure[0] = why
    if _failures >= _MAX_FAILURES:
        _disable(f"{_failures} warm starts in a row failed, the last: {why}")


class _Zygote:
    def __init__(self, env: dict[str, str]) -> None:
        self.owner = os.getpid()
        self.lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen([sys.executable, WORKER_SCRIPT, "--zygote", str(theirs.fileno())],
                                         stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, env=env,
                                         cwd="/", pass_fds=(theirs.fileno(),), start_new_session=True)
        finally:
            theirs.close()
        self.sock = ours
        self.sock.settimeout(120)  # the first import of torch on a loaded machine
        try:
            ready = self.sock.recv(1 << 12)
        except OSError as exc:
            ready = str(exc).encode()
        if ready != b'{"ready": true}':
            self.close()
            raise OSError(f"the zygote did not start ({ready[:200]!r}; {self._log_tail()})")
        self.sock.settimeout(_START_S)

    def _log_tail(self) -> str:
        try:
            self.log.seek(0)
            return self.log.read()[-500:].decode("utf-8", "replace").strip() or "no output"
        except (OSError, ValueError):
            return "no output"

    def fork(self, request: dict, fds: list[int]) -> int:
        with self.lock:
            socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
            reply = json.loads(self.sock.recv(1 << 12) or b"{}")
        if "pid" not in reply:
            raise OSError(f"the zygote refused the job: {reply.get('error', 'no reply')}")
        return int(reply["pid"])

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


# Variables a job may set differently from the zygote: each is read after the fork (paths,
# tags) or applied again in the job (the thread counts: the OpenMP runtime reads its variables
# when torch loads it, in the zygote, so the job calls torch.set_num_threads itself; oneDNN
# reads its JIT profiling variables at its first generated kernel, in the job).
_PER_JOB = ("HOME", "TMPDIR", "PWD", "GATEKEEPER_JOB", "GATEKEEPER_SPILL_DIR", "GATEKEEPER_SPILL_BYTES",
            "TORCH_EXTENSIONS_DIR", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "ONEDNN_JIT_PROFILE", "DNNL_JIT_PROFILE")


def _zygote_env(worker_env: dict[str, str]) -> dict[str, str]:
    """The job environment less what is the job's own: HOME points nowhere (no user site,
    as a worker whose HOME is its empty folder)."""
    env = {k: v for k, v in worker_env.items() if k not in _PER_JOB}
    env["HOME"] = "/nonexistent"
    return env


def _get_zygote(worker_env: dict[str, str]) -> Optional[_Zygote]:
    """The zygote started with this environment (less the per-job variables), started now if
    there is none yet and room for one; None: the job runs fresh."""
    env = _zygote_env(worker_env)
    key = tuple(sorted(env.items()))
    with _lock:
        for known, zygote in list(_zygotes.items()):
            if zygote.owner != os.getpid() or zygote.proc.poll() is not None:
                if zygote.owner == os.getpid():
                    zygote.close()
                del _zygotes[known]  # a forked copy of this process starts its own
        zygote = _zygotes.get(key)
        if zygote is None and disabled_reason is None and len(_zygotes) < _MAX_ZYGOTES:
            try:
                zygote = _zygotes[key] = _Zygote(env)
            except OSError as exc:
                _disable(str(exc))
        return zygote


@atexit.register
def _stop() -> None:
    for zygote in list(_zygotes.values()):
        if zygote.owner == os.getpid():
            zygote.close()


def launch(isolation: Isolation, *, workdir: Path, read_paths: Iterable[str], write_paths: Iterable[str],
           env: dict[str, str], result_fd: int) -> Optional[Launched]:
    """The job's sandbox with the job forked into it, or None (run it classically)."""
    if isolation.name != "bwrap" or not enabled():
        return None
    # The zygote imported torch with the job's own environment (less the per-job variables),
    # so what a library reads at import is what the job asks for; none free: a fresh worker.
    zygote = _get_zygote(env)
    if zygote is None:
        return None
    mine: list[int] = []  # our ends, closed on failure
    theirs: list[int] = []  # the job's ends, closed here once handed over
    try:
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        status_r, status_w = os.pipe()
        ready_r, ready_w = os.pipe()
        info_r, info_w = os.pipe()
        ack_r, ack_w = os.pipe()
        mine += [stdin_w, stdout_r, stderr_r, ready_r, info_r, ack_r]
        theirs += [stdin_r, stdout_w, stderr_w, status_r, status_w, ready_w, info_w, ack_w]
        argv = [str(isolation.tool), "--info-fd", str(info_w),
                *bwrap_args(workdir, read_paths, write_paths, isolation.extra_ro), "--", "/bin/sh", "-c", _HOLDER]
        proc = subprocess.Popen(argv, stdin=status_r, stdout=ready_w, stderr=subprocess.DEVNULL, cwd=workdir,
                                env=env, pass_fds=(info_w,), start_new_session=True)
    except OSError as exc:
        _close(mine + theirs)
        _failed(f"the sandbox holder could not be started: {exc}")
        return None
    try:
        for fd in (status_r, ready_w, info_w):
            os.close(fd)
            theirs.remove(fd)
        if _read_within(ready_r, 6) != b"ready\n":  # the holder's stdout stays open: read 6
            raise OSError("the sandbox holder did not start")
        sandbox_pid = int(json.loads(_read_json(info_r))["child-pid"])
        request = {"sandbox_pid": sandbox_pid, "holder_pid": proc.pid, "workdir": os.path.realpath(workdir),
                   "env": env}
        child = zygote.fork(request, [stdin_r, stdout_w, stderr_w, result_fd, status_w, ack_w])
        _close(theirs)
        theirs = []
        said = _read_within(ack_r, 300)
        if said != b"joined":
            raise OSError(f"the forked job did not join its sandbox ({said.decode('utf-8', 'replace') or 'no word'})")
    except (OSError, ValueError, KeyError) as exc:
        _close(theirs)
        kill_job(proc)  # bubblewrap and, with its pid namespace, anything forked into it
        _close(mine)
        _failed(f"the warm worker failed: {exc}")
        return None
    _succeeded()
    _close([ready_r, info_r, ack_r])
    return Launched(proc, os.fdopen(stdin_w, "wb"), os.fdopen(stdout_r, "rb"), os.fdopen(stderr_r, "rb"), child,
                    zygote.proc.pid)


def _read_within(fd: int, size: int) -> bytes:
    """Up to `size` bytes from `fd`, until its end, waiting at most _START_S in all."""
    deadline, got = time.monotonic() + _START_S, b""
    while len(got) < size:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, size - len(got))
        if not chunk:
            break
        got += chunk
    return got


def _read_json(fd: int) -> bytes:
    """bubblewrap's --info-fd object (one small JSON object)."""
    deadline, got = time.monotonic() + _START_S, b""
    while not got.rstrip().endswith(b"}"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            raise OSError("bubblewrap reported no sandbox pid")
        got += chunk
    return got


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
