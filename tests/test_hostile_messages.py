"""Issue 12, misleading messages: what a user reads when a path they named cannot be used
says what is there (a symbolic link loop, a dangling link), not "not found"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.path_errors import not_found, why_missing

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "fixtures" / "problems" / "cpu_mean.py"
HONEST = ROOT / "fixtures" / "hostile" / "honest_python.py"


@pytest.fixture
def links(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink("b.py", "a.py")
    os.symlink("a.py", "b.py")
    os.symlink("gone.py", "dangling.py")
    return tmp_path


def test_reasons(links):
    assert why_missing("a.py") == "it is a symbolic link loop (a.py -> b.py -> a.py); point the link at a real file"
    assert "symbolic link to gone.py, which does not exist" in why_missing("dangling.py")
    assert not_found("nothing.py", "problem file") == "problem file not found: nothing.py"
    os.mkdir("folder")
    assert "it is a folder, not a file" in not_found("folder", "submission")


def _gatekeeper(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "gatekeeper", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    return " ".join(done.stderr.split())


@pytest.mark.slow  # runs gatekeeper in subprocesses
def test_check_and_ingest_name_a_symlink_loop(links):
    assert "cannot read the submission a.py: it is a symbolic link loop (a.py -> b.py -> a.py)" in \
        _gatekeeper("check", "a.py", "-p", str(PROBLEM))
    assert "cannot read the problem file a.py: it is a symbolic link loop" in \
        _gatekeeper("check", str(HONEST), "-p", "a.py", "--static-only")
    assert "symbolic link to gone.py, which does not exist" in \
        _gatekeeper("check", str(HONEST), "-p", "dangling.py", "--static-only")
    assert "cannot read the ingest source a.py: it is a symbolic link loop" in \
        _gatekeeper("ingest", "a.py", "--problems", str(PROBLEM.parent), "--store", "r.db")


def test_the_mcp_crash_hint_does_not_blame_nesting_for_a_sigkill():
    import signal

    from gatekeeper.agent.worker import _likely_cause

    killed = _likely_cause(-signal.SIGKILL)
    assert "nesting" not in killed and "out-of-memory" in killed
    assert "native crash" in _likely_cause(-signal.SIGSEGV)
    assert "stderr" in _likely_cause(1)
