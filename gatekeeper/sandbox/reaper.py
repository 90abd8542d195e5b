"""End every process a job started, whatever process group or session it moved to.

With bubblewrap or unshare the worker's tree lives in its own pid namespace and dies with
the namespace's init. Without them (isolation `none`) a `setsid` double fork leaves the
worker's process group and is re-parented to init, so the parent finds the tree by a
random tag in the environment every descendant inherits (a child that execs with an
emptied environment escapes this; docs/threat-model.md says so).
"""

from __future__ import annotations

import os
import signal

_VAR = "GATEKEEPER_JOB"


def tag(env: dict[str, str]) -> str:
    """Put a fresh tag into a worker's environment; returns it."""
    token = os.urandom(12).hex()
    env[_VAR] = token
    return token


def tagged(token: str) -> list[int]:
    """Processes whose initial environment carries the tag (Linux /proc; [] elsewhere)."""
    needle = f"{_VAR}={token}".encode()
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


def reap_tagged(token: str, rounds: int = 3) -> int:
    """SIGKILL every tagged process (a few rounds: a fork may land between scans); returns how many."""
    killed = 0
    for _ in range(rounds):
        pids = tagged(token)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                continue
    return killed
