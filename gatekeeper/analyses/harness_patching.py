"""The write side of harness tampering, shared by the GK41x rules. Not a rule file.

`PatchRule` sees every way a submission replaces an attribute of a module or class it does
not own, and hands the qualified name written to `sensitive()`:
- assignment, augmented assignment, annotated assignment and `del` on an attribute
  (`torch.allclose = f`, `t.Event.elapsed_time = f` with `t = torch.cuda`);
- `__dict__` / `vars()` / `__builtins__` subscripts (`torch.__dict__["allclose"] = f`),
  and their `update` / `setdefault` / `__setitem__` / `pop` calls;
- `setattr` / `delattr` / `object.__setattr__` / `X.__setattr__` with a literal name
  (a computed name is GK432's business);
- `mock.patch("torch.allclose")`, `patch.object(torch, "allclose")`, `patch.multiple`,
  `patch.dict(torch.__dict__, ...)`, `monkeypatch.setattr(...)`;
- `__class__` swaps (`torch.cuda.Event.__class__ = X` writes under `torch.cuda.Event`);
- in C++/CUDA sources, pybind11 / C API writes (`py::module_::import("torch").attr("allclose")
  = f`, `py::setattr(torch, "allclose", f)`, `PyObject_SetAttrString`).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.analyses.cpp_source import cpp_python_writes
from gatekeeper.analyses.harness_support import literal, resolve
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.syntax import argument

_SETATTR = ("builtins.setattr", "builtins.delattr", "builtins.object.__setattr__",
            "builtins.object.__delattr__", "builtins.type.__setattr__")
# Writing these changes what an object says about itself, not what it does.
_METADATA = frozenset({"__module__", "__doc__", "__qualname__", "__name__", "__annotations__", "__wrapped__"})
_DICT_WRITES = ("update", "setdefault", "__setitem__", "pop", "popitem", "clear", "__delitem__")
_CALLS_OF_INTEREST = frozenset({"setattr", "delattr", "__setattr__", "__delattr__", "patch", "object", "partial",
                                "multiple", "dict", *_DICT_WRITES})


def _last(expr: cst.BaseExpression) -> str:
    if type(expr) is cst.Name:
        return expr.value
    if type(expr) is cst.Attribute:
        return expr.attr.value
    return ""


class PatchRule(Rule):
    """Base: subclasses define `sensitive(qual)` (a description or None) and a message with
    `{name}` and `{how}` fields."""

    def sensitive(self, qual: str) -> Optional[str]:
        raise NotImplementedError

    # statements -----------------------------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._target(target.target, node, "assignment")

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node.target, node, "assignment")

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target, node, "assignment")

    def visit_Del(self, node: cst.Del) -> None:
        self._target(node.target, node, "del")

    def _target(self, target: cst.BaseExpression, node: cst.CSTNode, how: str) -> None:
        if type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self._target(element.value, node, how)
            return
        if type(target) is cst.Attribute:
            if self._instance_attribute(target):
                return
            if target.attr.value == "__class__":
                how = "__class__ swap"
            self._found(node, self.target_name(target), how)
        elif type(target) is cst.Subscript:
            owner = resolve(self.ctx, target.value)
            if owner == "sys.modules":
                return  # GK415 owns sys.modules writes
            if owner is not None and owner.endswith(".__dict__") or type(target.value) is cst.Call:
                how = "__dict__ write"
            self._found(node, resolve(self.ctx, target), how)

    def _instance_attribute(self, target: cst.Attribute) -> bool:
        """`self.x = ...`, `out.data = ...`: attributes of objects the code holds, not modules
        (the resolver maps `self.fn = torch.relu` to `torch.relu`, which is not a write to it)."""
        root: cst.BaseExpression = target
        while type(root) is cst.Attribute:
            root = root.value
        if type(root) is not cst.Name:
            return False
        binding = self.ctx.resolver.lookup(root.value)
        return binding is not None and binding.kind in ("param", "local")

    def target_name(self, target: cst.Attribute) -> Optional[str]:
        return resolve(self.ctx, target)

    # calls ------------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        last = _last(node.func)
        if last not in _CALLS_OF_INTEREST:
            return
        func = resolve(self.ctx, node.func)
        if func in _SETATTR or (last in ("setattr", "delattr") and func is None):
            self._setattr(node, "setattr")
        elif last in ("__setattr__", "__delattr__") and type(node.func) is cst.Attribute:
            owner = resolve(self.ctx, node.func.value)
            name = literal(self.ctx, argument(node, 0))
            if owner and name:
                self._found(node, f"{owner}.{name}", "setattr")
        elif last == "patch":
            self._found(node, literal(self.ctx, argument(node, 0, "target")), "mock.patch")
        elif last in ("object", "multiple", "dict") and type(node.func) is cst.Attribute and _last(node.func.value) == "patch":
            self._patch_helper(node, last)
        elif last in _DICT_WRITES and type(node.func) is cst.Attribute:
            self._dict_method(node, node.func.value, last)
        elif last == "partial" and func == "functools.partial" and node.args:
            self._partial_setattr(node)

    def _partial_setattr(self, node: cst.Call) -> None:
        """`functools.partial(setattr, torch.cuda.Event)("elapsed_time", f)`: the partial is a
        setattr of the bound owner, whatever name it is later called with (red team round 9)."""
        bound = [a.value for a in node.args if a.keyword is None and a.star == ""]
        if not bound or len(bound) < 2 or resolve(self.ctx, bound[0]) not in _SETATTR:
            return
        owner = resolve(self.ctx, bound[1])
        if owner is None:
            return
        name = literal(self.ctx, bound[2]) if len(bound) > 2 else None
        parent = self.ctx.parent(node)
        if name is None and len(bound) == 2 and type(parent) is cst.Call and parent.func is node and parent.args:
            name = literal(self.ctx, parent.args[0].value)
        self._found(node, f"{owner}.{name or '<computed>'}", "setattr")

    def _setattr(self, node: cst.Call, how: str) -> None:
        first = argument(node, 0, "obj")
        dotted_target = literal(self.ctx, first)
        if dotted_target is not None:  # monkeypatch.setattr("torch.allclose", f)
            self._found(node, dotted_target, "monkeypatch.setattr")
            return
        owner = resolve(self.ctx, first)
        name_arg = argument(node, 1, "name")
        name = literal(self.ctx, name_arg)
        if owner and name:
            self._found(node, f"{owner}.{name}", "__class__ swap" if name == "__class__" else how)
        elif owner and name_arg is not None:
            # `for n in names: setattr(torch, n, f)`: any attribute of owner may be replaced
            self._found(node, f"{owner}.<computed>", how)

    def _patch_helper(self, node: cst.Call, kind: str) -> None:
        owner = resolve(self.ctx, argument(node, 0, "target"))
        if owner is None and kind == "dict":
            owner = literal(self.ctx, argument(node, 0, "in_dict"))
        if owner is None:
            return
        if owner.endswith(".__dict__"):
            owner = owner[: -len(".__dict__")]
        if kind == "object":
            name = literal(self.ctx, argument(node, 1, "attribute"))
            if name:
                self._found(node, f"{owner}.{name}", "mock.patch.object")
        elif kind == "multiple":
            for arg in node.args:
                if arg.keyword is not None:
                    self._found(node, f"{owner}.{arg.keyword.value}", "mock.patch.multiple")
        else:
            self.dict_write(node, owner, None, "mock.patch.dict")

    def _dict_method(self, node: cst.Call, receiver: cst.BaseExpression, method: str) -> None:
        owner: Optional[str] = None
        if type(receiver) is cst.Attribute and receiver.attr.value == "__dict__":
            owner = resolve(self.ctx, receiver.value)
        elif type(receiver) is cst.Call and resolve(self.ctx, receiver.func) == "builtins.vars" and receiver.args:
            owner = resolve(self.ctx, receiver.args[0].value)
        elif type(receiver) is cst.Name and receiver.value == "__builtins__":
            owner = "builtins"
        else:
            plain = resolve(self.ctx, receiver)
            if plain in ("sys.modules", "os.environ"):
                return  # GK415 / GK444
            owner = None
        if owner is None:
            return
        key = literal(self.ctx, argument(node, 0)) if method in ("__setitem__", "setdefault", "pop", "__delitem__") else None
        self.dict_write(node, owner, key, f"__dict__.{method}")

    def dict_write(self, node: cst.Call, owner: str, key: Optional[str], how: str) -> None:
        """A write into owner's namespace; with no literal key, every name under it."""
        if key is not None:
            self._found(node, f"{owner}.{key}", how)
            return
        found = False
        for arg in node.args:
            if arg.keyword is None and type(arg.value) is cst.Dict:
                for element in arg.value.elements:
                    name = literal(self.ctx, element.key) if (type(element) is cst.DictElement) else None
                    if name:
                        found = True
                        self._found(node, f"{owner}.{name}", how)
            elif arg.keyword is not None and arg.keyword.value not in ("values", "clear"):
                found = True
                self._found(node, f"{owner}.{arg.keyword.value}", how)
        if not found:
            self._found(node, owner, how)

    # C++ ---------------------------------------------------------------------------------
    def check_cpp(self, source: CppSource) -> None:
        """`py::module_::import("torch").attr("allclose") = f` and `py::setattr(mod, ...)`."""
        for offset, qual in cpp_python_writes(source):
            what = self.sensitive(qual)
            if what is not None:
                self.report_cpp(source, offset, self.message.format(name=qual, how="pybind11/C API write", what=what)
                                + " (from the C++/CUDA source)", evidence={"target": qual, "how": "C++"})

    # reporting ------------------------------------------------------------------------
    def _found(self, node: cst.CSTNode, qual: Optional[str], how: str) -> None:
        if not qual or qual.rsplit(".", 1)[-1] in _METADATA:
            return
        what = self.sensitive(qual)
        if what is None:
            return
        self.report(node, self.message.format(name=qual, how=how, what=what),
                    evidence={"target": qual, "how": how})
