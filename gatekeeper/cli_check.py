"""`gatekeeper check`: resolve the submissions, their problems and the configuration, run
the checks, render the reports, and choose the exit code. Kept apart from cli.py so that
the command's options stay readable there."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, TextIO

from gatekeeper import progress
from gatekeeper.config import Config, load_config
from gatekeeper.errors import UsageError
from gatekeeper.report import Location, Report

if TYPE_CHECKING:  # rich is imported only where text is printed (json, sarif, github runs never need it)
    from rich.console import Console


@dataclass
class CheckRequest:
    paths: list[str]
    problem: Optional[Path]
    stages: str
    fmt: str
    profile: Optional[str]
    config: Optional[Path]
    select: Optional[list[str]]
    ignore: Optional[list[str]]
    exit_zero: bool
    output_file: Optional[Path]
    verbosity: int
    stdin_filename: Optional[str]
    submissions_only: bool
    jobs: Optional[int]
    keep_going: bool
    seed: Optional[int]
    time: bool


def defines_submission(path: Path, config: Config) -> bool:
    """Whether the file defines one of the configured submission classes (ModelNew)."""
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return True  # let the check itself report what is wrong with it
    classes = list(config.submission_classes)
    if path.name == "solution.py" and (path.parent / "reference.py").is_file():
        classes.append("Model")  # KernelBench-Hard: solution.py beside reference.py defines Model
    names = "|".join(re.escape(n) for n in classes)
    return re.search(rf"^\s*(class\s+({names})\b|({names})\s*=)", text, re.MULTILINE) is not None


def _renamed(report: Report, name: str) -> Report:
    """A report on stdin text, under the name given for it."""
    findings = [f.model_copy(update={"location": Location(**{**f.location.model_dump(), "path": name})})
                if f.location and f.location.path == "<submission>" else f for f in report.findings]
    return report.model_copy(update={"submission": report.submission.model_copy(update={"path": name}),
                                     "findings": findings})


def _problem_for(path: Path, request: CheckRequest, config: Config) -> Optional[Path]:
    if request.problem is not None:
        return request.problem
    from gatekeeper.problem.mapping import map_problem

    return map_problem(path, config)


def _problems(request: CheckRequest, config: Config, files: list[Path], stdin_text: Optional[str]) -> list:
    """Each submission's problem (None: none given or mapped), resolved before any work so that a
    mapping error stops the run before the first check."""
    if stdin_text is not None:
        name = request.stdin_filename or "-"
        return [_problem_for(Path(name), request, config) if request.stdin_filename else request.problem]
    return [_problem_for(path, request, config) for path in files]


def _reports(request: CheckRequest, config: Config, files: list[Path], stdin_text: Optional[str], problems: list):
    from gatekeeper.api import check, check_many

    kwargs = dict(stages=request.stages, config=config, keep_going=request.keep_going, seed=request.seed,
                  time=request.time)
    if stdin_text is not None:
        name = request.stdin_filename or "-"
        yield _renamed(check(stdin_text, problems[0], **kwargs), name)
        return
    yield from check_many(files, problems, jobs=request.jobs or config.jobs, **kwargs)


def _warn_if_nothing_runs(request: CheckRequest, config: Config, err: Console) -> None:
    """A selection that leaves no stage with a code to run checks nothing: say so, once."""
    from gatekeeper.report import StageName

    wanted = {StageName.STATIC} if request.stages == "static" else {
        StageName.STATIC, StageName.BUILD, StageName.BEHAVIOUR} | ({StageName.TIMING} if request.time else set())
    if wanted <= config.idle_stages():
        err.print("gatekeeper: warning: --select/--ignore (with the configuration's select, ignore and rules) "
                  f"leave no enabled code in the stages this run would run ({', '.join(sorted(s.value for s in wanted))}); "
                  "nothing is checked and every submission passes. Widen --select or narrow --ignore"
                  + (", or drop --static-only to run the run-time checks" if request.stages == "static" else ""),
                  markup=False, highlight=False, soft_wrap=True)


def run_check(request: CheckRequest, out: Console, stream: TextIO, err: Console) -> int:
    from gatekeeper.api import expand_paths

    stdin_text: Optional[str] = None
    files: list[Path] = []
    if "-" in request.paths:
        if len(request.paths) > 1:
            raise UsageError("- (stdin) must be the only submission argument")
        start = Path(request.stdin_filename) if request.stdin_filename else Path.cwd()
    else:
        start = Path(request.paths[0])
    config = load_config(config_file=request.config, search_from=start,
                         overrides={"profile": request.profile, "select": request.select, "ignore": request.ignore})
    _check_jobs(request, config)
    if "-" in request.paths:  # read after the configuration, whose max_file_bytes bounds it
        stdin_text = _read_stdin(config.max_file_bytes)
    if stdin_text is None:  # after the configuration: its exclude / extend-exclude shape the walk
        files = expand_paths([Path(p) for p in request.paths], config)
    if request.submissions_only and files:
        from gatekeeper.problem.mapping import is_problem_file

        files = [f for f in files if defines_submission(f, config) and not is_problem_file(f, config)]
        if not files:
            if request.verbosity >= 0 and request.fmt == "text":
                err.print("gatekeeper: no submissions among the files (none defines "
                          f"{' or '.join(config.submission_classes)}); nothing to check")
            return 0
    problems = _problems(request, config, files, stdin_text)
    _warn_if_nothing_runs(request, config, err)
    single = stdin_text is not None or (len(request.paths) == 1 and Path(request.paths[0]).is_file())
    progress.start_for_check(sys.stderr, request.fmt, request.verbosity, len(files) or 1)  # terminals only
    reports = _reports(request, config, files, stdin_text, problems)  # api.check fails closed without a problem
    if request.stages == "static":
        return _render(request, config, reports, single, out, stream)
    from gatekeeper.sandbox.lifeline import guarded_run

    _warn_without_isolation(request, err)
    with guarded_run("gatekeeper-check-"):  # a kill -9 of check leaves no process, no temp dir (issue 12)
        return _render(request, config, reports, single, out, stream)


def _read_stdin(limit: int) -> str:
    """The submission on stdin, read up to `limit` bytes (max_file_bytes): an endless stream
    (`< /dev/zero`) would otherwise be read until memory runs out."""
    try:
        data = sys.stdin.buffer.read(limit + 1)
    except OSError as exc:
        raise UsageError(f"cannot read the submission from standard input: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise UsageError(f"the submission on standard input is larger than {limit:,} bytes (max_file_bytes in the "
                         "configuration); give a smaller submission, or raise max_file_bytes")
    text = data.decode("utf-8", errors="surrogateescape")
    return text if "\n" in text else text + "\n"  # one line of code is still code, never a path


def _check_jobs(request: CheckRequest, config: Config) -> None:
    """Refuse a process count past max_jobs() (4 per CPU, at most 256): `-j 10000` forked until memory ran out."""
    from gatekeeper.config import max_jobs

    jobs, ceiling = request.jobs or config.jobs, max_jobs()
    if jobs > ceiling:
        origin = "--jobs" if request.jobs else f"'jobs' in {config.source or 'the configuration'}"
        raise UsageError(f"{origin} asks for {jobs} parallel processes; this machine allows at most {ceiling} "
                         f"(4 per CPU, {os.cpu_count() or 1} CPUs); give a smaller number")


def _warn_without_isolation(request: CheckRequest, err: Console) -> None:
    """One line on stderr before untrusted code runs with isolation `none` (docs/threat-model.md)."""
    from gatekeeper.sandbox.isolation import detect, isolation_required

    found = detect()
    if found.name == "none" and request.verbosity >= 0 and not isolation_required():
        err.print(f"gatekeeper: warning: running submission code without OS isolation ({found.detail}); it can "
                  f"read and write your files, reach the network and signal gatekeeper. Why: {found.reason}. "
                  "Or pass --require-isolation to refuse", markup=False, highlight=False, soft_wrap=True)
    elif found.reason and request.verbosity >= 1:  # -v: why a weaker level than bubblewrap is in force
        err.print(f"gatekeeper: isolation: {found.name}, not bubblewrap: {found.reason}", markup=False,
                  highlight=False, soft_wrap=True)


def _render(request: CheckRequest, config: Config, reports, single: bool, out: Console, stream: TextIO) -> int:
    from gatekeeper.cli_gc import frozen_after_first
    from gatekeeper.render.json_text import report_json, reports_json

    if request.fmt == "text":
        from gatekeeper.render.text import print_report, print_totals, totals
    worst = 0
    collected: list[Report] = []
    for report in frozen_after_first(reports):  # the collector's policy in a check run: cli_gc.py
        progress.clear()  # the status line goes before the report is printed
        worst = max(worst, report.exit_code)
        collected.append(report)
        if request.fmt == "text":
            print_report(report, out, request.verbosity)
        elif request.fmt == "jsonl":
            stream.write(report_json(report) + "\n")
            stream.flush()
    if request.fmt == "text" and len(collected) > 1:
        out.print()
        print_totals(totals(collected), out)
    elif request.fmt == "json":
        if single:
            stream.write(report_json(collected[0], 2) + "\n")
        else:
            stream.write(reports_json(collected) + "\n")
    elif request.fmt == "sarif":
        from gatekeeper.render.sarif import to_sarif

        stream.write(json.dumps(to_sarif(collected, config.rule_dirs), indent=2) + "\n")
    elif request.fmt == "github":
        from gatekeeper.render.github import to_github

        text = to_github(collected)
        if text:
            stream.write(text + "\n")
    if request.exit_zero and worst == 1:
        return 0  # rejects are reported, not failed on; gatekeeper's own errors still exit 3
    return worst
