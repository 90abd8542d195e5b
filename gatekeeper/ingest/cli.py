"""Commands `ingest`, `leaderboard` and `export`, registered on the main CLI.

Imports stay inside the commands: `gatekeeper check` loads this module at start-up."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from gatekeeper.choices import ProfileName
from gatekeeper.term import make_console


class StageChoice(str, Enum):
    static = "static"
    build = "build"
    behaviour = "behaviour"
    timing = "timing"


class ExecutorChoice(str, Enum):
    local = "local"
    ray = "ray"


class ExportFormat(str, Enum):
    csv = "csv"
    jsonl = "jsonl"


def _fail(exc) -> None:
    from gatekeeper.cli import fail

    fail(exc)  # one line on stderr, escaped (messages hold "kernel-gatekeeper[ray]"), NO_COLOR honoured


def ingest(
    source: Path = typer.Argument(..., help="a folder of submissions, a .jsonl or a .parquet of {id, problem, code}"),
    problems: Optional[Path] = typer.Option(
        None, "--problems", help="folder of problem files; a record's problem is a file's stem [default: the "
        "configuration's [[problem_map]] places each file of a folder source]"),
    store: Path = typer.Option(..., "--store", help="SQLite results store (created if missing)"),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="worker processes when there is no GPU"),
    stages: StageChoice = typer.Option(StageChoice.behaviour, "--stages", help="the last stage to run"),
    profile: Optional[ProfileName] = typer.Option(None, "--profile", help="strict | default | lenient [default: the "
                                                  "configuration's profile, else default]"),
    config: Optional[Path] = typer.Option(None, "--config", help="configuration file (TOML) [default: the "
                                           "nearest gatekeeper.toml or pyproject.toml above the source]"),
    mapping: Optional[Path] = typer.Option(None, "--mapping", help="folder source: JSON/TOML map of file -> problem "
                                           "[default: the configuration's problem_map, else the file's stem]"),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="seconds per submission before its worker is "
                                           "killed [default: the [limits] of the stages run, plus 30 s]"),
    retry_errors: bool = typer.Option(False, "--retry-errors", help="run again the submissions stored with verdict error"),
    executor: ExecutorChoice = typer.Option(ExecutorChoice.local, "--executor",
                                            help="local worker processes, or Ray tasks (pip install 'kernel-gatekeeper[ray]')"),
    address: Optional[str] = typer.Option(None, "--address", help="--executor ray: the Ray cluster [default: start a local one]"),
) -> None:
    """Check a batch of submissions in parallel into a results store; rerun to resume.
    Exit 0 when every submission was checked (rejects included), 2 on usage errors,
    3 when some records could not be checked (a bad input record, a crash, a timeout)."""
    from gatekeeper.config import max_jobs
    from gatekeeper.errors import GatekeeperError, UsageError
    from gatekeeper.ingest.run import IngestOptions, ingest as run_ingest, print_summary

    if jobs > max_jobs():  # as `check` refuses it: thousands of forked workers exhaust memory first
        _fail(UsageError(f"--jobs asks for {jobs} worker processes; this machine allows at most {max_jobs()} "
                         f"(4 per CPU). Pass --jobs {max_jobs()} or fewer."))
    options = IngestOptions(source=source, problems=problems, store=store, jobs=jobs, stages=stages.value,
                            profile=profile.value if profile else None, config_file=config, mapping=mapping,
                            timeout_s=timeout, retry_errors=retry_errors, executor=executor.value,
                            address=address)
    err = make_console(stderr=True)  # the terminal conventions of every command (gatekeeper.term)
    try:
        summary = run_ingest(options, err)
    except GatekeeperError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        err.print(f"gatekeeper: interrupted; finished results are stored in {store}. "
                  "Run the same command again to resume.")
        raise typer.Exit(130)
    print_summary(summary, options, make_console())
    raise typer.Exit(summary.exit_code)


def leaderboard(
    store: Path = typer.Option(..., "--store", help="the results store written by `gatekeeper ingest`"),
    problem: Optional[str] = typer.Option(None, "--problem", help="only this problem [default: every problem]"),
    profile: Optional[ProfileName] = typer.Option(None, "--profile", help="only results under this profile "
                                                  "[default: every profile]"),
    stages: Optional[StageChoice] = typer.Option(None, "--stages", help="only results of runs to this stage "
                                                 "[default: every run]"),
    html: Optional[Path] = typer.Option(None, "--html", help="write a self-contained index.html into this folder "
                                        "[default: none; the table goes to stdout]"),
) -> None:
    """Per problem: the best passing submission (speedup, SOL fraction) and rejects by category."""
    from gatekeeper.errors import GatekeeperError
    from gatekeeper.ingest.leaderboard import build_boards, load_meta, print_boards
    from gatekeeper.ingest.queries import Filters, entries
    from gatekeeper.ingest.store import connect

    filters = Filters(problem=problem, profile=profile.value if profile else None,
                      stages=stages.value if stages else None)
    out = make_console(soft_wrap=False)
    if not out.is_terminal:
        out = make_console(soft_wrap=False, width=200)  # a pipe or a log: do not squeeze the table to 80
    try:
        conn = connect(store, readonly=True)
        try:
            items = list(entries(conn, filters))
            boards = build_boards(items, load_meta(conn))
            if html is not None:
                from gatekeeper.ingest.html_page import write_page

                page = write_page(conn, boards, items, html)
                out.print(f"wrote {page}", markup=False)
            elif not boards:
                out.print("no results match; check --store and the filters", markup=False)
            else:
                print_boards(boards, out)
        finally:
            conn.close()
    except GatekeeperError as exc:
        _fail(exc)


def export(
    store: Path = typer.Option(..., "--store", help="the results store written by `gatekeeper ingest`"),
    fmt: ExportFormat = typer.Option(..., "--format", "-f", help="csv or jsonl"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="file to write [default: stdout]"),
    problem: Optional[str] = typer.Option(None, "--problem", help="only this problem [default: every problem]"),
    errors: bool = typer.Option(False, "--errors", help="export the records that could not be checked instead"),
) -> None:
    """One row per stored result (or per bad input record with --errors)."""
    from gatekeeper.errors import GatekeeperError, UsageError
    from gatekeeper.ingest.export import export_input_errors, export_results
    from gatekeeper.ingest.queries import Filters
    from gatekeeper.ingest.store import connect

    try:
        conn = connect(store, readonly=True)
        try:
            handle = sys.stdout
            if output is not None:
                try:
                    handle = output.open("w", encoding="utf-8", newline="")
                except OSError as exc:
                    raise UsageError(f"cannot write {output}: {exc.strerror}") from None
            try:
                if errors:
                    export_input_errors(conn, fmt.value, handle)
                else:
                    export_results(conn, fmt.value, handle, Filters(problem=problem))
            finally:
                if handle is not sys.stdout:
                    handle.close()
        finally:
            conn.close()
    except GatekeeperError as exc:
        _fail(exc)


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)
    app.command("leaderboard")(leaderboard)
    app.command("export")(export)
