"""A one-paragraph plain-text summary of a Report, written for an agent to act on."""

from __future__ import annotations

from gatekeeper.report import Finding, Report, Severity, StageStatus, Verdict

_NOT_CHECKED = (StageStatus.SKIPPED, StageStatus.NOT_IMPLEMENTED)


def _where(finding: Finding) -> str:
    if finding.location is None:
        return "file"
    return f"line {finding.location.line}"


def _finding_lines(findings: list[Finding]) -> list[str]:
    lines: list[str] = []
    last_hint = None
    for f in findings:
        # The same rule often fires on several lines with one fix: say the fix once.
        fix = "same fix as above" if f.hint == last_hint else f.hint
        sure = "" if f.confidence.value == "certain" else f"({f.confidence.value}) "
        if f.probe is not None and f.probe.check and f.probe.outcome.value != "unconfirmed":
            sure += f"(run-time check {f.probe.check} {f.probe.outcome.value}) "
        lines.append(f"- {_where(f)}: [{f.rule} {f.category.value}] {sure}{f.message} — fix: {fix}")
        last_hint = f.hint
    return lines


def summarise(report: Report) -> str:
    """Verdict first, then each error finding as `line N: message — fix: hint`, then what
    was not checked (so a pass is never read as more than it is)."""
    errors = report.errors()
    warnings = [f for f in report.findings if f.severity == Severity.WARNING]
    parts: list[str] = []
    if report.verdict == Verdict.ERROR:
        parts.append(
            f"Verdict: ERROR. The gatekeeper could not finish ({report.error or 'unknown cause'}). "
            "This is not a judgement of your code: fix the cause named here (often the problem "
            "source) and call again."
        )
    elif report.verdict == Verdict.REJECT:
        parts.append(f"Verdict: REJECT, {len(errors)} error finding(s). Fix every one, then call again:")
        parts.extend(_finding_lines(errors))
    else:
        parts.append("Verdict: PASS, no error findings.")
    held = report.unconfirmed()
    if held:
        parts.append(f"{len(held)} suspicion(s) are unconfirmed: they reject only if the named run-time check "
                     "confirms them: call run_correctness (or submit), which runs those checks.")
    if warnings:
        parts.append(f"{len(warnings)} warning(s), not blocking but suspicious:")
        parts.extend(_finding_lines(warnings))
    ran = [s.name.value for s in report.stages if s.status not in _NOT_CHECKED]
    skipped = [f"{s.name.value} ({s.status.value})" for s in report.stages if s.status in _NOT_CHECKED]
    parts.append(f"Stages checked: {', '.join(ran) or 'none'}."
                 + (f" Not checked: {', '.join(skipped)}." if skipped else ""))
    if report.score:
        parts.append(f"Score: {report.score}.")
    parts.append("The full report is the structured content (schema_version "
                 f"{report.schema_version}); each finding has a `hint` saying what to write instead.")
    return "\n".join(parts)
