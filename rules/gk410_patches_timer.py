from __future__ import annotations

from typing import Optional

from gatekeeper.analyses.harness_names import TIMERS
from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_patching import PatchRule
from gatekeeper.analyses.harness_support import matches



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
        "import torch, time\ndef bench(f):\n    torch.cuda.synchronize()\n    t0 = time.perf_counter()\n"
        "    f()\n    torch.cuda.synchronize()\n    return time.perf_counter() - t0\n",
        "import torch\nstart = torch.cuda.Event(enable_timing=True)\nstart.record()\nstart.label = 'mine'\n",
        "from time import perf_counter as pc\npc = None\n",  # rebinding a local name patches nothing
    ]
    INVALID = [
        "import torch\ntorch.cuda.Event.elapsed_time = lambda self, other: 0.001\n",
        "import torch as T\nt = T.cuda\nt.Event.elapsed_time = lambda s, e: 1e-3\n",
        "import time\nsetattr(time, 'perf_counter', lambda: 0.0)\n",
        "from unittest import mock\nmock.patch('torch.cuda.synchronize', lambda: None).start()\n",
        "import torch\ntorch.cuda.__dict__['synchronize'] = lambda *a: None\n",
        "import torch\nclass Fast: pass\ntorch.cuda.Event.__class__ = Fast\n",
        "from unittest.mock import patch\nimport time\n@patch.object(time, 'time', lambda: 0)\ndef f():\n    pass\n",
        "import torch\ndef _install():\n    orig = torch.cuda.Event.record\n"
        "    def record(self, stream=None):\n        return orig(self, stream)\n    torch.cuda.Event.record = record\n",
        'src = r"""\n#include <torch/extension.h>\nvoid f() {\n  auto t = py::module_::import("torch.cuda");\n'
        '  py::setattr(t, "synchronize", py::none());\n}\n"""\n',
    ]

    def sensitive(self, qual: str) -> Optional[str]:
        entry = matches(qual, TIMERS)
        return f"it is part of the timing path (`{entry}`)" if entry else None
