"""Nothing a gatekeeper run started may outlive it, even a `kill -9` of the run itself.

Two layers:
- `die_with_parent`: gatekeeper's own worker processes (ingest workers, `check --jobs`
  pool workers) ask Linux for PR_SET_PDEATHSIG, so they die with the process that started
  them; sandboxed workers do the same (sandbox/worker.py) and bubblewrap's
  `--die-with-parent` takes the whole pid namespace with them.
- `RunGuard`: what PDEATHSIG cannot reach. Under isolation `none` a compiler that ninja
  started in its own process group, or a submission's `setsid` double fork, is re-parented
  to init when its worker dies; and nobody removes the temporary directories of a killed
  run. A RunGuard gives the run a private temporary root and a run tag that every process
  it starts inherits (reaper.tag copies it into the sandboxes' scrubbed environments), and
  starts a small watcher process in a session of its own. The watcher holds the read end
  of a pipe only the run holds open for writing; when the run ends in any way (normal exit,
  exception, SIGKILL) it sees end-of-file, SIGKILLs every process carrying the run tag and
  deletes the temporary root. Processes that do not show the tag (Ray's agents rewrite
  their title and with it /proc's view of their environment) are `adopt`ed: their pid and
  start time travel to the watcher on the same pipe, and it kills them (and their
  descendants) too. Killing the watcher itself, or a child that execs with an emptied
  environment after its parent ended, escapes this (docs/threat-model.md).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable, Iterator, Optional

PARENT_VAR = "GATEKEEPER_PARENT_PID"
_SETTLE_S = 0.05  # between reaper scans: a fork may land between two of them
_REAP_LIMIT_S = 10.0  # a tree that keeps forking faster than this is killed still gets this long


def die_with_parent(expected_parent: Optional[int] = None) -> None:
    """Ask the kernel to SIGKILL this process when the thread that started it ends. When the
    parent is already gone (we were re-parented before the call), exit now."""
    if expected_parent is None:
        given = os.environ.get(PARENT_VAR, "")
        expected_parent = int(given) if given.isdigit() else os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != expected_parent:
        os._exit(1)


class RunGuard:
    """A run's temporary root and run tag, cleaned up by a watcher when the run ends.

    `env()` is what to add to the environment of every process the run starts (TMPDIR
    and the run tag). `close()` ends the run normally: the watcher reaps and cleans, and
    close waits for it, so the temporary root is gone when close returns."""

    def __init__(self, prefix: str = "gatekeeper-run-") -> None:
        from gatekeeper.sandbox.reaper import RUN_VAR

        self.var = RUN_VAR
        self.token = os.urandom(12).hex()
        self.adopted: set[tuple[int, int]] = set()
        try:
            self.root = Path(tempfile.mkdtemp(prefix=prefix))
        except OSError as exc:
            from gatekeeper.errors import InfrastructureError

            raise InfrastructureError(f"cannot create a temporary folder in {tempfile.gettempdir()}: "
                                      f"{exc.strerror}; set TMPDIR to a writable folder") from None
        read_end, self._write_end = os.pipe()  # both close-on-exec: no worker inherits the write end
        try:
            self.watcher: Optional[subprocess.Popen] = subprocess.Popen(
                [sys.executable, "-I", "-B", os.path.abspath(__file__), self.var, self.token, str(self.root)],
                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, env=_untagged_env())
        except OSError:
            self.watcher = None  # no watcher: close() still cleans up after a normal end
        finally:
            os.close(read_end)

    def env(self) -> dict[str, str]:
        return {"TMPDIR": str(self.root), self.var: self.token}

    def adopt(self, pids: Iterable[int]) -> None:
        """Processes of the run that may not carry the run tag: the watcher kills them too
        (each named by pid and start time, so a reused pid is never hit)."""
        from gatekeeper.sandbox.reaper import start_time

        if self._write_end < 0:
            return
        named = {(pid, start) for pid in pids if (start := start_time(pid)) >= 0} - self.adopted
        self.adopted |= named
        lines = "".join(f"{pid} {start}\n" for pid, start in sorted(named))
        try:
            os.write(self._write_end, lines.encode())
        except OSError:
            pass  # the watcher is gone: close() cleans up what carries the tag

    def close(self, wait_s: float = 30.0) -> None:
        if self._write_end < 0:
            return
        os.close(self._write_end)
        self._write_end = -1
        if self.watcher is not None:
            try:
                self.watcher.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                pass
        cleanup(self.var, self.token, self.root, self.adopted)

    def __enter__(self) -> "RunGuard":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def guarded_run(prefix: str = "gatekeeper-run-") -> Iterator[RunGuard]:
    """This process's whole run under a RunGuard: its own temp dirs (tempfile), the
    environment its workers inherit (TMPDIR, the run tag) and everything they start. Used
    by `gatekeeper check` when it runs submission code; restores both on the way out."""
    guard = RunGuard(prefix)
    saved_env = {k: os.environ.get(k) for k in guard.env()}
    saved_tempdir = tempfile.tempdir
    os.environ.update(guard.env())
    tempfile.tempdir = str(guard.root)
    try:
        yield guard
    finally:
        tempfile.tempdir = saved_tempdir
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        guard.close()


def _untagged_env() -> dict[str, str]:
    from gatekeeper.sandbox.reaper import RUN_VAR

    return {k: v for k, v in os.environ.items() if k != RUN_VAR}


def cleanup(var: str, token: str, root: Path, adopted: Optional[set[tuple[int, int]]] = None) -> None:
    """SIGKILL every process tagged with the run's token or adopted by it, and their
    descendants, until a scan finds none, then delete the run's temporary root."""
    from_reaper = _reaper()
    deadline = time.monotonic() + _REAP_LIMIT_S
    quiet = 0
    while quiet < 2 and time.monotonic() < deadline:
        killed = from_reaper.reap_adopted(adopted or set())
        killed += from_reaper.reap_tagged(token, rounds=1, var=var)
        quiet = quiet + 1 if killed == 0 else 0
        time.sleep(_SETTLE_S)
    for _ in range(20):  # a process killed a moment ago may still be closing files in it
        shutil.rmtree(root, ignore_errors=True)
        if not os.path.exists(root):
            break
        time.sleep(_SETTLE_S)


def _reaper():
    if __name__ == "__main__":  # the watcher script: the module next to this file, no package
        import reaper  # type: ignore[import-not-found]
    else:
        from gatekeeper.sandbox import reaper
    return reaper


def _watch(var: str, token: str, root: str) -> None:
    """The watcher: read adopted processes ("pid start" lines) from the run's pipe until it
    reaches end-of-file, then clean up."""
    for name in ("SIGINT", "SIGHUP", "SIGTERM", "SIGPIPE"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)  # only the end of the run stops it
    adopted: set[tuple[int, int]] = set()
    pending = b""
    while True:
        try:
            data = os.read(0, 4096)
        except InterruptedError:
            continue
        except OSError:
            break
        if not data:
            break
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            fields = line.split()
            if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
                adopted.add((int(fields[0]), int(fields[1])))
    cleanup(var, token, Path(root), adopted)


if __name__ == "__main__":
    # `python -I -B lifeline.py VAR TOKEN ROOT`: -I leaves the script's folder off sys.path,
    # and importing the gatekeeper package would cost half a second; reaper.py is stdlib-only.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    _watch(*sys.argv[1:4])
