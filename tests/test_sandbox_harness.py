"""The harness between gatekeeper and a worker under isolation `none` (sandbox/shim.py) and
the run watcher's adopted processes (lifeline.RunGuard.adopt): real workers, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gatekeeper.sandbox import run_job
from gatekeeper.sandbox.lifeline import RunGuard
from gatekeeper.sandbox.reaper import start_time

pytestmark = pytest.mark.slow  # starts sandboxed worker processes

TIMEOUTS = {"import": 20, "call": 20}


def _none(monkeypatch) -> None:
    monkeypatch.setenv("GATEKEEPER_ISOLATION", "none")


def _code(code: str):
    return run_job("gatekeeper.sandbox.selftest:run_code", {"code": code}, timeouts=TIMEOUTS, default_timeout_s=30)


def test_the_worker_parent_is_the_harness_not_this_process(monkeypatch):
    _none(monkeypatch)
    result = _code("import os\nresult = [os.getppid(), open(f'/proc/{os.getppid()}/cmdline', 'rb').read()]")
    assert result.status == "ok", result
    parent, cmdline = result.first("result")["value"]
    assert parent != os.getpid()
    assert b"shim.py" in cmdline


@pytest.mark.parametrize("sig, what", [(signal.SIGKILL, "was killed by SIGKILL"),
                                       (signal.SIGTERM, "was killed by SIGTERM"),
                                       (signal.SIGSTOP, "was stopped by a signal")])
def test_a_signalled_harness_is_the_submissions_failure_and_this_process_lives(monkeypatch, sig, what):
    _none(monkeypatch)
    started = time.monotonic()
    # Sent from outside Python (a shell's kill, as native code would): os.kill itself is refused
    # and reported by the audit guard (issue 22 item 6), so it would never reach the harness.
    result = _code(f"import os\nos.system('kill -{int(sig)} ' + str(os.getppid()))\nresult = 1")
    assert result.status == "crashed", result
    assert "its harness" in result.detail and what in result.detail, result.detail
    assert time.monotonic() - started < 15  # a stopped harness is not waited on to a limit


def test_a_worker_that_kills_itself_is_not_blamed_on_the_harness(monkeypatch):
    _none(monkeypatch)
    result = _code("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert result.status == "crashed", result
    assert "harness" not in result.detail, result.detail


def test_an_honest_job_through_the_harness_is_ok(monkeypatch):
    _none(monkeypatch)
    result = _code("result = sum(range(10))")
    assert result.status == "ok" and result.first("result")["value"] == 45, result


def test_the_watcher_kills_adopted_processes_that_carry_no_tag():
    # A process that shows no run tag (an emptied environment, as Ray's agents show),
    # adopted by pid and start time: gone when the run ends.
    untagged = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env={},
                                start_new_session=True)
    guard = RunGuard(prefix="gatekeeper-test-adopt-")
    try:
        guard.adopt([untagged.pid])
        assert (untagged.pid, start_time(untagged.pid)) in guard.adopted
        guard.close()
        assert untagged.wait(timeout=10) == -signal.SIGKILL
        assert not guard.root.exists()
    finally:
        if untagged.poll() is None:
            untagged.kill()
            untagged.wait()


def test_an_adopted_pid_whose_process_ended_is_not_killed():
    # Named by start time too: the watcher never kills a process that merely reuses the pid.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    pid, start = gone.pid, start_time(gone.pid)
    gone.wait()
    from gatekeeper.sandbox.reaper import still_running

    assert start_time(pid) == -1 or start_time(pid) != start
    assert still_running({(pid, start)}) == []
