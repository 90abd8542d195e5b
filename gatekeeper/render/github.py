"""GitHub Actions workflow commands (`::error file=...::message`)."""

from __future__ import annotations

from typing import Iterable

from gatekeeper.report import Report, Severity

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(reports: Iterable[Report]) -> str:
    lines = []
    for report in reports:
        for f in report.findings:
            props = [f"file={_prop(f.location.path if f.location else report.submission.path)}"]
            if f.location:
                props += [f"line={f.location.line}", f"col={f.location.column}"]
                if f.location.end_line:
                    props.append(f"endLine={f.location.end_line}")
            how = f.category.value if f.confidence.value == "certain" else f"{f.category.value}, {f.confidence.value}"
            if f.probe is not None and f.probe.check:
                how += f", run-time check {f.probe.check} {f.probe.outcome.value}"
            elif f.confirmed_by:
                how += f", run-time check {f.confirmed_by}"
            props.append(f"title={_prop(f'{f.rule} {f.name} ({how})')}")
            lines.append(f"::{_COMMAND[f.severity]} {','.join(props)}::{_data(f.message + chr(10) + 'Fix: ' + f.hint)}")
        if report.verdict.value == "error":
            lines.append(f"::error file={_prop(report.submission.path)},title=gatekeeper error::{_data(report.error or 'error')}")
    return "\n".join(lines)
