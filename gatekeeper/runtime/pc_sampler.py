"""Work attribution by the code that actually executes (issue 22 item 3), on the CPU.

The dispatcher sees only ATen operators that reach a Python dispatch mode. Library code
called directly (MKL's `sgemm_`, which libtorch exports; `at::cpu::sum` from C++; numpy
writing into the output), ops run with the Python key excluded, or a custom op whose body is
torch all escape it. A program-counter sampler does not: a SIGPROF timer on the process's CPU
time interrupts whichever thread runs, a small C handler (pc_sampler.c) records the
interrupted address, and afterwards each address is mapped to the shared object and the
nearest symbol that hold it. The submission's own code is whatever lives in its own compiled
extensions (or a library it loads from its own folder); everything else is torch, a vendor
library, numpy, the interpreter or the C library.

Code a JIT writes into anonymous memory belongs to no object. oneDNN, linked into libtorch,
JIT-generates its GEMM and convolution micro-kernels; the worker has it name them in a Linux
perf map (`ONEDNN_JIT_PROFILE=2` writes `/tmp/perf-<pid>.map`), and an anonymous address that
map covers is vendor work (`jit_ranges`). Any other address that no file mapping holds is
`anonymous`: compute, and never the submission's own, whose code is file-backed by the
extensions it built. So a map that cannot be written (/tmp is read-only under `unshare`),
or one the submission removes, or JIT code freed before the samples are read, loses only the
name, never the attribution (before 2026-12-07 such samples were left out of the compute
share, and a oneDNN GEMM passed as not judged outside bubblewrap).

The handler itself is the part a submission could attack: replacing the SIGPROF handler or
disarming the timer is detected when sampling stops (`intact`), and a sample count far below
what the consumed CPU time implies (signals blocked in every thread) is reported by the
caller as suppressed sampling.

The library is compiled once per machine with the system C compiler into the cache
(`$GATEKEEPER_CACHE_DIR/tools`), by the trusted parent, never inside a worker.
"""

from __future__ import annotations

import ctypes
from bisect import bisect_right
import hashlib
import os
import re
import resource
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

SOURCE = Path(__file__).with_name("pc_sampler.c")
DEFAULT_INTERVAL_US = 250
# What a worker sets so that oneDNN names its JIT code (both spellings: DNNL_ is the older).
JIT_MAP_ENV = {"ONEDNN_JIT_PROFILE": "2", "DNNL_JIT_PROFILE": "2"}
JIT_OBJECT = "[oneDNN JIT code]"
ANONYMOUS_OBJECT = "[JIT code in anonymous memory]"  # code no file holds: a JIT's, named by no perf map
_MAX_JIT_MAP = 8 << 20  # bytes of perf map read at most: a line per generated kernel

_VENDOR = re.compile(r"mkl|dnnl|mkldnn|onednn|openblas|blis|sgemm|dgemm|hgemm|gemm_|cblas|lapack|"
                     r"fbgemm|xnnpack|qnnpack|nnpack|cudnn|cublas|sleef", re.I)
_TORCH_OBJECT = re.compile(r"libtorch|libc10|libshm|_C\.cpython|libtorch_python")
_NUMPY = re.compile(r"numpy|_multiarray|_umath|libopenblas64_|libscipy_openblas", re.I)
_PYTHON = re.compile(r"libpython|/python3(\.\d+)?$|/python$|\.cpython-\d+[^/]*\.so$")
_SYSTEM = re.compile(r"/lib(c|m|pthread|dl|rt|gcc_s|stdc\+\+|gomp|iomp5)[.-]|/ld-linux|linux-vdso|/libz\.")


def _tools_dir() -> Path:
    given = os.environ.get("GATEKEEPER_CACHE_DIR")
    root = Path(given) if given else Path.home() / ".cache" / "gatekeeper"
    return root.expanduser().resolve() / "tools"


def build_sampler() -> Optional[Path]:
    """The compiled sampler library, built on first use; None when this machine cannot build
    it (no C compiler): attribution then falls back to the dispatcher alone, and says so."""
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source + os.uname().machine.encode()).hexdigest()[:16]
    target = _tools_dir() / f"pc_sampler-{digest}.so"
    if target.is_file():
        return target
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        out = Path(scratch) / target.name
        done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(out), str(SOURCE), "-ldl"],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0 or not out.is_file():
            return None
        os.replace(out, target)  # atomic: a concurrent check sees the whole library or none
    return target


HIDING_MIN_S, HIDING_SHARE = 0.02, 0.05


