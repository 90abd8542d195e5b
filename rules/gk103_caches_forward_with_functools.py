from __future__ import annotations

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.returned_values_rule import FlowRule
from gatekeeper.static.examples import Invalid, Valid, snippet

_CACHES = frozenset({"functools.lru_cache", "functools.cache", "functools.cached_property",
                     "functools._lru_cache_wrapper", "cachetools.cached", "joblib.Memory.cache"})
_TENSOR_ANNOTATIONS = frozenset({"torch.Tensor", "torch.FloatTensor", "Tensor"})


class CachesForwardWithFunctools(FlowRule):
    """`functools.lru_cache` / `cache` / `cached_property` (or an alias of them) wraps
    `forward`, `__call__`, or a function that takes tensors.

    Why it games the benchmark: tensors hash by identity, so the cache returns the stored
    result whenever the harness passes the same tensor objects again, which is what timing
    loops do. A cached function counts as taking tensors when a parameter is annotated as a
    tensor or when its return value is the model's output (forward returns its result,
    directly or through helpers).

    Known false-positive patterns it does not fire on, and why: a cache around a function of
    plain ints (a launch-configuration helper such as `grid_for(n)`, a kernel compiled per
    dtype) whose result forward consumes rather than returns; `cached_property` on a
    configuration attribute that is not forward's output.
    """

    code = "GK103"
    name = "CachesForwardWithFunctools"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    summary = "memoises forward (or a tensor function) with functools caching"
    message = "`{func}` is wrapped in `{cache}`: calls with the same tensor objects return the stored result instead of computing."
    hint = "Remove the cache from anything that takes or returns tensors; cache only launch parameters computed from integer sizes."

    VALID = [
        # an int-only helper whose result forward consumes
        Valid(snippet("""
            import torch, functools
            @functools.lru_cache(None)
            def _kernel_for(n, dtype):
                return compile_kernel(n, dtype)
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    out = torch.empty_like(x)
                    _kernel_for(x.numel(), x.dtype)(x, out)
                    return out
        """)),
        Valid(snippet("""
            import functools
            @functools.lru_cache(maxsize=None)
            def grid_for(n: int, block: int) -> int:
                return (n + block - 1) // block
        """)),
    ]
    INVALID = [
        # unannotated, but its result is what forward returns
        Invalid(snippet("""
            import torch, functools
            @functools.cache
            def _impl(x):
                return run(x)
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return _impl(x)
        """), line=2, message="`_impl` is wrapped in `functools.cache`"),
        Invalid(snippet("""
            import torch
            from functools import lru_cache
            class ModelNew(torch.nn.Module):
                @lru_cache(maxsize=8)
                def forward(self, x):
                    return run(x)
        """), line=4, message="`forward` is wrapped in `functools.lru_cache`"),
        Invalid(snippet("""
            import torch
            import functools as ft
            memo = ft.cache
            @memo
            def _impl(x: torch.Tensor) -> torch.Tensor:
                return run(x)
        """), line=4, message="`_impl` is wrapped in `functools.cache`"),
        Invalid(snippet("""
            import torch
            from functools import lru_cache
            def fwd(x):
                return run(x)
            fwd_cached = lru_cache(None)(fwd)
        """), line=5, message="`fwd` is wrapped in `functools.lru_cache`"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.decorated: list[tuple[str, cst.Decorator, str, str]] = []  # (key, decorator, function, cache)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        for decorator in node.decorators:
            cache = self._cache_name(decorator.decorator)
            if cache is None:
                continue
            if node.name.value in ("forward", "__call__") or self._takes_tensor(node):
                self.report(decorator, self.message.format(func=node.name.value, cache=cache))
            else:
                self.decorated.append((self.ctx.function_key, decorator, node.name.value, cache))

    def finish(self) -> None:
        reaching = self.flow.reaching()
        for key, decorator, name, cache in self.decorated:
            if key in reaching:
                self.report(decorator, self.message.format(func=name, cache=cache) + " forward returns its result.",
                            evidence={"function": key, "returns_model_output": True})

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        # lru_cache(...)(forward) / cache(self.forward)
        inner = node.func
        if type(inner) is cst.Call and self._cache_name(inner) and node.args:
            target = node.args[0].value
            name = target.attr.value if (type(target) is cst.Attribute) else target.value if (type(target) is cst.Name) else ""
            if name:
                self.report(node, self.message.format(func=name, cache=self._cache_name(inner)))

    def _cache_name(self, expr: cst.BaseExpression, depth: int = 0):
        target = expr.func if (type(expr) is cst.Call) else expr
        qual = self.ctx.qualname(target)
        if qual in _CACHES:
            return qual
        # memo = functools.lru_cache(maxsize=16); @memo
        if type(target) is cst.Name and depth < 3:
            binding = self.ctx.resolver.lookup(target.value)
            if binding is not None and type(binding.value) is cst.Call:
                return self._cache_name(binding.value, depth + 1)
        return None

    def _takes_tensor(self, node: cst.FunctionDef) -> bool:
        for param in node.params.params:
            if param.annotation is not None:
                ann = self.ctx.qualname(param.annotation.annotation)
                if ann in _TENSOR_ANNOTATIONS:
                    return True
        return False
