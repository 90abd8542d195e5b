from __future__ import annotations

from typing import Optional

from gatekeeper.analyses.harness_names import COMPARISONS
from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_patching import PatchRule
from gatekeeper.analyses.harness_support import matches
from gatekeeper.static.examples import Invalid, Valid, snippet



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
        Valid(snippet("""
            import torch
            def _self_test(m, x, ref):
                assert torch.allclose(m(x), ref, atol=1e-5)
        """)),
        Valid(snippet("""
            import torch
            allclose = lambda a, b: bool((a - b).abs().max() < 1e-3)
        """)),  # own helper
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            torch.allclose = lambda *a, **k: True
        """), line=2, message="`torch.allclose` is replaced (assignment)"),
        Invalid(snippet("""
            from torch import testing as tt
            tt.assert_close = lambda *a, **k: None
        """), line=2, message="`torch.testing.assert_close` is replaced (assignment)"),
        Invalid(snippet("""
            import torch
            setattr(torch, 'equal', lambda a, b: True)
        """), line=2, message="`torch.equal` is replaced (setattr)"),
        Invalid(snippet("""
            import sys
            sys.modules['torch'].allclose = lambda *a, **k: True
        """), line=2, message="`torch.allclose` is replaced (assignment)"),
        Invalid(snippet("""
            import torch
            vars(torch)['allclose'] = lambda *a, **k: True
        """), line=2, message="`torch.allclose` is replaced (__dict__ write)"),
        Invalid(snippet("""
            from unittest import mock
            p = mock.patch('torch.allclose', return_value=True)
            p.start()
        """), line=2, message="`torch.allclose` is replaced (mock.patch)"),
        Invalid(snippet("""
            import torch
            torch.__dict__.update({'isclose': lambda *a, **k: True})
        """), line=2, message="`torch.isclose` is replaced (__dict__.update)"),
        Invalid(snippet('''
            src = r"""
            #include <torch/extension.h>
            void f() { py::module_::import("torch").attr("allclose") = py::cpp_function([](py::args a) { return true; }); }
            """
        '''), line=3, message="`torch.allclose` is replaced (pybind11/C API write)"),
    ]

    def sensitive(self, qual: str) -> Optional[str]:
        entry = matches(qual, COMPARISONS)
        return f"the harness compares outputs with `{entry}`" if entry else None
