from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.persistence import INPLACE_RETURNS_SELF, PersistenceTracker
from gatekeeper.static.rule import Rule


class ReturnsPersistentTensor(Rule):
    """A method returns a tensor that is kept across calls: an attribute of `self` (lazily
    allocated or not, a buffer or a parameter), a module global, a closure variable, an
    entry of a container held there, or the result of an extension function that returns
    the persistent buffer it was handed.

    Why it games the benchmark: every call returns the same storage, so a caller that keeps
    the first result sees it overwritten by the next call, and a harness that checks only
    one call, or compares against a result computed once, is fooled. The seed case
    (`self._y`, handed to `mean_rank4_out`, which returns it) is this pattern.

    A persistent scratch workspace that is written to but never returned is not a finding.
    """

    code = "GK101"
    name = "ReturnsPersistentTensor"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    summary = "returns a tensor stored across calls instead of a fresh output"
    message = "forward returns {origin}, which persists across calls: every call hands back the same storage."
    hint = (
        "Allocate the output on every call from the input's sizes, e.g. "
        "`out = torch.empty((x.size(1), x.size(2)), device=x.device, dtype=x.dtype)`, write it "
        "in the kernel and return it. Keep only scratch workspaces across calls, never outputs."
    )

    VALID = [
        # fresh output every call
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        out = torch.empty_like(x)\n        _ext.run(x, out)\n        return out\n",
        # persistent scratch workspace, never returned
        "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self._ws = None\n    def forward(self, x):\n        if self._ws is None:\n"
        "            self._ws = torch.empty(1024, device=x.device)\n        out = torch.empty_like(x)\n"
        "        _ext.run(x, self._ws, out)\n        return out\n",
        # parameter used as an input, the call returns a fresh tensor
        "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.w = torch.nn.Parameter(torch.randn(4))\n    def forward(self, x):\n"
        "        return _ext.scale(x, self.w)\n",
        # a lazily built extension handle kept in a global and returned by a getter
        "import torch\nfrom torch.utils.cpp_extension import load_inline\n_EXT = None\ndef _ext():\n    global _EXT\n"
        "    if _EXT is None:\n        _EXT = load_inline(name='e', cpp_sources=SRC, functions=['f'])\n    return _EXT\n"
        "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return _ext().f(x)\n",
    ]
    INVALID = [
        # the seed: lazily allocated self._y handed to an extension that returns it
        "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
        "_ext = load_inline(name='m', cpp_sources='', cuda_sources='''\n"
        "torch::Tensor f(torch::Tensor x, torch::Tensor y) { k<<<1, 32>>>(x.data_ptr<float>(), y.data_ptr<float>()); return y; }\n''', functions=['f'])\n"
        "class ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._y = None\n"
        "    def forward(self, x):\n        y = self._y\n        if y is None:\n"
        "            y = torch.empty((16, 48), device=x.device)\n            self._y = y\n"
        "        return _ext.f(x, y)\n",
        # returning the attribute directly after an in-place copy
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        if not hasattr(self, 'out'):\n            self.out = torch.empty_like(x)\n"
        "        kernel[(1,)](x, self.out)\n        return self.out\n",
        # module global cache
        "import torch\n_OUT = None\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        global _OUT\n        if _OUT is None:\n            _OUT = compute(x)\n        return _OUT\n",
        # closure dict
        "import torch\ndef make():\n    store = {}\n    def fwd(x):\n        if 'r' not in store:\n"
        "            store['r'] = compute(x)\n        return store['r']\n    return fwd\n",
        # in-place method on a stored tensor returns the stored tensor
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        return self.buf.copy_(x * 2)\n",
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.flow = PersistenceTracker(self.ctx)
        # (return node, extension function name, argument index, origin)
        self.handed: list[tuple[cst.Return, str, int, str]] = []
        self.returned_params: dict[str, set[int]] = {}
        self.direct: list[tuple[cst.Return, str]] = []
        # Everything assigned to `self.X` and to module names, to tell a stored extension
        # handle (`_EXT = load_inline(...)`, returned by a lazy getter) from a stored tensor.
        self.assigned: dict[str, list[cst.BaseExpression]] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.flow.enter_function()

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.flow.leave_function()

    def visit_Global(self, node: cst.Global) -> None:
        self.flow.declare(node)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.flow.declare(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.flow.assign(target.target, node.value)
            key = _store_key(target.target)
            if key is not None:
                self.assigned.setdefault(key, []).append(node.value)

    def visit_Return(self, node: cst.Return) -> None:
        if not self.ctx.functions or self.ctx.functions[-1].name.value == "__init__":
            return
        for value in _returned_values(node.value):
            self._check_value(node, value)

    def _check_value(self, node: cst.Return, value: cst.BaseExpression) -> None:
        origin = self.flow.origin(value)
        if origin is not None and not self._is_module_object(value):
            self.direct.append((node, origin))
            return
        if not isinstance(value, cst.Call):
            return
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in INPLACE_RETURNS_SELF:
            inner = self.flow.origin(func.value)
            if inner is not None:
                self.report(node, self.message.format(origin=f"{inner} (via the in-place `{func.attr.value}`)"),
                            evidence={"returns": inner})
                return
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if name is None:
            return
        positional = [a for a in value.args if a.keyword is None and not a.star]
        for index, arg in enumerate(positional):
            origin = self.flow.origin(arg.value)
            if origin is not None:
                self.handed.append((node, name, index, origin))

    def _is_module_object(self, value: cst.BaseExpression) -> bool:
        # `return self.fn` where fn is a module function alias is not storage.
        return self.ctx.qualname(value) is not None

    def check_cpp(self, source: CppSource) -> None:
        for fn in source.functions:
            if fn.returns_params:
                self.returned_params.setdefault(fn.name, set()).update(fn.returns_params)

    def _holds_handle(self, origin: str) -> bool:
        key = origin.removeprefix("module global ").split("[")[0]
        values = self.assigned.get(key, [])
        return any(isinstance(v, cst.Call) and (self.ctx.qualname(v.func) or "") in _HANDLE_MAKERS for v in values)

    def finish(self) -> None:
        for node, origin in self.direct:
            if not self._holds_handle(origin):
                self.report(node, self.message.format(origin=origin), evidence={"returns": origin})
        for node, name, index, origin in self.handed:
            if index in self.returned_params.get(name, set()):
                self.report(
                    node,
                    self.message.format(origin=origin)
                    + f" It is passed to the extension function `{name}`, whose C++ body returns that argument.",
                    evidence={"returns": origin, "extension_function": name, "argument": index},
                )


# Calls that build something other than a tensor: a compiled extension, a module, a kernel.
_HANDLE_MAKERS = frozenset({
    "torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load", "importlib.import_module",
    "torch.compile", "torch.jit.script", "torch.jit.trace", "triton.jit", "ctypes.CDLL", "ctypes.cdll.LoadLibrary",
    "cupy.RawKernel", "cupy.RawModule",
})


def _store_key(target: cst.BaseExpression) -> Optional[str]:
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return f"self.{target.attr.value}"
    if isinstance(target, cst.Name):
        return target.value
    return None


def _returned_values(value: Optional[cst.BaseExpression]) -> list[cst.BaseExpression]:
    if value is None:
        return []
    if isinstance(value, (cst.Tuple, cst.List)):
        return [e.value for e in value.elements]
    return [value]
