"""Shared machinery of the result-memo rules (GK102 identity keys, GK106 `is` identity,
GK107 content fingerprints): find lookups of persistent containers and comparisons with
stored values whose key is built from an input, and report them only when the looked-up
value is what the model returns (it flows into the return of a function whose return is
the model's output, or the lookup decides a branch that hands back a stored value).

That last condition is what separates a memo of results from the sound caches honest
code keeps: a weight prepared once and re-prepared when its `._version` changes, a
CUDA graph keyed on the input's pointer that replays (and so recomputes) on the live
buffer, a launch configuration keyed by shape. None of those returns a stored result.

Keys are worked out lazily, at the end, and only for lookups of persistent storage: the
traversal itself just records each function's assignments and returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from gatekeeper.analyses.returned_values_rule import FlowRule
from gatekeeper.static.walk import subtree

_DEPTH = 4  # how far a key is followed through locals and key helpers


@dataclass
class Frame:
    """What a function binds: parameters and every value assigned to each local."""

    params: set[str]
    assigned: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    returned: list[cst.BaseExpression] = field(default_factory=list)


@dataclass
class Candidate:
    key: str  # function key
    node: cst.CSTNode
    origin: str  # the persistent cache or stored value
    exprs: tuple[cst.BaseExpression, ...]  # expressions that may hold the key
    frame: Frame


class MemoRule(FlowRule):
    """Base class (no code: discovery skips it). Subclasses define `key_of`."""

    lookups = True  # container lookups and `==` comparisons (GK106 looks at `is` only)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.frames: list[Frame] = []
        self.by_name: dict[str, Frame] = {}  # function name -> its frame, for key helpers
        self.candidates: list[Candidate] = []

    def key_of(self, expr: cst.BaseExpression, frame: Frame) -> Optional[str]:
        raise NotImplementedError

    # traversal -------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        frame = Frame({p.name.value for p in node.params.params if p.name.value != "self"})
        self.frames.append(frame)
        self.by_name[node.name.value] = frame

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().leave_FunctionDef(node)
        self.frames.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        super().visit_Assign(node)
        if self.frames:
            for target in node.targets:
                if type(target.target) is cst.Name:
                    self.frames[-1].assigned.setdefault(target.target.value, []).append(node.value)

    def visit_Return(self, node: cst.Return) -> None:
        super().visit_Return(node)
        if self.frames and node.value is not None:
            self.frames[-1].returned.append(node.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self.lookups and len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index:
            self._lookup(node, node.value, node.slice[0].slice.value)

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        func = node.func
        if self.lookups and type(func) is cst.Attribute and func.attr.value in ("get", "setdefault", "pop") and node.args:
            self._lookup(node, func.value, node.args[0].value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if not self.frames or not self.lookups:
            return
        for target in node.comparisons:
            if type(target.operator) in (cst.In, cst.NotIn):
                self._lookup(node, target.comparator, node.left)
            elif type(target.operator) in (cst.Equal, cst.NotEqual):
                # `if sig == self._sig:` compares a key with a stored one
                tracker = self.flow.tracker
                stored = tracker.origin(target.comparator) or tracker.origin(node.left) \
                    or _getattr_self(target.comparator) or _getattr_self(node.left)
                if stored:
                    self.candidates.append(Candidate(self.ctx.function_key, node, stored,
                                                     (node.left, target.comparator), self.frames[-1]))

    def _lookup(self, node: cst.CSTNode, container: cst.BaseExpression, key_expr: cst.BaseExpression) -> None:
        if not self.frames:
            return
        origin = self.flow.tracker.origin(container)
        if origin is not None:
            self.candidates.append(Candidate(self.ctx.function_key, node, origin, (key_expr,), self.frames[-1]))

    # keys --------------------------------------------------------------------------
    def key(self, expr: cst.BaseExpression, frame: Frame, depth: int = 0) -> Optional[str]:
        """A description of the key read in expr, following locals and key helpers."""
        found = self.key_of(expr, frame)
        if found or depth >= _DEPTH:
            return found
        for current in subtree(expr, into_functions=False):
            if type(current) is cst.Call and type(current.func) is cst.Name and current.func.value in self.by_name:
                helper = self.by_name[current.func.value]
                for value in helper.returned:
                    inner = self.key(value, helper, depth + 1)
                    if inner:
                        return f"{current.func.value}(...), which returns {inner}"
            if type(current) is cst.Name and current.value in frame.assigned:
                for value in frame.assigned[current.value]:
                    if value is not expr:
                        inner = self.key(value, frame, depth + 1)
                        if inner:
                            return inner
        return None

    def is_input(self, expr: cst.CSTNode, frame: Frame, depth: int = 0) -> bool:
        """expr mentions a parameter, or a local computed from one (`flat = x.reshape(-1)`)."""
        for node in subtree(expr, into_functions=False):
            if type(node) is cst.Name:
                if node.value in frame.params:
                    return True
                if depth < _DEPTH and any(v is not expr and self.is_input(v, frame, depth + 1)
                                          for v in frame.assigned.get(node.value, ())):
                    return True
        return False

    # results ---------------------------------------------------------------------
    def returns_stored(self, key: str, node: cst.CSTNode) -> bool:
        """The lookup at `node` is what the model returns."""
        if key not in self.flow.reaching():
            return False
        return self.flow.returns_expr(key, node) or bool(self.flow.guarded_returns(key, node))

    def finish(self) -> None:
        seen: set[tuple[str, str]] = set()  # one finding per function and cache
        for c in self.candidates:
            if (c.key, c.origin) in seen or not self.returns_stored(c.key, c.node):
                continue
            what = next((k for k in (self.key(e, c.frame) for e in c.exprs) if k), None)
            if what is None:
                continue
            seen.add((c.key, c.origin))
            self.report(c.node, self.message.format(container=c.origin, key=what),
                        evidence={"container": c.origin, "key": what})


def _getattr_self(expr: cst.BaseExpression) -> Optional[str]:
    if type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value == "getattr" and expr.args:
        first = expr.args[0].value
        if type(first) is cst.Name and first.value == "self" and len(expr.args) > 1:
            name = expr.args[1].value
            return f"self.{name.evaluated_value}" if (type(name) is cst.SimpleString) else "an attribute of self"
    return None
