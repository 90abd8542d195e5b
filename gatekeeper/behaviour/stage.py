"""The behaviour stage: plan trials, run the reference and the submission in separate
sandboxed workers, judge in the parent."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from gatekeeper.runtime.failures import job_errors, missing_stack_reason, model_location, needs_cuda_reason, worker_failure
from gatekeeper.behaviour.evidence import runtime_evidence
from gatekeeper.runtime.checks import finding
from gatekeeper.runtime.disk import disk_full_reason, free_bytes, is_disk_full, mentions_disk_full
from gatekeeper.behaviour.completeness import infrastructure_failure
from gatekeeper.behaviour.judge import Judge
from gatekeeper.behaviour.schedule_checks import (
    judge_calls, loop_probe_fractions, queued_indices, recorded_indices, work_messages,
)
from gatekeeper.behaviour.repeat_probe import RepeatProbe
from gatekeeper.behaviour.schedule_judge import ScheduleJudge
from gatekeeper import progress
from gatekeeper.build.cache import cuda_present, exclusive, extensions_dir, is_built
from gatekeeper.build.sources import extract_bundle
from gatekeeper.build.stage import submission_file
from gatekeeper.config import Config
from gatekeeper.stages import RunOptions, StageOutcome, Submission
from gatekeeper.problem.plan import Trial, draw_seed, plan_trials
from gatekeeper.problem.schedule import AFTER_LOOP, plan_schedule
from gatekeeper.problem.secret import init_seed
from gatekeeper.problem.loaded import Problem
from gatekeeper.report import Finding, StageName, StageStatus
from gatekeeper.sandbox import JobResult, run_job
from gatekeeper.sandbox.runner import Job

STAGE = StageName.BEHAVIOUR
# Trusted start-up (python + torch import, before any submission code) gets at least this
# long, so that a short import limit meant for the submission does not fail a busy machine.
TRUSTED_START_S = 120.0
# The call schedule (problem.schedule): hundreds of calls; its phase gets at least this long.
SCHEDULE_S = 120.0
# Phase durations of the last run in this process (for bench/bench_behaviour.py).
LAST_TIMINGS: dict[str, float] = {}
LAST_SCHEDULE: dict[str, Any] = {}  # the call schedule of the last run: planned, sent, observed
SCHEDULE = True  # the call schedule (issue 15); bench/bench_behaviour.py switches it off to measure its cost


def _error(reason: str, environment: Optional[dict[str, Any]] = None) -> StageOutcome:
    return StageOutcome(StageStatus.ERROR, reason=reason, environment=environment or {})


def run_reference(problem: Problem, trials: list[Trial], seed: int, config: Config,
                  device: Optional[str] = None, schedule: Optional[dict[str, Any]] = None) -> JobResult:
    limits = config.limits
    attempts = max(len(t.attempts) for t in trials)
    params = {**problem.describe(), "jitter_names": list(config.jitter.names), "device": device,
              "trials": [t.to_json(init_seed=init_seed(seed)) for t in trials], "schedule": schedule}
    return run_job("gatekeeper.behaviour.reference_job:reference_job", params,
                   timeouts={"load": max(limits.import_timeout_s, TRUSTED_START_S),
                             "trial": limits.call_timeout_s * (attempts + 1),
                             "schedule": max(limits.call_timeout_s, SCHEDULE_S)},
                   default_timeout_s=max(limits.import_timeout_s, TRUSTED_START_S), memory_mb=limits.memory_mb,
                   cap_address_space=not cuda_present(), env={"OMP_NUM_THREADS": "1"})


def start_subject(path: Path, device_hint: str, config: Config, ext_dir: Optional[Path], cold_build: bool,
                  wait_s: float, entry: str = "ModelNew") -> Job:
    """Started before the reference finishes: it imports torch and the submission meanwhile."""
    limits = config.limits
    first = limits.build_timeout_s if cold_build else limits.import_timeout_s
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    roots = []
    if ext_dir is not None:
        env["TORCH_EXTENSIONS_DIR"] = str(ext_dir)
        roots.append(str(ext_dir))
    params = {"submission": str(path), "device": device_hint, "poison": True, "entry": entry}
    if device_hint == "cpu":  # attribution by executing code (behaviour.executing); GPUs use CUPTI
        from gatekeeper.runtime.pc_sampler import JIT_MAP_ENV, build_sampler

        sampler = build_sampler()
        if sampler is not None:
            params["pc_sampler"] = str(sampler)
            env.update(JIT_MAP_ENV)  # oneDNN names the code it JIT-generates (pc_sampler.jit_ranges)
    elif device_hint.startswith("cuda"):  # kernels by their launcher (gatekeeper/runtime/kernel_owner.py)
        from gatekeeper.runtime.kernel_owner import worker_params

        params.update(worker_params())
    return Job("gatekeeper.behaviour.subject_job:subject_job", params,
               timeouts={"start": max(limits.import_timeout_s, TRUSTED_START_S), "import": first, "init": first,
                         "build": limits.build_timeout_s, "wait-trials": wait_s, "call": limits.call_timeout_s,
                         "schedule": max(limits.call_timeout_s, SCHEDULE_S)},
               default_timeout_s=limits.call_timeout_s, memory_mb=limits.memory_mb,
               cap_address_space=device_hint == "cpu", env=env, write_roots=roots, keep_stdin=True)


def feed_trials(job: Job, references: dict[str, dict[str, Any]], seed: int, device: str,
                schedule: Optional[dict[str, Any]] = None) -> None:
    """The trials, then the call schedule's inputs (never its reference outputs)."""
    job.feed({"device": device, "trials": [{"name": name, "init": ref["init"], "inputs": ref["inputs"],
                                            "init_seed": init_seed(seed)} for name, ref in references.items()]},
             close=False)
    sent = (schedule or {}).get("calls", [])
    recorded = recorded_indices(seed, [c["index"] for c in sent])  # issue 22: any call may be checked
    queued = queued_indices(seed, sent) if device.startswith("cuda") else set()  # behaviour.queued_entry
    calls = [{"index": c["index"], "kind": c["kind"], "inputs": c["inputs"], "record": c["index"] in recorded,
              "queued": c["index"] in queued} for c in sent]
    # the timing loop's probes: the last plain fresh calls (behaviour.timing_loop), one short of them drawn here
    job.feed({"calls": calls, "timed_from": (schedule or {}).get("timed_from", 0),
              "loop_probes": loop_probe_fractions(seed, AFTER_LOOP - 1)})


