from __future__ import annotations

from gatekeeper.analyses.kernel_output_flow import find_discarded
from gatekeeper.analyses.torch_rule_base import TorchFallbackRule
from gatekeeper.analyses.torch_policy_table import policy
from gatekeeper.static.examples import Invalid, Valid, snippet

_TRITON = ("import torch\nimport torch.nn.functional as F\nimport triton\n@triton.jit\n"
           "def kernel(x_ptr, y_ptr, n):\n    pass\n")
_EXT = ("import torch\nfrom torch.utils.cpp_extension import load_inline\n"
        "_ext = load_inline('m', '', '__global__ void k() {}', functions=['f'])\n")


class DiscardsKernelOutput(TorchFallbackRule):
    """The submission launches its own kernel, but what forward returns is a torch result:
    the kernel's output is never read, or is overwritten by torch before the return.

        y = _ext.fused(x)                    out = _ext.fused(x)
        y = self.conv(x).relu()              out.copy_(F.relu(self.conv(x)))
        return y                             return out

    Why it games the benchmark: the kernel runs (and is timed, and shows up in a profile),
    so the submission looks like a custom kernel, but torch computed the answer that passes
    the correctness check. The kernel is decoration.

    How it is decided (kernel_output_flow.py): in each forward-path function that launches an
    own kernel (or calls a helper of the file that does), names holding kernel output are
    followed statement by statement; the rule fires when every `return` gives a value
    computed by torch and the kernel output stays in locals that nothing returns.

    Known false-positive patterns and why it does not fire on them:
    - in-place kernels (`_ext.relu_(y)`, `k[grid](y, ...)` with no result): a launch whose
      result is not kept is taken to write every tensor passed to it, so `return y` reads
      kernel output;
    - kernel output kept on `self` or written into a parameter (a buffer the caller reads):
      it escapes the analysis, nothing is reported;
    - a torch reassignment inside a branch or loop (`if training: y = torch.relu(y)`): only
      straight-line reassignments overwrite kernel output;
    - a return of a call the analysis cannot see into (a submodule of the submission's own,
      `self.block(y)`) counts as possibly kernel output;
    - a helper of the file that launches a kernel counts as a launch where it is called.
    """

    code = "GK308"
    name = "DiscardsKernelOutput"
    summary = "the own kernel's output is discarded; forward returns a torch result"
    kinds = ()
    situations = ("discarded_kernel_output",)
    message = ("`{function}` launches the submission's kernel `{kernel}` but returns a value torch computed: the "
               "kernel's output never reaches the return, so torch does the work the kernel claims to do.")
    hint = (
        "Return the kernel's output (or pass the output buffer to the kernel and return that buffer), and remove "
        "the torch computation of the same result. If the kernel is only a check or a warm-up, delete it."
    )
    VALID = [
        # the kernel's output is returned; torch only allocates
        Valid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline('m', '', '__global__ void k() {}', functions=['f'])
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = self.conv(x)
                    return _ext.f(y)
        """)),
        # in-place launch: the buffer passed to the kernel is the result
        Valid(snippet("""
            import torch
            import torch.nn.functional as F
            import triton
            @triton.jit
            def kernel(x_ptr, y_ptr, n):
                pass
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.relu(x)
                    out = torch.empty_like(y)
                    kernel[(4,)](y, out, y.numel())
                    return out
        """)),
        # a torch op inside a branch does not overwrite the kernel output
        Valid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline('m', '', '__global__ void k() {}', functions=['f'])
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = _ext.f(x)
                    if self.training:
                        y = torch.relu(x)
                    return torch.tanh(y)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline('m', '', '__global__ void k() {}', functions=['f'])
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = torch.nn.Conv2d(3, 8, 3)
                def forward(self, x):
                    y = _ext.f(x)
                    y = torch.relu(self.conv(x))
                    return y
        """), line=11, message="`ModelNew.forward` launches the submission's kernel `_ext.f` but returns a value torch computed"),
        Invalid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline('m', '', '__global__ void k() {}', functions=['f'])
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    _ = _ext.f(x)
                    return x.mean(dim=0)
        """), line=7, message="`ModelNew.forward` launches the submission's kernel `_ext.f` but returns a value torch computed"),
        Invalid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline('m', '', '__global__ void k() {}', functions=['f'])
            import torch.nn.functional as F
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    out = _ext.f(x)
                    out.copy_(F.gelu(x))
                    return out
        """), line=9, message="`ModelNew.forward` launches the submission's kernel `_ext.f` but returns a value torch computed"),
    ]

    def finish(self) -> None:
        self.usage.resolve()
        verdict = policy().verdict("discarded_kernel_output", self.ctx.profile)
        severity = self.active_severity if self.active_severity != type(self).severity_for(self.ctx.profile) \
            else verdict.level
        for found in find_discarded(self.usage):
            message = self.message.format(function=found.function, kernel=found.kernel.what)
            self.report(found.ret, message, evidence={"function": found.function, "kernel": found.kernel.what},
                        severity=severity, confidence=verdict.confidence)
