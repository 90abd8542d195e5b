"""The timing stage: `run_timing(...)` for gatekeeper.pipeline.STAGE_RUNNERS.

Without a GPU it stops with an infrastructure error that says so (exit 3): a CPU figure is
never offered in place of a GPU time. With one, it runs two sandboxed workers, one per side,
timed in alternating blocks (gatekeeper.timing.conduct): the submission's process never
holds the reference. It judges the results here, in the trusted parent.
"""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

from gatekeeper.stages import StageOutcome
from gatekeeper.report import Finding, Severity, StageStatus
from gatekeeper.timing import cache as calib_cache
from gatekeeper.timing import findings as rules
from gatekeeper.timing.floors import Counts, floors
from gatekeeper.timing.adaptive import rule_from_settings
from gatekeeper.timing.conduct import Outcome, Plan, run
from gatekeeper.timing.outputs import compare_checks, tolerances
from gatekeeper.timing.score import Measured, judge
from gatekeeper.timing.specs import resolve

NO_GPU = ("timing needs a CUDA GPU and none is visible to torch on this machine "
          "(torch.cuda.is_available() is False); no CPU time is given in its place. "
          "Run `gatekeeper check --time` on a machine with an NVIDIA GPU, or drop --time.")


def gpu_name() -> Optional[str]:
    """The first CUDA device's name, or None when torch has no usable GPU."""
    try:
        import torch
    except ImportError:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        return torch.cuda.get_device_name(0)
    except Exception:  # a broken driver is "no GPU" for this purpose
        return None


def _error(reason: str, **environment: Any) -> StageOutcome:
    return StageOutcome(status=StageStatus.ERROR, reason=reason, environment=environment)


def _submission_file(submission: Any, scratch: Path) -> str:
    path = Path(submission.path)
    if path.is_file():
        return str(path.resolve())
    target = scratch / "submission.py"
    target.write_bytes(submission.data)
    return str(target)


def _driver() -> str:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return "unknown"
    for word in text.split():
        if word.count(".") >= 1 and word.replace(".", "").isdigit():
            return word
    return "unknown"


def _extensions_dir(submission: Any, fallback: Path) -> Path:
    """The build stage's cache folder for this submission's extensions, so the timing worker
    loads what the build stage compiled instead of compiling again."""
    try:
        from gatekeeper.build.cache import extensions_dir
        from gatekeeper.build.sources import extract_bundle

        # the same key as the build and behaviour stages: a bundle's modules are in it too
        extracted = extract_bundle(submission.data, submission.path)
        if extracted is not None and extracted.compiles:
            return extensions_dir(extracted.cache_key())
    except Exception:  # an installation without the build stage: a folder of our own
        pass
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


def _failure(result: Any, who: str, config: Any) -> Optional[Finding]:
    """A finding when the submission's worker failed on the submission's account."""
    if result.status == "timeout":
        return rules.TIMING_TIMEOUT.finding(result.detail, {"phase": result.phase}, config)
    if result.status == "forged":
        return rules.RESULTS_FORGED.finding(result.detail, {"phase": result.phase}, config)
    err = result.first("error")
    if err is not None or result.status in ("crashed", "memory"):
        detail = (err or {}).get("message") or result.detail or result.stderr_tail[-500:]
        return rules.TIMING_RUN_FAILED.finding(f"In phase '{result.phase}': {detail}",
                                               {"phase": result.phase, "status": result.status}, config)
    return None


