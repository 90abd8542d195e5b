"""Shared machinery of the result-memo rules (GK102 identity keys, GK106 `is` identity,
GK107 content fingerprints): find lookups of persistent containers and comparisons with
stored values whose key is built from an input, and report them only when the looked-up
value is what the model returns (it flows into the return of a function whose return is
the model's output, or the lookup decides a branch that hands back a stored value).

That last condition is what separates a memo of results from the sound caches honest
code keeps: a weight prepared once and re-prepared when its `._version` changes, a
CUDA graph keyed on the input's pointer that replays (and so recomputes) on the live
buffer, a launch configuration keyed by shape. None of those returns a stored result.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.returns import ReturnFlow
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import subtree


class MemoRule(Rule):
    """Base class (no code: discovery skips it). Subclasses define `key_of`."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.flow = ReturnFlow(self.ctx)
        self.key_locals: list[dict[str, str]] = []
        self.params: list[set[str]] = []
        # Helpers whose result is a key: `def _key(t): return (t.data_ptr(), ...)`.
        self.key_functions: dict[str, str] = {}
        # (function key, node, container or stored origin, key description)
        self.candidates: list[tuple[str, cst.CSTNode, str, str]] = []

    def key_of(self, expr: cst.BaseExpression) -> Optional[str]:
        raise NotImplementedError

    # traversal -------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.flow.enter_function()
        self.key_locals.append({})
        self.params.append({p.name.value for p in node.params.params if p.name.value != "self"})

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.flow.leave_function()
        self.key_locals.pop()
        self.params.pop()

    def visit_Global(self, node: cst.Global) -> None:
        self.flow.declare(node)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.flow.declare(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        self.flow.assign(node)
        if not self.key_locals:
            return
        key = self._key(node.value)
        derived = self.mentions_param(node.value)
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                if key:
                    self.key_locals[-1][target.target.value] = key
                if derived:  # `flat = x.reshape(-1)`: computed from an input, an input too
                    self.params[-1].add(target.target.value)

    def visit_Return(self, node: cst.Return) -> None:
        if not self.ctx.functions or node.value is None:
            return
        self.flow.on_return(node)
        key = self._key(node.value)
        if key:
            self.key_functions[self.ctx.functions[-1].name.value] = key

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            self._lookup(node, node.value, node.slice[0].slice.value)

    def visit_Call(self, node: cst.Call) -> None:
        self.flow.note_call(node)
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("get", "setdefault", "pop") and node.args:
            self._lookup(node, func.value, node.args[0].value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if not self.key_locals:
            return
        for target in node.comparisons:
            if isinstance(target.operator, (cst.In, cst.NotIn)):
                self._lookup(node, target.comparator, node.left)
            elif isinstance(target.operator, (cst.Equal, cst.NotEqual)):
                # `if sig == self._sig:` compares a key with a stored one
                key = self._key(node.left) or self._key(target.comparator)
                stored = self.flow.tracker.origin(target.comparator) or self.flow.tracker.origin(node.left) \
                    or _getattr_self(target.comparator) or _getattr_self(node.left)
                if key and stored:
                    self.candidates.append((self.ctx.function_key, node, stored, key))

    def _lookup(self, node: cst.CSTNode, container: cst.BaseExpression, key_expr: cst.BaseExpression) -> None:
        if not self.key_locals:
            return
        origin = self.flow.tracker.origin(container)
        if origin is None:
            return
        key = self._key(key_expr)
        if key:
            self.candidates.append((self.ctx.function_key, node, origin, key))

    def _key(self, expr: cst.BaseExpression) -> Optional[str]:
        for current in subtree(expr, into_functions=False):
            if isinstance(current, cst.Call) and isinstance(current.func, cst.Name) and current.func.value in self.key_functions:
                return f"{current.func.value}(...), which returns {self.key_functions[current.func.value]}"
            if isinstance(current, cst.Name) and self.key_locals and current.value in self.key_locals[-1]:
                return self.key_locals[-1][current.value]
        return self.key_of(expr)

    def mentions_param(self, expr: cst.CSTNode) -> bool:
        names = self.params[-1] if self.params else set()
        return any(isinstance(n, cst.Name) and n.value in names for n in subtree(expr, into_functions=False))

    # results ---------------------------------------------------------------------
    def returns_stored(self, key: str, node: cst.CSTNode) -> bool:
        """The lookup at `node` is what the model returns."""
        if key not in self.flow.reaching():
            return False
        return self.flow.returns_expr(key, node) or bool(self.flow.guarded_returns(key, node))

    def finish(self) -> None:
        seen: set[tuple[str, str]] = set()  # one finding per function and cache
        for key, node, origin, what in self.candidates:
            if (key, origin) in seen or not self.returns_stored(key, node):
                continue
            seen.add((key, origin))
            self.report(node, self.message.format(container=origin, key=what), evidence={"container": origin, "key": what})


def _getattr_self(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "getattr" and expr.args:
        first = expr.args[0].value
        if isinstance(first, cst.Name) and first.value == "self" and len(expr.args) > 1:
            name = expr.args[1].value
            return f"self.{name.evaluated_value}" if isinstance(name, cst.SimpleString) else "an attribute of self"
    return None
