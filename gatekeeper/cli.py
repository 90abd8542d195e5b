"""The command line: a thin layer over gatekeeper.api. Exit codes: 0 pass, 1 reject,
2 usage or configuration error, 3 the gatekeeper itself (or the problem) failed."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from gatekeeper.api import check_many, expand_paths
from gatekeeper.config import load_config
from gatekeeper.errors import GatekeeperError
from gatekeeper.report import Report, report_json_schema

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Says whether a GPU-kernel submission's speedup is real.")
config_app = typer.Typer(no_args_is_help=True, help="Inspect the resolved configuration.")
app.add_typer(config_app, name="config")
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)


class Format(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"


class ProfileName(str, Enum):
    strict = "strict"
    default = "default"
    lenient = "lenient"


def _fail(exc: GatekeeperError) -> None:
    err.print(f"[bold red]gatekeeper:[/] {exc}")
    raise typer.Exit(exc.exit_code)


@app.command()
def check(
    paths: List[Path] = typer.Argument(..., help="submission files or folders of them"),
    problem: Optional[Path] = typer.Option(None, "--problem", "-p", help="the reference problem file"),
    static_only: bool = typer.Option(False, "--static-only", help="run only the static rules (no code executed)"),
    fmt: Format = typer.Option(Format.text, "--format", "-f", help="output format"),
    profile: Optional[ProfileName] = typer.Option(None, "--profile", help="strict | default | lenient"),
    config: Optional[Path] = typer.Option(None, "--config", help="configuration file (TOML)"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="parallel processes"),
    keep_going: bool = typer.Option(False, "--keep-going", help="run every stage even after error findings"),
    seed: Optional[int] = typer.Option(None, "--seed", help="reproduce a run's random inputs"),
    time: bool = typer.Option(False, "--time", help="time and score on the GPU after the gate"),
) -> None:
    """Check submissions. Exit 0 pass, 1 reject, 2 usage error, 3 internal error."""
    try:
        files = expand_paths(paths)
        resolved = load_config(config_file=config, search_from=files[0],
                               overrides={"profile": profile.value if profile else None})
        stages = "static" if static_only else ("timing" if time else "behaviour")
        reports = check_many(files, problem, jobs=jobs or resolved.jobs, stages=stages,
                             config=resolved, keep_going=keep_going, seed=seed, time=time)
        worst = 0
        collected: list[Report] = []
        for report in reports:
            worst = max(worst, report.exit_code)
            if fmt == Format.text:
                from gatekeeper.render.text import print_report

                print_report(report, out)
            elif fmt == Format.json:
                sys.stdout.write(report.model_dump_json(indent=2 if len(files) == 1 else None) + "\n")
                sys.stdout.flush()
            else:
                collected.append(report)
        if fmt == Format.sarif:
            from gatekeeper.render.sarif import to_sarif

            sys.stdout.write(json.dumps(to_sarif(collected), indent=2) + "\n")
        elif fmt == Format.github:
            from gatekeeper.render.github import to_github

            text = to_github(collected)
            if text:
                sys.stdout.write(text + "\n")
    except GatekeeperError as exc:
        _fail(exc)
    raise typer.Exit(worst)


@app.command()
def rules(config: Optional[Path] = typer.Option(None, "--config")) -> None:
    """List every rule: code, name, category, severity, summary."""
    from rich.table import Table

    from gatekeeper.static.discovery import discover_rules

    try:
        resolved = load_config(config_file=config, search_from=Path.cwd())
        found = discover_rules(resolved.rule_dirs)
    except GatekeeperError as exc:
        _fail(exc)
    rows = [(r.code, r.name, r.category.value, r.severity_for(resolved.profile).value, r.summary) for r in found]
    if not out.is_terminal:  # pipes and scripts get one tab-separated line per rule
        for row in rows:
            sys.stdout.write("\t".join(row) + "\n")
        return
    table = Table("code", "name", "category", "severity", "summary", box=None)
    for row in rows:
        table.add_row(*row)
    out.print(table)


@app.command()
def explain(code: str = typer.Argument(..., help="a rule code such as GK101, or its name")) -> None:
    """Print a rule's documentation with a bad and a good example."""
    from gatekeeper.static.discovery import discover_rules

    try:
        resolved = load_config(search_from=Path.cwd())
        found = {r.code: r for r in discover_rules(resolved.rule_dirs)}
    except GatekeeperError as exc:
        _fail(exc)
    rule = found.get(code.upper()) or next((r for r in found.values() if r.name.lower() == code.lower()), None)
    if rule is None:
        err.print(f"[bold red]gatekeeper:[/] no rule {code!r}; `gatekeeper rules` lists them")
        raise typer.Exit(2)
    out.print(f"[bold]{rule.code} {rule.name}[/] ({rule.category.value}, {rule.severity.value} by default)\n")
    out.print(rule.docs(), markup=False)
    out.print(f"\n[green]Fix:[/] {rule.hint}", markup=True)
    if rule.INVALID:
        out.print("\n[bold red]Flagged:[/]")
        out.print(rule.INVALID[0], markup=False)
    if rule.VALID:
        out.print("[bold green]Not flagged:[/]")
        out.print(rule.VALID[0], markup=False)


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
