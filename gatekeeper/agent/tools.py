"""The agent workflow as plain functions: one per MCP tool, each source in, Report out.

Kept free of the `mcp` package so the workflow can be tested, benchmarked and reused by
other agent frameworks without a server. Every failure of the caller's making is raised
as `UsageError` with a message that says what to send instead.
"""

from __future__ import annotations

import re
import tempfile
from functools import lru_cache
from typing import Optional

from gatekeeper.api import check
from gatekeeper.errors import UsageError
from gatekeeper.report import Report

PROFILES = ("strict", "default", "lenient")
MAX_SOURCE_CHARS = 2_000_000  # far above any real kernel; stops a runaway payload early

# The API writes problem source to a private temporary file; its path means nothing to
# the agent (and is gone by the time it reads the report), so it is shown as <problem>.
_TEMP_PROBLEM = re.compile(re.escape(tempfile.gettempdir()) + r"/gatekeeper-problem-[^/\s]+/problem\.py")


_FILE_NAME = re.compile(r"[\w./\\~:-]+\.py")


def _source(value: Optional[str], what: str, required: bool) -> Optional[str]:
    if value is None or not value.strip():
        if not required:
            return None  # an agent that sends "" for an optional argument means "none"
        raise UsageError(
            f"`{what}` is empty: pass the full source text of the {what} "
            f"({'a Python module defining ModelNew' if what == 'code' else 'the reference module defining Model and get_inputs'}), "
            "not a file name."
        )
    if _FILE_NAME.fullmatch(value.strip()):
        # Likely an agent passing the name instead of the text: reading it would check the
        # wrong thing silently (a file name parses as a Python expression), so say so.
        raise UsageError(f"`{what}` is {value.strip()!r}, a file name: pass the file's contents, not its name.")
    if len(value) > MAX_SOURCE_CHARS:
        raise UsageError(f"`{what}` is {len(value):,} characters; the limit is {MAX_SOURCE_CHARS:,}.")
    # The API reads a one-line string without a newline as a file path; tool arguments
    # are always source, so make sure it is read as such.
    return value if "\n" in value else value + "\n"


def _profile(value: Optional[str]) -> Optional[str]:
    if value is not None and value not in PROFILES:
        raise UsageError(f"unknown profile {value!r}; choose one of {', '.join(PROFILES)}")
    return value


def _tidy(report: Report) -> Report:
    updates = {}
    if report.problem is not None and _TEMP_PROBLEM.fullmatch(report.problem.path):
        updates["problem"] = report.problem.model_copy(update={"path": "<problem>"})
    if report.error:
        updates["error"] = _TEMP_PROBLEM.sub("<problem>", report.error)
    return report.model_copy(update=updates) if updates else report


def _run(code: str, problem: Optional[str], stages: str, profile: Optional[str],
         seed: Optional[int] = None, problem_required: bool = True) -> Report:
    source = _source(code, "code", required=True)
    reference = _source(problem, "problem", required=problem_required)
    return _tidy(check(source, reference, stages=stages, profile=_profile(profile), seed=seed))


@lru_cache(maxsize=1)
def gpu_available() -> bool:
    """Whether timing can run here. Imports torch once, on the first submit only."""
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # a broken driver means no timing, not a crashed server
        return False


def static_check(code: str, problem: Optional[str] = None, profile: Optional[str] = None) -> Report:
    return _run(code, problem, "static", profile, problem_required=False)


def compile_submission(code: str, problem: str, profile: Optional[str] = None) -> Report:
    return _run(code, problem, "build", profile)


def run_correctness(code: str, problem: str, profile: Optional[str] = None, seed: Optional[int] = None) -> Report:
    return _run(code, problem, "behaviour", profile, seed)


def submit(code: str, problem: str, profile: Optional[str] = None, seed: Optional[int] = None) -> Report:
    return _run(code, problem, "timing" if gpu_available() else "behaviour", profile, seed)
