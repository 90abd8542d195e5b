"""The static stage over a whole submission: its file, then each of its own modules
(gatekeeper.submission_files), with the same rules and problem facts."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Optional

from gatekeeper.config import Config
from gatekeeper.report import FileRef, Finding
from gatekeeper.stages import Submission
from gatekeeper.submission_files import local_modules
from gatekeeper.static.problem_facts import ProblemFacts
from gatekeeper.static.stage import run_static


# Codes about the submission as a whole, judged on its main file only.
WHOLE_SUBMISSION = frozenset({"GK005"})


def _shown_path(module: Path, submission_path: str) -> str:
    """The module's path as the user would write it: beside the submission as they named it."""
    main = Path(submission_path)
    return os.path.join(os.path.dirname(submission_path), os.path.relpath(module, main.resolve().parent))


def run_static_bundle(submission: Submission, config: Config,
                      problem: Optional[ProblemFacts]) -> tuple[list[Finding], list[FileRef]]:
    """(findings over every file, the submission's own modules that were checked with it)."""
    findings = run_static(submission.data, submission.path, config, problem)
    text = submission.data.decode("utf-8", errors="replace")
    modules = local_modules(text, submission.path)
    checked: list[FileRef] = []
    codes = {f.rule for f in findings if f.location is None}
    for module in modules:
        try:
            data = module.read_bytes()
        except OSError:
            continue
        shown = _shown_path(module, submission.path)
        checked.append(FileRef(path=shown, sha256=hashlib.sha256(data).hexdigest()))
        if not data.strip():
            continue  # an empty __init__.py is a package marker, not an empty submission
        for f in run_static(data, shown, config, problem):
            if f.location is None and f.rule in codes:
                continue  # a file-level notice (no problem given, unread shapes) is said once
            if f.rule in WHOLE_SUBMISSION:
                continue  # judged on the submission's own file: a helper module has no ModelNew
            findings.append(f)
    return findings, checked