def thread_cpu() -> dict[int, tuple[str, float]]:
    """tid -> (name, CPU seconds so far) for every thread of this process."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[str, float]] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as fh:
                raw = fh.read(4096)
            name = raw[raw.index(b"(") + 1: raw.rindex(b")")].decode("utf-8", "replace")
            fields = raw.rsplit(b")", 1)[1].split()
            out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / tick)
        except (OSError, ValueError, IndexError):
            continue
    return out


@dataclass
class Samples:
    """What one sampled stretch of execution ran on."""

    addresses: list[int]
    intact: bool  # the handler and the timer were still the sampler's when it stopped
    cpu_s: float  # process CPU time over the whole phase
    interval_us: int
    signals: int = 0  # SIGPROF deliveries over the whole phase, recorded or not
    # Threads that used CPU over the phase but took almost none of its signals: (name, CPU s)
    hiding: list[tuple[str, float]] = field(default_factory=list)

    @property
    def suppressed(self) -> bool:
        """Far fewer timer signals than the CPU time implies: SIGPROF blocked or diverted.
        The kernel checks CPU timers at its tick (at most 10 ms), hence the generous bound."""
        return self.cpu_s > 0.5 and self.signals < self.cpu_s / 0.010 * 0.1


@dataclass
class Attribution:
    classes: Counter = field(default_factory=Counter)  # own | torch | vendor | numpy | python | system | unknown
    objects: Counter = field(default_factory=Counter)
    symbols: Counter = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.classes.values())

    def share(self, cls: str) -> float:
        return self.classes[cls] / self.total if self.total else 0.0

    def to_json(self, top: int = 8) -> dict:
        return {"samples": self.total, "classes": dict(self.classes),
                "objects": [[o, n] for o, n in self.objects.most_common(top)],
                "symbols": [[s, n] for s, n in self.symbols.most_common(top)]}


class Sampler:
    """Inside a worker: `start()` once for a phase, `record(True)`/`record(False)` around each
    stretch to attribute (every forward call), `stop()` at the end of the phase."""

    def __init__(self, library: str, interval_us: int = DEFAULT_INTERVAL_US) -> None:
        self.lib = ctypes.CDLL(library)
        self.lib.gk_pc.restype = ctypes.c_size_t
        self.lib.gk_pc.argtypes = [ctypes.c_int]
        self.lib.gk_resolve.argtypes = [ctypes.c_size_t, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self.interval_us = interval_us
        self._cpu0 = 0.0
        self._threads0: dict[int, tuple[str, float]] = {}
        self._names: dict[int, tuple[str, str]] = {}

    @staticmethod
    def _cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def start(self) -> None:
        self.lib.gk_reset()
        self.lib.gk_record(0)
        self._cpu0 = self._cpu()
        self._threads0 = thread_cpu()
        if self.lib.gk_start(self.interval_us) != 0:
            raise OSError("the sampler's SIGPROF timer could not be armed")

    def record(self, on: bool) -> None:
        self.lib.gk_record(1 if on else 0)

    def count(self) -> int:
        """Samples recorded so far: marks where one call's samples begin and end."""
        return int(self.lib.gk_count())

    def stop(self) -> Samples:
        intact = bool(self.lib.gk_stop())
        cpu = self._cpu() - self._cpu0
        n = self.lib.gk_count()
        return Samples([int(self.lib.gk_pc(i)) for i in range(n)], intact, cpu, self.interval_us,
                       int(self.lib.gk_signals_seen()), self._hiding(cpu))

    def _hiding(self, cpu: float) -> list[tuple[str, float]]:
        """Threads whose CPU time over the phase should have drawn signals and did not (fewer than
        a tenth of what their share implies): they block SIGPROF while they work (red team round
        6, h07 and h12, which blocked it only while computing). Needs 20 ms and 5% of the CPU."""
        counts: dict[int, int] = {}
        for i in range(int(self.lib.gk_tid_slots())):
            key = int(self.lib.gk_tid_key(i))
            if key:
                counts[key] = int(self.lib.gk_tid_count(i))
        total_signals = sum(counts.values())
        if cpu <= 0 or not total_signals:
            return []
        out = []
        for tid, (name, used) in thread_cpu().items():
            used -= self._threads0.get(tid, ("", 0.0))[1]
            if used < max(HIDING_MIN_S, HIDING_SHARE * cpu):
                continue
            expected = total_signals * used / cpu
            # 20 expected signals at least: an honest thread's count is Poisson around that, and
            # under a tenth of it (0 or 1) happens with a chance of about 1e-8
            if expected >= 20 and counts.get(tid, 0) < 0.1 * expected:
                out.append((name, round(used, 3)))
        return out

    def remove_jit_map(self) -> None:
        """Delete this process's perf map once read (outside bubblewrap /tmp is the host's).
        Through the sampler's C code: the worker's audit guard refuses os.remove there."""
        self.lib.gk_remove_jit_map()

    def name(self, pc: int) -> tuple[str, str]:
        """(object path, symbol) of an address; cached, since hot loops repeat addresses."""
        hit = self._names.get(pc)
        if hit is None:
            obj, sym = ctypes.create_string_buffer(512), ctypes.create_string_buffer(512)
            self.lib.gk_resolve(pc, obj, 512, sym, 512)
            hit = (obj.value.decode("utf-8", "replace"), sym.value.decode("utf-8", "replace"))
            self._names[pc] = hit
        return hit

    def attribute(self, samples: Samples, own_roots: Iterable[str],
                  classes: Optional[list[str]] = None, own_files: Iterable[str] = (),
                  own_inodes: Iterable[int] = ()) -> Attribution:
        """What the samples ran on; `classes`, when given, receives each sample's class in
        order (the caller splits them by forward call). `own_files`: the submission's own
        compiled objects wherever they were built (a load_inline build_directory anywhere)."""
        roots = tuple(os.path.realpath(r).rstrip("/") + "/" for r in own_roots if r)
        files = frozenset(os.path.realpath(f) for f in own_files if f)
        out = Attribution()
        jit: Optional[list[tuple[int, int, str]]] = None
        inodes = frozenset(own_inodes)
        maps = mapped_inodes()
        for pc in samples.addresses:
            obj, sym = self.name(pc)
            cls = classify(obj, sym, roots, files)
            if cls == "own" and inodes and maps and inode_at(maps, pc) not in inodes:
                # An own file's path, but not the file that was loaded as own: another one renamed
                # over it and mapped from there (red team round 6, h11), a library's code.
                cls = "vendor"
            if not obj:  # no object claims it: oneDNN's JIT code when its perf map covers it
                jit = jit_ranges(jit_map_path()) if jit is None else jit
                named = jit_name(jit, pc)
                if named is not None:
                    obj, sym, cls = JIT_OBJECT, named, "vendor"
                elif maps and inode_at(maps, pc) is None:  # (no maps read: nothing is known)
                    # Not file-backed (or unmapped since): a JIT's code, never the submission's own.
                    # A file-backed address without an object (the main program) stays unknown.
                    obj, cls = ANONYMOUS_OBJECT, "anonymous"
            if classes is not None:
                classes.append(cls)
            out.classes[cls] += 1
            out.objects[os.path.basename(obj) or "?"] += 1
            if sym:
                out.symbols[sym[:120]] += 1
        return out


