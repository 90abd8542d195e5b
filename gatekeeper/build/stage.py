"""The build stage: compile the submission's extensions once per distinct source, sandboxed."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from gatekeeper.runtime.failures import job_errors, missing_stack_reason, model_location, needs_cuda_reason, worker_failure
from gatekeeper.runtime.checks import finding
from gatekeeper import progress
from gatekeeper.build.cache import cuda_present, exclusive, extensions_dir, is_built, mark_built
from gatekeeper.build.errors import first_error
from gatekeeper.build.pch import Headers, prepare
from gatekeeper.build.sources import Extracted, extract_bundle
from gatekeeper.build.toolchain import toolchain_failure
from gatekeeper.config import Config
from gatekeeper.problem.loaded import Problem
from gatekeeper.stages import RunOptions, StageOutcome, Submission
from gatekeeper.report import Finding, Location, StageName, StageStatus
from gatekeeper.sandbox import run_job

STAGE = StageName.BUILD
FAILED_MARKER = ".gatekeeper-failed"


def submission_file(submission: Submission, scratch: Path) -> Path:
    """The file workers import: the original path, or the code written into scratch."""
    if submission.path != "<submission>" and Path(submission.path).is_file():
        return Path(submission.path).resolve()
    target = scratch / "submission.py"
    target.write_bytes(submission.data)
    return target


def run_build(submission: Submission, problem: Optional[Problem], config: Config, options: RunOptions,
              findings_so_far: list[Finding]) -> StageOutcome:
    """The stage entry point (pipeline.STAGE_RUNNERS). Never raises (exit 3 on our own faults)."""
    try:
        return _run_build(submission, config)
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        return StageOutcome(StageStatus.ERROR, reason=f"internal error in the build stage: {type(exc).__name__}: {exc}")


def _run_build(submission: Submission, config: Config) -> StageOutcome:
    extracted = extract_bundle(submission.data, submission.path)
    if extracted is None:
        return StageOutcome(StageStatus.SKIPPED, reason="the submission does not parse (see the static findings)")
    if not extracted.compiles:
        return StageOutcome(StageStatus.SKIPPED, reason="no C++/CUDA extension to compile (plain Python)")
    if extracted.needs_cuda and not cuda_present():
        return StageOutcome(StageStatus.ERROR, reason="needs a CUDA device: the submission compiles CUDA sources "
                            "(load_inline cuda_sources) and this machine has no NVIDIA GPU; run it on a GPU machine")
    key = extracted.cache_key()
    failed = extensions_dir(key) / FAILED_MARKER
    if failed.is_file():  # the same sources and flags failed to compile before: same answer, no compile
        text = submission.data.decode("utf-8", errors="replace")
        output = failed.read_text("utf-8", errors="replace")
        finding_ = _compile_finding(output, extracted, submission.path, model_location(submission.path, text))
        finding_.evidence["cached"] = True
        return StageOutcome(StageStatus.FAILED, [finding_])
    if is_built(key):
        return StageOutcome(StageStatus.PASSED, environment={}, reason=None,
                            report={}, findings=[])
    return build(submission, extracted, key, config)


def build(submission: Submission, extracted: Extracted, key: str, config: Config) -> StageOutcome:
    import tempfile

    text = submission.data.decode("utf-8", errors="replace")
    location = model_location(submission.path, text)
    folder = extensions_dir(key)
    headers = prepare(config.build.precompiled_header, extracted.needs_cuda)
    with tempfile.TemporaryDirectory(prefix="gatekeeper-build-") as scratch:
        path = submission_file(submission, Path(scratch))
        with exclusive(folder):
            progress.step(f"compiling {progress.extension_names(extracted.loader_calls)}")
            result = _build_job(path, _limits(config), config, folder, headers)
    return _outcome(result, submission, extracted, key, config, location, headers)


def _limits(config: Config) -> dict[str, float]:
    return {"start": 120.0, "load": max(config.limits.import_timeout_s, 120.0), "build": config.limits.build_timeout_s}


def _build_job(path: Path, limits: dict[str, float], config: Config, folder: Path, headers: Optional[Headers]):
    env = {"TORCH_EXTENSIONS_DIR": str(folder), "MAX_JOBS": "2"}
    if headers is not None:  # GCC takes torch/extension.h.gch from here when its options match (build/pch.py)
        env["CPATH"] = str(headers.root)
    return run_job("gatekeeper.build.job:build_job", {"submission": str(path)}, timeouts=limits,
                   default_timeout_s=config.limits.build_timeout_s, memory_mb=config.limits.memory_mb,
                   cap_address_space=not cuda_present(), env=env, write_roots=[str(folder)],
                   read_files=list(headers.files) if headers else None,
                   verbatim_errors=True)  # compiler output maps to lines


def _outcome(result, submission: Submission, extracted: Extracted, key: str, config: Config,
             location: Optional[Location], headers: Optional[Headers]) -> StageOutcome:
    environment = {"isolation": result.isolation}
    if result.status == "timeout":
        f = finding("GK681", STAGE, {"phase": result.phase, "stderr_tail": result.stderr_tail[-2000:]},
                    location, limit=f"{config.limits.build_timeout_s:g}")
        return StageOutcome(StageStatus.FAILED, [f], environment=environment)
    if result.status != "ok":
        return StageOutcome(StageStatus.FAILED, worker_failure(result, STAGE, {}, location), environment=environment)
    errors = result.of_kind("error")
    if not errors:
        mark_built(key)
        return StageOutcome(StageStatus.PASSED, [], environment=environment)
    message = " ".join(str(e.get("message", "")) for e in errors)
    cuda = needs_cuda_reason(message + result.stderr_tail) or missing_stack_reason(errors)
    if cuda:
        return StageOutcome(StageStatus.ERROR, reason=cuda, environment=environment)
    if "Error building extension" in message or "error:" in message:
        broken = toolchain_failure(extracted.needs_cuda, result.isolation, lambda path, folder: _build_job(
            path, _limits(config), config, folder, headers))
        if broken:
            return StageOutcome(StageStatus.ERROR, environment=environment, reason=(
                f"this machine cannot build even a trivial {'CUDA' if extracted.needs_cuda else 'C++'} extension "
                f"in the sandbox ({result.isolation} isolation), so the submission's compile error says nothing "
                f"about it: {broken[-600:]} — check the compiler ($CC, CUDA_HOME) and that the sandbox can see it, "
                "or set GATEKEEPER_ISOLATION"))
        (extensions_dir(key) / FAILED_MARKER).write_text(message, "utf-8")
        return StageOutcome(StageStatus.FAILED, [_compile_finding(message, extracted, submission.path, location)],
                            environment=environment)
    return StageOutcome(StageStatus.FAILED, job_errors(result, STAGE, location), environment=environment)


def _compile_finding(output: str, extracted: Extracted, path: str, fallback: Optional[Location]) -> Finding:
    error = first_error(output, extracted)
    if error is None:
        tail = output.strip().splitlines()[-5:]
        return finding("GK680", STAGE, {"compiler_output": output[-3000:]}, fallback, detail=" | ".join(tail)[:500])
    location = Location(path=path, line=error.python_line, column=max(1, error.column or 1)) \
        if error.python_line and path != "<submission>" else fallback
    detail = f"{error.file}:{error.line}: {error.message}"
    if error.source_line:
        detail += f" (in `{error.source_line[:120]}`)"
    return finding("GK680", STAGE, {"file": error.file, "line": error.line, "column": error.column,
                                    "compiler_message": error.message, "source_line": error.source_line,
                                    "compiler_output": output[-3000:]}, location, detail=detail)
