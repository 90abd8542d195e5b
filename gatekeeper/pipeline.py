"""The pipeline: load -> static -> build -> behaviour -> timing -> score -> verdict.

Each stage returns findings and a status. A stage with an error-severity finding stops the
pipeline unless keep_going. Stages that did not run are listed with the reason, never as
passed.
"""

from __future__ import annotations

import importlib
import importlib.util
import platform
import time
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Callable, Optional

from gatekeeper import progress
from gatekeeper.catalogue import configured
from gatekeeper.config import Config
from gatekeeper.errors import GatekeeperError
from gatekeeper.report import (
    Environment, FileRef, Finding, ProblemRef, Report, Severity, StageName, StageResult,
    StageStatus, Verdict,
)
from gatekeeper.problem.loaded import Problem, load_problem
from gatekeeper.settle import settle
from gatekeeper.stages import RunOptions, StageOutcome, Submission
from gatekeeper.static.bundle_stage import run_static_bundle
from gatekeeper.static.time_limit import static_time_limit
from gatekeeper.version import __version__

# Submission, RunOptions and StageOutcome live in gatekeeper.stages; imported here for API users.
__all__ = ["ORDER", "RunOptions", "STAGE_RUNNERS", "StageOutcome", "Submission", "environment", "run"]

ORDER = (StageName.STATIC, StageName.BUILD, StageName.BEHAVIOUR, StageName.TIMING)


# Later stages live in their own packages and are imported only when they run. Each is
# `fn(submission, problem, config, options, findings_so_far) -> StageOutcome`, `problem`
# being the one Problem the pipeline loaded (None when there is none).
STAGE_RUNNERS: dict[StageName, str] = {
    StageName.BUILD: "gatekeeper.build.stage:run_build",
    StageName.BEHAVIOUR: "gatekeeper.behaviour.stage:run_behaviour",
    StageName.TIMING: "gatekeeper.timing.stage:run_timing",
}


def _runner(name: StageName) -> Optional[Callable[..., StageOutcome]]:
    target = STAGE_RUNNERS.get(name)
    if target is None:
        return None
    module_name, func = target.split(":")
    try:
        if importlib.util.find_spec(module_name) is None:
            return None
    except ModuleNotFoundError:
        return None
    return getattr(importlib.import_module(module_name), func)


@lru_cache(maxsize=1)
def _torch_version() -> Optional[str]:
    # Read from the installed metadata, not by importing torch (seconds) in static runs.
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def environment() -> Environment:
    return Environment(gatekeeper=__version__, python=platform.python_version(), torch=_torch_version())


def _has_error(findings: list[Finding]) -> bool:
    return any(f.severity == Severity.ERROR for f in findings)


