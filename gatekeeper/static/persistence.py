"""Which expressions denote storage that outlives a call: attributes of `self`, module
globals, closure variables, mutable default arguments, and entries of containers held there.

Shared by the cached-output rules. Tracking is per function and flow-insensitive on
purpose: `y = self._y` followed by `if y is None: y = torch.empty(...)` may still return
the stored tensor, and that possibility is what the rule is about.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.context import FileContext
from gatekeeper.static.syntax import class_attr, class_attr_root, self_attr

_CONTAINER_READS = ("get", "setdefault", "pop", "__getitem__")
# Methods that return the tensor they are called on (in-place ops and copies into it).
INPLACE_RETURNS_SELF = ("copy_", "zero_", "fill_", "add_", "mul_", "resize_", "set_", "index_copy_", "scatter_", "normal_", "uniform_")


class PersistenceTracker:
    """Call `enter_function` / `leave_function` and `assign` during the traversal."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.frames: list[dict[str, str]] = []
        self.globals_declared: list[set[str]] = []

    def enter_function(self) -> None:
        frame: dict[str, str] = {}
        # A mutable default (`def _run(x, box=[None, None])`) is made once, when the `def` runs,
        # and every call shares it: storage that outlives the call, like a global.
        fn = self.ctx.functions[-1] if self.ctx.functions else None
        if fn is not None:
            for param in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params):
                default = param.default
                if default is not None and not (type(default) is cst.Name and default.value == "None") \
                        and _mutable_holder(default):
                    frame[param.name.value] = f"default argument {param.name.value}"
                elif type(default) is cst.Name and self._is_module_state(default.value):
                    frame[param.name.value] = f"{self._state_kind(default.value)} {default.value}"  # box=_BOX
        self.frames.append(frame)
        self.globals_declared.append(set())

    def leave_function(self) -> None:
        if self.frames:
            self.frames.pop()
            self.globals_declared.pop()

    def declare(self, node: cst.Global | cst.Nonlocal) -> None:
        if self.globals_declared:
            self.globals_declared[-1].update(n.name.value for n in node.names)

    def assign(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if not self.frames or type(target) is not cst.Name:
            return
        origin = self.origin(value)
        if origin is not None:
            self.frames[-1][target.value] = origin

    def origin(self, expr: Optional[cst.BaseExpression]) -> Optional[str]:
        """A description of the persistent storage `expr` may denote, or None."""
        if expr is None:
            return None
        if type(expr) is cst.Attribute:
            key = self_attr(expr)
            if key is not None and self.frames:
                return key
            owner = self._type_owner(expr.value) if self.frames else None
            if owner is not None:
                return f"{owner} {class_attr(expr)}"
            inner = self.origin(expr.value)
            return f"{inner}.{expr.attr.value}" if inner and expr.attr.value in ("data",) else None
        if type(expr) is cst.Name:
            if self.frames and expr.value in self.frames[-1]:
                return self.frames[-1][expr.value]
            if self.frames and self._is_module_state(expr.value):
                return f"{self._state_kind(expr.value)} {expr.value}"
            return None
        if type(expr) is cst.Subscript:
            inner = self.origin(expr.value)
            return f"{inner}[...]" if inner else None
        if type(expr) is cst.Call and type(expr.func) is cst.Attribute:
            method = expr.func.attr.value
            inner = self.origin(expr.func.value)
            if inner and (method in _CONTAINER_READS or method in INPLACE_RETURNS_SELF or method in ("detach", "view", "view_as", "reshape", "as_strided")):
                return inner if method not in _CONTAINER_READS else f"{inner}[...]"
        if type(expr) is cst.IfExp:
            return self.origin(expr.body) or self.origin(expr.orelse)
        if type(expr) is cst.BooleanOperation:
            return self.origin(expr.left) or self.origin(expr.right)
        return None

    def _type_owner(self, expr: cst.BaseExpression) -> Optional[str]:
        """"class attribute" for `type(self)`, `self.__class__` or a class of the module,
        "function attribute" for a function of the module: an attribute set on either is
        shared by every call, like a global (red team round 9: `_Plan.out`, `_mm.out`)."""
        if class_attr_root(expr):
            return "class attribute"
        if type(expr) is cst.Name:
            binding = self.ctx.resolver.lookup(expr.value)
            if binding is not None and binding.kind in ("class", "def") \
                    and binding is self.ctx.resolver.module_scope.names.get(expr.value):
                return "class attribute" if binding.kind == "class" else "function attribute"
        return None

    def _state_kind(self, name: str) -> str:
        """"module global" or "closure variable": how a message names the storage."""
        owner = next((s for s in reversed(self.ctx.resolver.stack) if name in s.names), None)
        return "closure variable" if owner is not None and owner.kind == "function" else "module global"

    def _is_module_state(self, name: str) -> bool:
        """A module-level name holding something mutable, read inside a function, that the
        function did not bind itself (or declared global/nonlocal)."""
        if self.globals_declared and name in self.globals_declared[-1]:
            return True
        binding = self.ctx.resolver.lookup(name)
        if binding is None or binding.kind != "local" or not _mutable_holder(binding.value):
            return False
        # Bound in an enclosing function (closure) or at module level, not in this one
        # (a comprehension or lambda inside the function still reads the function's local).
        for scope in reversed(self.ctx.resolver.stack):
            if scope.kind in ("comprehension", "lambda"):
                if name in scope.names:
                    return False
                continue
            return name not in scope.names if scope.kind == "function" else True
        return True


def _mutable_holder(value: Optional[cst.BaseExpression]) -> bool:
    if value is None:
        return False
    if type(value) in (cst.Dict, cst.List, cst.Set):
        return True
    if type(value) is cst.Name and value.value == "None":
        return True
    if type(value) is cst.Call:
        func = value.func
        name = func.attr.value if (type(func) is cst.Attribute) else func.value if (type(func) is cst.Name) else ""
        return name in ("dict", "list", "OrderedDict", "defaultdict", "WeakKeyDictionary", "WeakValueDictionary",
                        "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "randn", "rand", "tensor")
    return False
