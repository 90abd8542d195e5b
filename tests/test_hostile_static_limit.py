"""The static stage's time limit (issue 12, "a time limit on the static stage"): a file whose
static stage runs past `[limits] static_timeout_s` gets an error report (exit 3) that says
what, where and how to fix it; never a traceback, never a pass, never a reject."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gatekeeper.static.time_limit import StaticTimeout, time_limit

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "fixtures" / "problems" / "cpu_mean.py"
HONEST = ROOT / "fixtures" / "hostile" / "honest_python.py"


def _spin() -> None:
    while True:
        pass


def test_the_limit_stops_python_code_in_any_thread():
    caught: list[BaseException] = []

    def body() -> None:
        try:
            with time_limit(0.05):
                _spin()
        except StaticTimeout as exc:
            caught.append(exc)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(30)
    assert not worker.is_alive() and len(caught) == 1


def test_a_block_that_ends_in_time_is_never_interrupted_afterwards():
    # A limit far above what `pass` takes, then a wait past it: a timer that was not
    # cancelled would raise during the sleep.
    with time_limit(1.0):
        pass
    time.sleep(1.5)
    with time_limit(None):
        time.sleep(0.02)


def _run(tmp_path: Path, limit: float, *args: str) -> subprocess.CompletedProcess:
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "gatekeeper.toml").write_text(f"[limits]\nstatic_timeout_s = {limit}\n")
    path = folder / "sub.py"
    path.write_text(HONEST.read_text())
    return subprocess.run([sys.executable, "-m", "gatekeeper", "check", str(path), "-p", str(PROBLEM),
                           "--static-only", *args], capture_output=True, text=True, timeout=300, cwd=folder)


@pytest.mark.slow  # runs gatekeeper in a subprocess
@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]], ids=["in-process", "pool"])
def test_check_past_the_static_limit_is_an_error_report_with_exit_3(tmp_path, jobs):
    # 1 ms: rule discovery alone takes longer, so the limit always fires inside the stage.
    done = _run(tmp_path, 0.001, "-f", "json", *jobs)
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr + done.stdout
    report = json.loads(done.stdout)
    report = report[0] if isinstance(report, list) else report
    assert report["verdict"] == "error" and not report["findings"], report
    assert "static stage did not finish" in report["error"] and "within 0.001 s" in report["error"]
    assert "static_timeout_s" in report["error"] and "sub.py" in report["error"]


@pytest.mark.slow  # runs gatekeeper in a subprocess
def test_text_output_says_what_where_and_how(tmp_path):
    done = _run(tmp_path, 0.001)
    assert done.returncode == 3
    text = " ".join((done.stdout + done.stderr).split())
    assert "did not finish" in text and "static_timeout_s" in text and "Traceback" not in text


@pytest.mark.slow  # runs gatekeeper in a subprocess
def test_within_the_limit_the_stage_decides(tmp_path):
    done = _run(tmp_path, 60, "-f", "json")
    assert done.returncode in (0, 1), done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["verdict"] in ("pass", "reject") and report["error"] is None
    assert [s["status"] for s in report["stages"] if s["name"] == "static"] in (["passed"], ["failed"])