def run(
    submission: Submission,
    problem_path: Optional[Path],
    config: Config,
    options: RunOptions,
    problem: Optional[Problem] = None,
) -> Report:
    env = environment()
    progress.begin(submission.path)  # the terminal's status line (gatekeeper/progress.py), if on
    stages: list[StageResult] = []
    findings: list[Finding] = []
    extra: dict = {}
    env_extra: dict = {}
    problem_ref: Optional[ProblemRef] = None
    bundle: list[FileRef] = []  # the submission's own modules, checked with it
    try:
        if problem_path is not None and problem is None:
            problem = load_problem(problem_path, tuple(config.jitter.names))  # once, for every stage, no code run
        if problem is not None:
            problem_ref = problem.ref()
            if options.last_stage != StageName.STATIC or options.time:
                # Stages that run code may run shapes.py too, when a static read could not follow it.
                from gatekeeper.problem.shapes_worker import resolve_shapes

                problem = resolve_shapes(problem, config)
            elif options.import_problem:  # no later stage would notice a broken problem; no code runs
                from gatekeeper.problem.loaded import require_names

                require_names(problem)
        stopped: Optional[str] = None
        idle = config.idle_stages()  # stages --select/--ignore left no code in: not run, never "passed"
        for name in ORDER:
            if ORDER.index(name) > ORDER.index(options.last_stage) and not (name == StageName.TIMING and options.time):
                reason = "not requested (--static-only)" if options.last_stage == StageName.STATIC else "not requested"
                stages.append(StageResult(name=name, status=StageStatus.SKIPPED, reason=reason))
                continue
            if name in idle:
                stages.append(StageResult(name=name, status=StageStatus.SKIPPED, reason=(
                    "deselected: --select/--ignore or the configuration leave none of its codes enabled")))
                continue
            if stopped is not None:
                stages.append(StageResult(name=name, status=StageStatus.SKIPPED, reason=stopped))
                continue
            if name == StageName.TIMING and _has_error(findings):
                # --keep-going ran the checks; a rejected submission is not timed: that is a skip.
                rejected_by = next(f.stage.value for f in findings if f.severity == Severity.ERROR)
                stages.append(StageResult(name=name, status=StageStatus.SKIPPED, reason=(
                    f"timing runs only on a submission with no error findings; the {rejected_by} stage rejected it")))
                continue
            started = time.perf_counter()
            progress.stage(name.value)
            if name == StageName.STATIC:
                with static_time_limit(config.limits.static_timeout_s, submission.path):
                    found, bundle = run_static_bundle(submission, config, problem.facts if problem else None)
                status = StageStatus.FAILED if _has_error(found) else StageStatus.PASSED
                reason = None
            else:
                runner = _runner(name)
                if runner is None:
                    stages.append(StageResult(
                        name=name, status=StageStatus.NOT_IMPLEMENTED,
                        reason=f"the {name.value} stage is not available in gatekeeper {__version__}; it did not run",
                    ))
                    continue
                outcome = runner(submission, problem, config, options, list(findings))
                status, found = outcome.status, configured(outcome.findings, config)
                if status == StageStatus.FAILED and not _has_error(found):
                    status = StageStatus.PASSED  # the configuration disabled or downgraded what failed it
                elif status == StageStatus.PASSED and _has_error(found):
                    status = StageStatus.FAILED  # the profile made a policy warning an error (strict_severity)
                extra.update(outcome.report)
                env_extra.update(outcome.environment)
                reason = outcome.reason
            findings.extend(found)
            stages.append(StageResult(name=name, status=status,
                                      duration_s=round(time.perf_counter() - started, 4), reason=reason))
            if status == StageStatus.ERROR:
                stopped = f"the {name.value} stage could not complete"
            elif status == StageStatus.FAILED and not options.keep_going:
                stopped = f"stopped after {name.value} findings (use --keep-going to run it anyway)"
    except GatekeeperError as exc:
        if exc.exit_code == 2:
            raise
        settle(findings, stages, config, extra.get("work"))
        return _error_report(submission, problem_ref, config, env, stages, findings, str(exc))
    if env_extra:
        from gatekeeper.sandbox.isolation import reason_for  # why not bubblewrap, when it is not

        env = env.model_copy(update={**env_extra, "isolation_reason": reason_for(env_extra.get("isolation"))})
    settle(findings, stages, config, extra.get("work"))  # static suspicions -> the run-time evidence
    if any(s.status == StageStatus.ERROR for s in stages):
        why = next(s.reason for s in stages if s.status == StageStatus.ERROR) or "a stage failed"
        if not _has_error(findings):
            return _error_report(submission, problem_ref, config, env, stages, findings, why)
    verdict = Verdict.REJECT if _has_error(findings) else Verdict.PASS
    return Report(
        verdict=verdict, submission=FileRef(path=submission.path, sha256=submission.sha256),
        problem=problem_ref, profile=config.profile, stages=stages, findings=findings,
        environment=env, seed=options.seed, bundle=bundle, **{k: v for k, v in extra.items() if k in ("timing", "score", "work")},
    )


def _error_report(submission, problem_ref, config, env, stages, findings, message) -> Report:
    return Report(
        verdict=Verdict.ERROR, submission=FileRef(path=submission.path, sha256=submission.sha256),
        problem=problem_ref, profile=config.profile, stages=stages, findings=findings,
        environment=env, error=message,
    )
