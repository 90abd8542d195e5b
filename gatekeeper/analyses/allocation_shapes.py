"""The shape a torch allocation asks for (`torch.empty((16, 48))`, `x.new_zeros(16, 48)`,
`torch.empty(*SHAPE)`, `torch.empty(x.shape[:-1] + (48,))`), read from its arguments: the
entries that are literal sizes, and None for those read at run time. What GK201 judges. Not
a rule file: it defines no rule with a `code`; nothing here reports."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.analyses.shape_helpers import py_int, py_shape, size_read_kind
from gatekeeper.static.context import FileContext

TORCH_ALLOC = frozenset({"empty", "zeros", "ones", "full", "rand", "randn", "empty_strided"})
METHOD_ALLOC = frozenset({"new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided"})
# These take the shape as one argument; the others also accept it spread out.
_SHAPE_FIRST_ONLY = frozenset({"full", "empty_strided", "new_full", "new_empty_strided"})


def allocation_shape(ctx: FileContext, node: cst.Call, last: str) -> Optional[list[Optional[int]]]:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "size":
            return shape_of(ctx, arg.value)
    args = [a for a in node.args if a.keyword is None and a.star != "**"]
    if not args:
        return None
    if not args[0].star:
        first = shape_of(ctx, args[0].value)
        if first is not None:
            return first
        if last in _SHAPE_FIRST_ONLY:
            return None
    values: list[Optional[int]] = []
    for arg in args:  # torch.empty(16, 48) or torch.empty(*SHAPE)
        if arg.star == "*":
            spread = shape_of(ctx, arg.value)
            values.extend(spread if spread is not None else [None])
        else:
            values.append(py_int(ctx, arg.value))
    return values


def shape_of(ctx: FileContext, expr: cst.BaseExpression, depth: int = 0) -> Optional[list[Optional[int]]]:
    """A shape expression's entries, through module constants, a local assigned a tuple,
    and `x.shape[:-1] + (48,)`; None when it is not a shape."""
    if depth > 4:
        return None
    shape = py_shape(ctx, expr)
    if shape is not None:
        return shape
    if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Add:
        left = shape_of(ctx, expr.left, depth + 1)
        right = shape_of(ctx, expr.right, depth + 1)
        if left is not None and right is not None:
            return left + right
        return None
    if size_read_kind(ctx, expr) == "shape":
        return [None]
    if type(expr) is cst.Name:
        binding = ctx.resolver.lookup(expr.value)
        if binding is not None and binding.kind == "local" and type(binding.value) in (cst.Tuple, cst.List, cst.BinaryOperation):
            return shape_of(ctx, binding.value, depth + 1)
    return None
