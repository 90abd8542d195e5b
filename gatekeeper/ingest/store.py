"""The results store: SQLite in WAL mode, written in transactions, safe to resume.

Tables:
- results: one row per (code_key, problem_sha256, gatekeeper_version, profile, stages,
  config_sha256). code_key is the normalised-tree sha256 (see normalise.py), so
  submissions equal up to comments, whitespace and docstrings share one row; the row
  keeps the bytes sha256 of the submission actually checked.
- submissions: each source id, with its bytes sha256 and code_key, mapped to a problem.
- sources: the code of every distinct submission (findings point into it).
- problems, input_errors: problem files seen; records that could not be checked.

UNIQUE constraints plus INSERT OR IGNORE / upserts make a rerun idempotent.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from gatekeeper.errors import UsageError

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY,
    code_key TEXT NOT NULL,
    submission_sha256 TEXT NOT NULL,
    problem_sha256 TEXT NOT NULL,
    problem TEXT NOT NULL,
    gatekeeper_version TEXT NOT NULL,
    profile TEXT NOT NULL,
    stages TEXT NOT NULL,
    config_sha256 TEXT NOT NULL,
    source_id TEXT NOT NULL,
    verdict TEXT NOT NULL,
    categories TEXT NOT NULL,
    findings_count INTEGER NOT NULL,
    speedup REAL,
    sol_fraction REAL,
    error TEXT,
    duration_s REAL,
    report_json TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    UNIQUE (code_key, problem_sha256, gatekeeper_version, profile, stages, config_sha256)
);
CREATE INDEX IF NOT EXISTS results_problem ON results (problem, verdict);
CREATE INDEX IF NOT EXISTS results_verdict ON results (verdict);
CREATE INDEX IF NOT EXISTS results_submission ON results (submission_sha256);
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    source_id TEXT NOT NULL,
    problem TEXT NOT NULL,
    problem_sha256 TEXT NOT NULL,
    submission_sha256 TEXT NOT NULL,
    code_key TEXT NOT NULL,
    UNIQUE (source, source_id)
);
CREATE INDEX IF NOT EXISTS submissions_key ON submissions (code_key, problem_sha256);
CREATE TABLE IF NOT EXISTS sources (
    submission_sha256 TEXT PRIMARY KEY,
    code TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS problems (
    problem_sha256 TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    path TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS submission_meta (
    source TEXT NOT NULL,
    source_id TEXT NOT NULL,
    model TEXT,
    author TEXT,
    PRIMARY KEY (source, source_id)
);
CREATE TABLE IF NOT EXISTS input_errors (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    ref TEXT NOT NULL,
    source_id TEXT NOT NULL,
    problem TEXT NOT NULL,
    message TEXT NOT NULL,
    UNIQUE (source, ref, message)
);
"""

RESULT_COLUMNS = (
    "code_key", "submission_sha256", "problem_sha256", "problem", "gatekeeper_version", "profile",
    "stages", "config_sha256", "source_id", "verdict", "categories", "findings_count", "speedup",
    "sol_fraction", "error", "duration_s", "report_json",
)


@dataclass(frozen=True)
class RunKey:
    """What, besides the code and the problem, makes a result: rerunning with another
    version, profile, last stage or configuration is new work, not a duplicate."""

    gatekeeper_version: str
    profile: str
    stages: str
    config_sha256: str


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        if not path.is_file():
            raise UsageError(f"no store at {path}; create one with `gatekeeper ingest SOURCE --store {path}`")
        uri = f"file:{path.resolve()}?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=30)
            conn.execute("SELECT count(*) FROM results").fetchone()
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"{path} is not a gatekeeper store: {exc}") from None
        return conn
    # A short wait while opening: a store another program holds is an error now, before any work.
    return sqlite3.connect(str(path), timeout=2, isolation_level=None)


