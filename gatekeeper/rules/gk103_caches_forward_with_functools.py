from __future__ import annotations

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.static.rule import Rule

_CACHES = frozenset({"functools.lru_cache", "functools.cache", "functools.cached_property",
                     "functools._lru_cache_wrapper", "cachetools.cached", "joblib.Memory.cache"})
_TENSOR_ANNOTATIONS = frozenset({"torch.Tensor", "torch.FloatTensor", "Tensor"})


class CachesForwardWithFunctools(Rule):
    """`functools.lru_cache` / `cache` / `cached_property` (or an alias of them) wraps
    `forward`, `__call__`, or a function that takes tensors.

    Why it games the benchmark: tensors hash by identity, so the cache returns the stored
    result whenever the harness passes the same tensor objects again, which is what timing
    loops do. A cache around a function of plain ints (a launch-configuration helper such as
    `grid_for(n)`) is fine and is not flagged.
    """

    code = "GK103"
    name = "CachesForwardWithFunctools"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    summary = "memoises forward (or a tensor function) with functools caching"
    message = "`{func}` is wrapped in `{cache}`: calls with the same tensor objects return the stored result instead of computing."
    hint = "Remove the cache from anything that takes or returns tensors; cache only launch parameters computed from integer sizes."

    VALID = [
        "import functools\n@functools.lru_cache(maxsize=None)\ndef grid_for(n: int, block: int) -> int:\n    return (n + block - 1) // block\n",
    ]
    INVALID = [
        "import torch\nfrom functools import lru_cache\nclass ModelNew(torch.nn.Module):\n    @lru_cache(maxsize=8)\n"
        "    def forward(self, x):\n        return run(x)\n",
        "import torch\nimport functools as ft\nmemo = ft.cache\n@memo\ndef _impl(x: torch.Tensor) -> torch.Tensor:\n    return run(x)\n",
        "import torch\nfrom functools import lru_cache\ndef fwd(x):\n    return run(x)\nfwd_cached = lru_cache(None)(fwd)\n",
    ]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        for decorator in node.decorators:
            cache = self._cache_name(decorator.decorator)
            if cache is None:
                continue
            if node.name.value in ("forward", "__call__") or self._takes_tensor(node):
                self.report(decorator, self.message.format(func=node.name.value, cache=cache))

    def visit_Call(self, node: cst.Call) -> None:
        # lru_cache(...)(forward) / cache(self.forward)
        inner = node.func
        if isinstance(inner, cst.Call) and self._cache_name(inner) and node.args:
            target = node.args[0].value
            name = target.attr.value if isinstance(target, cst.Attribute) else target.value if isinstance(target, cst.Name) else ""
            if name:
                self.report(node, self.message.format(func=name, cache=self._cache_name(inner)))

    def _cache_name(self, expr: cst.BaseExpression, depth: int = 0):
        target = expr.func if isinstance(expr, cst.Call) else expr
        qual = self.ctx.qualname(target)
        if qual in _CACHES:
            return qual
        # memo = functools.lru_cache(maxsize=16); @memo
        if isinstance(target, cst.Name) and depth < 3:
            binding = self.ctx.resolver.lookup(target.value)
            if binding is not None and isinstance(binding.value, cst.Call):
                return self._cache_name(binding.value, depth + 1)
        return None

    def _takes_tensor(self, node: cst.FunctionDef) -> bool:
        for param in node.params.params:
            if param.annotation is not None:
                ann = self.ctx.qualname(param.annotation.annotation)
                if ann in _TENSOR_ANNOTATIONS:
                    return True
        return False
