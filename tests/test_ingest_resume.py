"""Resume after kill -9: a real `gatekeeper ingest` is SIGKILLed midway and run again.
The final store holds exactly one result per distinct input, and the second run checks
only what the first did not commit."""

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fixtures" / "ingest"))
from make_batch import write_jsonl  # noqa: E402

pytestmark = pytest.mark.slow  # ingests submissions through worker processes

COUNT = 200


def _count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT count(*) FROM results").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0


def test_kill_9_midway_then_rerun_finishes_without_duplicates(tmp_path):
    source = write_jsonl(tmp_path / "batch.jsonl", COUNT)
    db = tmp_path / "r.db"
    command = [sys.executable, "-m", "gatekeeper", "ingest", str(source), "--problems",
               str(ROOT / "fixtures" / "problems"), "--store", str(db), "--stages", "static", "--jobs", "1"]
    first = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _count(db) == 0 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert first.returncode == -signal.SIGKILL
    stored = _count(db)
    assert 0 < stored < COUNT, f"the kill must land midway (stored {stored} of {COUNT})"

    second = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    checked = int(re.search(r"(\d+) checked", second.stdout).group(1))
    assert checked == COUNT - stored, "what the first run committed must not run again"
    assert f"{stored}" in re.search(r"already stored\s+(\d+)", second.stdout).group(0)

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT count(*) FROM results").fetchone()[0] == COUNT
        assert conn.execute("SELECT count(DISTINCT code_key) FROM results").fetchone()[0] == COUNT
        assert conn.execute("SELECT count(*) FROM submissions").fetchone()[0] == COUNT
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
