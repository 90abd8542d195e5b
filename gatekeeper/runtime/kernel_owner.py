"""Kernel ownership on a GPU by the code that launched each kernel (issue 22 item 3).

Names lie in both directions: an honest submission's own CUTLASS instantiation carries a
vendor-looking name, and a hack can mention "cutlass" to claim cuBLAS's kernels. kernel_owner.c
subscribes to CUPTI, walks the host stack at every launch to the first frame outside the CUDA
libraries (the launcher: the submission's extension, libtorch_cuda, libcublasLt, Triton's
launcher, CuPy), and joins CUPTI's kernel records to it. `owner_class` turns a launcher into
own / torch / vendor.

Trusted parent: `build_kernel_owner()` compiles the library (CUPTI's headers only; libcupti is
opened at run time) into the cache, like the CPU sampler (gatekeeper/runtime/pc_sampler.py).
Worker: `start()` once, before the submission is imported, so the submission cannot take the
one CUPTI subscription first; it stays subscribed for every call alike.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Optional

from gatekeeper.runtime.pc_sampler import _tools_dir

SOURCE = Path(__file__).with_name("kernel_owner.c")
HEADERS = [Path(__file__).with_name(n) for n in ("kernel_owner_objects.h", "kernel_owner_launches.h")]  # SOURCE's

_VENDOR = re.compile(r"libcublas|libcudnn|libcufft|libcusparse|libcusolver|libcurand|libnccl|libcutensor|"
                     r"libnvjpeg|libnvblas|libcublasLt", re.I)
_TORCH = re.compile(r"libtorch|libc10|/torch/_C\.|_C\.cpython|libtorch_python|libflash|libaotriton")
_TRITON_LAUNCHER = re.compile(r"__triton_launcher|/triton/.*\.so$|cuda_utils\.(?:cpython[^/]*\.)?so$")
# inductor's generated Triton kernels are torch's work even though Triton launches them
_INDUCTOR_KERNEL = re.compile(r"^triton_(poi|per|red|tem|for)_")


def _include_dirs() -> list[str]:
    """Folders holding cupti.h (and the cuda.h it includes): the toolkit, or the pip wheels."""
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    roots += sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    found = []
    for root in filter(None, roots):
        for sub in ("include", "extras/CUPTI/include", "targets/x86_64-linux/include"):
            if os.path.isfile(os.path.join(root, sub, "cupti.h")) or os.path.isfile(os.path.join(root, sub, "cuda.h")):
                found.append(os.path.join(root, sub))
    for site in sys.path:
        found += glob.glob(os.path.join(site, "nvidia", "*", "include"))
    return [d for d in dict.fromkeys(found) if os.path.isdir(d)]


def worker_params(hold: bool = False) -> dict[str, Any]:
    """What a CUDA worker needs to start (or, `hold`, only hold) the tracker. The default since
    its GPU run of 2026-12-07 (docs/gpu-validation.md, round 17); GATEKEEPER_KERNEL_OWNERSHIP=name
    goes back to kernel names, and a host that cannot build it falls back to them, saying why."""
    if os.environ.get("GATEKEEPER_KERNEL_OWNERSHIP", "launcher") == "name":
        return {}
    library, why = build_kernel_owner()
    libcupti = find_libcupti()
    if library is None or libcupti is None:
        return {"kernel_owner_missing": why or "libcupti was not found (CUDA toolkit or the nvidia-cuda-cupti wheel)"}
    return {"kernel_owner": str(library), "libcupti": libcupti, **({"kernel_owner_hold": True} if hold else {})}


def build_kernel_owner() -> tuple[Optional[Path], str]:
    """(the compiled library, "") or (None, why not): no C compiler, or no CUPTI headers."""
    includes = _include_dirs()
    if not any(os.path.isfile(os.path.join(d, "cupti.h")) for d in includes):
        return None, "CUPTI's headers (cupti.h) are not installed (CUDA toolkit or the nvidia-cuda-cupti wheel)"
    source = SOURCE.read_bytes() + b"".join(h.read_bytes() for h in HEADERS)
    digest = hashlib.sha256(source + os.uname().machine.encode() + "|".join(includes).encode()).hexdigest()[:16]
    target = _tools_dir() / f"kernel_owner-{digest}.so"
    if target.is_file():
        return target, ""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler (cc or gcc) to build the CUPTI launcher tracker"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        out = Path(scratch) / target.name
        flags = [f"-I{d}" for d in includes]
        done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", *flags, "-o", str(out), str(SOURCE), "-ldl",
                               "-lpthread"], capture_output=True, text=True, timeout=120)
        if done.returncode != 0 or not out.is_file():
            return None, "the CUPTI launcher tracker did not compile: " + (done.stderr.strip().splitlines() or ["?"])[-1]
        os.replace(out, target)  # atomic: a concurrent check sees the whole library or none
    return target, ""


def find_libcupti() -> Optional[str]:
    """libcupti as torch's own wheels or the toolkit ship it; None when there is none."""
    candidates = []
    for site in sys.path:
        candidates += glob.glob(os.path.join(site, "nvidia", "*", "lib", "libcupti.so*"))  # cuda_cupti, cu13
    for root in filter(None, [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]):
        candidates += glob.glob(os.path.join(root, "extras", "CUPTI", "lib64", "libcupti.so*"))
        candidates += glob.glob(os.path.join(root, "lib64", "libcupti.so*"))
        candidates += glob.glob(os.path.join(root, "lib", "libcupti.so*"))
    for path in candidates:
        if os.path.isfile(path):
            return path
    return None


