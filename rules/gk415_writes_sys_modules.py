from __future__ import annotations

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_support import literal, resolve, subscript_key
from gatekeeper.static.syntax import argument
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

_REGISTRIES = ("sys.modules", "sys.meta_path", "sys.path_hooks")
_MUTATORS = ("update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__",
             "insert", "append", "extend", "remove")


class WritesSysModules(Rule):
    """Changes the import system: `sys.modules[name] = obj`, `del sys.modules[name]`,
    `sys.modules.update/setdefault/pop(...)`, `mock.patch.dict(sys.modules, ...)`,
    replacing `sys.modules` itself, or installing import hooks in `sys.meta_path` /
    `sys.path_hooks`.

    Why it games the benchmark: whatever the harness imports after the submission (torch,
    its own checking modules, the reference) can be swapped for a fake.

    Not flagged: reading `sys.modules` (GK423 reports that) and `sys.path` changes.
    """

    code = "GK415"
    name = "WritesSysModules"
    category = Category.HARNESS_TAMPERING
    severity = Severity.ERROR
    summary = "writes to sys.modules or installs an import hook"
    message = "The import system is changed ({how} on `{name}`): modules the harness imports later can be replaced."
    hint = (
        "Remove the write to `sys.modules` / `sys.meta_path`. Import what you need with plain "
        "`import` statements and never replace a module for the rest of the process."
    )
    VALID = [
        Valid(snippet("""
            import sys
            this = sys.modules[__name__]
        """)),
        Valid(snippet("""
            import sys, os
            sys.path.insert(0, os.path.dirname(__file__))
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import sys, types
            sys.modules['torch.testing'] = types.ModuleType('fake')
        """), line=2, message="The import system is changed (assignment on `sys.modules['torch.testing']`)"),
        Invalid(snippet("""
            import sys as _s
            _s.modules.update({'gatekeeper.timing': object()})
        """), line=2, message="The import system is changed (.update() on `sys.modules`)"),
        Invalid(snippet("""
            import sys
            del sys.modules['torch']
        """), line=2, message="The import system is changed (del on `sys.modules['torch']`)"),
        Invalid(snippet("""
            from unittest import mock
            import sys
            mock.patch.dict(sys.modules, {'numpy': None}).start()
        """), line=3, message="The import system is changed (mock.patch.dict on `sys.modules`)"),
        Invalid(snippet("""
            import sys
            class Finder:
                def find_spec(self, *a):
                    return None
            sys.meta_path.insert(0, Finder())
        """), line=5, message="The import system is changed (.insert() on `sys.meta_path`)"),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._target(target.target, node, "assignment")

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node.target, node, "assignment")

    def visit_Del(self, node: cst.Del) -> None:
        self._target(node.target, node, "del")

    def _target(self, target: cst.BaseExpression, node: cst.CSTNode, how: str) -> None:
        if type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self._target(element.value, node, how)
        elif type(target) is cst.Subscript:
            owner = resolve(self.ctx, target.value)
            if owner in _REGISTRIES:
                key = subscript_key(self.ctx, target)
                self._report(node, f"{owner}[{key!r}]" if key else owner, how)
        elif type(target) is cst.Attribute:
            qual = resolve(self.ctx, target)
            if qual in _REGISTRIES:
                self._report(node, qual, how)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute:
            if resolve(self.ctx, func) == "builtins.setattr":
                owner, name = resolve(self.ctx, argument(node, 0)), literal(self.ctx, argument(node, 1))
                if owner and name and f"{owner}.{name}" in _REGISTRIES:
                    self._report(node, f"{owner}.{name}", "setattr")
            return
        method = func.attr.value
        if method in _MUTATORS:
            owner = resolve(self.ctx, func.value)
            if owner in _REGISTRIES:
                self._report(node, owner, f".{method}()")
        elif method == "dict" and type(func.value) in (cst.Name, cst.Attribute) and (
                func.value.value if (type(func.value) is cst.Name) else func.value.attr.value) == "patch":
            target = argument(node, 0, "in_dict")
            owner = resolve(self.ctx, target) or literal(self.ctx, target)
            if owner in _REGISTRIES:
                self._report(node, owner, "mock.patch.dict")

    def _report(self, node: cst.CSTNode, name: str, how: str) -> None:
        self.report(node, self.message.format(name=name, how=how), evidence={"target": name, "how": how})
