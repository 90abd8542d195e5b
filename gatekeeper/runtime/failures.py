"""Turn a worker that did not finish normally into findings (or a needs-CUDA error)."""

from __future__ import annotations

import re
from typing import Any, Optional

from gatekeeper.runtime.checks import finding
from gatekeeper.report import Finding, Location, StageName
from gatekeeper.sandbox import JobResult

_NEEDS_CUDA = ("Torch not compiled with CUDA enabled", "Found no NVIDIA driver", "No CUDA GPUs are available",
               "CUDA_HOME environment variable is not set", "no CUDA-capable device", "Cannot access accelerator")


def needs_cuda_reason(text: str) -> Optional[str]:
    for marker in _NEEDS_CUDA:
        if marker in text:
            return f"needs a CUDA device: the submission uses CUDA ({marker!r}) and this machine has none; run it on a GPU machine"
    return None


# GPU programming stacks a CPU machine (or a slim image) commonly lacks. A submission written for
# them fails to import here through no fault of its own: an infrastructure error, never a reject.
# Only where this machine cannot import the package either (a module missing everywhere is the
# submission's error).
GPU_STACK_MODULES = frozenset({"triton", "cupy", "cuda", "cutlass", "cute", "pycuda", "tilelang", "thunderkittens",
                               "nvmath", "cuda_bindings", "cuda_python", "warp", "tk", "flashinfer", "flash_attn"})
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def missing_stack_reason(errors: list[dict]) -> Optional[str]:
    """Why the run says nothing about the submission when it failed only because a GPU
    programming package it imports is not installed on this machine; None otherwise."""
    import importlib.util

    for error in errors:
        if error.get("type") not in ("ModuleNotFoundError", "ImportError"):
            continue
        match = _NO_MODULE.search(str(error.get("message", "")))
        top = match.group(1).split(".")[0] if match else ""
        if top in GPU_STACK_MODULES and importlib.util.find_spec(top) is None:
            return (f"needs the `{top}` package, which this machine does not have: the submission imports it "
                    f"({error.get('type')}: No module named {match.group(1)!r}); run it on a GPU machine with "
                    f"`{top}` installed, or use --static-only here")
    return None


def model_location(path: str, text: str, entry: str = "ModelNew") -> Optional[Location]:
    match = re.search(rf"^class\s+{re.escape(entry)}\b", text, re.MULTILINE)
    if match is None or path == "<submission>":
        return None
    return Location(path=path, line=text.count("\n", 0, match.start()) + 1, column=1)


# SIGSEGV and SIGBUS, as a negative return code or as a shell's 128 + signal.
_MEMORY_FAULTS = frozenset({-11, -7, 139, 135})
_DEVICE_FAULT_HINT = (
    "; it died of a memory fault while this problem runs on {device} here: a C++ extension that reads tensor "
    "data on the host (a CPU loop over data_ptr) faults on device memory. Check the tensors' device "
    "(TORCH_CHECK(x.device().is_cpu())) or launch a CUDA kernel; a problem meant for the CPU declares "
    "device = \"cpu\" in its sidecar")


def worker_failure(result: JobResult, stage: StageName, limits: dict[str, float],
                   location: Optional[Location], device: Optional[str] = None) -> list[Finding]:
    evidence: dict[str, Any] = {"phase": result.phase, "stderr_tail": result.stderr_tail[-2000:],
                                "stdout_tail": result.stdout_tail[-500:], "exit_code": result.returncode}
    if result.status == "timeout":
        return [finding("GK661", stage, evidence, location, detail=result.detail)]
    if result.status == "memory":
        return [finding("GK663", stage, evidence, location, detail=result.detail)]
    if result.status == "forged":
        return [finding("GK664", stage, evidence, location, detail=result.detail)]
    if result.status == "crashed":
        detail = result.detail
        if device and device.startswith("cuda") and result.returncode in _MEMORY_FAULTS:
            detail = f"{detail}{_DEVICE_FAULT_HINT.format(device=device)}"
        return [finding("GK662", stage, evidence, location, detail=detail)]
    return []


def job_errors(result: JobResult, stage: StageName, location: Optional[Location]) -> list[Finding]:
    out = []
    for error in result.of_kind("error"):
        evidence = {"phase": error.get("phase"), "traceback": str(error.get("traceback", ""))[-3000:]}
        if error.get("type") == "MemoryError" or "can't allocate memory" in str(error.get("message", "")) \
                or "DefaultCPUAllocator: not enough memory" in str(error.get("message", "")):
            out.append(finding("GK663", stage, evidence, location,
                               detail=f"{error.get('type')} during {error.get('phase')}: {str(error.get('message'))[:300]}"))
        else:
            out.append(finding("GK660", stage, evidence, location, type=error.get("type"),
                               phase=error.get("phase"), message=str(error.get("message", ""))[:500]))
    for violation in result.of_kind("violation"):
        out.append(finding("GK665", stage, violation, location, event=violation.get("event"),
                           target=violation.get("target"), phase=violation.get("phase")))
    return out
