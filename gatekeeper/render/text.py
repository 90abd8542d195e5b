"""Human-readable output with the offending source lines (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from gatekeeper.report import Report, Severity, StageStatus, Verdict

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_VERDICT = {Verdict.PASS: "bold green", Verdict.REJECT: "bold red", Verdict.ERROR: "bold magenta"}


def print_report(report: Report, console: Console) -> None:
    for f in report.findings:
        where = f"{f.location.path}:{f.location.line}:{f.location.column}" if f.location else report.submission.path
        console.print(
            f"[bold]{escape(where)}[/] [{_STYLE[f.severity]}]{f.severity.value}[/] "
            f"[bold]{f.rule}[/] {f.name} [dim]({f.category.value}, {f.stage.value})[/]"
        )
        console.print(f"  {escape(f.message)}")
        line = f.evidence.get("source_line")
        if line and f.location:
            console.print(f"  [dim]{f.location.line:>5} |[/] {escape(line)}")
            if f.location.end_line in (None, f.location.line):
                width = max(1, (f.location.end_column or f.location.column + 1) - f.location.column)
                console.print(f"  [dim]      |[/] {' ' * (f.location.column - 1)}[{_STYLE[f.severity]}]{'^' * min(width, 80)}[/]")
        cpp = f.evidence.get("cpp_line")
        if cpp:
            console.print(f"  [dim]  C++ |[/] {escape(cpp)}")
        console.print(f"  [green]fix:[/] {escape(f.hint)}")
        console.print()
    ran = []
    for stage in report.stages:
        text = f"{stage.name.value}: {stage.status.value}"
        if stage.status in (StageStatus.SKIPPED, StageStatus.NOT_IMPLEMENTED, StageStatus.ERROR) and stage.reason:
            text += f" ({stage.reason})"
        ran.append(text)
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in Severity}
    console.print(
        f"[{_VERDICT[report.verdict]}]{report.verdict.value.upper()}[/] {escape(report.submission.path)}"
        f" [dim]profile={report.profile}[/]: {counts[Severity.ERROR]} error(s), "
        f"{counts[Severity.WARNING]} warning(s), {counts[Severity.INFO]} note(s)"
    )
    if report.timing:
        from gatekeeper.timing.render import timing_lines

        for line in timing_lines(report.timing, report.score):
            console.print(f"  {escape(line)}")
    if report.error:
        console.print(f"  [magenta]gatekeeper could not finish:[/] {escape(report.error)}")
    for text in ran:
        console.print(f"  [dim]- {escape(text)}[/]")
    if report.verdict == Verdict.PASS and any(
        s.status in (StageStatus.SKIPPED, StageStatus.NOT_IMPLEMENTED) for s in report.stages
    ):
        console.print("  [yellow]note:[/] only the stages marked passed were checked; the others did not run.")
