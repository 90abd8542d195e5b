"""Commands that describe rather than check: `rules`, `explain`, `schema`, `config show`.

Registered on the main CLI at start-up, so this module imports only typer: the catalogue,
the configuration and rich load inside the commands.

`--format` follows one convention across subcommands: `-f/--format`, `text` by default
(for people: a table on a terminal, one tab-separated line per row in a pipe), `json` for
programs, plus the formats a command alone has (markdown, jsonl, sarif, github, csv).
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from gatekeeper.choices import ProfileName


class ListFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    table = "table"  # the name before issue 21; the same as text


def register(app: typer.Typer) -> None:
    from gatekeeper.cli import config_app

    app.command()(rules)
    app.command()(explain)
    app.command()(schema)
    config_app.command("show")(config_show)


def rules(
    config: Optional[Path] = typer.Option(None, "--config", help="configuration file (TOML) [default: the nearest "
                                          "gatekeeper.toml, or pyproject.toml with [tool.gatekeeper]]"),
    profile: Optional[ProfileName] = typer.Option(
        None, "--profile", help="show each code's severity under this profile (docs/profiles.md) [default: the "
        "configuration's profile, else default]"),
    fmt: ListFormat = typer.Option(ListFormat.text, "--format", "-f",
                                   help="text (a table on a terminal, tab-separated lines in a pipe) | json | markdown"),
) -> None:
    """List every code a report can carry: static rules, build, behaviour and timing checks."""
    from gatekeeper.catalogue import catalogue, severity_under
    from gatekeeper.cli import fail, out
    from gatekeeper.cli_docs import markdown_reference
    from gatekeeper.config import load_config
    from gatekeeper.errors import GatekeeperError

    try:
        overrides = {"profile": profile.value} if profile else None
        resolved = load_config(config_file=config, search_from=Path.cwd(), overrides=overrides)
        found = catalogue(resolved.rule_dirs)
    except GatekeeperError as exc:
        fail(exc)
    if fmt == ListFormat.markdown:
        sys.stdout.write(markdown_reference(found.values()))
        return
    rows = []
    for e in found.values():
        settings = resolved.rule(e.code)
        severity, held = severity_under(e, resolved.profile, settings)
        rows.append({"code": e.code, "name": e.name, "category": e.category.value, "stage": e.stage.value,
                     "severity": severity, "held": held, "confidence": e.confidence.value,
                     "confirmed_by": e.confirmed_by, "enabled": settings.enabled, "summary": e.summary,
                     "help_uri": e.help_uri})
    if fmt == ListFormat.json:
        sys.stdout.write(json.dumps([dict(row, profile=resolved.profile) for row in rows], indent=2) + "\n")
        return
    columns = ("code", "name", "category", "stage", "severity", "summary")
    for row in rows:
        if row["held"]:
            row["severity"] = f"{row['severity']} ({row['held']})"
    if not out.is_terminal:  # pipes and scripts get one tab-separated line per code
        for row in rows:
            sys.stdout.write("\t".join(str(row[c]) for c in columns) + "\n")
        return
    from rich.table import Table

    table = Table(*columns, box=None, title=f"profile {resolved.profile}")
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns))
    out.print(table)


def explain(code: str = typer.Argument(..., help="a code such as GK101 or GK610, or its name")) -> None:
    """Print a code's documentation, its fix, and a flagged and a clean example."""
    from rich.markup import escape

    from gatekeeper.catalogue import closest, lookup
    from gatekeeper.cli import err, fail, out
    from gatekeeper.config import load_config
    from gatekeeper.errors import GatekeeperError

    try:
        resolved = load_config(search_from=Path.cwd())
        entry = lookup(code, resolved.rule_dirs)
        near = closest(code, resolved.rule_dirs) if entry is None else None
    except GatekeeperError as exc:
        fail(exc)
    if entry is None:
        hint = f"; did you mean {near}?" if near else ""
        err.print(f"[bold red]gatekeeper:[/] no code {escape(repr(code))}{escape(hint)} (`gatekeeper rules` lists them)")
        raise typer.Exit(2)
    from gatekeeper.catalogue import severity_under

    severities = ", ".join(f"{p}: {' '.join(x for x in (s, f'({h})' if h else '') if x)}"
                           for p in ("strict", "default", "lenient") for s, h in [severity_under(entry, p)])
    out.print(f"[bold]{entry.code} {entry.name}[/] ({entry.category.value}, {entry.stage.value} stage; "
              f"{escape(severities)})\n")
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


def schema() -> None:
    """Print the report's JSON Schema."""
    from gatekeeper.report import report_json_schema

    sys.stdout.write(json.dumps(report_json_schema(), indent=2) + "\n")


def config_show(
    config: Optional[Path] = typer.Option(None, "--config", help="configuration file (TOML) [default: the nearest "
                                          "gatekeeper.toml, or pyproject.toml with [tool.gatekeeper]]"),
    path: Optional[Path] = typer.Option(None, "--for", help="resolve as for this submission [default: the "
                                        "current folder]"),
) -> None:
    """Print the resolved configuration as JSON, with the file it came from."""
    from gatekeeper.cli import fail
    from gatekeeper.config import load_config
    from gatekeeper.errors import GatekeeperError

    try:
        resolved = load_config(config_file=config, search_from=path or Path.cwd())
    except GatekeeperError as exc:
        fail(exc)
    payload = {"source": resolved.source or "built-in defaults", **resolved.model_dump(mode="json")}
    sys.stdout.write(json.dumps(payload, indent=2) + "\n")
