"""Processes of gatekeeper's own that must not outlive the process that started them
(ingest workers, `check --jobs` pool workers): Linux PR_SET_PDEATHSIG."""

from __future__ import annotations

import os
import signal
from typing import Optional

PARENT_VAR = "GATEKEEPER_PARENT_PID"


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
