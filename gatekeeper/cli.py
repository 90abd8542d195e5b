"""The command line: a thin layer over gatekeeper.api. Exit codes: 0 pass, 1 reject,
2 usage or configuration error, 3 the gatekeeper itself (or the problem) failed."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional, TextIO

import typer
from rich.console import Console
from rich.markup import escape

from gatekeeper.config import ProfileName, load_config
from gatekeeper.errors import GatekeeperError, UsageError
from gatekeeper.report import report_json_schema
from gatekeeper.version import __version__

app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Says whether a GPU-kernel submission's speedup is real.")
config_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Inspect the resolved configuration.")
app.add_typer(config_app, name="config")
out = Console(highlight=False, soft_wrap=True)
# soft_wrap: a message is one line that the terminal wraps, never hard-wrapped at 80 columns in a
# pipe or a log (where the breaks land mid-path and grep misses it).
err = Console(stderr=True, highlight=False, soft_wrap=True)


class Format(str, Enum):
    text = "text"
    json = "json"
    jsonl = "jsonl"
    sarif = "sarif"
    github = "github"


class Color(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


def _fail(exc: GatekeeperError) -> None:
    err.print(f"[bold red]gatekeeper:[/] {escape(str(exc))}")  # messages hold [brackets]: text, not markup
    raise typer.Exit(exc.exit_code)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"gatekeeper {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Says whether a GPU-kernel submission's speedup is real."""


def _selectors(values: Optional[List[str]]) -> Optional[list[str]]:
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _console(stream: TextIO, color: Color) -> Console:
    if color == Color.always:  # an explicit flag beats NO_COLOR (no-color.org); auto honours it
        return Console(file=stream, highlight=False, soft_wrap=True, force_terminal=True, color_system="standard",
                       no_color=False)
    if color == Color.never:
        return Console(file=stream, highlight=False, soft_wrap=True, no_color=True, color_system=None)
    return Console(file=stream, highlight=False, soft_wrap=True)


@app.command()
def check(
    ctx: typer.Context,
    paths: List[str] = typer.Argument(..., help="submission files or folders of them; - reads one from stdin"),
    problem: Optional[Path] = typer.Option(None, "--problem", "-p",
                                           help="the reference problem file, or a KernelBench-Hard problem folder (default: the configuration's problem_map)"),
    static_only: bool = typer.Option(False, "--static-only", help="run only the static rules (no code executed)"),
    fmt: Format = typer.Option(Format.text, "--format", "-f",
                               help="text | json (one document) | jsonl (one report a line) | sarif | github"),
    profile: Optional[ProfileName] = typer.Option(None, "--profile", help="strict | default | lenient"),
    config: Optional[Path] = typer.Option(None, "--config", help="configuration file (TOML)"),
    select: Optional[List[str]] = typer.Option(
        None, "--select", help="only these codes, code prefixes (GK2), categories or stages; comma-separated"),
    ignore: Optional[List[str]] = typer.Option(
        None, "--ignore", help="not these codes, code prefixes, categories or stages; comma-separated"),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="exit 0 even when a submission is rejected"),
    output_file: Optional[Path] = typer.Option(None, "--output-file", "-o", help="write the output to this file"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="text: one verdict line per submission"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="text: also evidence and stage durations"),
    color: Color = typer.Option(Color.auto, "--color", help="auto | always | never"),
    stdin_filename: Optional[str] = typer.Option(None, "--stdin-filename",
                                                 help="the name to report (and map to a problem) for -"),
    submissions_only: bool = typer.Option(
        False, "--submissions-only", help="skip files that define no ModelNew (or the configured "
        "submission_classes) and problem files of the problem_map; for pre-commit"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="parallel processes"),
    keep_going: bool = typer.Option(False, "--keep-going", help="run every stage even after error findings"),
    seed: Optional[int] = typer.Option(None, "--seed", help="reproduce a run's random inputs"),
    time: bool = typer.Option(False, "--time", help="time and score on the GPU after the gate"),
    require_isolation: bool = typer.Option(
        False, "--require-isolation", help="refuse to run submission code unless bubblewrap isolation works"),
) -> None:
    """Check submissions. Exit 0 pass, 1 reject, 2 usage error, 3 internal error."""
    _refuse_contradictions(ctx, static_only=static_only, time=time, quiet=quiet, verbose=verbose)
    if time:
        _refuse_time_without_gpu()
    from gatekeeper.cli_check import CheckRequest, run_check

    if require_isolation:  # read by every sandboxed job, in this process and in --jobs workers
        import os

        os.environ["GATEKEEPER_REQUIRE_ISOLATION"] = "1"

    request = CheckRequest(
        paths=paths, problem=problem, stages="static" if static_only else ("timing" if time else "behaviour"),
        fmt=fmt.value, profile=profile.value if profile else None, config=config, select=_selectors(select),
        ignore=_selectors(ignore), exit_zero=exit_zero, output_file=output_file,
        verbosity=-1 if quiet else (1 if verbose else 0), stdin_filename=stdin_filename,
        submissions_only=submissions_only, jobs=jobs, keep_going=keep_going, seed=seed, time=time)
    stream: TextIO = sys.stdout
    try:
        if output_file is not None:
            try:
                stream = output_file.open("w", encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"cannot write --output-file {output_file}: {exc.strerror}") from None
        code = run_check(request, _console(stream, Color.never if output_file else color), stream, err)
    except GatekeeperError as exc:
        _fail(exc)
    finally:
        if stream is not sys.stdout:
            stream.close()
    raise typer.Exit(code)


