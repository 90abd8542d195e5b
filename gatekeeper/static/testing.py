"""Helpers to run rules on source strings: used by the rule-example tests and by users
writing their own rules."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Optional

from gatekeeper.config import Config
from gatekeeper.report import Finding
from gatekeeper.static.problem_facts import load_problem_facts
from gatekeeper.static.stage import run_static


def static_findings(source: str, problem_source: Optional[str] = None, *, profile: str = "default",
                    config: Optional[Config] = None) -> list[Finding]:
    config = config or Config(profile=profile)
    with tempfile.TemporaryDirectory(prefix="gatekeeper-example-") as tmp:
        path = Path(tmp) / "submission.py"
        path.write_text(source, "utf-8")
        problem = None
        if problem_source is not None:
            problem_path = Path(tmp) / "problem.py"
            problem_path.write_text(problem_source, "utf-8")
            problem = load_problem_facts(problem_path)
        return run_static(source.encode("utf-8"), str(path), config, problem)
