from __future__ import annotations

from typing import Optional

from gatekeeper.analyses.harness_names import COMPARISONS
from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_patching import PatchRule
from gatekeeper.analyses.harness_support import matches



class PatchesComparison(PatchRule):
    """Replaces a function the harness uses to compare outputs with the reference:
    `torch.allclose`, `torch.equal`, `torch.isclose`, anything in `torch.testing`
    (`assert_close`), the Tensor comparison methods, or numpy's equivalents, by assignment,
    `setattr`, `mock.patch`, `__dict__` writes or `__class__` swaps, through any alias,
    also from C++ through pybind11 (`py::module_::import("torch").attr("allclose") = f`).

    Why it games the benchmark: a correctness check that always says "close" accepts any
    output, so a kernel that computes nothing passes.

    Not flagged: calling these functions, for example in a self-test of the submission
    (the comparison is the harness's to make, but calling it changes nothing).
    """

    code = "GK411"
    name = "PatchesComparison"
    category = Category.HARNESS_TAMPERING
    severity = Severity.ERROR
    summary = "replaces a correctness comparison such as torch.allclose"
    message = "`{name}` is replaced ({how}): {what}. The harness's correctness check would accept anything."
    hint = (
        "Remove the patch: never assign to or `mock.patch` `torch.allclose`, `torch.equal` or "
        "`torch.testing`. If the output does not match the reference, fix the kernel."
    )
    VALID = [
        "import torch\ndef _self_test(m, x, ref):\n    assert torch.allclose(m(x), ref, atol=1e-5)\n",
        "import torch\nallclose = lambda a, b: bool((a - b).abs().max() < 1e-3)\n",  # own helper
    ]
    INVALID = [
        "import torch\ntorch.allclose = lambda *a, **k: True\n",
        "from torch import testing as tt\ntt.assert_close = lambda *a, **k: None\n",
        "import torch\nsetattr(torch, 'equal', lambda a, b: True)\n",
        "import sys\nsys.modules['torch'].allclose = lambda *a, **k: True\n",
        "import torch\nvars(torch)['allclose'] = lambda *a, **k: True\n",
        "from unittest import mock\np = mock.patch('torch.allclose', return_value=True)\np.start()\n",
        "import torch\ntorch.__dict__.update({'isclose': lambda *a, **k: True})\n",
        'src = r"""\n#include <torch/extension.h>\nvoid f() { py::module_::import("torch").attr("allclose") = '
        'py::cpp_function([](py::args a) { return true; }); }\n"""\n',
    ]

    def sensitive(self, qual: str) -> Optional[str]:
        entry = matches(qual, COMPARISONS)
        return f"the harness compares outputs with `{entry}`" if entry else None
