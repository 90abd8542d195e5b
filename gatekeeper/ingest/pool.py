"""A pool of worker processes with one task in flight per worker.

One task per worker means a crash or a hang is pinned on exactly one submission: that
worker is killed (on a hang) or found dead (on a crash), an outcome is recorded for its
task, a fresh worker takes its place, and the batch goes on. Each task has its own
wall-clock deadline. Workers run in their own session, so a Ctrl-C at the terminal stops
only the parent, which then ends the workers it started.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

from gatekeeper.errors import InfrastructureError

_MAX_START_FAILURES = 3
_START_TIMEOUT_S = 120.0  # a worker that has not finished its imports by then is stuck


@dataclass
class Task:
    i: int
    code: str
    problem: str


@dataclass
class Outcome:
    i: int
    report: Optional[dict] = None  # the Report as JSON data, when the check finished
    error: Optional[str] = None  # why there is no report: crash, timeout, internal error
    duration_s: float = 0.0


@dataclass
class _Worker:
    serial: int
    process: subprocess.Popen
    log: Any
    env_slot: int
    task: Optional[Task] = None
    started: float = 0.0
    served: int = 0
    ready: bool = False  # set by the worker's first line, once its imports are done
    reader: Optional[threading.Thread] = field(default=None, repr=False)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _stopped(pid: int) -> bool:
    """The process is stopped (SIGSTOP, SIGTSTP) or traced (Linux /proc; False elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def _who_signals() -> str:
    """Who can signal a checker: anything of the same user outside a pid namespace."""
    from gatekeeper.sandbox.isolation import detect

    level = detect().name
    if level == "bwrap" or level == "unshare":
        return (f"Under isolation '{level}' submission code cannot signal it: look for another process of "
                "this user, or the out-of-memory killer (the system log says).")
    return (f"Under isolation '{level}' the submission's code can signal the process checking it "
            "(os.kill(os.getppid(), ...)), which is the likely cause; install bubblewrap so that it cannot "
            "(docs/threat-model.md). The verdict is error, not a pass.")


def _signalled(code: int) -> str:
    return f". {_who_signals()}" if code in (-signal.SIGKILL, -signal.SIGSTOP, -signal.SIGTERM) else ""


class WorkerPool:
    def __init__(self, setup: dict, envs: list[dict[str, str]], timeout_s: float):
        self.setup = setup
        self.envs = envs
        self.timeout_s = timeout_s
        self._inbox: "queue.Queue[tuple[int, Optional[str]]]" = queue.Queue()
        self._serials = itertools.count(1)
        self._workers: dict[int, _Worker] = {}
        self._start_failures = 0
        self.pids: list[int] = []  # every worker ever started, for tests and diagnostics

    def _start(self, slot: int) -> _Worker:
        env = {**os.environ, **self.envs[slot], "GATEKEEPER_PARENT_PID": str(os.getpid())}
        log = tempfile.TemporaryFile()
        process = subprocess.Popen(
            [sys.executable, "-m", "gatekeeper.ingest.worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True,
            text=True, encoding="utf-8", bufsize=1)
        worker = _Worker(serial=next(self._serials), process=process, log=log, env_slot=slot,
                         started=time.monotonic())
        process.stdin.write(json.dumps(self.setup) + "\n")
        process.stdin.flush()
        worker.reader = threading.Thread(target=self._read, args=(worker.serial, process.stdout), daemon=True)
        worker.reader.start()
        self._workers[worker.serial] = worker
        self.pids.append(process.pid)
        return worker

    def _read(self, serial: int, stream) -> None:
        for line in stream:
            self._inbox.put((serial, line))
        self._inbox.put((serial, None))

    def _stderr_tail(self, worker: _Worker) -> str:
        try:
            worker.log.seek(0, os.SEEK_END)
            size = worker.log.tell()
            worker.log.seek(max(0, size - 600))
            text = worker.log.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""
        lines = [l for l in text.splitlines() if l.strip()][-3:]
        return " | ".join(lines)

    def _retire(self, worker: _Worker, kill: bool) -> None:
        self._workers.pop(worker.serial, None)
        if kill and worker.process.poll() is None:
            try:
                os.killpg(worker.process.pid, signal.SIGKILL)  # its own session: takes its children too
            except OSError:
                worker.process.kill()
        try:
            worker.process.stdin.close()
        except OSError:
            pass
        try:
            worker.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.process.kill()
        worker.log.close()

    def _send(self, worker: _Worker, task: Task) -> bool:
        worker.task, worker.started = task, time.monotonic()
        try:
            worker.process.stdin.write(json.dumps({"i": task.i, "code": task.code, "problem": task.problem}) + "\n")
            worker.process.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False  # it died already; its EOF arrives through the reader

    def run(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        pending = iter(tasks)
        exhausted = False
        try:
            for slot in range(len(self.envs)):
                self._start(slot)
            while True:
                for worker in list(self._workers.values()):
                    if worker.ready and worker.task is None and not exhausted:
                        task = next(pending, None)
                        if task is None:
                            exhausted = True
                        else:
                            self._send(worker, task)
                busy = [w for w in self._workers.values() if w.task is not None]
                if exhausted and not busy:
                    return
                deadlines = [w.started + self.timeout_s for w in busy]
                deadlines += [w.started + _START_TIMEOUT_S for w in self._workers.values() if not w.ready]
                wait = min(deadlines) - time.monotonic() if deadlines else 1.0
                try:
                    serial, line = self._inbox.get(timeout=max(0.0, wait))
                except queue.Empty:
                    yield from self._expire()
                    continue
                worker = self._workers.get(serial)
                if worker is None:
                    continue  # a message from a worker already retired
                if line is None:
                    outcome = self._died(worker)
                    if outcome is not None:
                        yield outcome
                    continue
                if not worker.ready:
                    worker.ready = True
                    self._start_failures = 0
                    continue
                outcome = self._received(worker, line)
                if outcome is not None:
                    yield outcome
        finally:
            for worker in list(self._workers.values()):
                self._retire(worker, kill=True)

    def _received(self, worker: _Worker, line: str) -> Optional[Outcome]:
        task, worker.task = worker.task, None
        if task is None:
            return None
        worker.served += 1
        duration = time.monotonic() - worker.started
        try:
            message = json.loads(line)
        except ValueError:
            return Outcome(task.i, error="the worker sent an unreadable reply", duration_s=duration)
        if message.get("i") != task.i:
            return Outcome(task.i, error="the worker replied for another task", duration_s=duration)
        return Outcome(task.i, report=message.get("report"), error=message.get("error"), duration_s=duration)

    def _died(self, worker: _Worker) -> Optional[Outcome]:
        task = worker.task
        worker.process.wait()
        code = worker.process.returncode
        how = f"was killed by {_signal_name(code)}" if code < 0 else f"exited with status {code}"
        tail = self._stderr_tail(worker)
        self._retire(worker, kill=False)
        if not worker.ready:
            self._start_failures += 1
            if self._start_failures > _MAX_START_FAILURES:
                raise InfrastructureError(f"ingest workers die as they start ({how}): {tail or 'no output'}")
        self._start(worker.env_slot)
        if task is None:
            return None
        detail = f"; its last output: {tail}" if tail else ""
        return Outcome(task.i, error=f"the worker process checking this submission {how}{_signalled(code)}{detail}",
                       duration_s=time.monotonic() - worker.started)

    def _expire(self) -> Iterator[Outcome]:
        now = time.monotonic()
        for worker in list(self._workers.values()):
            if not worker.ready and now - worker.started >= _START_TIMEOUT_S:
                tail = self._stderr_tail(worker)
                self._retire(worker, kill=True)
                self._start_failures += 1
                if self._start_failures > _MAX_START_FAILURES:
                    raise InfrastructureError(f"ingest workers do not start within {_START_TIMEOUT_S:g} s: "
                                              f"{tail or 'no output'}")
                self._start(worker.env_slot)
                continue
            if worker.task is not None and now - worker.started >= self.timeout_s:
                task = worker.task
                frozen = _stopped(worker.process.pid)
                self._retire(worker, kill=True)
                self._start(worker.env_slot)
                if frozen:
                    error = (f"the worker checking this submission was frozen (stopped by a signal) and did not "
                             f"finish within {self.timeout_s:g} s; the worker was killed. "
                             f"{_who_signals()}")
                else:
                    error = (f"the check did not finish within {self.timeout_s:g} s; the worker was killed "
                             "(raise --timeout if the stages need longer)")
                yield Outcome(task.i, error=error, duration_s=now - worker.started)
