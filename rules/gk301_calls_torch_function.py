from __future__ import annotations

from gatekeeper.analyses.torch_rule_base import TorchFallbackRule
from gatekeeper.static.examples import Invalid, Valid, snippet


class CallsTorchFunction(TorchFallbackRule):
    """The forward path calls a torch function that computes: `torch.mean`,
    `torch.nn.functional.conv2d`, `torch.einsum`, `torch.linalg.*`, `torch.fft.*`,
    `torch.special.*`, `torch._C._nn.linear`, reached through any alias
    (`import torch as T; T.mean`, `from torch import mean as m`, `mm = torch.matmul`,
    `getattr(torch, "mean")`), in `forward` or in any helper it calls.

    Why it games the benchmark: the submission is timed as a custom kernel, but torch does
    the work, so the speedup measures torch against torch (or a kernel that does only the
    easy part).

    An array library handed the tensor's data computes the same way: numpy, CuPy and JAX
    functions on `x.numpy()` / `cupy.asarray(x)`, and SciPy's BLAS / LAPACK wrappers
    (`scipy.linalg.blas.sgemm`, what `get_blas_funcs` returns) and scipy.linalg's functions,
    whatever they are handed (`find_best_blas_type`, `*_lwork` queries and matrix builders
    such as `toeplitz` compute nothing).

    Any `torch.*` function is compute unless rules/torch_ops.toml lists it as allocation,
    a view, metadata, a move or a utility (`torch.empty`, `torch.empty_like`,
    `torch.reshape`, `torch.cuda.*`, `torch.utils.cpp_extension.*`, `torch.no_grad`...).

    Severity is the torch-fallback policy (rules/torch_policy.toml, shared by GK301-GK310,
    table below). Under `default` it follows KernelBench: torch may do part of the work when
    the submission's own kernel does real work on the forward path, so such a use is
    `suspect` (a warning) until the run-time work attribution (GK667) says torch did the
    timed work; it is an error when the forward launches no kernel of its own (none, only in
    `__init__`, only on a constant sliver such as `x[:1]`), when the problem forbids the op,
    or when torch computes every op of the reference. `strict` rejects every use. An own
    kernel is a Triton (or other JIT) kernel launch, a function of an extension built with
    load_inline/load whose source defines a kernel (or loops, for CPU extensions), also
    when stored on self (`self.op = _ext.fused`), a prebuilt extension module,
    torch.ops.<own namespace>, or a helper / autograd Function of the file that launches one.

    Known false-positive patterns and why it does not fire on them: module-level and
    `__init__`-only code (weight set-up) and functions only they reach; `get_inputs`,
    `backward`, a copy of the reference `Model` kept for testing; comments, docstrings and
    strings; a local variable or parameter named `torch`; a torch call on a fallback branch
    (GK310 reports it once per branch). Allow ops per problem with
    `[rules.GK301.options] allow = ["torch.relu", "mean"]` (names or fnmatch patterns) or the
    problem sidecar's `allowed_ops`.
    """

    code = "GK301"
    name = "CallsTorchFunction"
    summary = "forward computes with a torch function instead of the submission's kernel"
    kinds = ("function",)
    message = "forward path calls `{what}`, so torch computes `{op}`, not the submission's kernel: {why}."
    hint = (
        "Compute this op in your own kernel (CUDA through load_inline, or Triton) and keep torch "
        "for allocation, views and metadata only (`torch.empty_like(x)`, `x.view(...)`, `x.size(0)`). "
        "If the problem allows this op, add it to the `allow` option of GK301 in gatekeeper.toml (rules.GK301.options)."
    )
    VALID = [
        # a query of the dispatcher's state computes nothing (reading it is GK425's business)
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if torch._C._len_torch_dispatch_stack() > 0:
                        x = x.contiguous()
                    return _ext.run(x)
        """)),
        # allocation, metadata and the extension call
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    out = torch.empty((x.size(1), x.size(2)), device=x.device, dtype=x.dtype)
                    _ext.run(x.contiguous(), out)
                    return out
        """)),
        # a docstring and a comment that mention torch.mean; a local named torch
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    '''Faster than torch.mean(x, 0).'''
                    # torch.mean(x, dim=0) was slower
                    return _ext.mean0(x)

            def helper(torch):
                return torch.mean(1)
        """)),
        # compute only at construction time (weight set-up)
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = torch.nn.Parameter(torch.randn(4, 4).softmax(-1))
                    self.s = torch.sqrt(torch.tensor(4.0))
                def forward(self, x):
                    return _ext.mm(x, self.w)
        """)),
    ]
    INVALID = [
        # torch reached through a torch module's own `import torch` (round 7, 2026-12-06)
        Invalid(snippet("""
            import torch
            from torch.backends import cudnn as _backend
            class ModelNew(torch.nn.Module):
                def forward(self, a, b):
                    return _backend.torch.matmul(a, b)
        """), line=5, message="forward path calls `torch.matmul`"),
        # handed to the class machinery as a class keyword, stored there, called in forward
        Invalid(snippet("""
            import torch
            class _Family(torch.nn.Module):
                def __init_subclass__(cls, contraction=None, **kw):
                    super().__init_subclass__(**kw)
                    cls._contract = staticmethod(contraction)
            class ModelNew(_Family, contraction=torch.matmul):
                def forward(self, a, b):
                    return self._contract(a, b)
        """), line=6, message="`torch.matmul`"),
        Invalid(snippet("""
            import torch as T
            class ModelNew(T.nn.Module):
                def forward(self, x):
                    return T.mean(x, dim=0)
        """), line=4, message="forward path calls `torch.mean`"),
        Invalid(snippet("""
            from torch import mean as m
            class ModelNew:
                def forward(self, x):
                    return m(x, 0)
        """), line=4, message="forward path calls `torch.mean`"),
        Invalid(snippet("""
            import torch.nn.functional as F
            class ModelNew:
                def forward(self, x, w):
                    return F.conv2d(x, w)
        """), line=4, message="forward path calls `torch.nn.functional.conv2d`"),
        # in a helper called from forward, through an assignment alias
        Invalid(snippet("""
            import torch
            mm = torch.einsum
            def _helper(a, b):
                return mm('ij,jk->ik', a, b)
            class ModelNew:
                def forward(self, a, b):
                    return _helper(a, b)
        """), line=4, message="forward path calls `torch.einsum`"),
        # SciPy's BLAS wrapper computes as numpy's matmul does (red team round 13)
        Invalid(snippet("""
            import scipy.linalg as sla
            import torch
            def _panel(a_np, b_np):
                gemm = sla.blas.sgemm
                return gemm(1.0, a_np, b_np)
            class ModelNew(torch.nn.Module):
                def forward(self, a, b):
                    return torch.from_numpy(_panel(a.numpy(), b.numpy()))
        """), line=5, message="forward path calls `scipy.linalg.blas.sgemm`"),
    ]
