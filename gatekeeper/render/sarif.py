"""SARIF 2.1.0, as GitHub code scanning ingests it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from gatekeeper.catalogue import Entry, catalogue
from gatekeeper.report import Finding, Report, Severity, Verdict
from gatekeeper.version import __version__

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _uri(path: str) -> str:
    p = Path(path)
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def _rule_entry(code: str, finding: Finding, known: dict[str, Entry]) -> dict[str, Any]:
    entry = known.get(code)
    summary = entry.summary if entry else finding.name
    descriptor: dict[str, Any] = {
        "id": code,
        "name": finding.name,
        "shortDescription": {"text": summary},
        "fullDescription": {"text": entry.docs if entry else summary},
        "help": {"text": f"Fix: {entry.hint if entry else finding.hint}",
                 "markdown": f"**Fix:** {entry.hint if entry else finding.hint}"},
        "defaultConfiguration": {"level": _LEVEL[entry.severity if entry else finding.severity]},
        "properties": {"category": finding.category.value, "tags": [finding.category.value, finding.stage.value],
                       "stage": finding.stage.value},
    }
    if entry:
        descriptor["helpUri"] = entry.help_uri
        if entry.confidence.value != "certain":
            descriptor["properties"]["confidence"] = entry.confidence.value
    return descriptor


def _invocation(reports: list[Report]) -> dict[str, Any]:
    """Infrastructure errors (verdict error, exit 3) are the tool's failure, not results:
    SARIF says so with executionSuccessful=false and one notification per failed check."""
    notes = []
    for report in reports:
        if report.verdict == Verdict.ERROR:
            notes.append({
                "level": "error",
                "message": {"text": f"gatekeeper gave no verdict for {report.submission.path}: "
                                    f"{report.error or 'a stage failed'}"},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(report.submission.path)}}}],
                "properties": {"stages": {s.name.value: s.status.value for s in report.stages}},
            })
    return {"executionSuccessful": not notes, "toolExecutionNotifications": notes,
            "exitCode": max((r.exit_code for r in reports), default=0)}


def to_sarif(reports: Iterable[Report], rule_dirs: Iterable[str] = ()) -> dict[str, Any]:
    reports = list(reports)
    known = catalogue(rule_dirs)
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    results: list[dict[str, Any]] = []
    for report in reports:
        for finding in report.findings:
            if finding.rule not in index:
                index[finding.rule] = len(rules)
                rules.append(_rule_entry(finding.rule, finding, known))
            loc = finding.location
            region: dict[str, int] = {"startLine": loc.line if loc else 1, "startColumn": loc.column if loc else 1}
            if loc and loc.end_line:
                region["endLine"] = loc.end_line
                if loc.end_column:
                    region["endColumn"] = loc.end_column
            properties: dict[str, Any] = {"category": finding.category.value, "stage": finding.stage.value,
                                          "confidence": finding.confidence.value}
            if finding.confirmed_by:
                properties["confirmed_by"] = finding.confirmed_by
            if finding.probe is not None:  # the evidence link: finding -> probe -> outcome
                properties["probe"] = finding.probe.model_dump(mode="json")
            if finding.id:
                properties["id"] = finding.id
            results.append({
                "ruleId": finding.rule,
                "ruleIndex": index[finding.rule],
                "level": _LEVEL[finding.severity],
                "message": {"text": f"{finding.message} Fix: {finding.hint}"},
                "locations": [{"physicalLocation": {
                    "artifactLocation": {"uri": _uri(loc.path if loc else report.submission.path)},
                    "region": region,
                }}],
                "properties": properties,
            })
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "gatekeeper", "version": __version__, "semanticVersion": __version__,
                "informationUri": "https://github.com/gatekeeper-kernels/gatekeeper", "rules": rules,
            }},
            "invocations": [_invocation(reports)],
            "results": results,
        }],
    }
