"""End every process a job started, whatever process group or session it moved to.

With bubblewrap or unshare the worker's tree lives in its own pid namespace and dies with
the namespace's init. Without them (isolation `none`) a `setsid` double fork leaves the
worker's process group and is re-parented to init, so the parent finds the tree by a
random tag in the environment every descendant inherits (a child that execs with an
emptied environment escapes this; docs/threat-model.md says so).

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


def reap_tagged(token: str, rounds: int = 3, var: str = _VAR) -> int:
    """SIGKILL every tagged process (a few rounds: a fork may land between scans); returns how many."""
    killed = 0
    for _ in range(rounds):
        pids = tagged(token, var)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                continue
    return killed