def mapped_inodes() -> list[tuple[int, int, int]]:
    """(start, end, inode) of this process's file mappings, sorted (/proc/self/maps)."""
    out: list[tuple[int, int, int]] = []
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) >= 5 and parts[4] != "0":
                    start, _, end = parts[0].partition("-")
                    out.append((int(start, 16), int(end, 16), int(parts[4])))
    except (OSError, ValueError):
        return []
    out.sort()
    return out


def inode_at(maps: list[tuple[int, int, int]], pc: int) -> Optional[int]:
    """The inode of the file mapping holding `pc`, or None."""
    index = bisect_right(maps, (pc, float("inf"), 0)) - 1
    if index >= 0 and maps[index][0] <= pc < maps[index][1]:
        return maps[index][2]
    return None


def jit_map_path() -> str:
    """Where oneDNN writes this process's perf map (a fixed place: perf looks for it there)."""
    return f"/tmp/perf-{os.getpid()}.map"


def jit_ranges(path: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of each range of a Linux perf map (`START SIZE NAME` in hex), sorted;
    empty when there is none or it cannot be read."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(_MAX_JIT_MAP)
    except OSError:
        return []
    out: list[tuple[int, int, str]] = []
    for line in data.decode("utf-8", "replace").splitlines():
        parts = line.split(None, 2)
        if len(parts) < 2:
            continue
        try:
            start, size = int(parts[0], 16), int(parts[1], 16)
        except ValueError:
            continue
        out.append((start, start + size, parts[2].strip() if len(parts) > 2 else ""))
    out.sort()
    return out


def jit_name(ranges: list[tuple[int, int, str]], pc: int) -> Optional[str]:
    """The name of the perf-map range holding `pc` (the latest one starting at or below it), or None."""
    index = bisect_right(ranges, (pc, float("inf"), "")) - 1
    if index >= 0 and ranges[index][0] <= pc < ranges[index][1]:
        return ranges[index][2] or "jit"
    return None


def classify(obj: str, sym: str, own_roots: tuple[str, ...], own_files: frozenset[str] = frozenset()) -> str:
    """The class of code at one address, by the object that holds it (and, inside torch's
    objects, by the symbol: MKL and oneDNN are linked into libtorch_cpu). Where the code came
    from decides before any name: an own extension's `gemm_rows` is the submission's GEMM."""
    if not obj:
        return "unknown"  # anonymous memory: JIT code, or an address no object claims
    real = os.path.realpath(obj)
    if real in own_files:
        return "own"
    if any(real.startswith(root) for root in own_roots):
        # Beside the submission but never loaded as its module or library: a dependency the
        # dynamic linker pulled in, such as a vendor library copied there (red team round 6, h08).
        # Its code is a library's, whoever built the extension that links it.
        return "vendor" if own_files else "own"
    if _VENDOR.search(sym) or _VENDOR.search(os.path.basename(real)):
        return "vendor"
    if _TORCH_OBJECT.search(real):
        return "torch"
    if _NUMPY.search(real):
        return "numpy"
    if _SYSTEM.search(real):
        return "system"
    if _PYTHON.search(real):
        return "python"
    return "unknown"
