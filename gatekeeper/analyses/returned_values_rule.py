"""Base class of the cached-output rules that read the shared return-value flow
(static/returns.py). The first such rule on a file feeds the flow from its visitors;
the others read it. A subclass overriding a visitor here calls `super()` first."""

from __future__ import annotations

import libcst as cst

from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.returns import ReturnFlow
from gatekeeper.static.rule import Rule


class FlowRule(Rule):
    """Base class (no code: discovery skips it)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.flow, self.feeds = ReturnFlow.shared(self.ctx, self)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.feeds:
            self.flow.enter_function()

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.feeds:
            self.flow.leave_function()

    def visit_Global(self, node: cst.Global) -> None:
        if self.feeds:
            self.flow.declare(node)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        if self.feeds:
            self.flow.declare(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.feeds:
            self.flow.assign(node)

    def visit_Return(self, node: cst.Return) -> None:
        if self.feeds:
            self.flow.on_return(node)

    def visit_Call(self, node: cst.Call) -> None:
        if self.feeds:
            self.flow.note_call(node)

    def check_cpp(self, source: CppSource) -> None:
        if self.feeds:
            self.flow.add_cpp(source.functions)
