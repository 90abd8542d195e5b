from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.static.persistence import PersistenceTracker
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import subtree

# Expressions that identify an input's storage or contents cheaply, not its values.
_IDENTITY_METHODS = frozenset({"data_ptr", "_version", "storage", "untyped_storage", "storage_offset", "_cdata", "item", "tolist"})
_IDENTITY_BUILTINS = frozenset({"builtins.id", "builtins.hash"})


class MemoisesByInputIdentity(Rule):
    """A persistent cache (attribute of `self`, module global, closure) is read or written
    with a key built from an input's identity or a cheap fingerprint: `id(x)`,
    `x.data_ptr()`, `x._version`, `x.untyped_storage()`, or a sampled value such as
    `x[0, 0].item()`. The key may be built in a local first (`key = (id(x), x.shape)`).

    Why it games the benchmark: harnesses reuse the same input tensors across timed calls;
    a result looked up by identity skips the work, and stays wrong when the values change in
    place at the same address.

    A cache keyed only by shapes or dtypes (launch configurations, compiled kernels) is not
    flagged; returning a tensor from such a cache is GK101.
    """

    code = "GK102"
    name = "MemoisesByInputIdentity"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    summary = "looks up results in a cache keyed by input identity (id, data_ptr, _version)"
    message = "A persistent cache ({container}) is keyed by `{key}`, the input's identity rather than its values: repeated calls on the same tensor skip the computation."
    hint = (
        "Compute the output from the input's values on every call. If you cache something "
        "across calls, key it by shape/dtype only and cache launch parameters or compiled "
        "kernels, never results."
    )

    VALID = [
        "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._cfg = {}\n"
        "    def forward(self, x):\n        key = (tuple(x.shape), x.dtype)\n        if key not in self._cfg:\n"
        "            self._cfg[key] = pick_block(x.shape)\n        return run(x, self._cfg[key])\n",
        "import torch\ndef forward(x):\n    ptr = x.data_ptr()\n    return kernel(ptr, x.numel())\n",
    ]
    INVALID = [
        "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.cache = {}\n"
        "    def forward(self, x):\n        k = x.data_ptr()\n        if k in self.cache:\n            return self.cache[k]\n"
        "        out = compute(x)\n        self.cache[k] = out\n        return out\n",
        "import torch\n_memo = {}\ndef forward(x):\n    hit = _memo.get((id(x), x._version))\n    if hit is not None:\n        return hit\n"
        "    _memo[(id(x), x._version)] = r = compute(x)\n    return r\n",
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        sig = float(x[0, 0].item())\n"
        "        if sig == getattr(self, '_sig', None):\n            return self._last\n        self._sig = sig\n        self._last = compute(x)\n        return self._last\n",
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.flow = PersistenceTracker(self.ctx)
        self.identity_locals: list[dict[str, str]] = []
        # Helpers whose result is an identity key: `def _key(t): return (t.data_ptr(), ...)`.
        self.identity_functions: dict[str, str] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.flow.enter_function()
        self.identity_locals.append({})

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.flow.leave_function()
        self.identity_locals.pop()

    def visit_Global(self, node: cst.Global) -> None:
        self.flow.declare(node)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.flow.declare(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self.identity_locals:
            return
        key = self._identity(node.value)
        for target in node.targets:
            self.flow.assign(target.target, node.value)
            if key and isinstance(target.target, cst.Name):
                self.identity_locals[-1][target.target.value] = key

    def visit_Return(self, node: cst.Return) -> None:
        if self.ctx.functions and node.value is not None:
            key = self._identity(node.value)
            if key:
                self.identity_functions[self.ctx.functions[-1].name.value] = key

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            self._lookup(node, node.value, node.slice[0].slice.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("get", "setdefault", "pop") and node.args:
            self._lookup(node, func.value, node.args[0].value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for target in node.comparisons:
            if isinstance(target.operator, (cst.In, cst.NotIn)):
                self._lookup(node, target.comparator, node.left)
            elif isinstance(target.operator, (cst.Equal, cst.NotEqual)):
                # `if sig == self._sig:` compares a fingerprint with a stored one
                key = self._identity(node.left) or self._identity(target.comparator)
                stored = self.flow.origin(target.comparator) or self.flow.origin(node.left) or _getattr_self(target.comparator)
                if key and stored and self.identity_locals:
                    self.report(node, self.message.format(container=stored, key=key))

    def _lookup(self, node: cst.CSTNode, container: cst.BaseExpression, key_expr: cst.BaseExpression) -> None:
        if not self.identity_locals:
            return
        origin = self.flow.origin(container)
        if origin is None:
            return
        key = self._identity(key_expr)
        if key:
            self.report(node, self.message.format(container=origin, key=key), evidence={"container": origin, "key": key})

    def _identity(self, expr: cst.BaseExpression) -> Optional[str]:
        """A short description of the identity read inside expr, if any."""
        for current in subtree(expr, into_functions=False):
            if isinstance(current, cst.Call):
                if isinstance(current.func, cst.Name) and current.func.value in self.identity_functions:
                    return f"{current.func.value}(...), which returns {self.identity_functions[current.func.value]}"
                if self.ctx.qualname(current.func) in _IDENTITY_BUILTINS:
                    return f"{self.ctx.qualname(current.func).split('.')[-1]}(...)"  # type: ignore[union-attr]
                if isinstance(current.func, cst.Attribute) and current.func.attr.value in _IDENTITY_METHODS:
                    return f".{current.func.attr.value}()"
            if isinstance(current, cst.Attribute) and current.attr.value in ("_version", "_cdata"):
                return f".{current.attr.value}"
            if isinstance(current, cst.Name) and self.identity_locals and current.value in self.identity_locals[-1]:
                return self.identity_locals[-1][current.value]
        return None


def _getattr_self(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "getattr" and expr.args:
        first = expr.args[0].value
        if isinstance(first, cst.Name) and first.value == "self":
            return "an attribute of self"
    return None
