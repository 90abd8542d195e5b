"""What a Python expression says about CUDA streams, for GK500: the module-level streams, an
expression that is the current stream or a parameter, a name that is a reference to a stream
(not its binding or a test of it), the name a new stream is stored under, a frame that
switches to a stream. Not a rule file: it defines no rule with a `code`; nothing here reports."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.analyses.stream_joins import CURRENT_STREAM, STREAM_CTORS
from gatekeeper.static.context import FileContext
from gatekeeper.static.syntax import store_key


def module_streams(ctx: FileContext) -> set[str]:
    """Module-level names bound to a new stream (`S = torch.cuda.Stream()`)."""
    return {
        name for name, values in ctx.constants.items()
        for v in values if type(v) is cst.Call and ctx.qualname(v.func) in STREAM_CTORS
    }


def is_current_stream(ctx: FileContext, expr: Optional[cst.BaseExpression]) -> bool:
    if expr is None or (type(expr) is cst.Name and expr.value == "None"):
        return True
    if type(expr) is cst.Call:
        return ctx.qualname(expr.func) in CURRENT_STREAM
    if type(expr) is cst.Name:
        binding = ctx.resolver.lookup(expr.value)
        value = binding.value if binding is not None else None
        return type(value) is cst.Call and ctx.qualname(value.func) in CURRENT_STREAM
    return False


def is_stream_parameter(ctx: FileContext, expr: Optional[cst.BaseExpression]) -> bool:
    """A stream that arrives as a parameter is the caller's: judged where it is created."""
    if type(expr) is not cst.Name:
        return False
    binding = ctx.resolver.lookup(expr.value)
    return binding is not None and binding.kind == "param"


def is_stream_reference(ctx: FileContext, node: cst.CSTNode) -> bool:
    parent = ctx.parent(node)
    if type(parent) is cst.AssignTarget or type(parent) is cst.Annotation:
        return False
    if type(parent) is cst.Attribute and parent.attr is node:
        return False
    if type(parent) in (cst.Comparison, cst.ComparisonTarget, cst.If, cst.UnaryOperation):
        return False  # `if self.stream is None:`: a test of the handle launches nothing on it
    return type(parent) not in (cst.Param, cst.ImportAlias, cst.Global, cst.Nonlocal)


def creation_target(ctx: FileContext, node: cst.Call) -> Optional[str]:
    parent = ctx.parent(node)
    if type(parent) is cst.Assign and len(parent.targets) == 1:
        return store_key(parent.targets[0].target)
    if type(parent) is cst.AnnAssign and type(parent.target) is cst.Name:
        return parent.target.value
    return None


