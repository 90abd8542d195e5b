from __future__ import annotations

from gatekeeper.analyses.torch_rule_base import TorchFallbackRule
from gatekeeper.static.examples import Invalid, Valid, snippet


class CallsTensorComputeMethod(TorchFallbackRule):
    """The forward path calls a tensor method that computes: `x.mean(dim=0)`, `x.sum()`,
    `x.matmul(w)`, `x.softmax(-1)`, `x.exp()`, `x.relu_()`, `torch.Tensor.mean(x)`, on an
    input, on a kernel's output, or on any other tensor.

    Why it games the benchmark: the method is torch's kernel, so torch does the timed work.
    The seed problem's reference is `x.mean(dim=0)`; a submission that calls it is the
    reference with extra steps.

    Methods are compute only when rules/torch_ops.toml names them ([methods] compute):
    the receiver's type is not known statically, so `lst.sort()` on a local list,
    `"".join(...)`, `math.exp(v)`, `self.helper(x)` and the extension's own functions
    (`_ext.mean(x)`, even when named like a tensor method) are not findings. Views, moves,
    casts and metadata (`view`, `reshape`, `contiguous`, `to`, `float`, `size`, `stride`,
    `data_ptr`, `copy_`, `fill_`) are fine.

    Known false-positive patterns and why it does not fire on them: a method of the
    submission's extension named like a tensor method (`_ext.mean(x)`, `self.ext.sum(x)`):
    the receiver is the extension; `.sum()` inside a `@triton.jit` kernel (kernel code, not
    torch); a method on a container or a non-torch object (`self.seen.add`, `logger.log`).
    Severity follows the torch-fallback policy (see GK301 and the table below); allow
    methods with `[rules.GK303.options] allow = ["mean", "Tensor.exp"]`.
    """

    code = "GK303"
    name = "CallsTensorComputeMethod"
    summary = "forward computes with a tensor method instead of the submission's kernel"
    kinds = ("method",)
    message = "forward path calls the tensor method `.{op}()`, so torch computes it, not the submission's kernel: {why}."
    hint = (
        "Do this op inside your own kernel; on the Python side use only views, moves and metadata "
        "(`x.contiguous()`, `x.view(...)`, `x.size(0)`, `x.data_ptr()`). "
        "If the problem allows this op, add it to the `allow` option of GK303 in gatekeeper.toml (rules.GK303.options)."
    )
    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    x = x.contiguous().view(x.size(0), -1).float()
                    out = x.new_empty(x.shape)
                    names = []
                    names.sort()
                    _ext.run(x, out, x.stride(0), x.numel())
                    return out
        """)),
        # the extension's own function called `mean`
        Valid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline(name='m', cpp_sources='', cuda_sources='__global__ void k() {}', functions=['mean'])
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return _ext.mean(x)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return x.mean(0)
        """), line=4, message="forward path calls the tensor method `.mean()`"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x, w):
                    y = _ext.scale(x)
                    return y.matmul(w).softmax(-1)
        """), line=5, message="forward path calls the tensor method `.softmax()`"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return torch.Tensor.sum(x, 0)
        """), line=4, message="forward path calls the tensor method `.sum()`"),
        # a method fetched by a name the file fixes (red team round 13)
        Invalid(snippet("""
            import torch
            _SLOT = "mm"
            def _panel(p, b):
                kernel = object.__getattribute__(p, _SLOT)
                return kernel(b)
            class ModelNew(torch.nn.Module):
                def forward(self, a, b):
                    return _panel(a, b)
        """), line=5, message="the tensor method `.mm()`"),
        # a bound method handed to something that calls it (red team round 13)
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, a, b):
                    return torch.cat([next(map(p.mm, (b,))) for p in a.split(64)])
        """), line=4, message="the tensor method `.mm()`"),
    ]
