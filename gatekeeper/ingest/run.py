"""`gatekeeper ingest`: read, plan, check in parallel, store, summarise."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections import Counter
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from gatekeeper.config import Config, load_config
from gatekeeper.errors import UsageError
from gatekeeper.ingest.devices import gpu_count, worker_envs
from gatekeeper.ingest.plan import make_plan
from gatekeeper.ingest.pool import WorkerPool
from gatekeeper.ingest.problems import load_problems, mapped_problems
from gatekeeper.ingest.progress import IngestProgress, summary_tables
from gatekeeper.ingest.queries import Filters, entries, input_errors
from gatekeeper.ingest.rows import report_for, result_row
from gatekeeper.ingest.sources import read_source
from gatekeeper.ingest.store import RunKey, Store
from gatekeeper.sandbox.lifeline import RunGuard
from gatekeeper.version import __version__

STAGES = ("static", "build", "behaviour", "timing")
EXECUTORS = ("local", "ray")
_FLUSH_EVERY_ROWS = 64
_FLUSH_EVERY_S = 0.5


class IngestOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: Path
    problems: Optional[Path] = None  # None: the configuration's [[problem_map]] places every file
    store: Path
    jobs: int = Field(default=1, ge=1)
    stages: str = "behaviour"
    profile: Optional[str] = None
    config_file: Optional[Path] = None
    mapping: Optional[Path] = None
    timeout_s: Optional[float] = Field(default=None, gt=0)
    retry_errors: bool = False
    executor: str = "local"
    address: Optional[str] = None  # a Ray cluster; None starts a local Ray instance


class IngestSummary(BaseModel):
    records: int
    checked: int
    done_before: int
    shared: int
    bad_records: int
    verdicts: dict[str, int]
    categories: dict[str, int]
    workers: int
    gpus: int
    elapsed_s: float

    @property
    def exit_code(self) -> int:
        """3 when some record was not checked: a bad input record (no code, no problem, not text)
        or a submission the gatekeeper could not check (crash, timeout); else 0. Rejects are
        the data, not a failure of the ingest. A script must not read "all checked" from 0
        while records were skipped."""
        return 3 if self.verdicts.get("error") or self.bad_records else 0


def default_timeout(stages: str, config: Config) -> float:
    """A backstop per submission; the stages keep their own, finer limits."""
    limits = config.limits
    # The static stage's own limit first, so its message (which rule, which key to raise) wins
    # over this backstop's; 30 s more for loading the problem and writing the report.
    budget = limits.static_timeout_s + 30.0
    if stages in ("build", "behaviour", "timing"):
        budget += limits.build_timeout_s
    if stages in ("behaviour", "timing"):
        budget += limits.import_timeout_s + limits.call_timeout_s * (config.jitter.shapes + 2) * 2
    if stages == "timing":
        budget += 600.0
    return budget


def config_sha(config: Config) -> str:
    return hashlib.sha256(json.dumps(config.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


def ingest(options: IngestOptions, console: Console) -> IngestSummary:
    started = time.monotonic()
    if options.stages not in STAGES:
        raise UsageError(f"unknown --stages {options.stages!r}; choose one of {', '.join(STAGES)}")
    if options.executor not in EXECUTORS:
        raise UsageError(f"unknown --executor {options.executor!r}; choose one of {', '.join(EXECUTORS)}")
    if options.address and options.executor != "ray":
        raise UsageError("--address names a Ray cluster; use it with --executor ray")
    if options.executor == "ray":
        from gatekeeper.ingest.ray_executor import import_ray

        import_ray()  # a missing ray is a usage error before anything is read or written
    config = load_config(config_file=options.config_file, search_from=options.problems or options.source,
                         overrides={"profile": options.profile})
    problems = load_problems(options.problems) if options.problems is not None \
        else mapped_problems(options.source, config)
    items = read_source(options.source, options.mapping, _problem_mapper(config))  # raises before the store is touched
    run_key = RunKey(__version__, config.profile, options.stages, config_sha(config))
    source = str(options.source.resolve())
    store = Store(options.store)
    try:
        plan = make_plan(items, source=source, problems=problems, store=store, run_key=run_key,
                         max_bytes=config.max_file_bytes, dedupe=not config.allow_suppressions,
                         retry_errors=options.retry_errors)
        gpus = gpu_count(options.stages) if plan.tasks else 0
        envs = worker_envs(min(options.jobs, max(1, len(plan.tasks))), gpus)
        _run_tasks(plan, store, run_key, config, options, envs, console)
    finally:
        store.close()
    return _summarise(options, run_key, source, plan, len(envs), gpus, time.monotonic() - started)


def _problem_mapper(config: Config):
    """The configuration's problem_map as a folder source's mapper: file -> problem name."""
    if not config.problem_map:
        return None
    from gatekeeper.problem.mapping import map_problem

    def mapper(path: Path) -> Optional[str]:
        found = map_problem(path, config)
        return found.stem if found is not None else None

    return mapper


def _run_tasks(plan, store: Store, run_key: RunKey, config: Config, options: IngestOptions,
               envs: list[dict], console: Console) -> None:
    if not plan.tasks:
        return
    timeout = options.timeout_s or default_timeout(options.stages, config)
    # Static work runs no submission code and needs no torch, so a memory cap is safe there;
    # later stages manage memory in their own sandboxes (a CUDA process needs a large address space).
    setup = {"config": config.model_dump(mode="json"), "stages": options.stages,
             "memory_mb": config.limits.memory_mb if options.stages == "static" else None}
    guard: "RunGuard | contextlib.nullcontext" = contextlib.nullcontext()
    if options.executor == "ray":
        from gatekeeper.ingest.ray_executor import RayPool

        pool = RayPool(setup, jobs=len(envs), timeout_s=timeout, address=options.address, stages=options.stages)
    else:
        # A kill -9 of ingest must leave no process and no temp dir (issue 12, row 5): the
        # workers' temp dirs live under the guard's root and their trees carry its run tag.
        guard = RunGuard(prefix="gatekeeper-ingest-")
        pool = WorkerPool(setup, [{**env, **guard.env()} for env in envs], timeout)
    last_flush = time.monotonic()
    with guard, IngestProgress(console, len(plan.tasks)) as progress:
        try:
            for outcome in pool.run(plan.tasks):
                info = plan.info[outcome.i]
                report = report_for(outcome, info, run_key)
                store.add_result(result_row(report, info, run_key, outcome.duration_s))
                progress.advance(report.verdict.value)
                now = time.monotonic()
                if store.pending >= _FLUSH_EVERY_ROWS or now - last_flush >= _FLUSH_EVERY_S:
                    store.flush()
                    last_flush = now
        finally:
            store.flush()  # on Ctrl-C too: what finished is kept


def _summarise(options: IngestOptions, run_key: RunKey, source: str, plan, workers: int, gpus: int,
               elapsed: float) -> IngestSummary:
    from gatekeeper.ingest.store import connect

    conn = connect(options.store, readonly=True)
    try:
        filters = Filters(source=source, profile=run_key.profile, stages=run_key.stages,
                          gatekeeper_version=run_key.gatekeeper_version, config_sha256=run_key.config_sha256)
        verdicts: Counter = Counter()
        categories: Counter = Counter()
        for entry in entries(conn, filters):
            verdicts[entry.verdict] += 1
            if entry.verdict == "reject":
                categories.update(entry.categories)
    finally:
        conn.close()
    return IngestSummary(records=plan.records, checked=len(plan.tasks), done_before=plan.done, shared=plan.shared,
                         bad_records=plan.bad, verdicts=dict(verdicts), categories=dict(categories),
                         workers=workers, gpus=gpus, elapsed_s=round(elapsed, 3))


def print_summary(summary: IngestSummary, options: IngestOptions, console: Console) -> None:
    notes = [("bad records", summary.bad_records), ("checked now", summary.checked),
             ("already stored", summary.done_before), ("shared (same code)", summary.shared)]
    for table in summary_tables(Counter(summary.verdicts), Counter(summary.categories), notes):
        console.print(table)
    rate = summary.checked / summary.elapsed_s if summary.elapsed_s > 0 else 0.0
    where = f"{summary.gpus} GPU(s)" if summary.gpus else f"{summary.workers} process(es)"
    if summary.checked:
        console.print(f"{summary.records} records, {summary.checked} checked on {where} in {summary.elapsed_s:.1f} s "
                      f"({rate:.1f}/s); results in {options.store}")
    else:
        console.print(f"{summary.records} records, 0 checked: nothing new to check; results in {options.store}")
    if summary.bad_records:
        from gatekeeper.ingest.store import connect

        conn = connect(options.store, readonly=True)
        try:
            shown = input_errors(conn, str(options.source.resolve()))
        finally:
            conn.close()
        console.print(f"[yellow]{summary.bad_records} record(s) could not be checked[/] (table input_errors):",
                      markup=True)
        for ref, _, message in shown[:10]:
            console.print(f"  {message}", markup=False)
        if len(shown) > 10:
            console.print(f"  ... and {len(shown) - 10} more: `gatekeeper export --store {options.store} "
                          "--format jsonl --errors`", markup=False)
    if summary.verdicts.get("error"):
        console.print(f"[red]{summary.verdicts['error']} submission(s) could not be checked (verdict error: "
                      "crash, timeout or internal error); see the `error` column. Rerun with --retry-errors "
                      "to try them again.[/]", markup=True)
