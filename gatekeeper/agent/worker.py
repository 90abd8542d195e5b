"""A long-lived checker process, so nothing a submission does can take the server down.

libcst's native parser overflows its stack, and the process dies by a signal, on a few
thousand levels of nesting (`x = ----…1`, `1+1+…`, deep parentheses): no Python exception
to catch. So the server never parses submissions itself: it hands each call to a worker
process (spawned once, kept warm, restarted after a crash or a timeout) and reports a
dead worker as a tool error instead of dying with it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from multiprocessing.connection import Connection
from typing import Any, Optional

from gatekeeper.errors import GatekeeperError, InfrastructureError, UsageError

_FUNCTIONS = ("static_check", "compile_submission", "run_correctness", "submit")


class WorkerCrashed(InfrastructureError):
    """The worker died or hung on one call; it is replaced before the next."""


def _serve(conn: Connection) -> None:
    """The worker's loop: (function, kwargs) in, ("ok", report JSON) or an error out."""
    # Whatever the stages print goes to stderr: the server's stdout may be the protocol.
    os.dup2(2, 1)
    from gatekeeper.agent import tools

    while True:
        try:
            name, kwargs = conn.recv()
        except (EOFError, OSError):  # the server went away: so do we
            return
        try:
            report = getattr(tools, name)(**kwargs)
            reply: tuple = ("ok", report.model_dump_json())
        except GatekeeperError as exc:
            reply = ("usage" if exc.exit_code == 2 else "gatekeeper", str(exc))
        except Exception as exc:  # noqa: BLE001 - reported to the caller as an internal error
            reply = ("internal", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except (OSError, BrokenPipeError):  # the server went away mid-call
            return


def _describe_exit(code: Optional[int]) -> str:
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _likely_cause(code: Optional[int]) -> str:
    """Why a checker process died, as far as its exit says: a SIGKILL comes from outside
    (the out-of-memory killer, a user, a supervisor), not from the code being checked."""
    if code == -signal.SIGKILL:
        return (" (SIGKILL comes from outside the checker: usually the out-of-memory killer or another "
                "process; see the system log)")
    if code in (-signal.SIGSEGV, -signal.SIGBUS, -signal.SIGABRT):
        return (" (a native crash; parser bombs are screened, so report this code to gatekeeper's "
                "maintainers)")
    return " (its error is on the server's stderr)"


class Worker:
    """One child process serving one call at a time. Thread-safe: callers queue on a lock."""

    def __init__(self, name: str, timeout_s: Optional[float]) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._process: Optional[multiprocessing.process.BaseProcess] = None
        self._conn: Optional[Connection] = None
        # Held while a child is being spawned: a kill then would leave the child reading
        # its start-up data from a closed pipe, and it prints a traceback on our stderr.
        self._starting = threading.Lock()

    def _start(self) -> None:
        # spawn, not fork: the server has threads, and a forked copy of them is unsafe.
        # Not a daemon: the build and behaviour stages start processes of their own.
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_serve, args=(child,), name=f"gatekeeper-{self.name}", daemon=False)
        with self._starting:
            process.start()
            self._process, self._conn = process, parent
        child.close()

    def _stop(self) -> None:
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if conn is not None:
            conn.close()
        if process is not None and process.is_alive():
            process.kill()
        if process is not None:
            process.join(5)

    def warm(self) -> None:
        """Start the process ahead of the first call (imports take most of a second)."""
        with self._lock:
            if self._process is None:
                self._start()

    def call(self, function: str, **kwargs: Any) -> str:
        """Run `gatekeeper.agent.tools.<function>(**kwargs)` in the worker; the Report JSON."""
        if function not in _FUNCTIONS:
            raise ValueError(function)
        with self._lock:
            if self._process is None or not self._process.is_alive():
                self._stop()
                self._start()
            assert self._conn is not None and self._process is not None
            try:
                self._conn.send((function, kwargs))
                ready = self._conn.poll(self.timeout_s)
                reply = self._conn.recv() if ready else None
            except (EOFError, OSError, BrokenPipeError):
                ready, reply = True, None
            if reply is None:
                process = self._process
                if not ready:
                    self._stop()
                    raise WorkerCrashed(
                        f"the check did not finish within {self.timeout_s:.0f} s and was stopped; "
                        "the checker is restarted for the next call")
                process.join(5)
                code = process.exitcode
                self._stop()
                why = _likely_cause(code)
                raise WorkerCrashed(f"the checker process {_describe_exit(code)} while checking this code{why}; "
                                    "it is restarted for the next call")
        kind, payload = reply
        if kind == "ok":
            return payload
        if kind == "usage":
            raise UsageError(payload)
        if kind == "gatekeeper":
            raise InfrastructureError(payload)
        raise RuntimeError(payload)

    def close(self) -> None:
        with self._lock:
            self._stop()

    def kill_now(self) -> None:
        """For a signal handler: end the process without waiting for a call in flight
        (but after a spawn in progress, which takes well under a second)."""
        acquired = self._starting.acquire(timeout=5)
        process = self._process
        if acquired:
            self._starting.release()
        if process is not None and process.is_alive():
            process.kill()
