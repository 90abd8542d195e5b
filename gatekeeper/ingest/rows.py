"""Turn a worker's outcome into a store row: the Report JSON plus indexed columns.

A crash, a timeout or an internal error still gets a full Report, with verdict `error`
(the gatekeeper failed, which is never a reject) and the reason in `error`.
"""

from __future__ import annotations

import json
import math
from typing import Any, Optional

from pydantic import ValidationError

from gatekeeper.ingest.plan import TaskInfo
from gatekeeper.ingest.pool import Outcome
from gatekeeper.ingest.store import RunKey
from gatekeeper.report import FileRef, ProblemRef, Report, Severity, Verdict

# Score fields as the scoring stage may name them; the first present wins.
SPEEDUP_KEYS = ("speedup", "speedup_x")
SOL_KEYS = ("sol_fraction", "speed_of_light_fraction", "sol")


def _number(score: Optional[dict], keys: tuple[str, ...]) -> Optional[float]:
    if not score:
        return None
    for key in keys:
        value = score.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def _error_report(info: TaskInfo, run_key: RunKey, message: str) -> Report:
    from gatekeeper.pipeline import environment

    return Report(
        verdict=Verdict.ERROR, submission=FileRef(path=info.source_id, sha256=info.submission_sha256),
        problem=ProblemRef(path=str(info.problem.path), sha256=info.problem.sha256, name=info.problem.name),
        profile=run_key.profile, environment=environment(), error=message)


def report_for(outcome: Outcome, info: TaskInfo, run_key: RunKey) -> Report:
    if outcome.report is not None:
        try:
            return Report.model_validate(outcome.report)
        except ValidationError as exc:
            return _error_report(info, run_key, f"the worker returned a report that does not validate: {exc}")
    return _error_report(info, run_key, outcome.error or "the worker returned neither a report nor an error")


def error_categories(report: Report) -> list[str]:
    return sorted({f.category.value for f in report.findings if f.severity == Severity.ERROR})


def result_row(report: Report, info: TaskInfo, run_key: RunKey, duration_s: float) -> dict[str, Any]:
    return {
        "code_key": info.code_key, "submission_sha256": info.submission_sha256,
        "problem_sha256": info.problem.sha256, "problem": info.problem.name,
        "gatekeeper_version": run_key.gatekeeper_version, "profile": run_key.profile,
        "stages": run_key.stages, "config_sha256": run_key.config_sha256, "source_id": info.source_id,
        "verdict": report.verdict.value, "categories": json.dumps(error_categories(report)),
        "findings_count": len(report.findings),
        "speedup": _number(report.score, SPEEDUP_KEYS), "sol_fraction": _number(report.score, SOL_KEYS),
        "error": report.error, "duration_s": round(duration_s, 4),
        "report_json": report.model_dump_json(),
    }
