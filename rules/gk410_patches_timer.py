from __future__ import annotations

from typing import Optional

from gatekeeper.analyses.harness_names import TIMERS
from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_patching import PatchRule
from gatekeeper.analyses.harness_support import matches
from gatekeeper.static.examples import Invalid, Valid, snippet



class PatchesTimer(PatchRule):
    """Replaces a timer the harness measures with: `torch.cuda.Event` or its methods
    (`elapsed_time`, `record`, `synchronize`, `query`), `torch.cuda.synchronize`, stream
    methods, anything in `time` / `timeit`, `triton.testing.do_bench`, or
    `torch.utils.benchmark`. Seen through aliases (`t = torch.cuda; t.Event.elapsed_time =
    f`), `setattr`, `mock.patch`, `__dict__` writes and `__class__` swaps, in Python or from
    C++ through pybind11 / the C API (`py::setattr(torch_cuda, "synchronize", ...)`).

    Why it games the benchmark: the harness imports the submission into the process that
    times it, so a patched `elapsed_time` or `perf_counter` reports whatever the submission
    wants, and a patched `synchronize` lets the timer stop before the work is done.

    Not flagged: calling these (`torch.cuda.synchronize()`, `time.perf_counter()`,
    `torch.cuda.Event(enable_timing=True)` for the submission's own measurements), and
    setting attributes of an event instance the submission created itself.
    """

    code = "GK410"
    name = "PatchesTimer"
    category = Category.HARNESS_TAMPERING
    severity = Severity.ERROR
    summary = "replaces a timing function or CUDA event method"
    message = "`{name}` is replaced ({how}): {what}. The harness would time with the submission's fake clock."
    hint = (
        "Remove the patch. Never assign to, `setattr`, `mock.patch` or `del` anything in "
        "`torch.cuda.Event`, `torch.cuda.synchronize`, `time` or `triton.testing`; only call them. "
        "Make the kernel faster instead; timing happens outside the submission's control."
    )
    VALID = [
        Valid(snippet("""
            import torch, time
            def bench(f):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                f()
                torch.cuda.synchronize()
                return time.perf_counter() - t0
        """)),
        Valid(snippet("""
            import torch
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            start.label = 'mine'
        """)),
        Valid(snippet("""
            from time import perf_counter as pc
            pc = None
        """)),  # rebinding a local name patches nothing
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            torch.cuda.Event.elapsed_time = lambda self, other: 0.001
        """), line=2, message="`torch.cuda.Event.elapsed_time` is replaced (assignment)"),
        Invalid(snippet("""
            import torch as T
            t = T.cuda
            t.Event.elapsed_time = lambda s, e: 1e-3
        """), line=3, message="`torch.cuda.Event.elapsed_time` is replaced (assignment)"),
        Invalid(snippet("""
            import time
            setattr(time, 'perf_counter', lambda: 0.0)
        """), line=2, message="`time.perf_counter` is replaced (setattr)"),
        Invalid(snippet("""
            from unittest import mock
            mock.patch('torch.cuda.synchronize', lambda: None).start()
        """), line=2, message="`torch.cuda.synchronize` is replaced (mock.patch)"),
        Invalid(snippet("""
            import torch
            torch.cuda.__dict__['synchronize'] = lambda *a: None
        """), line=2, message="`torch.cuda.synchronize` is replaced (__dict__ write)"),
        Invalid(snippet("""
            import torch
            class Fast: pass
            torch.cuda.Event.__class__ = Fast
        """), line=3, message="`torch.cuda.Event.__class__` is replaced (__class__ swap)"),
        Invalid(snippet("""
            from unittest.mock import patch
            import time
            @patch.object(time, 'time', lambda: 0)
            def f():
                pass
        """), line=3, message="`time.time` is replaced (mock.patch.object)"),
        Invalid(snippet("""
            import torch
            def _install():
                orig = torch.cuda.Event.record
                def record(self, stream=None):
                    return orig(self, stream)
                torch.cuda.Event.record = record
        """), line=6, message="`torch.cuda.Event.record` is replaced (assignment)"),
        Invalid(snippet('''
            src = r"""
            #include <torch/extension.h>
            void f() {
              auto t = py::module_::import("torch.cuda");
              py::setattr(t, "synchronize", py::none());
            }
            """
        '''), line=5, message="`torch.cuda.synchronize` is replaced (pybind11/C API write)"),
    ]

    def sensitive(self, qual: str) -> Optional[str]:
        entry = matches(qual, TIMERS)
        return f"it is part of the timing path (`{entry}`)" if entry else None
