"""`gatekeeper ingest` end to end: real subprocesses, real workers, real SQLite."""

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.slow  # ingests submissions through worker processes

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "fixtures" / "problems"
FOLDER = ROOT / "fixtures" / "ingest" / "folder"
HONEST = (ROOT / "fixtures" / "submissions" / "seed_honest_generic.py").read_text()
HACKED = (ROOT / "fixtures" / "submissions" / "seed_cached_hardcoded.py").read_text()
# libcst's native parser overflows its stack on this (SIGSEGV); the engine now refuses it first.
DEEP = "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"


def gk(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "gatekeeper", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def _rows(db, query):
    conn = sqlite3.connect(db)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def test_folder_ingest_dedupes_equal_code_and_resumes_as_a_no_op(tmp_path):
    db = tmp_path / "r.db"
    first = gk("ingest", FOLDER, "--problems", PROBLEMS, "--store", db, "--stages", "static", "--jobs", "2")
    assert first.returncode == 0, first.stderr
    assert "by verdict" in first.stdout and "rejects by category" in first.stdout
    rows = dict(_rows(db, "SELECT source_id, verdict FROM results"))
    assert rows == {"seed_mean/hacked.py": "reject", "seed_mean/honest.py": "pass"}
    # The reformatted copy has its own mapping but shares the honest result.
    subs = _rows(db, "SELECT s.source_id, r.verdict FROM submissions s JOIN results r ON r.code_key = s.code_key"
                     " ORDER BY s.source_id")
    assert subs == [("seed_mean/hacked.py", "reject"), ("seed_mean/honest.py", "pass"),
                    ("seed_mean/honest_reformatted.py", "pass")]
    cats = json.loads(_rows(db, "SELECT categories FROM results WHERE verdict='reject'")[0][0])
    assert "hardcoded-shape" in set(cats)  # the persistent output is held for GK610 (static only)
    again = gk("ingest", FOLDER, "--problems", PROBLEMS, "--store", db, "--stages", "static")
    assert again.returncode == 0, again.stderr
    assert "0 checked" in again.stdout
    assert _rows(db, "SELECT count(*) FROM results")[0][0] == 2
    # Another profile is another result, not a duplicate.
    strict = gk("ingest", FOLDER, "--problems", PROBLEMS, "--store", db, "--stages", "static", "--profile", "strict")
    assert strict.returncode == 0, strict.stderr
    assert _rows(db, "SELECT profile, count(*) FROM results GROUP BY profile") == [("default", 2), ("strict", 2)]


def test_jsonl_bad_records_and_a_crashing_submission_do_not_stop_the_batch(tmp_path):
    source = tmp_path / "subs.jsonl"
    records = [
        {"id": "honest", "problem": "seed_mean", "code": HONEST},
        {"id": "deep", "problem": "seed_mean", "code": DEEP},
        {"id": "unknown", "problem": "no_such_problem", "code": HONEST},
        {"id": "huge", "problem": "seed_mean", "code": "x = 1\n" * 400_000},
        {"id": "hacked", "problem": "seed_mean", "code": HACKED},
    ]
    lines = [json.dumps(r) for r in records]
    lines.insert(2, '{"id": "cut off", "problem"')
    source.write_text("\n".join(lines) + "\n")
    db = tmp_path / "r.db"
    run = gk("ingest", source, "--problems", PROBLEMS, "--store", db, "--stages", "static", "--jobs", "2")
    results = dict(_rows(db, "SELECT source_id, verdict FROM results"))
    assert results["honest"] == "pass" and results["hacked"] == "reject"
    # Whatever the engine makes of it (a finding today; a segfault in libcst before the engine
    # guarded against it), it is stored and the batch carried on.
    assert results["deep"] in ("reject", "error")
    if results["deep"] == "error":
        assert "worker process checking this submission" in _rows(db, "SELECT error FROM results WHERE source_id='deep'")[0][0]
    assert run.returncode == 3, run.stdout + run.stderr  # bad records were not checked: never exit 0 (issue 21)
    errors = {sid or ref: msg for ref, sid, msg in _rows(db, "SELECT ref, source_id, message FROM input_errors")}
    assert "unknown problem 'no_such_problem'" in errors["unknown"]
    assert "over the 2,000,000-byte limit" in errors["huge"]
    assert "not valid JSON" in errors["line 3"]
    assert "3 record(s) could not be checked" in run.stdout


def test_parquet_source(tmp_path):
    source = tmp_path / "subs.parquet"
    pq.write_table(pa.table({"id": [1, 2], "problem": ["seed_mean", "seed_mean"], "code": [HONEST, HACKED]}), source)
    db = tmp_path / "r.db"
    run = gk("ingest", source, "--problems", PROBLEMS, "--store", db, "--stages", "static")
    assert run.returncode == 0, run.stderr
    assert dict(_rows(db, "SELECT source_id, verdict FROM results")) == {"1": "pass", "2": "reject"}


def test_later_stages_are_stored_whatever_they_report_and_errors_can_be_retried(tmp_path):
    """Ingest does not care which stages exist yet: each report is stored as the pipeline made it.
    (Here, without a GPU, building CUDA is an error: the gatekeeper could not check it.)"""
    db = tmp_path / "r.db"
    run = gk("ingest", FOLDER, "--problems", PROBLEMS, "--store", db, "--stages", "build")
    assert run.returncode in (0, 3), run.stderr
    stored = _rows(db, "SELECT stages, report_json FROM results")
    assert len(stored) == 2 and all(s == "build" for s, _ in stored)
    for _, report in stored:
        names = [s["name"] for s in json.loads(report)["stages"]]
        assert names[:2] == ["static", "build"]
    errors = _rows(db, "SELECT count(*) FROM results WHERE verdict = 'error'")[0][0]
    assert run.returncode == (3 if errors else 0)
    again = gk("ingest", FOLDER, "--problems", PROBLEMS, "--store", db, "--stages", "build")
    assert "0 checked" in again.stdout
    retried = gk("ingest", FOLDER, "--problems", PROBLEMS, "--store", db, "--stages", "build", "--retry-errors")
    assert re.search(r"checked now\s+(\d+)", retried.stdout).group(1) == str(errors), retried.stdout
    assert _rows(db, "SELECT count(*) FROM results")[0][0] == 2


def test_a_second_concurrent_ingest_is_refused_before_any_work(tmp_path):
    db = tmp_path / "r.db"
    holder = subprocess.Popen([sys.executable, "-c",
                               "import time; from pathlib import Path; from gatekeeper.ingest.store import Store;"
                               f" s = Store(Path({str(db)!r})); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        run = gk("ingest", FOLDER, "--problems", PROBLEMS, "--store", db, "--stages", "static")
    finally:
        holder.kill()
        holder.wait()
    assert run.returncode == 2
    assert "another `gatekeeper ingest` is writing" in run.stderr
    assert _rows(db, "SELECT count(*) FROM results")[0][0] == 0


def test_usage_errors_exit_2_with_a_message(tmp_path):
    run = gk("ingest", tmp_path / "missing.jsonl", "--problems", PROBLEMS, "--store", tmp_path / "r.db")
    assert run.returncode == 2 and "not found" in run.stderr
    assert not (tmp_path / "r.db").exists()  # nothing started
    run = gk("ingest", FOLDER, "--problems", tmp_path, "--store", tmp_path / "r.db")
    assert run.returncode == 2 and "no problem files" in run.stderr
    (tmp_path / "dir.db").mkdir()
    run = gk("ingest", FOLDER, "--problems", PROBLEMS, "--store", tmp_path / "dir.db", "--stages", "static")
    assert run.returncode == 2 and "cannot write the store" in run.stderr


def test_a_worker_killed_during_a_real_ingest_costs_at_most_one_submission(tmp_path):
    import signal
    import time

    sys.path.insert(0, str(ROOT / "fixtures" / "ingest"))
    from make_batch import write_jsonl

    source = write_jsonl(tmp_path / "b.jsonl", 120)
    db = tmp_path / "r.db"
    process = subprocess.Popen([sys.executable, "-m", "gatekeeper", "ingest", str(source), "--problems", str(PROBLEMS),
                                "--store", str(db), "--stages", "static", "--jobs", "2"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (db.exists() and _count_results(db)) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
    assert workers, "the ingest should be running its workers"
    os.kill(int(workers[0]), signal.SIGKILL)
    out, err = process.communicate(timeout=300)
    assert _rows(db, "SELECT count(*) FROM results")[0][0] == 120, out + err
    errors = _rows(db, "SELECT error FROM results WHERE verdict = 'error'")
    assert len(errors) <= 1  # the worker may have been between two submissions
    if errors:
        assert "was killed by SIGKILL" in errors[0][0]
    assert process.returncode == (3 if errors else 0), out + err


def _count_results(db):
    try:
        return _rows(db, "SELECT count(*) FROM results")[0][0]
    except sqlite3.OperationalError:
        return 0
