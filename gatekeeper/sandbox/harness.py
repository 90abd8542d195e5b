"""What happened to a worker's harness (the process gatekeeper started for it).

Under isolation `none` that process is sandbox/shim.py, the worker's parent; a submission
can signal it (`os.kill(os.getppid(), SIGKILL)` or `SIGSTOP`, issue 12 row 2). The shim
never dies of a signal on its own (it forwards a worker's death as exit code 128+N) and
is never stopped by gatekeeper, so:
- a negative return code that the parent's own kill did not cause means someone killed it;
- a stopped shim (state T in /proc) means someone stopped it.
Either is reported as the submission's run-time failure, never a pass, never exit 3.

`before_kill` is called by `runner.kill_job` just before it SIGKILLs a harness, to record
whether it was still running (our kill) or stopped (theirs); `fate` reads the record.
"""

from __future__ import annotations

import signal
import subprocess
import time
import weakref

_POLL_S = 0.02
# Popen -> "killed" (the parent killed it while it ran) or "stopped" (it was frozen then).
_MARKS: "weakref.WeakKeyDictionary[subprocess.Popen, str]" = weakref.WeakKeyDictionary()


def is_stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal or a tracer (Linux /proc; False elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return False
    return bool(fields) and fields[0] in (b"T", b"t")


def before_kill(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return  # it ended on its own: its return code says how
    _MARKS.setdefault(proc, "stopped" if is_stopped(proc.pid) else "killed")


def wait(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Wait up to timeout_s for the harness to exit; return early (False) when it is stopped,
    since a stopped process never exits by itself. True when it exited."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        if is_stopped(proc.pid) or time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


def fate(proc: subprocess.Popen) -> str:
    """How the harness ended, when the submission is the likely cause; "" otherwise."""
    mark = _MARKS.get(proc)
    if mark == "stopped":
        return "was stopped by a signal (SIGSTOP or another stop signal), so gatekeeper killed it"
    code = proc.returncode
    if mark is None and code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}, which gatekeeper did not send"
    return ""


def blame(proc: subprocess.Popen) -> str:
    """The finding's detail for a harness the submission killed or stopped; "" when it was not."""
    why = fate(proc)
    if not why:
        return ""
    return (f"its harness (the process that started the worker, pid {proc.pid}) {why}: under isolation 'none' "
            f"a submission can signal its parent (os.kill(os.getppid(), ...)), so this run's results do not count; "
            f"do not signal other processes (with bubblewrap, apt-get install bubblewrap, the worker cannot reach them)")