def _import_torch() -> None:
    try:
        import torch  # noqa: F401
    except Exception:
        pass


# The frame that load_module's exec ran: the problem module's own top level.
_IMPORT_FRAME = re.compile(r'in load_module\n(?:.*\n)*?\s*File "([^"]+)", line (\d+), in <module>')


def _reference_failure(ref: JobResult, environment: dict[str, Any]) -> Optional[StageOutcome]:
    """A problem error (exit 3) when the reference worker failed or rejects nominal inputs."""
    env_info = ref.first("env") or {}  # first: a report of a run that failed still names its device
    if env_info:
        environment.update({"device": env_info.get("device", "cpu"), "gpu": env_info.get("gpu")})
    if ref.status != "ok" or ref.of_kind("error"):
        detail = ref.detail or "; ".join(f"{e.get('type')}: {e.get('message')}" for e in ref.of_kind("error"))
        if mentions_disk_full([detail]):
            return _error(disk_full_reason("the reference worker wrote its tensors"), environment)
        return _error(f"problem error: the reference worker failed ({ref.status}): {detail}; "
                      f"stderr: {ref.stderr_tail[-600:]}", environment)
    environment.setdefault("device", "cpu")
    environment.setdefault("gpu", None)
    names = {m["name"] for m in ref.of_kind("trial")}
    failed = {m["name"]: m for m in ref.of_kind("trial-failed")}
    for name in ("nominal", "nominal-second", "nominal-overwrite"):
        if name not in names:
            first = (failed.get(name, {}).get("failures") or [{}])[0]
            why = first.get("error", "no result")
            if mentions_disk_full([why]):
                return _error(f"{disk_full_reason('the reference worker wrote its tensors')} ({why})", environment)
            at_import = _IMPORT_FRAME.search(first.get("traceback", ""))
            if at_import:  # not "fails on its inputs": no input was ever made (issue 12)
                return _error(f"problem error: the problem file {at_import.group(1)} raises at import (line "
                              f"{at_import.group(2)}): {why}; the reference never ran. Fix the problem file "
                              f"(`python {at_import.group(1)}` shows the error)", environment)
            return _error(f"problem error: the reference fails on its own nominal inputs: {why}", environment)
    return None