def owner_class(launcher: str, kernel: str, own_roots: Iterable[str]) -> str:
    """own | torch | vendor, by the object that launched the kernel. Anything that is neither
    torch's nor a vendor library's (the submission's extension, CuPy, cuda-python, ctypes) is
    the submission's own launch; a Triton launch is torch's only for inductor's kernels."""
    real = os.path.realpath(launcher) if launcher and launcher != "?" else ""
    roots = tuple(os.path.realpath(r).rstrip("/") + "/" for r in own_roots if r)
    if real and any(real.startswith(root) for root in roots):
        return "own"
    if _VENDOR.search(os.path.basename(real)):
        return "vendor"
    if _TORCH.search(real):
        return "torch"
    if _TRITON_LAUNCHER.search(real) and _INDUCTOR_KERNEL.search(kernel):
        return "torch"
    return "own"


class KernelOwners:
    """Worker side: `start()` once; `record(True/False)` around a forward call; after the
    device is synchronised, `collect()` the kernels launched while recording."""

    def __init__(self, library: str) -> None:
        self.lib = ctypes.CDLL(library)
        self.lib.gk_start.argtypes = [ctypes.c_char_p]
        self.lib.gk_error.restype = ctypes.c_char_p
        self.lib.gk_entry.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                      ctypes.POINTER(ctypes.c_longlong), ctypes.POINTER(ctypes.c_longlong)]
        self.lib.gk_launcher_here.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self.lib.gk_unowned_ns.restype = ctypes.c_longlong

    def start(self, libcupti: str) -> None:
        if self.lib.gk_start(libcupti.encode()) != 0:
            raise OSError(self.lib.gk_error().decode("utf-8", "replace"))

    def hold(self, libcupti: str) -> None:
        """Only hold the subscription (the timing worker): no callback, no cost per launch."""
        self.lib.gk_hold.argtypes = [ctypes.c_char_p]
        if self.lib.gk_hold(libcupti.encode()) != 0:
            raise OSError(self.lib.gk_error().decode("utf-8", "replace"))

    def record(self, on: bool) -> None:
        if on:
            self.lib.gk_reset()
        self.lib.gk_record(1 if on else 0)

    def pause(self, paused: bool) -> None:
        """Stop or go on recording within a call, keeping what was recorded (record resets)."""
        self.lib.gk_record(0 if paused else 1)

    def collect(self) -> list[dict[str, Any]]:
        """[{launcher, name, count, s}] of the kernels launched while recording."""
        self.lib.gk_flush()
        out = []
        owner, name = ctypes.create_string_buffer(512), ctypes.create_string_buffer(256)
        count, ns = ctypes.c_longlong(), ctypes.c_longlong()
        for i in range(self.lib.gk_entries()):
            if self.lib.gk_entry(i, owner, 512, name, 256, ctypes.byref(count), ctypes.byref(ns)):
                out.append({"launcher": owner.value.decode("utf-8", "replace"),
                            "name": name.value.decode("utf-8", "replace"), "count": int(count.value),
                            "s": ns.value / 1e9})
        return sorted(out, key=lambda k: -k["s"])

    def launcher_here(self) -> str:
        """The launcher a kernel launched from this point would get (tests)."""
        out = ctypes.create_string_buffer(512)
        self.lib.gk_launcher_here(out, 512)
        return out.value.decode("utf-8", "replace")


