from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

HOOKS = frozenset({"__torch_function__", "__torch_dispatch__"})
MODE_BASES = frozenset({
    "torch.overrides.TorchFunctionMode", "torch.utils._python_dispatch.TorchDispatchMode",
    "torch._python_dispatcher.PythonDispatcher",
})
# Qualified-name prefixes whose use reroutes torch calls through Python.
PREFIXES = ("torch.utils._python_dispatch.", "torch._subclasses.", "torch._C._push_on_torch",
            "torch._C._set_torch_function_mode", "torch._C._set_torch_dispatch_mode",
            "torch._C._EnablePythonDispatcher", "torch._C._enable_python_dispatcher",
            "torch._C._EnableTorchFunction", "torch._C._set_torch_function_state")
# Reading whether a mode is active intercepts nothing: GK425 reports these reads.
READERS = frozenset({
    "torch.utils._python_dispatch._get_current_dispatch_mode", "torch.utils._python_dispatch._get_current_dispatch_mode_stack",
    "torch.utils._python_dispatch.is_in_torch_dispatch_mode", "torch.overrides._get_current_function_mode",
    "torch.overrides._get_current_function_mode_stack", "torch.overrides.is_in_torch_function_mode",
})
OVERRIDES_OK = frozenset({"is_tensor_like", "is_tensor_method_or_property", "get_ignored_functions",
                          "get_overridable_functions", "get_testing_overrides", "resolve_name"})


class OverridesTorchDispatch(Rule):
    """The submission hooks torch's dispatch from Python: it defines `__torch_function__` or
    `__torch_dispatch__` (as a method or by assignment in a class body), subclasses or
    enters a `TorchFunctionMode` / `TorchDispatchMode`, or uses the machinery under
    `torch.overrides` (`handle_torch_function`, ...), `torch.utils._python_dispatch`,
    `torch._subclasses` (fake and functional tensors) or the `torch._C` mode stacks.

    Why it games the benchmark: these hooks let Python code intercept every torch call made
    on the output, including the checker's `allclose`, `sub`, `abs` and `max`: the output can
    compute lazily when compared, or answer the comparison with whatever passes.

    Not flagged: the harmless queries of `torch.overrides` (`is_tensor_like`,
    `get_ignored_functions`, ...), and ordinary torch calls.
    """

    code = "GK521"
    name = "OverridesTorchDispatch"
    category = Category.LAZY_OUTPUT
    severity = Severity.ERROR
    summary = "intercepts torch dispatch (__torch_function__, __torch_dispatch__, modes)"
    message = (
        "{what}: it lets Python intercept the torch calls made on the output, including the checker's "
        "comparisons, so the result can be computed lazily or the comparison answered directly."
    )
    hint = (
        "Return a plain tensor computed by your kernel; do not define `__torch_function__` / "
        "`__torch_dispatch__` or use torch's dispatch modes."
    )
    VALID = [
        Valid(snippet("""
            import torch
            from torch.overrides import is_tensor_like
            def forward(x):
                assert is_tensor_like(x)
                return _ext.run(x)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return _ext.run(x)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class Out:
                pass
            setattr(Out, '__torch_function__', classmethod(lambda *a, **k: True))
        """), line=4, message="`__torch_function__` is set with setattr"),
        Invalid(snippet("""
            import torch
            class Out:
                @classmethod
                def __torch_function__(cls, func, types, args=(), kwargs=None):
                    return True
        """), line=4, message="`__torch_function__` is defined"),
        Invalid(snippet("""
            from torch.utils._python_dispatch import TorchDispatchMode as M
            class Spy(M):
                def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                    return func(*args, **(kwargs or {}))
        """), line=2, message="`Spy` subclasses `torch.utils._python_dispatch.TorchDispatchMode`"),
        Invalid(snippet("""
            import torch
            class Out:
                __torch_function__ = staticmethod(lambda *a, **k: True)
        """), line=3, message="`__torch_function__` is assigned"),
        Invalid(snippet("""
            import torch.overrides as ov
            def forward(x):
                with ov.TorchFunctionMode():
                    return _ext.run(x)
        """), line=3, message="`torch.overrides.TorchFunctionMode` is used"),
    ]

    def _flagged(self, expr: cst.BaseExpression) -> Optional[str]:
        qual = self.ctx.qualname(expr)
        if qual is None or not qual.startswith("torch.") or qual in READERS:
            return None
        if qual in MODE_BASES or qual.startswith(PREFIXES):
            return qual
        if qual.startswith("torch.overrides.") and qual.rsplit(".", 1)[-1] not in OVERRIDES_OK:
            return qual
        return None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value in HOOKS:
            self.report(node.name, self.message.format(what=f"`{node.name.value}` is defined"),
                        evidence={"hook": node.name.value})

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        target = node.target
        name = target.value if (type(target) is cst.Name) else target.attr.value if (type(target) is cst.Attribute) else None
        if name in HOOKS:
            self.report(node, self.message.format(what=f"`{name}` is assigned"), evidence={"hook": name})

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            qual = self._flagged(base.value)
            if qual is not None:
                self.report(base, self.message.format(what=f"`{node.name.value}` subclasses `{qual}`"),
                            evidence={"base": qual})

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Name and node.func.value == "setattr" and len(node.args) >= 2:
            name = node.args[1].value
            if type(name) is cst.SimpleString and name.evaluated_value in HOOKS:
                self.report(node, self.message.format(what=f"`{name.evaluated_value}` is set with setattr"),
                            evidence={"hook": name.evaluated_value})
                return
        qual = self._flagged(node.func)
        if qual is not None:
            self.report(node, self.message.format(what=f"`{qual}` is used"), evidence={"uses": qual})
