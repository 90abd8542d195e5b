"""`gatekeeper export`: one row per stored result, as CSV or JSONL."""

from __future__ import annotations

import csv
import json
import sqlite3
from typing import IO

from gatekeeper.ingest.queries import Filters, input_errors, result_rows

# Columns for CSV; JSONL rows carry the same keys plus the full report.
CSV_COLUMNS = ("id", "problem", "source_id", "submission_ids", "verdict", "categories", "findings_count",
               "speedup", "sol_fraction", "error", "gatekeeper_version", "profile", "stages",
               "submission_sha256", "code_key", "problem_sha256", "config_sha256", "duration_s", "created_at")


def export_results(conn: sqlite3.Connection, fmt: str, out: IO[str], filters: Filters = Filters()) -> int:
    count = 0
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for row in result_rows(conn, filters):
            values = []
            for column in CSV_COLUMNS:
                value = row.get(column)
                if isinstance(value, list):
                    value = ";".join(value)
                values.append("" if value is None else value)
            writer.writerow(values)
            count += 1
        return count
    for row in result_rows(conn, filters):
        row["report"] = json.loads(row.pop("report_json"))
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
        count += 1
    return count


def export_input_errors(conn: sqlite3.Connection, fmt: str, out: IO[str]) -> int:
    rows = input_errors(conn)
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(("ref", "source_id", "message"))
        writer.writerows(rows)
    else:
        for ref, source_id, message in rows:
            out.write(json.dumps({"ref": ref, "source_id": source_id, "message": message}, ensure_ascii=False) + "\n")
    return len(rows)
