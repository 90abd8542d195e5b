"""A worker's process tree from the parent's side: its resident memory, and killing it."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Optional

from gatekeeper.sandbox import harness


def rss_mb(pid: int) -> float:
    """Resident memory of pid and its descendants, in MiB (Linux /proc; 0 elsewhere)."""
    total = 0.0
    todo = [pid]
    seen: set[int] = set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            with open(f"/proc/{current}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024
                        break
        except (OSError, ValueError):
            continue
        todo.extend(_children(current))
    return total


def job_rss_mb(pid: int, warm_child: Optional[int] = None) -> float:
    """A job's resident memory: its wrapper's tree and, for a warm job (sandbox/warm.py), the
    tree below the zygote's child (not the child itself, which holds only the shared copy of
    the zygote's pages)."""
    total = rss_mb(pid)
    if warm_child:
        for child in _children(warm_child):
            total += rss_mb(child)
    return total


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(c) for c in handle.read().split())
    except (OSError, ValueError):
        pass
    return found


def kill_job(proc: subprocess.Popen) -> None:
    # Under bwrap/unshare the worker's whole tree is in its own pid namespace and dies with
    # its init (the wrapper); without them the process group goes here and the rest of the
    # tree (setsid, double forks) by its environment tag in `Job._reap`.
    harness.before_kill(proc)  # was it still running (our kill) or frozen (the submission's doing)?
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
