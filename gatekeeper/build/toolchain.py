"""Can this machine build anything at all in the sandbox? Asked only after a submission's
compile failed: if a trivial extension fails the same way, the failure is ours (a compiler the
sandbox cannot see, a broken CUDA install), an infrastructure error, never the submission's reject.

The answer is kept per process, and a success is also kept on disk per toolchain (compilers,
isolation level, torch version), so the probe compiles once per machine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Optional

from gatekeeper.build.cache import cache_root

# The smallest extension of each kind: C++ only, and C++ with one CUDA kernel.
_PROBE_CPP = """from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="gatekeeper_toolchain_probe_cpp", functions=["gk_probe"],
                   cpp_sources="#include <torch/extension.h>\\ntorch::Tensor gk_probe(torch::Tensor x) { return x + 1; }")
"""
_PROBE_CUDA = """from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="gatekeeper_toolchain_probe_cuda", functions=["gk_probe"],
                   cpp_sources="torch::Tensor gk_probe(torch::Tensor x);",
                   cuda_sources=("__global__ void k(float* y, long n) { long i = threadIdx.x; if (i < n) y[i] += 1.0f; }\\n"
                                 "torch::Tensor gk_probe(torch::Tensor x) { auto y = x.clone(); "
                                 "k<<<1, 32>>>(y.data_ptr<float>(), y.numel()); return y; }"))
"""
_answers: dict[str, Optional[str]] = {}


def _fingerprint(cuda: bool, isolation: str) -> str:
    parts = [str(cuda), isolation, *(os.environ.get(v, "") for v in ("CC", "CXX", "CUDA_HOME", "CUDAHOSTCXX"))]
    parts += [os.path.realpath(shutil.which(t) or "") for t in ("c++", "nvcc", "ninja")]
    try:
        from importlib.metadata import version
        parts.append(version("torch"))
    except Exception:  # noqa: BLE001 - a missing version only weakens the key
        pass
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def toolchain_failure(cuda: bool, isolation: str, build: Callable[[Path, Path], object]) -> Optional[str]:
    """None when a trivial extension builds here (so the submission's compile error is its own);
    otherwise the probe's output tail. `build(submission_path, folder)` runs the same build job
    the submission ran, with the same sandbox."""
    key = _fingerprint(cuda, isolation)
    if key in _answers:
        return _answers[key]
    folder = cache_root() / "toolchain" / key
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / ".gatekeeper-toolchain-ok").is_file():
        _answers[key] = None
        return None
    code = _PROBE_CUDA if cuda else _PROBE_CPP
    with tempfile.TemporaryDirectory(prefix="gatekeeper-probe-") as scratch:
        path = Path(scratch) / "probe.py"
        path.write_text(code, "utf-8")
        result = build(path, folder)
    errors = result.of_kind("error") if getattr(result, "status", "") == "ok" else None
    if getattr(result, "status", "") == "ok" and not errors:
        (folder / ".gatekeeper-toolchain-ok").write_text("ok\n")
        _answers[key] = None
        return None
    tail = " ".join(str(e.get("message", "")) for e in (errors or [])) + getattr(result, "stderr_tail", "")
    _answers[key] = tail.strip()[-1500:] or f"the probe build ended with status {getattr(result, 'status', '?')}"
    return _answers[key]
