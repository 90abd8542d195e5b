"""Cap and scrub what a worker that ran submission code can put into a report.

A submission can read files (everything the isolation level lets it see) and raise or
print their contents. Reports, the ingest store and the leaderboard quote only: the
exception type, a short one-line message of printable characters, the traceback's frame
lines (file, line, function; not the exception text), and short printable output tails.
"""

from __future__ import annotations

import re
from typing import Any

MESSAGE_CHARS = 200
_FRAME = re.compile(r'^\s*File "[^"\n]{0,300}", line \d+(, in [^\n]{0,120})?$')
_UNPRINTABLE = re.compile(r"[^\x20-\x7e\n]")


def scrub_line(text: Any, limit: int = MESSAGE_CHARS) -> str:
    """One line of printable ASCII, at most `limit` characters (a marker says it was cut)."""
    flat = _UNPRINTABLE.sub("?", " ".join(str(text).split()))
    return flat if len(flat) <= limit else flat[: limit - 14] + " [... cut ...]"


def scrub_traceback(text: Any) -> str:
    """Frame lines only; the last lines of a traceback are the exception's own text."""
    frames = [line.strip() for line in str(text).splitlines() if _FRAME.match(line)]
    return "\n".join(["Traceback (most recent call last), frames only:", *frames[-20:]]) if frames else ""


def scrub_text(text: str, limit: int) -> str:
    """A printable tail of at most `limit` characters (stdout/stderr of a worker)."""
    clean = _UNPRINTABLE.sub("?", text)
    return clean[-limit:]


def scrub_message(message: dict[str, Any]) -> dict[str, Any]:
    out = dict(message)
    for key in ("message", "error", "detail", "target", "event"):
        if isinstance(out.get(key), str):
            out[key] = scrub_line(out[key])
    if isinstance(out.get("traceback"), str):
        out["traceback"] = scrub_traceback(out["traceback"])
    if isinstance(out.get("failures"), list):
        out["failures"] = [scrub_message(f) if isinstance(f, dict) else f for f in out["failures"]]
    return out
