"""The Python API. The CLI, the agent server and ingestion are all thin layers over it."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Iterable, Optional, Union

from gatekeeper.config import Config, load_config
from gatekeeper.errors import GatekeeperError, UsageError
from gatekeeper.path_errors import not_found
from gatekeeper.pipeline import RunOptions, Submission, run
from gatekeeper.report import Report, StageName
from gatekeeper.problem.loaded import Problem, load_problem

PathOrCode = Union[str, Path]
STAGE_NAMES = {s.value: s for s in (StageName.STATIC, StageName.BUILD, StageName.BEHAVIOUR, StageName.TIMING)}


def _looks_like_code(value: str) -> bool:
    return "\n" in value or len(value) > 4096 or not value.strip().endswith(".py") and not os.path.exists(value)


def _submission(source_or_path: PathOrCode) -> Submission:
    if isinstance(source_or_path, Path) or not _looks_like_code(source_or_path):
        path = Path(source_or_path)
        if not path.is_file():
            raise UsageError(not_found(path, "submission"))
        try:
            return Submission(path=str(path), data=path.read_bytes())
        except OSError as exc:
            raise UsageError(f"cannot read submission {path}: {exc.strerror}") from None
    return Submission(path="<submission>", data=source_or_path.encode("utf-8", errors="surrogatepass"))


def _problem_path(problem: Optional[PathOrCode], scratch: list[Path]) -> Optional[Path]:
    if problem is None:
        return None
    if isinstance(problem, Path) or not _looks_like_code(problem):
        path = Path(problem)
        if not path.exists():  # a file, or a KernelBench-Hard folder (gatekeeper.problem.formats)
            raise UsageError(not_found(path, "problem file"))
        return path
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="gatekeeper-problem-"))
    path = folder / "problem.py"
    path.write_text(problem, "utf-8")
    scratch.append(folder)
    return path


_FACTS_BY_SOURCE: "OrderedDict[str, Problem]" = OrderedDict()
_FACTS_BY_SOURCE_MAX = 32
_FACTS_LOCK = threading.Lock()


def _static_problem(source: Optional[PathOrCode]) -> Optional[Problem]:
    """The Problem for problem source text, kept by content: an agent's hook passes the
    same problem text on every call, and writing, parsing and deleting it again cost about
    4 ms a call. None for a path, or for a problem that fails to load (the normal path then
    reports the failure as usual)."""
    if not isinstance(source, str) or not _looks_like_code(source):
        return None
    key = hashlib.sha256(source.encode("utf-8", errors="surrogatepass")).hexdigest()
    with _FACTS_LOCK:
        facts = _FACTS_BY_SOURCE.get(key)
        if facts is not None:
            _FACTS_BY_SOURCE.move_to_end(key)
            return facts
    scratch: list[Path] = []
    try:
        facts = load_problem(_problem_path(source, scratch))
    except GatekeeperError:
        return None
    finally:
        for folder in scratch:
            shutil.rmtree(folder, ignore_errors=True)
    with _FACTS_LOCK:
        _FACTS_BY_SOURCE[key] = facts
        while len(_FACTS_BY_SOURCE) > _FACTS_BY_SOURCE_MAX:
            _FACTS_BY_SOURCE.popitem(last=False)
    return facts


def check(
    source_or_path: PathOrCode,
    problem: Optional[PathOrCode] = None,
    *,
    stages: str = "behaviour",
    profile: Optional[str] = None,
    config: Optional[Config] = None,
    config_file: Optional[Path] = None,
    keep_going: bool = False,
    seed: Optional[int] = None,
    time: bool = False,
    import_problem: bool = True,
) -> Report:
    """Check one submission (a path, or its source code) against a problem (path or source).
    Given a path and no problem, the configuration's `[[problem_map]]` chooses the problem.

    `stages` names the last stage to run: static, build, behaviour or timing. With `stages`
    static no code runs, not even the problem's: its facts are read statically, and
    `import_problem` (the name is historical) checks statically that the problem defines
    Model, get_inputs and get_init_inputs (an error, exit 3, otherwise).
    """
    if stages not in STAGE_NAMES:
        raise UsageError(f"unknown stage {stages!r}; choose one of {', '.join(STAGE_NAMES)}")
    submission = _submission(source_or_path)
    if config is None:
        start = Path(submission.path) if submission.path != "<submission>" else Path.cwd()
        config = load_config(config_file=config_file, search_from=start,
                             overrides={"profile": profile})
    elif profile is not None:
        config = config.model_copy(update={"profile": profile})
    if problem is None and submission.path != "<submission>":
        # The configuration's [[problem_map]], as `check`, the pre-commit hook and ingest apply it.
        from gatekeeper.problem.mapping import map_problem

        problem = map_problem(Path(submission.path), config)
    if stages != "static":
        _require_isolation(config)
    scratch: list[Path] = []
    try:
        options = RunOptions(last_stage=STAGE_NAMES[stages], keep_going=keep_going or config.keep_going,
                             seed=seed, time=time or stages == "timing", import_problem=import_problem)
        loaded = _static_problem(problem) if stages == "static" else None
        if loaded is not None:
            # Static-only needs the problem's facts, not its file: reuse them by content.
            return run(submission, None, config, options, problem=loaded)
        problem_path = _problem_path(problem, scratch)
        return fail_closed(run(submission, problem_path, config, options), problem_path is None, config)
    finally:
        for folder in scratch:
            shutil.rmtree(folder, ignore_errors=True)


def fail_closed(report: Report, no_problem: bool, config: Config) -> Report:
    """`require_problem` (default true): a submission checked without its problem cannot pass,
    whichever surface asked (CLI, Python API, MCP, ingest). Without the reference nothing was
    compared with it and the rules that read its sizes did not run, so what would be a pass
    becomes an error (exit 3) that says how to give the problem. Findings still reject: the
    pre-commit hook catches a cached output without one."""
    from gatekeeper.report import Verdict

    if not (no_problem and config.require_problem and report.verdict == Verdict.PASS):
        return report
    where = f" ({config.source})" if config.source else ""
    return report.model_copy(update={"verdict": Verdict.ERROR, "error": (
        f"no problem for {report.submission.path}, so this is not a pass: without the reference problem "
        "nothing was compared with it and the rules that read its sizes did not run. Give the problem "
        "(`--problem PATH` on the command line, `problem=` in the Python API, `problem` in the agent tools), "
        f"map submissions to problems with [[problem_map]] in the configuration{where}, or set "
        "`require_problem = false` there to accept a check by the rules alone")})


def _require_isolation(config: Config) -> None:
    """`--require-isolation` / `require_isolation = true`: refuse before any code runs."""
    from gatekeeper.errors import InfrastructureError
    from gatekeeper.sandbox.isolation import IsolationRequired, require

    if config.require_isolation:
        os.environ["GATEKEEPER_REQUIRE_ISOLATION"] = "1"
    try:
        require()
    except IsolationRequired as exc:
        raise InfrastructureError(str(exc)) from None


def check_static(source_or_path: PathOrCode, problem: Optional[PathOrCode] = None, **kwargs) -> Report:
    """The fast path: static rules only, no code executed (not even the problem's), and no
    check that the problem defines the KernelBench names (the CLI's --static-only and
    check(stages="static") make that static check)."""
    kwargs.setdefault("import_problem", False)
    return check(source_or_path, problem, stages="static", **kwargs)


def expand_paths(paths: Iterable[Path], config: Optional[Config] = None) -> list[Path]:
    """The files `check PATH...` checks: folders walked with the excludes and .gitignore,
    named files always, each once (gatekeeper/discovery.py)."""
    from gatekeeper.discovery import discover

    config = config or Config()
    return discover(list(paths), config.exclude, config.extend_exclude).files


def _check_one(args: tuple) -> Report:
    path, problem, kwargs = args
    return check(path, problem, **kwargs)


def check_many(paths: list[Path], problem: Union[Optional[Path], list[Optional[Path]]], *, jobs: int = 1,
               **kwargs) -> Iterable[Report]:
    """Reports in input order; `jobs` > 1 spreads the work over processes. `problem` is one
    for all, or a list with each path's problem (from the configuration's problem_map)."""
    work = [(p, problem[i] if isinstance(problem, list) else problem, kwargs) for i, p in enumerate(paths)]
    jobs = min(jobs, len(work))  # the pool would start every worker it is allowed, busy or not
    if jobs <= 1 or len(work) == 1:
        for item in work:
            yield _check_one(item)
        return
    yield from _pooled(work, jobs)


def _pooled(work: list[tuple], jobs: int) -> Iterable[Report]:
    """Reports from a process pool, in order. A worker that dies (a native crash, a kill)
    breaks the pool for every file in flight: those are re-run one at a time in a fresh
    single-process pool, so the file that crashes it gets an error report of its own and
    the others get theirs."""
    # imported here: a run with --jobs 1 (and every in-process check) never needs multiprocessing
    from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor

    from gatekeeper.sandbox.lifeline import die_with_parent

    pool = ProcessPoolExecutor(max_workers=jobs, initializer=die_with_parent)
    try:
        futures = [pool.submit(_check_one, item) for item in work]
        for item, future in zip(work, futures):
            try:
                yield future.result()
            except BrokenProcessPool:
                yield _alone(item)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _alone(item: tuple) -> Report:
    from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor

    from gatekeeper.sandbox.lifeline import die_with_parent

    with ProcessPoolExecutor(max_workers=1, initializer=die_with_parent) as single:
        try:
            return single.submit(_check_one, item).result()
        except BrokenProcessPool:
            return _crash_report(item)


def _crash_report(item: tuple) -> Report:
    """The error report of a file whose checking process died (exit 3 for that file only)."""
    from gatekeeper.pipeline import environment
    from gatekeeper.report import FileRef, Verdict

    path, _problem, kwargs = item
    try:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        digest = ""
    return Report(verdict=Verdict.ERROR, submission=FileRef(path=str(path), sha256=digest),
                  profile=kwargs.get("profile") or "default", environment=environment(),
                  error=("the process checking this file died (a crash in a native library, or it was killed); "
                         "the other files were checked; re-run this one alone to see more, and report it: "
                         "gatekeeper must never crash on any input"))