def run_timing(submission: Any, problem: Optional[Any], config: Any, options: Any,
               findings_so_far: list[Finding]) -> StageOutcome:
    name = gpu_name()
    if name is None:
        return _error(NO_GPU)
    if problem is None:
        return _error("timing needs the reference problem (--problem) to time against", gpu=name, device="cuda")
    if any(f.severity == Severity.ERROR for f in findings_so_far):
        return StageOutcome(status=StageStatus.SKIPPED, reason="timing runs only on a submission with no error "
                            "findings", environment={"gpu": name, "device": "cuda"})
    try:
        from gatekeeper.sandbox import Job  # noqa: F401
    except ImportError:
        return _error("the sandbox worker is not available in this installation; timing runs only "
                      "inside it", gpu=name, device="cuda")
    import torch

    settings = config.timing
    seed = options.seed if options.seed is not None else secrets.randbelow(2**31)
    folder = Path(settings.cache_dir) if settings.cache_dir else calib_cache.default_dir()
    key = calib_cache.key(name, _driver(), torch.__version__)
    ceilings = calib_cache.load(folder, key)
    with tempfile.TemporaryDirectory(prefix="gatekeeper-timing-") as scratch:
        ext_dir = _extensions_dir(submission, folder.parent / "timing_extensions")
        out = measure(_submission_file(submission, Path(scratch)), problem.path, config, seed=seed,
                      device="cuda", calibrate=ceilings is None, ext_dir=ext_dir,
                      entry=getattr(problem, "entry", "ModelNew"))
    env = {"gpu": name, "device": "cuda"}
    if out.failed == "submission" or (out.submission is not None and out.failed is None
                                      and out.submission.first("error")):
        failed = _failure(out.submission, "submission", config) if out.submission is not None else None
        if failed is not None:
            return StageOutcome(status=StageStatus.FAILED if failed.severity == Severity.ERROR else StageStatus.PASSED,
                                findings=[failed], environment=env)
    if out.failed is not None or out.reference is None:
        ref = out.submission if out.failed == "submission" else out.reference
        err = (ref.first("error") if ref else None) or {}
        detail = err.get("message") or (ref.detail or ref.stderr_tail[-300:] if ref else "not started")
        return _error(f"the {out.failed or 'reference'} could not be timed "
                      f"({ref.status if ref else '?'}, phase '{ref.phase if ref else '?'}'): {detail}", **env)
    if ceilings is None:
        ceilings = out.messages["calibration"]["values"]
        calib_cache.store(folder, key, ceilings)
    facts = out.messages["device"]["facts"]
    counts = Counts(**{k: v for k, v in out.messages["counts"].items() if k != "kind"})
    spec, origin = resolve(facts["name"], SimpleNamespace(**facts))
    if spec is None:
        return _error(f"no peak rates are known for '{facts['name']}' and the device reports none; "
                      "add it to gatekeeper/timing/specs.py", **env)
    mode = out.mode
    launch = ceilings.get("graph_launch_floor_us" if mode == "graph" else "launch_floor_us")
    fl = floors(counts, spec, launch, settings.fp32_matmul_rate)
    paired = out.paired
    measured = Measured(paired.reference_us, paired.submission_us, out.reference_synced_us, out.submission_synced_us,
                        mode=mode, stopped_by=paired.stopped_by, elapsed_s=paired.elapsed_s,
                        method={"device": facts["name"], "l2_flush_bytes": _flush_bytes(facts, settings),
                                "queued_spin_us": out.spin_us, "host_call_us": out.host_call_us,
                                "input_sets": out.input_sets, "distinct_calls": out.calls,
                                "inputs": "fresh per call (rolled base sets), never repeated in a process",
                                "reference_process": "own worker, alternating blocks",
                                "persisting_l2_limit_bytes": out.persisting_l2_limit,
                                "persisting_l2_reset": out.l2_reset,
                                "warmup_calls": settings.warmup_calls,
                                "seed": seed, "torch": facts.get("torch"), "driver": facts.get("driver")})
    check = compare_checks(out.checks, tolerances(problem))
    timing, score, found = judge(measured, counts, fl, settings, config, ceilings=ceilings,
                                 spec={**spec.as_dict(), "origin": origin},
                                 reference_alone_us=out.alone.reference_us, output_check=check)
    if out.graph_error:
        f = rules.GRAPH_CAPTURE_FAILED.finding(out.graph_error, {}, config)
        if f is not None:
            found.append(f)
    status = StageStatus.FAILED if any(f.severity == Severity.ERROR for f in found) else StageStatus.PASSED
    return StageOutcome(status=status, findings=found, report={"timing": timing, "score": score}, environment=env)


def _flush_bytes(facts: dict[str, Any], settings: Any) -> int:
    n = max(int((facts.get("L2_cache_size") or 50 << 20) * settings.l2_flush_factor) // 4, 1 << 20)
    return n * 4


def measure(submission_path: str, problem_path: Path, config: Any, *, seed: int, device: str,
            calibrate: bool, ext_dir: Path, workdirs: Optional[tuple[Path, Path]] = None,
            entry: str = "ModelNew") -> Outcome:
    """Start the two workers and run the alternating blocks (gatekeeper.timing.conduct).
    `device` is "cuda" for the stage; tests drive the same path with "cpu" (host-clock
    times, no CUDA call), `workdirs` keeping the workers' folders for inspection."""
    from gatekeeper.sandbox import Job

    settings, limits = config.timing, config.limits
    idle = settings.budget_s * 3 + 120
    cuda = device == "cuda"
    common = dict(memory_mb=limits.memory_mb, cap_address_space=not cuda, default_timeout_s=limits.call_timeout_s,
                  env={"TORCH_EXTENSIONS_DIR": str(ext_dir), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
                  write_roots=[str(ext_dir)], keep_stdin=True)  # never the calibration cache
    ref_params = {"problem": str(problem_path.resolve()), "seed": seed, "jitter_names": config.jitter.names,
                  "device": device, "calibrate": calibrate,
                  # graph mode keeps one graph (and its output pool) per set: fewer sets there
                  "input_sets": min(settings.input_sets, 16) if settings.mode == "graph" else settings.input_sets,
                  "cap_bytes": settings.input_sets_max_mb << 20, "flush_factor": settings.l2_flush_factor}
    # The checking worker's parameters (gatekeeper.behaviour.stage.start_subject), poison
    # included: it is on while the submission loads, as there, and off from the decoy on.
    sub_params = {"submission": submission_path, "device": device, "poison": True, "entry": entry}
    if cuda:  # the checking worker's CUPTI subscription, held without callbacks: alike, at no cost
        from gatekeeper.runtime.kernel_owner import worker_params

        sub_params.update(worker_params(hold=True))
    phases = {"idle": idle, "block": idle, "warmup": idle, "report": limits.call_timeout_s}

    def start_reference() -> Job:
        return Job("gatekeeper.timing.jobs:reference_job", ref_params,
                   timeouts={"import": limits.import_timeout_s, "calibrate": 300, "count": limits.call_timeout_s,
                             "inputs": limits.call_timeout_s, **phases},
                   workdir=workdirs[0] if workdirs else None, **common)

    def start_submission() -> Job:
        first = max(limits.import_timeout_s, limits.build_timeout_s)
        return Job("gatekeeper.timing.jobs:submission_job", sub_params,
                   timeouts={"start": first, "import": first, "init": first, "build": limits.build_timeout_s,
                             "wait-inputs": idle, **phases},
                   workdir=workdirs[1] if workdirs else None, **common)

    plan = Plan(rule=rule_from_settings(settings), warmup_calls=settings.warmup_calls, idle_s=idle,
                start_s=max(limits.import_timeout_s, limits.build_timeout_s) + 300,
                checks_per_block=settings.output_checks, flush_factor=settings.l2_flush_factor,
                graph=settings.mode == "graph" and cuda)
    return run(start_reference, start_submission, plan)
