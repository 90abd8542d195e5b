"""Reports as JSON text for `check -f json` and `-f jsonl`, serialised by pydantic (in Rust).

The text is pure ASCII, as `json.dumps` writes it: a non-ASCII character (a source line
with `é`, a path in another script) is written as its `\\uXXXX` escape, so the report can
go to any stdout whatever its encoding (PYTHONIOENCODING=ascii, a C locale) without an
encoding error in place of the verdict."""

from __future__ import annotations

import re
from typing import Sequence

from gatekeeper.report import Report

_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # outside the basic plane: a UTF-16 surrogate pair, as JSON spells it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def ascii_only(text: str) -> str:
    """JSON text with every non-ASCII character escaped (they occur only inside strings)."""
    return _NON_ASCII.sub(_escape, text) if not text.isascii() else text


def report_json(report: Report, indent: int | None = None) -> str:
    return ascii_only(report.model_dump_json(indent=indent))


def reports_json(reports: Sequence[Report]) -> str:
    """The reports as one JSON array indented by two, as `json.dumps(..., indent=2)` lays it
    out; each report is serialised by pydantic (the indented `json.dumps` of their dicts runs
    in pure Python, about a tenth of a static batch)."""
    if not reports:
        return "[]"
    return "[\n  " + ",\n  ".join(report_json(r, 2).replace("\n", "\n  ") for r in reports) + "\n]"
