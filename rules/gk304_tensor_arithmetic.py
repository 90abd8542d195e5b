from __future__ import annotations

from gatekeeper.analyses.torch_rule_base import TorchFallbackRule
from gatekeeper.static.examples import Invalid, Valid, snippet


class TensorArithmetic(TorchFallbackRule):
    """The forward path does tensor arithmetic with Python operators: `a @ b` always, and
    elementwise `+ - * / // % **` (and their in-place forms, and unary minus) when an
    operand is a tensor: a forward parameter, a local assigned from one, or the result of a
    tensor method or torch function (`x * 0.25`, `a + b`, `x.view(-1) * 2`, `y += x`).

    Why it games the benchmark: each operator launches a torch kernel, so part (or all) of
    the computation is torch's. `@` is a matmul: always heavy.

    Size arithmetic is not tensor arithmetic: `x.size(0) * x.size(1)`, `x.shape[1] // 4`,
    `(n + 255) // 256`, `x.numel() * 4` are fine, and so are forward parameters annotated
    `int` / `float` / `bool`, parameters with a default, and everything inside
    `@triton.jit` (and other JIT) kernels. Known false-positive patterns and why it does
    not fire on them: grid and size arithmetic (`triton.cdiv(n, BLOCK)`, `x.numel() * 4`),
    because the operands are sizes, not tensors; arithmetic in `__init__` on weights
    (construction time). Severity follows the torch-fallback policy (see GK301 and the
    table below): elementwise glue around an own kernel is a warning under the default
    profile and an error under strict. Allow with `[rules.GK304.options] allow = ["mul"]`
    (op names: matmul, add, sub, mul, div, floor_divide, remainder, pow, neg; or the
    symbol, e.g. "*").
    """

    code = "GK304"
    name = "TensorArithmetic"
    summary = "forward does tensor arithmetic with Python operators (`@`, `*`, `+`...) in torch"
    kinds = ("operator",)
    message = "forward path computes `{what}` on tensors with a Python operator, so torch does `{op}`, not the submission's kernel: {why}."
    hint = (
        "Fold the arithmetic into your kernel (pass scalars such as a scale factor as kernel arguments). "
        "Python arithmetic is fine on sizes (`x.size(0) * x.size(1)`) but not on tensors. "
        "If the problem allows this op, add it to the `allow` option of GK304 in gatekeeper.toml (rules.GK304.options)."
    )
    VALID = [
        Valid(snippet("""
            import torch
            import triton
            import triton.language as tl
            @triton.jit
            def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                x = tl.load(x_ptr + offs, mask=offs < n)
                tl.store(y_ptr + offs, x * 0.25 + 1.0, mask=offs < n)
            class ModelNew(torch.nn.Module):
                def forward(self, x, scale: float, n: int):
                    numel = x.numel()
                    grid = ((numel + 1023) // 1024,)
                    y = torch.empty_like(x)
                    k[grid](x, y, numel * 1, BLOCK=1024)
                    rows = x.size(0) * x.shape[1]
                    return y
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, a, b):
                    return a @ b
        """), line=4, message="forward path computes `@` on tensors with a Python operator"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = _ext.run(x)
                    return x * 0.25
        """), line=5, message="forward path computes `*` on tensors with a Python operator"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    s = x.view(-1)
                    s += 1
                    return s
        """), line=5, message="forward path computes `+=` on tensors with a Python operator"),
    ]
