"""The SQLite store: WAL, unique keys, one writer at a time, clear errors for bad paths."""

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.errors import UsageError
from gatekeeper.ingest.normalise import normalised_sha, sha256_bytes
from gatekeeper.ingest.store import RESULT_COLUMNS, RunKey, Store, connect

KEY = RunKey("0.0-test", "default", "static", "c" * 64)


def _row(code_key: str, verdict: str = "pass", **extra) -> dict:
    row = {c: None for c in RESULT_COLUMNS}
    row.update(code_key=code_key, submission_sha256=code_key, problem_sha256="p" * 64, problem="seed_mean",
               gatekeeper_version=KEY.gatekeeper_version, profile=KEY.profile, stages=KEY.stages,
               config_sha256=KEY.config_sha256, source_id=f"id-{code_key}", verdict=verdict, categories="[]",
               findings_count=0, report_json="{}", duration_s=0.01)
    row.update(extra)
    return row


def test_store_uses_wal_and_never_duplicates_a_result(tmp_path):
    store = Store(tmp_path / "r.db")
    assert store.add_result(_row("a")) is True
    assert store.add_result(_row("a", verdict="reject")) is False  # same key: ignored, not duplicated
    store.add_result(_row("b"))
    store.flush()
    assert store.done_keys(KEY) == {("a", "p" * 64), ("b", "p" * 64)}
    assert store.done_keys(RunKey("0.0-test", "strict", "static", "c" * 64)) == set()
    store.close()
    conn = sqlite3.connect(tmp_path / "r.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT code_key, verdict FROM results ORDER BY code_key").fetchall() == [("a", "pass"), ("b", "pass")]


def test_submission_mapping_is_an_upsert(tmp_path):
    store = Store(tmp_path / "r.db")
    store.add_submission("src", "x", "seed_mean", "p" * 64, "s1", "k1", "code one")
    store.add_submission("src", "x", "seed_mean", "p" * 64, "s2", "k2", "code two")
    store.flush()
    store.close()
    conn = sqlite3.connect(tmp_path / "r.db")
    assert conn.execute("SELECT source_id, submission_sha256 FROM submissions").fetchall() == [("x", "s2")]
    assert conn.execute("SELECT count(*) FROM sources").fetchone()[0] == 2


def test_a_second_writer_is_refused_with_a_clear_message(tmp_path):
    first = Store(tmp_path / "r.db")
    with pytest.raises(UsageError, match="another `gatekeeper ingest` is writing"):
        Store(tmp_path / "r.db")
    first.close()
    Store(tmp_path / "r.db").close()  # released on close


@pytest.mark.slow
def test_the_lock_is_released_when_the_holder_is_killed(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c",
                               "import sys, time; from pathlib import Path; from gatekeeper.ingest.store import Store;"
                               f" s = Store(Path({str(tmp_path / 'r.db')!r})); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UsageError):
            Store(tmp_path / "r.db")
    finally:
        holder.kill()
        holder.wait()
    Store(tmp_path / "r.db").close()


@pytest.mark.slow
def test_a_store_locked_by_another_sqlite_writer_is_an_error(tmp_path):
    Store(tmp_path / "r.db").close()
    other = sqlite3.connect(tmp_path / "r.db", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(UsageError, match="cannot write the store"):
            Store(tmp_path / "r.db")
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_bad_store_paths_are_usage_errors(tmp_path):
    (tmp_path / "notes.txt").write_text("this is not a database, just some text that is long enough" * 20)
    with pytest.raises(UsageError, match="not an SQLite database"):
        Store(tmp_path / "notes.txt")
    with pytest.raises(UsageError, match="lock file"):
        Store(tmp_path / "missing-folder" / "r.db")
    # A read-only place (even for root): refused before anything is written.
    with pytest.raises(UsageError, match="must be writable"):
        Store(Path("/proc/gatekeeper-ingest-test.db"))
    with pytest.raises(UsageError, match="no store"):
        connect(tmp_path / "absent.db", readonly=True)


def test_normalisation_ignores_comments_layout_and_docstrings_only():
    base = 'import torch\nclass ModelNew:\n    def forward(self, x):\n        return x + 1\n'
    same = ('"""module doc"""\n# a comment\nimport torch\n\n\nclass ModelNew:\n    """class doc"""\n'
            '    def forward(self, x):  # trailing\n        "doc"\n        return (x + 1)\n')
    different = base.replace("x + 1", "x + 2")
    assert normalised_sha(base) == normalised_sha(same)
    assert normalised_sha(base) != normalised_sha(different)
    assert normalised_sha(base) != sha256_bytes(base.encode())
    # A string that is not a docstring is code (a CUDA source, say): it must count.
    assert normalised_sha('src = "a"\n') != normalised_sha('src = "b"\n')
    # Unparsable or pathologically deep code has no normalised key: the caller keys by bytes.
    assert normalised_sha("def (:\n") is None
    assert normalised_sha("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n") is None
