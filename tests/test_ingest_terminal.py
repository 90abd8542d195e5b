"""What a person at a terminal sees: the progress bar on a TTY, none in a pipe, and a clean
stop on Ctrl-C that keeps what finished."""

import os
import pty
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

pytestmark = pytest.mark.slow  # drives ingest on a pseudo-terminal


def _command(source, db, jobs=1):
    return [sys.executable, "-m", "gatekeeper", "ingest", str(source), "--problems", str(ROOT / "fixtures" / "problems"),
            "--store", str(db), "--stages", "static", "--jobs", str(jobs)]


def test_progress_bar_on_a_terminal_only(tmp_path):
    source = write_jsonl(tmp_path / "b.jsonl", 12)
    primary, secondary = pty.openpty()
    env = {**os.environ, "COLUMNS": "160", "TERM": "xterm"}
    process = subprocess.Popen(_command(source, tmp_path / "tty.db"), cwd=ROOT, stdin=secondary, stdout=secondary,
                               stderr=secondary, env=env)
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    process.wait(timeout=120)
    os.close(primary)
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))
    assert process.returncode == 0, screen
    assert re.search(r"checking .*12/12 failed 0 rejected 3 .*/s", screen), screen
    piped = subprocess.run(_command(source, tmp_path / "pipe.db"), cwd=ROOT, capture_output=True, text=True)
    assert piped.returncode == 0 and "checking" not in piped.stderr and "━" not in piped.stderr


HANG_AFTER = 3  # each worker checks this many submissions, then hangs (fixtures/ingest/hang_after)


def test_ctrl_c_stops_cleanly_and_keeps_finished_results(tmp_path):
    source = write_jsonl(tmp_path / "b.jsonl", 150)
    db = tmp_path / "r.db"
    marks = tmp_path / "hung"
    marks.mkdir()
    # Workers that hang after HANG_AFTER checks: the ingest cannot finish before the
    # Ctrl-C, and the test waits for the hang itself, not for some time to pass.
    env = {**os.environ, "PYTHONPATH": str(ROOT / "fixtures" / "ingest" / "hang_after"),
           "GATEKEEPER_TEST_HANG_AFTER": str(HANG_AFTER), "GATEKEEPER_TEST_HANG_MARKS": str(marks)}
    # As from a terminal: SIGINT at its default. A pytest-xdist worker ignores SIGINT, and an
    # ignored signal stays ignored across exec, so Python would install no Ctrl-C handler.
    process = subprocess.Popen([*_command(source, db, jobs=2), "--timeout", "3600"], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300  # a safety net for a broken build, not part of the test's logic
    while len(list(marks.iterdir())) < 2 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()
    children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
    # Besides the two pool workers, the run's cleanup watcher (sandbox/lifeline.py) is a child.
    workers = [c for c in children if "lifeline.py" not in Path(f"/proc/{c}/cmdline").read_text(errors="replace")]
    assert sorted(workers) == sorted(p.name for p in marks.iterdir()), "the two workers, both hung"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    assert "Run the same command again to resume" in err and "Traceback" not in err
    kept = sqlite3.connect(db).execute("SELECT count(*) FROM results").fetchone()[0]
    assert kept == 2 * HANG_AFTER, "every finished check is kept, and only those"
    # Its workers (in their own session, so the terminal's SIGINT never reached them) were ended.
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or "(Z)" in Path(f"/proc/{pid}/stat").read_text(), pid
    rerun = subprocess.run(_command(source, db), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert sqlite3.connect(db).execute("SELECT count(*) FROM results").fetchone()[0] == 150
