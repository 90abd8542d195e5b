"""Work attribution by executing code (gatekeeper/runtime/pc_sampler.py): the samples land in
the object that really ran, whatever the dispatcher saw, and tampering with the sampler shows."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gatekeeper.runtime.pc_sampler import JIT_MAP_ENV, build_sampler, classify, jit_name, jit_ranges

pytestmark = pytest.mark.slow  # each case runs torch in a fresh interpreter

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")


def _run(body: str, tmp_path: Path, env: dict[str, str] | None = None) -> dict:
    library = build_sampler()
    assert library is not None
    script = textwrap.dedent('''
        import json, sys
        from gatekeeper.runtime.pc_sampler import Sampler
        s = Sampler(sys.argv[1])
        roots = []
    ''') + textwrap.dedent(body) + textwrap.dedent('''
        r = s.stop()
        a = s.attribute(r, roots)
        s.remove_jit_map()
        print(json.dumps({"classes": dict(a.classes), "intact": r.intact, "suppressed": r.suppressed,
                          "samples": a.total, "symbols": a.to_json()["symbols"], "hiding": r.hiding}))
    ''')
    done = subprocess.run([sys.executable, "-c", script, str(library)], capture_output=True, text=True,
                          timeout=300, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", **(env or {})},
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_cc
def test_mkl_called_through_torch_is_vendor_work(tmp_path):
    out = _run('''
        import torch
        a, b = torch.randn(384, 384), torch.randn(384, 384)
        s.start()
        import time
        t = time.process_time()
        while time.process_time() - t < 0.6:
            s.record(True); torch.mm(a, b); s.record(False)
    ''', tmp_path)
    assert out["intact"] and out["samples"] >= 20
    assert out["classes"].get("vendor", 0) / out["samples"] > 0.8, out


@needs_cc
def test_an_own_library_loaded_from_the_submission_folder_is_own_work(tmp_path):
    (tmp_path / "own.c").write_text("double spin(long n){double a=0;for(long i=0;i<n;i++)a+=i*1e-9;return a;}\n")
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(tmp_path / "libown.so"), str(tmp_path / "own.c")],
                   check=True)
    out = _run(f'''
        import ctypes
        lib = ctypes.CDLL({str(tmp_path / "libown.so")!r})
        lib.spin.restype = ctypes.c_double
        roots = [{str(tmp_path)!r}]
        s.start()
        s.record(True); lib.spin(400_000_000); s.record(False)
    ''', tmp_path)
    assert out["classes"].get("own", 0) / out["samples"] > 0.9, out


@needs_cc
def test_samples_outside_recorded_stretches_are_dropped(tmp_path):
    out = _run('''
        import torch, time
        a = torch.randn(384, 384)
        s.start()
        t = time.process_time()
        while time.process_time() - t < 0.4:
            torch.mm(a, a)  # not recorded
    ''', tmp_path)
    assert out["samples"] == 0 and not out["suppressed"]


@needs_cc
def test_a_replaced_sigprof_handler_is_seen(tmp_path):
    out = _run('''
        import signal, time
        s.start()
        s.record(True)
        signal.signal(signal.SIGPROF, signal.SIG_IGN)
        t = time.process_time()
        while time.process_time() - t < 0.2:
            pass
        s.record(False)
    ''', tmp_path)
    assert out["intact"] is False


@needs_cc
def test_blocking_the_signal_in_every_thread_is_seen(tmp_path):
    out = _run('''
        import signal, time
        s.start()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF})
        s.record(True)
        t = time.process_time()
        while time.process_time() - t < 1.0:
            sum(range(1000))
        s.record(False)
    ''', tmp_path)
    assert out["suppressed"] is True


def test_classes_by_object_and_symbol():
    own = ("/cache/torch_extensions/abc/",)
    assert classify("/cache/torch_extensions/abc/ext/ext.so", "f", own) == "own"
    assert classify("/venv/torch/lib/libtorch_cpu.so", "mkl_blas_def_sgemm_kernel_0", own) == "vendor"
    assert classify("/venv/torch/lib/libtorch_cpu.so", "_ZN2at6native3sum", own) == "torch"
    assert classify("/venv/numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so", "", own) == "numpy"
    assert classify("/usr/lib/x86_64-linux-gnu/libc.so.6", "memcpy", own) == "system"
    assert classify("", "", own) == "unknown"


def test_a_library_beside_the_submission_that_it_did_not_load_itself_is_a_library(tmp_path):
    # red team round 6 (h08): numpy's OpenBLAS copied into the submission's build folder, renamed,
    # and linked to its extension by the dynamic linker. The extension module (and a library the
    # submission loads with ctypes) is own code; the dependency next to it is not.
    own = (str(tmp_path) + "/",)
    ext, dep = str(tmp_path / "build" / "kern.so"), str(tmp_path / "build" / "libtile.so")
    for path in (ext, dep):
        Path(path).parent.mkdir(exist_ok=True)
        Path(path).write_bytes(b"")
    assert classify(ext, "gemm_rows", own, frozenset({ext})) == "own"
    assert classify(dep, "", own, frozenset({ext})) == "vendor"
    assert classify(dep, "", own) == "own"  # nothing known to be loaded: the folder decides, as before


@needs_cc
def test_onednn_jit_code_named_in_its_perf_map_is_vendor_work(tmp_path):
    # oneDNN JIT-generates its convolution kernels into anonymous memory; with the worker's
    # variables it names them in /tmp/perf-<pid>.map and those samples are vendor work.
    body = '''
        import torch
        x, w = torch.randn(4, 32, 40, 40), torch.randn(32, 32, 3, 3)
        torch.nn.functional.conv2d(x, w, padding=1)
        s.start()
        import time
        t = time.process_time()
        while time.process_time() - t < 0.6:
            s.record(True); torch.nn.functional.conv2d(x, w, padding=1); s.record(False)
    '''
    named = _run(body, tmp_path, JIT_MAP_ENV)
    if not named["classes"].get("anonymous") and not named["classes"].get("vendor"):
        pytest.skip(f"this torch runs conv2d without oneDNN's JIT: {named}")
    assert named["classes"].get("vendor", 0) / named["samples"] > 0.5, named
    assert any(sym.startswith("jit_") for sym, _ in named["symbols"]), named
    # Without the map (unwritable /tmp, or removed) the same code loses its name, not its class:
    # no file holds it, so it is compute that is never the submission's own.
    unnamed = _run(body, tmp_path)
    assert unnamed["classes"].get("anonymous", 0) > unnamed["classes"].get("vendor", 0), unnamed
    assert unnamed["classes"].get("anonymous", 0) / unnamed["samples"] > 0.5 and not unnamed["classes"].get("own"), unnamed


def test_perf_map_ranges_name_only_the_addresses_inside_them(tmp_path):
    path = tmp_path / "perf-1.map"
    path.write_text("7f0000001000 100 jit_brgemm_kernel_t.0\nnot a line\n7f0000000000 10 jit_reorder\n7f0000002000 20\n")
    ranges = jit_ranges(str(path))
    assert [r[0] for r in ranges] == [0x7F0000000000, 0x7F0000001000, 0x7F0000002000]  # sorted
    assert jit_name(ranges, 0x7F0000001000) == "jit_brgemm_kernel_t.0"
    assert jit_name(ranges, 0x7F00000010FF) == "jit_brgemm_kernel_t.0"
    assert jit_name(ranges, 0x7F0000001100) is None  # one past the end
    assert jit_name(ranges, 0x7F0000000010) is None  # between ranges
    assert jit_name(ranges, 0x7F0000002001) == "jit"  # a range without a name
    assert jit_name(ranges, 0x1000) is None
    assert jit_ranges(str(tmp_path / "absent.map")) == []


@needs_cc
def test_a_thread_that_works_with_the_profiling_signal_blocked_is_named(tmp_path):
    # red team round 6 (h12): a worker that blocks SIGPROF while it computes takes none of the
    # timer's signals, which go to a thread that does not block it. Its CPU time gives it away.
    out = _run(_THREAD.replace("BLOCK", "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF})"), tmp_path)
    assert len(out["hiding"]) == 1 and out["hiding"][0][1] >= 0.3, out  # (OS thread name, its CPU seconds)


@needs_cc
def test_threads_that_take_their_signals_are_not_named(tmp_path):
    out = _run(_THREAD.replace("BLOCK", "pass"), tmp_path)
    assert out["hiding"] == [], out


_THREAD = """
import signal, threading, time
done, keep = threading.Event(), threading.Event()
def work():
    BLOCK
    t0 = time.thread_time()
    while time.thread_time() - t0 < 0.5:
        sum(range(2000))
    done.set()
    keep.wait()  # alive when the sampler stops, as a pool thread is
s.start()
s.record(True)
worker = threading.Thread(target=work, name="hidden", daemon=True)
worker.start()
done.wait()
s.record(False)
"""


def test_a_mapping_is_known_by_its_inode_not_its_path():
    # red team round 6 (h11): a vendor library renamed over the path of an own library after that
    # was loaded. The mapping keeps the inode of the file it came from, so own code is the inode
    # that was loaded as own, whatever now sits at its path.
    import ctypes
    import os

    from gatekeeper.runtime.pc_sampler import inode_at, mapped_inodes

    libc = ctypes.CDLL(None)
    address = ctypes.cast(libc.getpid, ctypes.c_void_p).value
    maps = mapped_inodes()
    inode = inode_at(maps, address)
    path = next(line.split()[-1] for line in open("/proc/self/maps") if line.split()[4] == str(inode))
    assert inode == os.stat(path).st_ino
    assert inode_at(maps, 8) is None  # no mapping there