def _refuse_contradictions(ctx: typer.Context, **flags: bool) -> None:
    """Flags that cannot hold together are a usage error (exit 2) when the arguments are
    parsed, before any file is read: one of them would otherwise be silently ignored."""
    pairs = (("static_only", "time", "--static-only runs no code, and --time runs and times it; pick one"),
             ("quiet", "verbose", "--quiet prints one line a submission, and --verbose adds evidence; pick one"))
    for first, second, why in pairs:
        if flags[first] and flags[second]:
            ctx.fail(why)  # click's usage error: the usage line, the message, exit 2


def _refuse_time_without_gpu() -> None:
    """--time on a machine without a GPU fails in the timing stage, after the build and the
    behaviour runs: refuse before any work, from what the driver exposes (no torch import)."""
    from gatekeeper.gpu_probe import NO_GPU, why_no_gpu

    why = why_no_gpu()
    if why is not None:
        from gatekeeper.errors import InfrastructureError

        _fail(InfrastructureError(NO_GPU.format(why=why)))


class ListFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


@app.command()
def rules(
    config: Optional[Path] = typer.Option(None, "--config"),
    fmt: Optional[ListFormat] = typer.Option(None, "--format", "-f",
                                             help="table (a terminal), tab-separated lines (a pipe), json, markdown"),
) -> None:
    """List every code a report can carry: static rules, build, behaviour and timing checks."""
    from gatekeeper.catalogue import catalogue
    from gatekeeper.cli_docs import markdown_reference

    try:
        resolved = load_config(config_file=config, search_from=Path.cwd())
        found = catalogue(resolved.rule_dirs)
    except GatekeeperError as exc:
        _fail(exc)
    if fmt == ListFormat.markdown:
        sys.stdout.write(markdown_reference(found.values()))
        return
    if fmt == ListFormat.json:
        payload = [{"code": e.code, "name": e.name, "category": e.category.value, "stage": e.stage.value,
                    "severity": resolved.rule(e.code).severity.value if resolved.rule(e.code).severity
                    else e.severity_for(resolved.profile).value, "enabled": resolved.rule(e.code).enabled,
                    "summary": e.summary, "help_uri": e.help_uri} for e in found.values()]
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    rows = []
    for e in found.values():
        settings = resolved.rule(e.code)
        severity = (settings.severity or e.severity_for(resolved.profile)).value if settings.enabled else "off"
        rows.append((e.code, e.name, e.category.value, e.stage.value, severity, e.summary))
    if not out.is_terminal:  # pipes and scripts get one tab-separated line per code
        for row in rows:
            sys.stdout.write("\t".join(row) + "\n")
        return
    from rich.table import Table

    table = Table("code", "name", "category", "stage", "severity", "summary", box=None)
    for row in rows:
        table.add_row(*row)
    out.print(table)


@app.command()
def explain(code: str = typer.Argument(..., help="a code such as GK101 or GK610, or its name")) -> None:
    """Print a code's documentation, its fix and, for static rules, a flagged and a clean example."""
    from gatekeeper.catalogue import closest, lookup

    try:
        resolved = load_config(search_from=Path.cwd())
        entry = lookup(code, resolved.rule_dirs)
        near = closest(code, resolved.rule_dirs) if entry is None else None
    except GatekeeperError as exc:
        _fail(exc)
    if entry is None:
        hint = f"; did you mean {near}?" if near else ""
        err.print(f"[bold red]gatekeeper:[/] no code {code!r}{hint} (`gatekeeper rules` lists them)")
        raise typer.Exit(2)
    out.print(f"[bold]{entry.code} {entry.name}[/] ({entry.category.value}, {entry.stage.value} stage, "
              f"{entry.severity.value} by default)\n")
    out.print(entry.docs, markup=False)
    if entry.confirmed_by:
        out.print(f"\nConfidence {entry.confidence.value}; the run-time check {entry.confirmed_by} confirms it.",
                  markup=False)
    from gatekeeper.rule_trust import trust_line

    trust = trust_line(entry.code) if entry.kind == "rule" else None  # figures of the static stage only
    if trust:
        out.print(f"\n{trust}", markup=False)
    out.print(f"\n[green]Fix:[/] {escape(entry.hint)}")
    if entry.invalid_example:
        out.print("\n[bold red]Flagged:[/]")
        out.print(entry.invalid_example, markup=False)
    if entry.valid_example:
        out.print("\n[bold green]Not flagged:[/]")
        out.print(entry.valid_example, markup=False)
    out.print(f"\n[dim]{entry.help_uri}[/]")


@app.command()
def schema() -> None:
    """Print the report's JSON Schema."""
    sys.stdout.write(json.dumps(report_json_schema(), indent=2) + "\n")


@config_app.command("show")
def config_show(
    config: Optional[Path] = typer.Option(None, "--config"),
    path: Path = typer.Option(Path.cwd(), "--for", help="resolve as for this submission"),
) -> None:
    """Print the resolved configuration as JSON, with the file it came from."""
    try:
        resolved = load_config(config_file=config, search_from=path)
    except GatekeeperError as exc:
        _fail(exc)
    payload = {"source": resolved.source or "built-in defaults", **resolved.model_dump(mode="json")}
    sys.stdout.write(json.dumps(payload, indent=2) + "\n")


# Commands that live with their feature (ingest, leaderboard, mcp, ...): each module
# defines `register(app)`. Imported only if present, and kept light at import time.
_PLUGINS = ("gatekeeper.ingest.cli", "gatekeeper.agent.cli", "gatekeeper.timing.cli")


def _register_plugins() -> None:
    for name in _PLUGINS:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if found:
            importlib.import_module(name).register(app)


_register_plugins()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("gatekeeper: interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
