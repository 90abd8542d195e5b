"""Human-readable output with the offending source lines (rich), wrapped to the terminal.

Verbosity: -1 (quiet) prints one verdict line per report; 0 the findings with their source
lines and fixes; 1 (verbose) adds each finding's evidence and the stages' durations.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from typing import Iterable, Optional

from rich.console import Console
from rich.markup import escape

from gatekeeper.report import Confidence, Finding, ProbeOutcome, Report, Severity, StageStatus, Verdict

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_VERDICT = {Verdict.PASS: "bold green", Verdict.REJECT: "bold red", Verdict.ERROR: "bold magenta"}
_INDENT = "  "


def _wrap(console: Console, text: str, first: str = "", indent: str = _INDENT) -> str:
    """`first` + text wrapped to the console's width; continuation lines under the text."""
    width = max(40, console.width)
    lines = textwrap.wrap(text, width=width, initial_indent=indent + first, subsequent_indent=indent + " " * len(first),
                          break_long_words=False, break_on_hyphens=False) or [indent + first]
    return "\n".join(lines)


def _print_wrapped(console: Console, text: str, label: str = "", style: str = "") -> None:
    wrapped = _wrap(console, text, f"{label} " if label else "")
    if label:  # colour the label only; everything else is escaped text
        head, _, rest = wrapped.partition(label)
        console.print(f"{escape(head)}[{style}]{escape(label)}[/]{escape(rest)}")
    else:
        console.print(escape(wrapped))


def _confidence(f: Finding) -> str:
    parts = []
    if f.confidence != Confidence.CERTAIN:
        parts.append(f"confidence {f.confidence.value}")
    if f.probe is not None and f.probe.check:
        parts.append(f"run-time check {f.probe.check}: {f.probe.outcome.value}")
    elif f.confirmed_by:
        parts.append(f"run-time check {f.confirmed_by}")
    return "; ".join(parts)


def _print_finding(f: Finding, report: Report, console: Console, previous_hint: Optional[str], verbose: bool) -> None:
    where = f"{f.location.path}:{f.location.line}:{f.location.column}" if f.location else report.submission.path
    extra = ", ".join(p for p in (f.category.value, f.stage.value, _confidence(f)) if p)
    console.print(
        f"[bold]{escape(where)}[/] [{_STYLE[f.severity]}]{f.severity.value}[/] "
        f"[bold]{f.rule}[/] {f.name} [dim]({escape(extra)})[/]"
    )
    _print_wrapped(console, f.message)
    line = f.evidence.get("source_line")
    if line and f.location:
        console.print(f"  [dim]{f.location.line:>5} |[/] {escape(line)}")
        if f.location.end_line in (None, f.location.line):
            width = max(1, (f.location.end_column or f.location.column + 1) - f.location.column)
            console.print(f"  [dim]      |[/] {' ' * (f.location.column - 1)}[{_STYLE[f.severity]}]{'^' * min(width, 80)}[/]")
    cpp = f.evidence.get("cpp_line")
    if cpp and (not line or cpp.strip() != line.strip()):  # the same line again says nothing new
        console.print(f"  [dim]  C++ |[/] {escape(cpp)}")
    if f.probe is not None and (f.probe.outcome != ProbeOutcome.UNCONFIRMED or f.probe.static_severity != f.severity):
        links = f" (see {', '.join(f.probe.findings)})" if f.probe.findings else ""
        _print_wrapped(console, f.probe.detail + links, f"{f.probe.outcome.value}:", "dim")
    if f.hint == previous_hint:
        console.print("  [green]fix:[/] [dim]same fix as above[/]")
    else:
        _print_wrapped(console, f.hint, "fix:", "green")
    if verbose:
        for key, value in f.evidence.items():
            if key not in ("source_line", "cpp_line"):
                _print_wrapped(console, f"{key} = {value!r}"[:2000], "evidence:", "dim")
    console.print()


def _how_to_run(report: Report) -> str:
    """How to run the checks that would settle the held suspicions, from why they did not run."""
    behaviour = next((s for s in report.stages if s.name.value == "behaviour"), None)
    why = (behaviour.reason or "") if behaviour is not None else ""
    if "--static-only" in why:
        return " (run without --static-only)"
    if "--keep-going" in why:
        return " (--keep-going runs them)"
    return ""


def verdict_line(report: Report) -> str:
    counts = Counter(f.severity for f in report.findings)
    held = len(report.unconfirmed())
    pending = (f", [yellow]{held} unconfirmed suspicion(s) need a run-time check[/]{_how_to_run(report)}"
               if held else "")
    return (f"[{_VERDICT[report.verdict]}]{report.verdict.value.upper()}[/] {escape(report.submission.path)}"
            f" [dim]profile={report.profile}[/]: {counts[Severity.ERROR]} error(s), "
            f"{counts[Severity.WARNING]} warning(s), {counts[Severity.INFO]} note(s){pending}")


def print_report(report: Report, console: Console, verbosity: int = 0) -> None:
    if verbosity < 0:
        console.print(verdict_line(report))
        if report.error:
            _print_wrapped(console, report.error, "no verdict:", "magenta")
        return
    previous: Optional[str] = None
    for f in report.findings:
        _print_finding(f, report, console, previous, verbosity > 0)
        previous = f.hint
    console.print(verdict_line(report))
    if report.timing:
        from gatekeeper.timing.render import timing_lines

        for line in timing_lines(report.timing, report.score):
            console.print(f"  {escape(line)}")
    if report.work:
        from gatekeeper.behaviour.work import work_lines

        for line in work_lines(report.work):
            console.print(f"  {escape(line)}")
    if report.error:
        _print_wrapped(console, report.error, "no verdict:", "magenta")
    for stage in report.stages:
        text = f"{stage.name.value}: {stage.status.value}"
        if stage.status in (StageStatus.SKIPPED, StageStatus.NOT_IMPLEMENTED, StageStatus.ERROR) and stage.reason:
            text += f" ({stage.reason})"
        if verbosity > 0 and stage.duration_s:
            text += f" in {stage.duration_s:.2f} s"
        console.print(f"  [dim]- {escape(text)}[/]")
    if report.verdict == Verdict.PASS and any(
        s.status in (StageStatus.SKIPPED, StageStatus.NOT_IMPLEMENTED) for s in report.stages
    ):
        console.print("  [yellow]note:[/] only the stages marked passed were checked; the others did not run.")


def totals(reports: Iterable[Report]) -> dict:
    """Files, verdicts and findings by category, for the end of a multi-file run."""
    verdicts: Counter = Counter()
    categories: Counter = Counter()
    files = 0
    for report in reports:
        files += 1
        verdicts[report.verdict.value] += 1
        categories.update(f.category.value for f in report.findings if f.severity == Severity.ERROR)
    return {"files": files, "verdicts": {v.value: verdicts[v.value] for v in Verdict},
            "error_findings_by_category": dict(categories.most_common())}


def print_totals(summary: dict, console: Console) -> None:
    v = summary["verdicts"]
    console.print(f"[bold]{summary['files']} file(s):[/] [green]{v['pass']} pass[/], [red]{v['reject']} reject[/], "
                  f"[magenta]{v['error']} error[/]")
    if summary["error_findings_by_category"]:
        text = ", ".join(f"{k} {n}" for k, n in summary["error_findings_by_category"].items())
        _print_wrapped(console, text, "error findings by category:", "dim")
