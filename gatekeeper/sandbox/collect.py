"""Collect a worker's signed frames until its `done` frame, a phase limit, the memory cap
or its end (the loop of runner.Job.wait)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from typing import Optional

from gatekeeper import progress
from gatekeeper.sandbox import harness
from gatekeeper.sandbox.channel import ChannelError, FrameReader
from gatekeeper.sandbox.process_tree import job_rss_mb, kill_job
from gatekeeper.sandbox.job_result import JobResult


def collect(proc: subprocess.Popen, fd: int, reader: FrameReader, result: JobResult,
             timeouts: dict[str, float], default_timeout_s: float, rss_cap_mb: Optional[int],
             warm_child: Optional[int] = None) -> None:
    """`warm_child`: the zygote's child whose tree holds a warm job (sandbox/warm.py); its
    memory counts with bubblewrap's."""
    deadline = time.monotonic() + timeouts.get("start", default_timeout_s)
    next_poll = 0.0
    exited: Optional[float] = None
    while True:
        now = time.monotonic()
        if now > deadline:
            result.status = "timeout"
            result.detail = f"phase '{result.phase}' ran past its {timeouts.get(result.phase, default_timeout_s):g} s limit"
            kill_job(proc)
            return
        if rss_cap_mb and now >= next_poll:
            next_poll = now + 0.25
            rss = job_rss_mb(proc.pid, warm_child)
            if rss > rss_cap_mb:
                result.status = "memory"
                result.detail = f"resident memory {rss:.0f} MiB over the {rss_cap_mb} MiB cap in phase '{result.phase}'"
                kill_job(proc)
                return
        ready, _, _ = select.select([fd], [], [], min(0.25, max(0.0, deadline - now)))
        if not ready:
            if proc.poll() is not None:
                # The worker is gone but something it started still holds the pipe open.
                exited = exited or time.monotonic()
                if time.monotonic() - exited > 1.0:
                    kill_job(proc)
                    result.status = "crashed"
                    result.detail = (f"the worker ended in phase '{result.phase}' without its signed 'done' "
                                     f"message (exit code {proc.returncode})")
                    return
            continue
        data = os.read(fd, 1 << 20)
        if not data:  # EOF: every copy of the write end is closed
            if not harness.wait(proc, 5):  # still running, or stopped: never waited on forever
                kill_job(proc)
            if result.status != "ok":
                result.status = "crashed"
                result.detail = (f"the worker ended in phase '{result.phase}' without its signed 'done' message "
                                 f"(exit code {proc.returncode})")
            return
        try:
            messages = reader.feed(data)
        except ChannelError as exc:
            result.status = "forged"
            result.detail = str(exc)
            kill_job(proc)
            return
        for message in messages:
            kind = message.get("kind")
            if kind == "phase":
                result.phase = str(message.get("phase", "?"))
                progress.phase(message)  # the terminal's status line, when `check` shows one
                deadline = time.monotonic() + timeouts.get(result.phase, default_timeout_s)
            elif kind == "done":
                result.status = "ok"
                if not harness.wait(proc, 10):
                    kill_job(proc)
                _reap_group(proc)
                return
            else:
                result.messages.append(message)


def _reap_group(proc: subprocess.Popen) -> None:
    # Anything the submission left behind in the worker's process group goes too.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
