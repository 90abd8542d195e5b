"""The command line: a thin layer over gatekeeper.api. Exit codes: 0 pass, 1 reject,
2 usage or configuration error, 3 the gatekeeper itself (or the problem) failed.

Start-up matters (`--version`, `--help`, shell completion): this module imports only typer
and light modules; rich, pydantic, libcst and the engine load inside the commands.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from enum import Enum
from pathlib import Path
from typing import List, NoReturn, Optional, TextIO

import typer

from gatekeeper.choices import ProfileName
from gatekeeper.errors import ReportWriteError
from gatekeeper.term import GuardedStdout, LazyConsole, PipeClosed, silence_stdout
from gatekeeper.version import __version__

# rich_markup_mode None: plain click help. Rich markup ate `[ray]` in 'kernel-gatekeeper[ray]',
# and rich's panels labelled flags `<bool>` as if they took a value (`--static-only true`).
app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Says whether a GPU-kernel submission's speedup is real.")
config_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Inspect the resolved configuration.")
app.add_typer(config_app, name="config")
out = LazyConsole()
err = LazyConsole(stderr=True)


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


def fail(exc: Exception) -> NoReturn:
    """A GatekeeperError on stderr, one line, as text (messages hold [brackets]), and its exit code."""
    from rich.markup import escape

    err.print(f"[bold red]gatekeeper:[/] {escape(str(exc))}")
    raise typer.Exit(getattr(exc, "exit_code", 3))


_fail = fail  # the name the plugins' older code used


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


@app.command()
def check(
    ctx: typer.Context,
    paths: List[str] = typer.Argument(..., help="submission files or folders of them; - reads one from stdin"),
    problem: Optional[Path] = typer.Option(
        None, "--problem", "-p", help="the reference problem file, or a KernelBench-Hard problem folder "
        "[default: the configuration's problem_map; none found is an error unless require_problem = false]"),
    static_only: bool = typer.Option(False, "--static-only", help="run only the static rules (no code executed)"),
    fmt: Format = typer.Option(Format.text, "--format", "-f",
                               help="text | json (one document) | jsonl (one report a line) | sarif | github"),
    profile: Optional[ProfileName] = typer.Option(
        None, "--profile", help="strict | default | lenient (docs/profiles.md) [default: the configuration's "
        "profile, else default]"),
    config: Optional[Path] = typer.Option(
        None, "--config", help="configuration file (TOML) [default: the nearest gatekeeper.toml, or pyproject.toml "
        "with [tool.gatekeeper], above the first submission]"),
    select: Optional[List[str]] = typer.Option(
        None, "--select", help="only these codes, code prefixes (GK2), categories or stages; comma-separated "
        "[default: every code]"),
    ignore: Optional[List[str]] = typer.Option(
        None, "--ignore", help="not these codes, code prefixes, categories or stages; comma-separated "
        "[default: none]"),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="exit 0 even when a submission is rejected"),
    output_file: Optional[Path] = typer.Option(None, "--output-file", "-o",
                                               help="write the output to this file [default: stdout]"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="text: one verdict line per submission"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="text: also evidence and stage durations"),
    color: Color = typer.Option(Color.auto, "--color",
                                help="auto (a terminal, unless NO_COLOR is set) | always | never"),
    stdin_filename: Optional[str] = typer.Option(None, "--stdin-filename",
                                                 help="the name to report (and map to a problem) for - [default: -]"),
    submissions_only: bool = typer.Option(
        False, "--submissions-only", help="skip files that define no ModelNew (or the configured "
        "submission_classes) and problem files of the problem_map; for pre-commit"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1,
                                       help="parallel processes [default: the configuration's jobs, else 1]"),
    keep_going: bool = typer.Option(False, "--keep-going", help="run every stage even after error findings"),
    seed: Optional[int] = typer.Option(None, "--seed", help="reproduce a run's random inputs "
                                       "[default: a fresh seed, recorded in the report]"),
    time: bool = typer.Option(False, "--time", help="time and score on the GPU after the gate"),
    require_isolation: bool = typer.Option(
        False, "--require-isolation", help="refuse to run submission code unless bubblewrap isolation works"),
) -> None:
    """Check submissions. Exit 0 pass, 1 reject, 2 usage error, 3 internal error."""
    _refuse_contradictions(ctx, static_only=static_only, time=time, quiet=quiet, verbose=verbose)
    if time:
        _refuse_time_without_gpu()
    from gatekeeper.cli_check import CheckRequest, run_check
    from gatekeeper.cli_gc import check_finished, collector_off_until_frozen
    from gatekeeper.errors import GatekeeperError, UsageError
    from gatekeeper.term import make_console

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
        try:
            if output_file is not None:
                try:
                    stream = GuardedStdout(output_file.open("w", encoding="utf-8"), str(output_file))  # type: ignore
                except OSError as exc:
                    raise UsageError(f"cannot write --output-file {output_file}: {exc.strerror}") from None
            shade = "never" if output_file else color.value
            # only text output prints through rich: the other formats make the console on first use, if ever
            console = make_console(stream, color=shade) if fmt.value == "text" else LazyConsole(file=stream,
                                                                                                color=shade)
            with collector_off_until_frozen():
                code = run_check(request, console, stream, err)
            check_finished()
        finally:
            if stream is not sys.stdout:
                stream.close()  # a failed write shows here (ReportWriteError): a buffered file writes at close
    except GatekeeperError as exc:
        fail(exc)
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

        fail(InfrastructureError(NO_GPU.format(why=why)))


# Commands that live with their feature (rules/explain/schema/config show, ingest, mcp, ...):
# each module defines `register(app)` and keeps its imports inside the commands.
_PLUGINS = ("gatekeeper.cli_info", "gatekeeper.ingest.cli", "gatekeeper.agent.cli", "gatekeeper.timing.cli")


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
    from gatekeeper.term import quiet_known_warnings

    quiet_known_warnings()
    from gatekeeper.cli_gc import exit_now, own_process

    own_process()  # the collector policy of a check run (cli_gc.py) applies to this process only
    sys.stdout = GuardedStdout(sys.stdout)  # type: ignore[assignment]
    try:
        try:
            app()
        finally:
            sys.stdout.flush()  # a closed pipe shows here at the latest, not at interpreter exit
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            exit_now(exc.code or 0)  # after a check: no interpreter teardown (cli_gc.py); else returns
        raise
    except PipeClosed:
        silence_stdout()  # the reader stopped reading: exit 0, as ruff does (gatekeeper.term)
        sys.exit(0)
    except ReportWriteError as exc:  # stdout's last flush failed (a full disk): the verdict was never written
        silence_stdout()
        err.print(f"gatekeeper: {exc}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("gatekeeper: interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
