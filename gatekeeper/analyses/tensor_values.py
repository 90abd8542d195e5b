"""Python arithmetic on tensors: which expressions are (statically) tensors, and which
operators compute on them. A mixin of TorchUsage (torch_usage.py); not a rule file."""

from __future__ import annotations

from bisect import bisect_left
from typing import Optional

import libcst as cst

from gatekeeper.analyses.torch_usage_model import (
    ELEMENTWISE, OPERATOR_SYMBOL, PY_COMPUTE, TENSOR_ATTRS, receiver_key,
)
from gatekeeper.static.syntax import is_self_attr


class TensorValues:
    """Needs from the host: ctx, ops, frames, holders, self_tensors, _in_kernel, _use()."""

    def operator(self, node: cst.CSTNode) -> None:
        if self._in_kernel or not self.frames:
            return
        if type(node) is cst.BinaryOperation:
            if type(node.operator) is cst.MatrixMultiply:
                self._use("operator", "@", node, op="matmul", heavy=True)
                return
            op = ELEMENTWISE.get(type(node.operator))
            if op is None or type(self.ctx.parent(node)) in (cst.BinaryOperation, cst.UnaryOperation):
                return
            if _stringish(node.left) or _stringish(node.right):
                return  # `"argmax_" + name`, `"%d" % n`: text, not arithmetic
            if self.tensorish(node.left) or self.tensorish(node.right):
                self._use("operator", OPERATOR_SYMBOL[op], node, op=op, heavy=False)
        elif type(node) is cst.AugAssign:
            if type(node.operator) is cst.MatrixMultiplyAssign:
                self._use("operator", "@=", node, op="matmul", heavy=True)
                return
            op = ELEMENTWISE.get(type(node.operator))
            if op is not None and (self.tensorish(node.target) or self.tensorish(node.value)):
                self._use("operator", OPERATOR_SYMBOL[op] + "=", node, op=op, heavy=False)
        elif type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
            if type(self.ctx.parent(node)) not in (cst.BinaryOperation, cst.UnaryOperation) and self.tensorish(node.expression):
                self._use("operator", "-", node, op="neg", heavy=False)

    # tensor-ness ------------------------------------------------------------------

    def tensorish(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> bool:
        """The expression is (statically) a tensor: a forward tensor parameter, a local
        assigned from one, a tensor method's or torch function's result, or arithmetic on
        those. Sizes (`x.size(0)`, `x.shape[1]`, `x.numel()`) are not."""
        if expr is None or depth > 12:
            return False
        if type(expr) is cst.Name:
            return bool(self.frames) and expr.value in self.frames[-1].tensor_names
        if type(expr) is cst.Attribute:
            if is_self_attr(expr):
                return expr.attr.value in self.self_tensors
            return expr.attr.value in TENSOR_ATTRS and self.tensorish(expr.value, depth + 1)
        if type(expr) is cst.Subscript:
            return self.tensorish(expr.value, depth + 1)
        if type(expr) is cst.BinaryOperation:
            return self.tensorish(expr.left, depth + 1) or self.tensorish(expr.right, depth + 1)
        if type(expr) is cst.UnaryOperation:
            return self.tensorish(expr.expression, depth + 1)
        if type(expr) is cst.IfExp:
            return self.tensorish(expr.body, depth + 1) or self.tensorish(expr.orelse, depth + 1)
        if type(expr) in (cst.GeneratorExp, cst.ListComp):  # sum(x[i] for i in range(n))
            return self.tensorish(expr.elt, depth + 1)
        if type(expr) is cst.Call:
            qual = self.ctx.qualname(expr.func)
            if qual == "functools.reduce":  # folding tensors gives a tensor
                return len(expr.args) >= 2 and self.tensorish(expr.args[1].value, depth + 1)
            if qual is not None and qual in PY_COMPUTE:  # operator.add(x, y): what `x + y` gives
                return any(self.tensorish(a.value, depth + 1) for a in expr.args)
            if qual is not None:
                return qual.startswith("torch.") and not qual.startswith("torch.ops.") and self.ops.returns_tensor(qual)
            func = expr.func
            if type(func) is cst.Attribute and not is_self_attr(func):
                receiver = func.value
                if type(receiver) is cst.Name and self.frames and receiver.value in self.frames[-1].containers:
                    return False
                if receiver_key(receiver) in self.holders:
                    # the extension's result: a tensor, unless its C++ function returns a number
                    return func.attr.value not in scalar_functions(self.ctx)
                if _stringish(receiver):
                    return False  # `str(x.dtype).split(".")`: a string method
                return self.ops.method_returns_tensor(func.attr.value)
        return False

    # records --------------------------------------------------------------------------


_SCALAR_TYPES = frozenset({"void", "bool", "char", "short", "int", "long", "unsigned", "signed", "float", "double",
                           "size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
                           "uint64_t", "ssize_t"})
_SCALARS_ATTR = "_gk_scalar_cpp_functions"


def scalar_functions(ctx) -> frozenset[str]:
    """The C++ functions of the file's sources declared to return a number (or nothing):
    `int64_t ws_elems(int64_t n)` gives a Python int, so arithmetic on it is not torch's."""
    cached = ctx.__dict__.get(_SCALARS_ATTR)
    if cached is not None and cached[0] == len(ctx.cpp_sources):  # sources found later are read again
        return cached[1]
    names: set[str] = set()
    for source in ctx.cpp_sources:
        tokens = source.tokens
        offsets = [t.offset for t in tokens]
        for fn in source.functions:
            index = bisect_left(offsets, fn.offset)
            if 0 < index < len(tokens) and tokens[index - 1].text in _SCALAR_TYPES:
                names.add(fn.name)
    found = frozenset(names)
    ctx.__dict__[_SCALARS_ATTR] = (len(ctx.cpp_sources), found)
    return found


_STRING_NODES = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
_TO_TEXT = frozenset({"str", "repr", "format", "hex", "chr"})


def _stringish(expr: cst.BaseExpression) -> bool:
    """A string literal, an f-string, `str(...)`-like builtins, or a string method of one."""
    if type(expr) in _STRING_NODES:
        return True
    if type(expr) is cst.Call:
        func = expr.func
        if type(func) is cst.Name:
            return func.value in _TO_TEXT
        if type(func) is cst.Attribute and func.attr.value in ("join", "format", "lower", "upper", "strip", "replace"):
            return _stringish(func.value)
    if type(expr) is cst.Subscript:
        return _stringish(expr.value)
    if type(expr) is cst.BinaryOperation:
        return _stringish(expr.left) or _stringish(expr.right)
    return False
