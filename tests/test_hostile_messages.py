"""Issue 12, misleading messages: what a user reads when a path they named cannot be used
says what is there (a symbolic link loop, a dangling link), not "not found"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.path_errors import not_found, why_missing

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "fixtures" / "problems" / "cpu_mean.py"
HOSTILE_DIR = ROOT / "fixtures" / "hostile"
HONEST = HOSTILE_DIR / "honest_python.py"


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


_PROBLEM_TAIL = '''
class Model(nn.Module):
    def forward(self, x):
        {forward}


def get_inputs():
    return [torch.randn(4, 16, 48)]


def get_init_inputs():
    return []
'''


@pytest.mark.slow  # runs the behaviour stage's sandboxed workers
@pytest.mark.parametrize("at_import", [True, False], ids=["raises-at-import", "forward-raises"])
def test_a_broken_problem_is_named_for_what_fails(tmp_path, at_import):
    head = "import torch\nimport torch.nn as nn\n" + ("raise RuntimeError('broken problem')\n" if at_import else "")
    forward = "return x.mean(0)" if at_import else "raise RuntimeError('broken forward')"
    problem = tmp_path / "problem.py"
    problem.write_text(head + _PROBLEM_TAIL.replace("{forward}", forward))
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "gatekeeper.toml").write_text((ROOT / "fixtures" / "hostile" / "gatekeeper.toml").read_text())
    sub = folder / "sub.py"
    sub.write_text(HONEST.read_text())
    done = subprocess.run([sys.executable, "-m", "gatekeeper", "check", str(sub), "-p", str(problem), "-f", "json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
    error = json.loads(done.stdout)["error"]
    if at_import:
        assert f"the problem file {problem} raises at import (line 3): RuntimeError: broken problem" in error
        assert "nominal inputs" not in error
    else:
        assert "the reference fails on its own nominal inputs: RuntimeError: broken forward" in error


@pytest.mark.slow  # runs ingest with sandboxed workers
def test_ingest_under_none_rejects_a_submission_that_signals_its_parent(tmp_path):
    """Row 2 without isolation: a submission kills or freezes the process that started its
    worker. Under `none` that is the worker's harness (sandbox/shim.py), not the ingest worker:
    the stored verdict is the submission's own reject, and the finding says what happened
    and how to prevent it (docs/threat-model.md)."""
    import sqlite3

    problems = tmp_path / "problems"
    problems.mkdir()
    for name in ("cpu_mean.py", "cpu_mean.toml"):
        (problems / name).write_text((ROOT / "fixtures" / "problems" / name).read_text())
    source = tmp_path / "subs.jsonl"
    source.write_text("".join(json.dumps({"id": f, "problem": "cpu_mean", "code": (HOSTILE_DIR / f).read_text()}) + "\n"
                              for f in ("kill_parent.py", "stop_parent.py")))
    store = tmp_path / "r.db"
    done = subprocess.run([sys.executable, "-m", "gatekeeper", "ingest", str(source), "--problems", str(problems),
                           "--store", str(store), "--config", str(HOSTILE_DIR / "gatekeeper.toml"), "--jobs", "2",
                           "--timeout", "30"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "GATEKEEPER_ISOLATION": "none"})
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {sid: (verdict, json.loads(report)) for sid, verdict, report in sqlite3.connect(store).execute(
        "select source_id, verdict, report_json from results")}
    for fixture, what in (("kill_parent.py", "was killed by SIGKILL"), ("stop_parent.py", "was stopped by a signal")):
        verdict, report = rows[fixture]
        # A signal sent through Python is refused and reported as the attempt it is (GK665,
        # issue 22 item 6); one that gets through (native code) hits the harness (GK662).
        refused = [f["message"] for f in report["findings"] if f["rule"] == "GK665" and "os.kill" in f["message"]]
        if refused:
            assert verdict == "reject", (fixture, verdict, report["findings"])
            continue
        messages = [f["message"] for f in report["findings"] if f["rule"] == "GK662"]
        assert verdict == "reject" and messages, (fixture, verdict, report["findings"])
        assert what in messages[0] and "its harness" in messages[0] and "bubblewrap" in messages[0], messages
