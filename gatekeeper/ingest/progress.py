"""What a person watching an ingest sees: a progress bar on a terminal, a summary at the end."""

from __future__ import annotations

from collections import Counter
from typing import Optional

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn,
                           TimeRemainingColumn)
from rich.table import Table
from rich.text import Text


class RateColumn(ProgressColumn):
    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.1f}/s" if speed else "-/s", style="progress.data.speed")


class IngestProgress:
    """A no-op unless the console is a terminal, so logs and pipes stay clean."""

    def __init__(self, console: Console, total: int):
        self.enabled = console.is_terminal and total > 0
        self._failed = 0
        self._rejected = 0
        self._progress: Optional[Progress] = None
        if self.enabled:
            self._progress = Progress(
                TextColumn("checking"), BarColumn(), MofNCompleteColumn(),
                TextColumn("[red]failed {task.fields[failed]}[/] rejected {task.fields[rejected]}"),
                RateColumn(), TimeRemainingColumn(), console=console, transient=False)
            self._task = self._progress.add_task("ingest", total=total, failed=0, rejected=0)

    def __enter__(self) -> "IngestProgress":
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, verdict: str) -> None:
        self._failed += verdict == "error"
        self._rejected += verdict == "reject"
        if self._progress is not None:
            self._progress.update(self._task, advance=1, failed=self._failed, rejected=self._rejected)


def summary_tables(verdicts: Counter, categories: Counter, notes: list[tuple[str, int]]) -> list[Table]:
    by_verdict = Table("verdict", "submissions", title="by verdict", title_justify="left", box=None)
    for verdict in ("pass", "reject", "error"):
        by_verdict.add_row(verdict, str(verdicts.get(verdict, 0)))
    for label, count in notes:
        by_verdict.add_row(label, str(count))
    by_category = Table("category", "rejected submissions", title="rejects by category",
                        title_justify="left", box=None)
    for category, count in sorted(categories.items(), key=lambda kv: (-kv[1], kv[0])):
        by_category.add_row(category, str(count))
    if not categories:
        by_category.add_row("(none)", "0")
    return [by_verdict, by_category]