def run_behaviour(submission: Submission, problem: Optional[Problem], config: Config, options: RunOptions,
                  findings_so_far: list[Finding]) -> StageOutcome:
    """The stage entry point (pipeline.STAGE_RUNNERS). Never raises: a fault of the gatekeeper
    itself is an ERROR outcome (exit 3), never a reject or a traceback."""
    try:
        return _run_behaviour(submission, problem, config, options, findings_so_far)
    except Exception as exc:  # noqa: BLE001 - the last line of defence, reported with its type
        import traceback

        if is_disk_full(exc):
            return _error(disk_full_reason("passing tensors between the workers"))
        return _error(f"internal error in the behaviour stage: {type(exc).__name__}: {exc} "
                      f"({traceback.format_exc(limit=-2).strip().splitlines()[-3:]})")


def _run_behaviour(submission: Submission, problem: Optional[Problem], config: Config,
                   options: RunOptions, findings_so_far: Optional[list[Finding]] = None) -> StageOutcome:
    if problem is None:
        return StageOutcome(StageStatus.SKIPPED, reason="no problem given (--problem): nothing to run against")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    sidecar, source = problem.sidecar, problem.source  # loaded once by the pipeline
    extracted = extract_bundle(submission.data, submission.path)
    if extracted is not None and extracted.needs_cuda and not cuda_present():
        return _error("needs a CUDA device: the submission compiles CUDA sources (load_inline cuda_sources) and "
                      "this machine has no NVIDIA GPU; run it on a GPU machine")
    seed = draw_seed(options.seed)
    options.seed = seed  # the report records the seed actually used
    try:
        trials, constants = plan_trials(source, sidecar, seed, config.jitter.shapes, config.jitter.low,
                                        config.jitter.high, canonical=problem.shapes)
    except Exception as exc:  # libcst parse error in the problem
        return _error(f"problem error: {problem.path} cannot be parsed: {exc}")
    timings["plan_s"] = time.perf_counter() - started

    text = submission.data.decode("utf-8", errors="replace")
    location = model_location(submission.path, text, problem.entry)
    key = extracted.cache_key() if extracted is not None and extracted.compiles else None
    ext_dir = extensions_dir(key) if key else None
    device_hint = sidecar.device or ("cuda" if cuda_present() else "cpu")
    warm = threading.Thread(target=_import_torch, daemon=True)  # the parent compares with torch
    warm.start()
    with tempfile.TemporaryDirectory(prefix="gatekeeper-behaviour-") as scratch, exclusive(ext_dir):
        path = submission_file(submission, Path(scratch))
        mark = time.perf_counter()
        budget = config.limits.import_timeout_s + config.limits.call_timeout_s * 5 * len(trials)
        subject = start_subject(path, device_hint, config, ext_dir, bool(key) and not is_built(key), budget,
                                problem.entry)
        schedule = {"plan": plan_schedule(seed, sidecar.values.allowed()).to_json(), "init_seed": init_seed(seed),
                    "fixed": sidecar.values.fixed} if SCHEDULE else None
        progress.step("reference (the problem's Model)")
        ref = run_reference(problem, trials, seed, config, sidecar.device, schedule)
        timings["reference_s"] = time.perf_counter() - mark
        environment: dict[str, Any] = {"isolation": ref.isolation}
        failure = _reference_failure(ref, environment)
        if failure is not None:
            subject.kill()
            return failure
        references = {m["name"]: m for m in ref.of_kind("trial")}
        failed = {m["name"]: m for m in ref.of_kind("trial-failed")}
        scheduled = ref.first("schedule") or {}
        progress.step("submission", trials=references)
        feed_trials(subject, references, seed, environment["device"], scheduled)
        result = subject.wait()
        timings["both_workers_s"] = time.perf_counter() - mark
    device = environment["device"]
    warm.join()

    errors_text = " ".join(str(e.get("message", "")) for e in result.of_kind("error") + result.of_kind("call-error"))
    if _believable_disk_full(result, references):
        return _error(disk_full_reason("the submission's worker read its inputs"), environment)
    cuda = needs_cuda_reason(errors_text) if device == "cpu" else None
    cuda = cuda or missing_stack_reason(result.of_kind("error") + result.of_kind("call-error"))
    if cuda:
        return _error(cuda, environment)

    mark = time.perf_counter()
    with _judging_threads():
        return _judge_run(result, references, failed, scheduled, trials, constants, problem, config, location,
                          submission, seed, environment, timings, ref, findings_so_far, mark)