_active: Optional[KernelOwners] = None
_failure: str = ""
_roots: list[str] = []


def start(params: dict[str, Any], device: str) -> None:
    """In the worker, before the submission is imported; CUDA only."""
    global _active, _failure, _roots
    library, libcupti = params.get("kernel_owner"), params.get("libcupti")
    if not device.startswith("cuda"):
        return
    # the submission's own code: its compiled extensions and its own folder
    _roots = [os.environ.get("TORCH_EXTENSIONS_DIR", ""),
              os.path.dirname(os.path.realpath(params.get("submission") or "")) if params.get("submission") else ""]
    if not library or not libcupti:
        _failure = params.get("kernel_owner_missing") or "no CUPTI launcher tracker was built"
        return
    try:
        owners = KernelOwners(library)
        if params.get("kernel_owner_hold"):
            owners.hold(libcupti)  # the timing worker: looks the same, records nothing
            return
        owners.start(libcupti)
        _active = owners
    except OSError as error:
        _failure = str(error)


def active() -> Optional[KernelOwners]:
    return _active


def own_roots() -> list[str]:
    return [r for r in _roots if r]


def classed(kernels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tracker's kernels with their launcher's class (`owner_class`)."""
    roots = own_roots()
    return [{"name": k["name"][:300], "s": k["s"], "count": k["count"],
             "owner": owner_class(k["launcher"], k["name"], roots), "launcher": os.path.basename(k["launcher"])}
            for k in kernels]


class LaunchesOnly:
    """A call's kernels by launcher, with nothing a submission can see from Python (no hook,
    no dispatch mode): the calls the recorder does not record are attributed too. Same
    interface as gatekeeper.behaviour.attribution.Recorder."""

    def __init__(self) -> None:
        self.kernels: list[dict[str, Any]] = []

    @staticmethod
    def available(device: str) -> bool:
        return device.startswith("cuda") and _active is not None

    def __enter__(self) -> "LaunchesOnly":
        assert _active is not None
        _active.record(True)
        return self

    def __exit__(self, *exc: Any) -> None:
        assert _active is not None
        _active.record(False)

    def finish_device(self) -> None:
        import torch

        torch.cuda.synchronize()
        assert _active is not None
        self.kernels = classed(_active.collect())

    def summary(self, out: Any, wall_s: float) -> dict[str, Any]:
        return {"wall_s": wall_s, "own_modules": [], "own_calls": [], "ops": [], "kernels": self.kernels[:500],
                "ownership": status(), "producer": None, "tampered": []}


def status() -> dict[str, Any]:
    """How kernels were attributed in this worker, for the report's `work` section."""
    if _active is not None:
        return {"ownership": "launcher (CUPTI callbacks and kernel records)"}
    return {"ownership": "kernel name", "why_not_launcher": _failure or "not a CUDA run"}
