"""End every process a job started, whatever process group or session it moved to.

With bubblewrap or unshare the worker's tree lives in its own pid namespace and dies with
the namespace's init. Without them (isolation `none`) a `setsid` double fork leaves the
worker's process group and is re-parented to init, so the parent finds the tree by a
random tag in the environment every descendant inherits (a child that execs with an
emptied environment escapes this unless its parent still runs; docs/threat-model.md says so).
The descendants of every tagged process go too, whatever their environment. Processes
that carry no tag (Ray's agents rewrite their title, and with it what /proc shows of their
environment) can be adopted by pid and start time (`RunGuard.adopt`).

A long-lived gatekeeper process (`ingest`) also puts a run tag (RUN_VAR) into the
environment of everything it starts; `tag` copies it into each worker's scrubbed
environment, so the run's watcher (gatekeeper/sandbox/lifeline.py) can end the whole run's
trees when that process is killed with SIGKILL.
"""

from __future__ import annotations

import os
import signal

_VAR = "GATEKEEPER_JOB"
RUN_VAR = "GATEKEEPER_RUN"


def tag(env: dict[str, str]) -> str:
    """Put a fresh job tag into a worker's environment, and the run's tag when this process
    has one; returns the job tag."""
    token = os.urandom(12).hex()
    env[_VAR] = token
    if os.environ.get(RUN_VAR):
        env[RUN_VAR] = os.environ[RUN_VAR]
    return token


def tagged(token: str, var: str = _VAR) -> list[int]:
    """Processes whose initial environment carries the tag (Linux /proc; [] elsewhere)."""
    needle = f"{var}={token}".encode()
    own = os.getpid()
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def start_time(pid: int) -> int:
    """The process's start time in clock ticks since boot (with the pid, it names one process
    even after the pid is reused); -1 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return -1


def still_running(adopted: set[tuple[int, int]]) -> list[int]:
    """Of (pid, start time) pairs, the pids that still name the same live process."""
    return [pid for pid, start in adopted if start >= 0 and start_time(pid) == start]


def reap_adopted(adopted: set[tuple[int, int]]) -> int:
    """SIGKILL processes adopted by pid and start time, and their descendants."""
    return _kill_all(with_descendants(still_running(adopted)))


def _kill_all(pids: list[int]) -> int:
    """SIGKILL each pid; how many signals landed (a gone or foreign process is skipped)."""
    killed = 0
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except (ProcessLookupError, PermissionError):
            continue
    return killed


def with_descendants(pids: list[int]) -> list[int]:
    """pids and every live descendant of theirs, from one scan of /proc (parents first is not
    needed: the caller SIGKILLs all of them before any is re-parented and lost)."""
    if not pids:
        return pids
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return pids
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    own = os.getpid()
    found: list[int] = []
    seen: set[int] = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        if pid != own:  # never the caller itself; its children, when asked, yes
            found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def reap_tagged(token: str, rounds: int = 3, var: str = _VAR) -> int:
    """SIGKILL every tagged process and its descendants (a few rounds: a fork may land
    between scans); returns how many."""
    killed = 0
    for _ in range(rounds):
        pids = with_descendants(tagged(token, var))
        if not pids:
            break
        killed += _kill_all(pids)
    return killed