def _error_budget_limit(config: Config) -> Optional[float]:
    """GK668's ratio for the scheduled calls (None: the rule is off, or the lenient profile,
    where it only warns on the named trials)."""
    from gatekeeper.behaviour.evidence import DEFAULT_MAX_ERROR_RATIO, rule_enabled, rule_options

    if not rule_enabled(config, "GK668") or config.profile == "lenient":
        return None
    return float(rule_options(config, "GK668").get("max_error_ratio", DEFAULT_MAX_ERROR_RATIO))


@contextlib.contextmanager
def _judging_threads() -> Iterator[None]:
    """Comparisons use half the cores: on a shared machine torch's spinning intra-op threads
    made judging a 32 MiB output twice as slow as one thread (issue 22, large problems)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, min(before, (os.cpu_count() or 2) // 2)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _judge_run(result: JobResult, references: dict[str, dict[str, Any]], failed: dict[str, dict[str, Any]],
               scheduled: dict[str, Any], trials: list[Trial], constants: dict[str, int], problem: Problem,
               config: Config, location: Any, submission: Submission, seed: int, environment: dict[str, Any],
               timings: dict[str, float], ref: JobResult, findings_so_far: Optional[list[Finding]],
               mark: float) -> StageOutcome:
    judge = Judge(references, problem.tolerance, location, device=str(environment.get("device", "")))
    calls = ScheduleJudge(scheduled, problem.tolerance, max_error_ratio=_error_budget_limit(config))
    repeats = RepeatProbe(scheduled, time_again=str(environment.get("device", "")).startswith("cpu"))
    for message in result.messages:
        kind = message.get("kind")
        try:
            if str(kind).startswith("schedule-"):
                calls.observe(message)
                repeats.observe(message)
            elif kind == "call":
                judge.call(message)
            elif kind == "call-error":
                judge.call_error(message)
            elif kind == "first-output-after-second":
                judge.first_after_second(message)
            elif kind == "tampering":
                judge.add("GK650", "import", {"names": message["names"]}, when="when the module was imported",
                          names=", ".join(map(str, message["names"])))
            elif kind == "no-model":
                judge.add("GK666", "import", {})
            elif kind == "import-children":
                when = {"import": "imported", "init": "built (ModelNew's constructor)"}.get(
                    str(message.get("when", "import")), "called")
                judge.add("GK645", "import", {"processes": int(message["count"]), "when": message.get("when")},
                          what=f"{int(message['count'])} process(es) that the submission started while it was {when}, "
                               "where work runs outside every sample and check, still running")
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as exc:
            # Signed but malformed: only code inside the submission's process can do that.
            judge.add("GK664", str(kind), {"kind": str(kind)},
                      detail=f"a signed '{kind}' observation is malformed ({type(exc).__name__}: {exc})")
    judge.determinism()
    calls.judge(judge.add)
    repeats.judge(judge.add)
    judge_calls(result.messages, references.get("nominal", {}), judge.add,  # every call checked alike
                {i: o.ok for i, o in calls.outcomes.items()})
    LAST_SCHEDULE.clear()
    LAST_SCHEDULE.update(planned=scheduled.get("planned", 0), sent=len(scheduled.get("calls", [])),
                         observed=len(calls.outcomes), skipped=scheduled.get("skipped", []),
                         dists=sorted({c.get("dist", "normal") for c in scheduled.get("calls", [])}),
                         fair_only=len(calls.rescued))
    found = judge.findings() + job_errors(result, STAGE, location)
    if result.status != "ok":
        limits = {"call": config.limits.call_timeout_s, "import": config.limits.import_timeout_s}
        found += worker_failure(result, STAGE, limits, location, str(environment.get("device", "")))
    found += _problem_notes(references, failed, trials, constants, location)
    work, more = runtime_evidence(result.messages + work_messages(result.messages), references, judge,
                                  config, location, findings_so_far or [], submission.data.decode("utf-8", "replace"),
                                  tuple(getattr(problem.facts, "declared_forbidden", ()) or ()))
    found += more
    timings["judge_s"] = time.perf_counter() - mark
    incomplete = infrastructure_failure(result, references, scheduled, found)
    if incomplete is not None:  # fewer calls than planned is never a pass (issue 22)
        return _error(incomplete, environment)
    shapes = {name: r.get("shapes") for name, r in references.items()}
    for f in found:
        f.evidence.setdefault("seed", seed)
    from gatekeeper.report import Severity

    status = StageStatus.FAILED if any(f.severity == Severity.ERROR for f in found) else StageStatus.PASSED
    outcome = StageOutcome(status, found, environment={k: v for k, v in environment.items() if v is not None},
                           report={"work": work} if work else {})
    _attach_run_facts(found, shapes, timings)
    LAST_TIMINGS.clear()
    LAST_TIMINGS.update(timings, reference_worker_s=ref.elapsed_s, submission_worker_s=result.elapsed_s)
    for message in result.of_kind("timing"):  # self-reported by the worker: for the benchmark only
        LAST_TIMINGS.update({f"worker_{k}": float(v) for k, v in message.items() if k.endswith("_s")})
    return outcome


def _believable_disk_full(result: JobResult, references: dict[str, dict[str, Any]]) -> bool:
    """ENOSPC reported from the submission's process, where the disk really is short.

    Its process is untrusted: an "error" instead of a reject must not be one raise away, so
    the claim counts only when the free space now could not hold the largest trial's
    transfer files twice over plus the reserve (the check that skips trials)."""
    texts = [m.get("message", "") for m in result.messages if "error" in str(m.get("kind"))] + [result.detail or ""]
    if not mentions_disk_full(texts):
        return False
    from gatekeeper.behaviour.transfer_budget import DISK_RESERVE

    held = max((int(r.get("held_bytes") or 0) for r in references.values()), default=0)
    free = free_bytes()
    return free is None or free < 2 * held + DISK_RESERVE


def _attach_run_facts(found: list[Finding], shapes: dict[str, Any], timings: dict[str, float]) -> None:
    for f in found:
        f.evidence.setdefault("trial_shapes", shapes)


def _problem_notes(references: dict[str, dict[str, Any]], failed: dict[str, dict[str, Any]], trials: list[Trial],
                   constants: dict[str, int], location: Any) -> list[Finding]:
    notes: list[Finding] = []
    nominal = references["nominal"]
    info = nominal.get("output_info", {})
    if info.get("zeros") or info.get("constant"):
        notes.append(finding("GK603", STAGE, {"output_info": info}, None, trial="nominal",
                             what="all zeros" if info.get("zeros") else "constant"))
    jittered = [r for name, r in references.items() if not name.startswith("nominal")]
    moved = [r for r in jittered if r.get("shapes") != nominal.get("shapes")]
    if not moved:
        if not jittered and failed:
            detail = "the reference rejected every jittered shape: " + "; ".join(
                f"{name}: {(m.get('failures') or [{}])[-1].get('error', '?')}" for name, m in failed.items())[:800]
        elif not constants and not any(r.get("jitter_calls") for r in references.values()):
            detail = "get_inputs uses no module size constant and no jitter_int call"
        else:
            detail = "jittering did not change any input shape"
        notes.append(finding("GK670", STAGE, {"failed": list(failed)}, None, detail=detail))
    return notes
