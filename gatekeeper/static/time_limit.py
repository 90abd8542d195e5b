"""A wall-clock limit on the static stage of one file (issue 12: static limits).

The byte, line, nesting and chain limits bound what the parser and the rules see, but a
rule can still be slow on some input (a quadratic walk over 20,000 lines). The stage is
gatekeeper's own code on the submission's text, so running past the limit is the checker
failing to decide: the file gets an error report (exit 3), never a pass and never a
reject, saying which rule was running and how to raise the limit (`[limits]
static_timeout_s`). `ingest` and `mcp` keep their own per-process backstops on top.

The limit works in any thread (the API is called from threads): one watchdog thread raises
`StaticTimeout` in the checking thread with PyThreadState_SetAsyncExc. Like a signal, it
lands between two Python bytecodes, so a single long call into native code (one libcst
parse, bounded by the input limits) finishes first.
"""

from __future__ import annotations

import ctypes
import re
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Iterator, Optional

from gatekeeper.errors import InfrastructureError

_RULE_FILE = re.compile(r"(gk\d{3})_\w+\.py$", re.IGNORECASE)
_OWN = ("gatekeeper_rules", "/rules/", "/gatekeeper/")


class StaticTimeout(BaseException):
    """Raised into the checking thread. A BaseException, so that a rule's `except
    Exception` cannot swallow it."""


def _raise_in(thread_id: int, exc: Optional[type]) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exc) if exc is not None else None)


class _Arm:
    """One armed block: the thread to interrupt and when."""

    __slots__ = ("target", "deadline", "armed", "fired")

    def __init__(self, target: int, deadline: float) -> None:
        self.target, self.deadline, self.armed, self.fired = target, deadline, True, False


class _Watchdog:
    """One daemon thread for every limit of the process. A thread (threading.Timer) per file
    cost two thread switches a file, a few percent of the stage on a busy core (issue 20
    item 8); arming here only records a deadline, and wakes the thread only when that
    deadline comes before the one it already sleeps towards."""

    IDLE_S = 1.0  # how long the thread sleeps with nothing armed

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.arms: set[_Arm] = set()
        self.wake = 0.0  # when the thread will next look, by time.monotonic()
        self.thread: Optional[threading.Thread] = None

    def arm(self, seconds: float) -> _Arm:
        arm = _Arm(threading.get_ident(), time.monotonic() + seconds)
        with self.cond:
            self.arms.add(arm)
            if self.thread is None or not self.thread.is_alive():  # first use, or after a fork
                self.thread = threading.Thread(target=self._loop, name="gatekeeper-static-time-limit", daemon=True)
                self.wake = arm.deadline
                self.thread.start()
            elif arm.deadline < self.wake:
                self.wake = arm.deadline
                self.cond.notify()
        return arm

    def disarm(self, arm: _Arm) -> None:
        with self.cond:
            arm.armed = False
            self.arms.discard(arm)
            if arm.fired:
                _raise_in(arm.target, None)  # fired after the block's last bytecode: drop the pending one

    def _loop(self) -> None:
        with self.cond:
            while True:
                now = time.monotonic()
                for arm in [a for a in self.arms if a.deadline <= now]:
                    arm.fired = True
                    self.arms.discard(arm)
                    _raise_in(arm.target, StaticTimeout)
                self.wake = min((a.deadline for a in self.arms), default=now + self.IDLE_S)
                self.cond.wait(max(self.wake - now, 0.0))


_WATCHDOG = _Watchdog()


@contextmanager
def time_limit(seconds: Optional[float]) -> Iterator[None]:
    """Raise StaticTimeout in this thread once `seconds` have passed inside the block."""
    if not seconds or seconds <= 0:
        yield
        return
    arm = _WATCHDOG.arm(seconds)
    # A limit that fires as the block ends may still land here, in this cleanup: the caller
    # (static_time_limit) catches it as a timeout, which it is (the block took the limit).
    try:
        yield
    finally:
        _WATCHDOG.disarm(arm)


def _where(tb: Optional[TracebackType]) -> str:
    """The innermost frame of gatekeeper's own code (a rule when one was running)."""
    frames = [f for f in traceback.extract_tb(tb) if any(part in f.filename.replace("\\", "/") for part in _OWN)]
    if not frames:
        return ""
    rule = next((f for f in reversed(frames) if _RULE_FILE.search(f.filename)), None)
    frame = rule or frames[-1]
    place = f"{Path(frame.filename).name}:{frame.lineno}, in {frame.name}"
    if rule is not None:
        code = _RULE_FILE.search(rule.filename).group(1).upper()  # type: ignore[union-attr]
        return f"; it was stopped in rule {code} ({place})"
    return f"; it was stopped in {place}"


@contextmanager
def static_time_limit(seconds: Optional[float], path: str) -> Iterator[None]:
    """`time_limit` for the static stage of `path`, as the InfrastructureError users read."""
    try:
        with time_limit(seconds):
            yield
    except StaticTimeout as exc:
        raise InfrastructureError(
            f"the static stage did not finish on {path} within {seconds:g} s{_where(exc.__traceback__)}. "
            "The file is within the size limits, so this is gatekeeper being slow on this input, not a "
            "finding against the submission (verdict error, exit 3). Raise `static_timeout_s` under "
            "[limits] in gatekeeper.toml if the machine is just slow, or report the file as a gatekeeper "
            "bug.") from None
