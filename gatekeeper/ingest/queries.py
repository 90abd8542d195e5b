"""Reading the store: every query the summary, the leaderboard and the exports need."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Iterator, Optional

# A submission's result is the row with its code key and problem; the join also accepts
# the bytes key, which is what a run that could not normalise (or chose not to) used.
_JOIN = ("FROM submissions s JOIN results r ON r.problem_sha256 = s.problem_sha256"
         " AND (r.code_key = s.code_key OR r.code_key = s.submission_sha256)")


@dataclass(frozen=True)
class Filters:
    problem: Optional[str] = None
    profile: Optional[str] = None
    stages: Optional[str] = None
    source: Optional[str] = None
    gatekeeper_version: Optional[str] = None
    config_sha256: Optional[str] = None

    def where(self) -> tuple[str, list]:
        clauses, args = [], []
        for column, value in (("r.problem", self.problem), ("r.profile", self.profile), ("r.stages", self.stages),
                              ("s.source", self.source), ("r.gatekeeper_version", self.gatekeeper_version),
                              ("r.config_sha256", self.config_sha256)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


@dataclass(frozen=True)
class Entry:
    """One submission with its result under one run key."""

    source_id: str
    problem: str
    submission_sha256: str
    result_id: int
    verdict: str
    categories: list[str]
    findings_count: int
    speedup: Optional[float]
    sol_fraction: Optional[float]
    profile: str
    stages: str
    gatekeeper_version: str
    error: Optional[str]

    @property
    def board(self) -> str:
        return f"{self.stages} · {self.profile} · {self.gatekeeper_version}"


def entries(conn: sqlite3.Connection, filters: Filters = Filters()) -> Iterator[Entry]:
    where, args = filters.where()
    rows = conn.execute(
        "SELECT s.source_id, s.problem, s.submission_sha256, r.id, r.verdict, r.categories, r.findings_count,"
        f" r.speedup, r.sol_fraction, r.profile, r.stages, r.gatekeeper_version, r.error {_JOIN}{where}"
        " ORDER BY s.problem, s.source_id, r.id", args)
    seen: set[tuple[str, int]] = set()
    for row in rows:
        key = (row[0], row[3])
        if key in seen:  # the same id in two sources
            continue
        seen.add(key)
        yield Entry(row[0], row[1], row[2], row[3], row[4], json.loads(row[5]), row[6], row[7], row[8],
                    row[9], row[10], row[11], row[12])


def result_rows(conn: sqlite3.Connection, filters: Filters = Filters()) -> Iterator[dict]:
    """Every stored result (one per result row), with the ids of the submissions that share it."""
    where, args = filters.where()
    if filters.source is None and not args:
        query = "SELECT r.* FROM results r ORDER BY r.id"
        rows = conn.execute(query)
    else:
        rows = conn.execute(f"SELECT DISTINCT r.* {_JOIN}{where} ORDER BY r.id", args)
    columns = [d[0] for d in rows.description]
    ids = _ids_by_result(conn)
    for values in rows:
        row = dict(zip(columns, values))
        row["categories"] = json.loads(row["categories"])
        row["submission_ids"] = ids.get(row["id"], [])
        yield row


def _ids_by_result(conn: sqlite3.Connection) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for result_id, source_id in conn.execute(f"SELECT DISTINCT r.id, s.source_id {_JOIN} ORDER BY s.source_id"):
        found.setdefault(result_id, []).append(source_id)
    return found


def report_json(conn: sqlite3.Connection, result_id: int) -> str:
    row = conn.execute("SELECT report_json FROM results WHERE id = ?", (result_id,)).fetchone()
    return row[0] if row else "{}"


def code_for(conn: sqlite3.Connection, submission_sha256: str) -> Optional[str]:
    row = conn.execute("SELECT code FROM sources WHERE submission_sha256 = ?", (submission_sha256,)).fetchone()
    return row[0] if row else None


def checked_sha(conn: sqlite3.Connection, result_id: int) -> Optional[str]:
    row = conn.execute("SELECT submission_sha256 FROM results WHERE id = ?", (result_id,)).fetchone()
    return row[0] if row else None


def input_errors(conn: sqlite3.Connection, source: Optional[str] = None) -> list[tuple[str, str, str]]:
    query = "SELECT ref, source_id, message FROM input_errors"
    rows = conn.execute(query + " WHERE source = ? ORDER BY id", (source,)) if source else conn.execute(query + " ORDER BY id")
    return list(rows)