class Store:
    """The writer. Holds an exclusive lock file beside the database for its lifetime, so a
    second ingest on the same store refuses at once instead of interleaving work."""

    def __init__(self, path: Path):
        self.path = path
        self._lock_fd: Optional[int] = None
        self._acquire_lock()
        try:
            self.conn = connect(path)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("BEGIN IMMEDIATE")  # proves the file is writable and not locked
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self.conn.execute(statement)
            self.conn.execute("COMMIT")
            self.conn.execute("PRAGMA busy_timeout=30000")  # readers (leaderboard) may hold it briefly
        except sqlite3.OperationalError as exc:
            self.close()
            raise UsageError(f"cannot write the store {path}: {exc}; check the file and its folder are "
                             "writable and that no other program holds a write lock on it") from None
        except sqlite3.DatabaseError as exc:
            self.close()
            raise UsageError(f"{path} is not an SQLite database ({exc}); give another --store path") from None
        self._pending = 0

    def _acquire_lock(self) -> None:
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(str(lock_path), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UsageError(f"cannot create the lock file {lock_path}: {exc.strerror}; the store's folder "
                             "must be writable") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise UsageError(f"another `gatekeeper ingest` is writing to {self.path} (lock {lock_path} is held); "
                             "wait for it to finish, or use another --store") from None
        self._lock_fd = fd

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            if conn.in_transaction:
                conn.execute("COMMIT")
            conn.close()
            self.conn = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    # Writes go into one open transaction; flush() commits it. A kill -9 loses only the
    # uncommitted tail, which the next run redoes (it was never marked done).
    def _begin(self) -> None:
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN IMMEDIATE")

    def flush(self) -> None:
        if self.conn is not None and self.conn.in_transaction:
            self.conn.execute("COMMIT")
        self._pending = 0

    def add_problem(self, sha: str, name: str, path: str) -> None:
        self._begin()
        self.conn.execute("INSERT OR IGNORE INTO problems VALUES (?, ?, ?)", (sha, name, path))

    def add_submission(self, source: str, source_id: str, problem: str, problem_sha: str,
                       submission_sha: str, code_key: str, code: str) -> None:
        self._begin()
        self.conn.execute(
            "INSERT INTO submissions (source, source_id, problem, problem_sha256, submission_sha256, code_key)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (source, source_id) DO UPDATE SET problem=excluded.problem,"
            " problem_sha256=excluded.problem_sha256, submission_sha256=excluded.submission_sha256,"
            " code_key=excluded.code_key",
            (source, source_id, problem, problem_sha, submission_sha, code_key))
        self.conn.execute("INSERT OR IGNORE INTO sources VALUES (?, ?)", (submission_sha, code))

    def add_meta(self, source: str, source_id: str, model: Optional[str], author: Optional[str]) -> None:
        """The submission's model and author, when its source has them (leaderboard columns)."""
        self._begin()
        self.conn.execute("INSERT INTO submission_meta VALUES (?, ?, ?, ?) ON CONFLICT (source, source_id)"
                          " DO UPDATE SET model=excluded.model, author=excluded.author",
                          (source, source_id, model, author))

    def add_input_error(self, source: str, ref: str, source_id: str, problem: str, message: str) -> None:
        self._begin()
        self.conn.execute("INSERT OR IGNORE INTO input_errors (source, ref, source_id, problem, message)"
                          " VALUES (?, ?, ?, ?, ?)", (source, ref, source_id, problem, message))

    def add_result(self, row: dict) -> bool:
        """Insert one result; False when an equal key was already stored (never a duplicate)."""
        self._begin()
        cursor = self.conn.execute(
            f"INSERT OR IGNORE INTO results ({', '.join(RESULT_COLUMNS)}) VALUES ({', '.join('?' * len(RESULT_COLUMNS))})",
            tuple(row[c] for c in RESULT_COLUMNS))
        self._pending += 1
        return cursor.rowcount == 1

    @property
    def pending(self) -> int:
        return self._pending

    def done_keys(self, key: RunKey) -> set[tuple[str, str]]:
        rows = self.conn.execute(
            "SELECT code_key, problem_sha256 FROM results WHERE gatekeeper_version=? AND profile=?"
            " AND stages=? AND config_sha256=?",
            (key.gatekeeper_version, key.profile, key.stages, key.config_sha256))
        return {(a, b) for a, b in rows}

    def forget_errors(self, key: RunKey, keys: Iterable[tuple[str, str]]) -> int:
        """For --retry-errors: drop error rows so their submissions run again."""
        self._begin()
        removed = 0
        for code_key, problem_sha in keys:
            removed += self.conn.execute(
                "DELETE FROM results WHERE verdict='error' AND code_key=? AND problem_sha256=? AND"
                " gatekeeper_version=? AND profile=? AND stages=? AND config_sha256=?",
                (code_key, problem_sha, key.gatekeeper_version, key.profile, key.stages, key.config_sha256),
            ).rowcount
        self.flush()
        return removed
