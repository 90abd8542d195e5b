"""The timing stage: `run_timing(...)` for gatekeeper.pipeline.STAGE_RUNNERS.

Without a GPU it stops with an infrastructure error that says so (exit 3): a CPU figure is
never offered in place of a GPU time. With one, it runs two sandboxed workers: the
reference alone (calibration, counts, reference outputs), then the submission and the
reference interleaved; it judges the results here, in the trusted parent.
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
from gatekeeper.timing.outputs import compare, tolerances
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
        from gatekeeper.build.sources import extract

        extracted = extract(submission.data, submission.path)
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
        from gatekeeper.sandbox import run_job
    except ImportError:
        return _error("the sandbox worker is not available in this installation; timing runs only "
                      "inside it", gpu=name, device="cuda")
    import torch

    settings = config.timing
    seed = options.seed if options.seed is not None else secrets.randbelow(2**31)
    folder = Path(settings.cache_dir) if settings.cache_dir else calib_cache.default_dir()
    key = calib_cache.key(name, _driver(), torch.__version__)
    ceilings = calib_cache.load(folder, key)
    keep = sorted(secrets.SystemRandom().sample(range(settings.min_reps), min(settings.output_checks, settings.min_reps)))
    params = {
        **problem.describe(), "seed": seed, "jitter_names": config.jitter.names,
        "input_sets": settings.input_sets, "cap_bytes": settings.input_sets_max_mb << 20,
        "warmup_calls": settings.warmup_calls, "flush_factor": settings.l2_flush_factor,
        "keep": keep, "gather_seed": secrets.randbelow(2**31), "gather_elements": 4096,
        "rule": {"min_reps": settings.min_reps, "max_reps": settings.max_reps, "batch": settings.batch,
                 "ci_rel_halfwidth": settings.ci_rel_halfwidth, "confidence": settings.confidence,
                 "budget_s": settings.budget_s},
    }
    limits = config.limits
    time_limit = settings.budget_s * 3 + 120
    with tempfile.TemporaryDirectory(prefix="gatekeeper-timing-") as scratch:
        ext_dir = _extensions_dir(submission, folder.parent / "timing_extensions")
        common = dict(memory_mb=limits.memory_mb, cap_address_space=False, default_timeout_s=limits.call_timeout_s,
                      env={"TORCH_EXTENSIONS_DIR": str(ext_dir)}, write_roots=[str(ext_dir)])  # never the calibration cache
        ref = run_job("gatekeeper.timing.jobs:reference_job", {**params, "calibrate": ceilings is None},
                      timeouts={"import": limits.import_timeout_s, "calibrate": 300, "count": limits.call_timeout_s,
                                "outputs": limits.call_timeout_s, "time": time_limit}, **common)
        if ref.status != "ok" or ref.first("error") or ref.first("reference_alone") is None:
            err = ref.first("error") or {}
            return _error(f"the reference could not be timed ({ref.status}, phase '{ref.phase}'): "
                          f"{err.get('message') or ref.detail or ref.stderr_tail[-300:]}", gpu=name, device="cuda")
        if ceilings is None:
            ceilings = ref.first("calibration")["values"]
            calib_cache.store(folder, key, ceilings)
        pair = run_job("gatekeeper.timing.jobs:time_pair_job",
                       {**params, "submission": _submission_file(submission, Path(scratch)), "mode": settings.mode},
                       timeouts={"import": max(limits.import_timeout_s, limits.build_timeout_s),
                                 "setup": limits.call_timeout_s, "time": time_limit,
                                 "report": limits.call_timeout_s}, **common)
    env = {"gpu": name, "device": "cuda"}
    failed = _failure(pair, "submission", config)
    if failed is not None:
        return StageOutcome(status=StageStatus.FAILED if failed.severity == Severity.ERROR else StageStatus.PASSED,
                            findings=[failed], environment=env)
    facts = ref.first("device")["facts"]
    counts_msg = {k: v for k, v in ref.first("counts").items() if k != "kind"}
    counts = Counts(**counts_msg)
    spec, origin = resolve(facts["name"], SimpleNamespace(**facts))
    if spec is None:
        return _error(f"no peak rates are known for '{facts['name']}' and the device reports none; "
                      "add it to gatekeeper/timing/specs.py", **env)
    p = pair.first("pairs")
    mode = p["mode"]
    launch = ceilings.get("graph_launch_floor_us" if mode == "graph" else "launch_floor_us")
    fl = floors(counts, spec, launch, settings.fp32_matmul_rate)
    measured = Measured(p["reference_event_us"], p["submission_event_us"], p["reference_synced_us"],
                        p["submission_synced_us"], mode=mode, stopped_by=p["stopped_by"], elapsed_s=p["elapsed_s"],
                        method={"device": facts["name"], "l2_flush_bytes": p["flush_bytes"],
                                "queued_spin_us": p["spin_us"], "host_call_us": p["host_call_us"],
                                "input_sets": p["input_sets"], "warmup_calls": settings.warmup_calls,
                                "seed": seed, "torch": facts.get("torch"), "driver": facts.get("driver")})
    reference_outputs = {int(m["set"]): m["tensors"] for m in ref.of_kind("output")}
    check = compare(pair.of_kind("output"), reference_outputs, tolerances(problem))
    timing, score, found = judge(measured, counts, fl, settings, config, ceilings=ceilings,
                                 spec={**spec.as_dict(), "origin": origin},
                                 reference_alone_us=ref.first("reference_alone")["event_us"], output_check=check)
    if p.get("graph_error"):
        f = rules.GRAPH_CAPTURE_FAILED.finding(p["graph_error"], {}, config)
        if f is not None:
            found.append(f)
    status = StageStatus.FAILED if any(f.severity == Severity.ERROR for f in found) else StageStatus.PASSED
    return StageOutcome(status=status, findings=found, report={"timing": timing, "score": score}, environment=env)
