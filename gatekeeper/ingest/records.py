"""What a source yields: good records to check, and bad ones to report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Record:
    """One submission as read from a source. `ref` says where it came from (line, row, file)."""

    source_id: str
    problem: str
    code: str
    ref: str
    # Optional, when the source has them: shown as leaderboard columns.
    model: Optional[str] = None
    author: Optional[str] = None


@dataclass(frozen=True)
class BadRecord:
    """A record that cannot be checked; stored with its message, never fatal to the batch."""

    ref: str
    message: str
    source_id: str = ""
    problem: str = ""
