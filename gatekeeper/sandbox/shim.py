"""The harness between gatekeeper and a worker under isolation `none`:
`python -I -B -S .../sandbox/shim.py <parent pid> -- <worker argv...>`.

Without a pid namespace a worker's `os.getppid()` would be gatekeeper itself, and
`os.kill(os.getppid(), SIGKILL)` (issue 12, row 2) would end the checker with no report.
With this shim in between, the worker's parent is the shim: a process that only starts
the worker, waits for it and exits with its status, holding none of the job's pipes. A
submission that kills or stops its parent hits the shim; the parent (runner.py) sees
the shim die of a signal it did not send, or sit stopped, and reports that as the
submission's own run-time failure. The worker dies with the shim (its PR_SET_PDEATHSIG
names the shim) and the shim dies with the thread that started it.

Stdlib only, no site (-S): the shim costs a bare interpreter start (about 20 ms).
This does not stop a submission that finds gatekeeper another way (its pid in /proc,
`kill(-1)`): only a pid namespace (bwrap, unshare) does (docs/threat-model.md).
"""

from __future__ import annotations

import os
import signal
import sys

# A worker that died of signal N: the shim exits 128+N, so that only the shim's own death
# by a signal shows as a negative return code in the parent.
_SIGNAL_BASE = 128


def _die_with_parent(parent: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent ended before the call above
        os._exit(1)


def _release_job_files() -> None:
    """Hold none of the job's pipes: their end-of-file must mean the worker closed them."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:  # the open ones only: closing every possible number costs more than the rest of the shim
        numbers = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        numbers = list(range(3, 1 << 16))
    for fd in numbers:
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass


def main(args: list[str]) -> None:
    if len(args) < 3 or args[1] != "--":
        sys.stderr.write("usage: shim.py <parent pid> -- <argv...>\n")
        os._exit(2)
    _die_with_parent(int(args[0]))
    argv = args[2:]
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _release_job_files()
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(1)
        if os.WIFEXITED(status):
            os._exit(os.WEXITSTATUS(status))
        if os.WIFSIGNALED(status):
            os._exit(_SIGNAL_BASE + os.WTERMSIG(status))


if __name__ == "__main__":
    main(sys.argv[1:])
