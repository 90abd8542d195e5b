"""SARIF 2.1.0, as GitHub code scanning ingests it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from gatekeeper.report import Finding, Report, Severity
from gatekeeper.static.discovery import discover_rules
from gatekeeper.version import __version__

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _uri(path: str) -> str:
    p = Path(path)
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def _rule_entry(code: str, finding: Finding, known: dict[str, Any]) -> dict[str, Any]:
    rule = known.get(code)
    summary = rule.summary if rule else finding.name
    return {
        "id": code,
        "name": finding.name,
        "shortDescription": {"text": summary},
        "fullDescription": {"text": rule.docs() if rule else summary},
        "help": {"text": finding.hint},
        "defaultConfiguration": {"level": _LEVEL[rule.severity if rule else finding.severity]},
        "properties": {"category": finding.category.value, "tags": [finding.category.value]},
    }


def to_sarif(reports: Iterable[Report]) -> dict[str, Any]:
    known = {r.code: r for r in discover_rules()}
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
            results.append({
                "ruleId": finding.rule,
                "ruleIndex": index[finding.rule],
                "level": _LEVEL[finding.severity],
                "message": {"text": f"{finding.message} Fix: {finding.hint}"},
                "locations": [{"physicalLocation": {
                    "artifactLocation": {"uri": _uri(loc.path if loc else report.submission.path)},
                    "region": region,
                }}],
                "properties": {"category": finding.category.value, "stage": finding.stage.value},
            })
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "gatekeeper", "version": __version__, "semanticVersion": __version__,
                "informationUri": "https://github.com/gatekeeper-kernels/gatekeeper", "rules": rules,
            }},
            "results": results,
        }],
    }
