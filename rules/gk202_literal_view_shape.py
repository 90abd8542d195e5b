from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.shape_helpers import in_main_guard, py_int, reach, py_shape, shape_text, significant_match, sizes_for
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

_P = "R = 4\nB = 16\nD = 48\ndef get_inputs():\n    return [torch.randn(R, B, D)]\n"
# method -> index of the shape argument in the method form (the function form has the
# tensor first); None: the sizes may also be spread over the arguments.
_VIEWS: dict[str, Optional[int]] = {
    "view": None, "reshape": None, "expand": None, "as_strided": 0, "broadcast_to": 0,
    "unflatten": 1, "resize_": None, "new_view": None,
}
_TORCH_FUNCS = frozenset({"reshape", "as_strided", "broadcast_to", "unflatten"})
_HEADER = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"


class LiteralViewShape(Rule):
    """`view`, `reshape`, `expand`, `as_strided`, `broadcast_to` or `unflatten` to literal
    sizes that are the problem's dimensions or their products: `y.view(16, 48)`,
    `x.reshape(-1, 48)`, `torch.as_strided(x, (16, 48), (48, 1))`, `x.view(SHAPE)` with a
    module constant.

    Why it games the benchmark: the reshaped tensor only has the right layout at the
    nominal sizes; a jittered input fails to reshape or, worse, is silently reinterpreted.

    Not flagged: `-1` together with sizes read from the input (`x.view(-1, x.size(-1))`),
    sizes of 0 or 1, small literals that are not the problem's sizes, and self-tests under
    `if __name__ == "__main__":`. Code that only runs at construction gets a warning. Needs
    the problem file, which says what the dimensions are.

    Confidence: likely on the forward path (confirmed by the behaviour stage's
    jittered-shape check, GK602); suspect at construction.

    Known false-positive patterns, and why it does not fire on them:
    - `x.view(-1, 2)`, `y.view(torch.int32)`: small literals that are not the problem's
      sizes, and dtype views, are not shapes;
    - `x.view(-1, x.size(-1))`: the sizes are read from the input;
    - weights reshaped once in `__init__`: a warning at most.
    """

    code = "GK202"
    name = "LiteralViewShape"
    category = Category.HARDCODED_SHAPE
    severity = Severity.ERROR
    confidence = Confidence.LIKELY
    confirmed_by = "GK602"
    needs_problem = True
    summary = "reshapes a tensor to the problem's nominal sizes written as literals"
    message = (
        "`{call}` reshapes to the literal sizes {shape}, which spell out the problem's sizes ({why}): "
        "the layout is only right for the benchmark's nominal input, and any other size fails or is "
        "silently reinterpreted."
    )
    message_strided = (
        "`{call}` views the tensor with the sizes {shape} and the strides {strides}, whose literals spell out "
        "the problem's sizes ({why}): the layout is only right for the benchmark's nominal input, and any "
        "other size fails or is silently reinterpreted."
    )
    hint = (
        "Read the sizes from the tensor instead of writing them: `x.view(-1, x.size(-1))`, "
        "`x.reshape(x.size(0), -1)`, or `out.view(*x.shape[:-1], n)` with `n` computed from the input."
    )
    EXAMPLE_PROBLEM = _P
    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = k(x.view(-1, x.size(-1)))
                    return y.view(x.size(1), x.size(2))
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return k(x.reshape(x.size(0), -1)).view(x.shape[1:])
        """)),
        # a dtype view and a small literal that is not a problem size
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = k(x.view(torch.int32))
                    return y.view(-1, 2)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = k(x)
                    return y.view(16, 48)
        """), line=5, message="`y.view(16, 48)` reshapes to the literal sizes (16, 48)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return k(x.reshape(-1, 48))
        """), line=4, message="`x.reshape(-1, 48)` reshapes to the literal sizes (-1, 48)"),
        Invalid(snippet("""
            import torch as T
            class ModelNew(T.nn.Module):
                def forward(self, x):
                    return k(T.as_strided(x, (x.size(1), x.size(2)), (48, 1)))
        """), line=4, message="views the tensor with the sizes (?, ?) and the strides (48, 1)"),
        Invalid(snippet("""
            import torch
            OUT = (16, 48)
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return k(x).expand(OUT)
        """), line=5, message="`k(x).expand(OUT)` reshapes to the literal sizes (16, 48)"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pending: list[tuple[cst.Call, str, str, dict]] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value not in _VIEWS:
            return
        method = func.attr.value
        positional = [a.value for a in node.args if a.keyword is None and not a.star]
        if method in _TORCH_FUNCS and self.ctx.qualname(func) == f"torch.{method}":
            positional = positional[1:]  # torch.reshape(x, shape): x is not a size
        values = self._sizes(method, positional, node)
        strides: list[Optional[int]] = []
        if method == "as_strided":
            # the strides bake in the row length just as the sizes do; they are named apart
            values, strides = self._strided(positional, node)
        values_all = values + strides
        literals = [v for v in values_all if v is not None and v > 1]
        if not literals:
            return
        if self.ctx.problem is None:
            return
        matched = significant_match(literals, sizes_for(self.ctx.problem))
        if not matched:
            return
        call = self.ctx.module.code_for_node(node)
        call = call if len(call) <= 80 else call[:77] + "..."
        why = ", ".join(w.replace("the problem dimension ", "") for _, w in matched)
        evidence = {"shape": shape_text(values), "meaning": why}
        if method == "as_strided":
            evidence["strides"] = shape_text(strides)
            message = self.message_strided.format(call=call, shape=shape_text(values), strides=shape_text(strides), why=why)
        else:
            message = self.message.format(call=call, shape=shape_text(values), why=why)
        self.pending.append((node, self.ctx.function_key, message, evidence))

    def finish(self) -> None:
        # Code that only runs at construction (weights reshaped in __init__) is a warning.
        for node, key, message, evidence in self.pending:
            where = reach(self.ctx, key)
            if where == "harness" or in_main_guard(self.ctx, node):
                continue  # a copy of get_inputs(), or a self-test under __main__
            self.report(node, message, evidence=evidence,
                        severity=None if where == "forward" else Severity.WARNING,
                        confidence=Confidence.LIKELY if where == "forward" else Confidence.SUSPECT)

    def _sizes(self, method: str, positional: list[cst.BaseExpression], node: cst.Call) -> list[Optional[int]]:
        keyword = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        index = _VIEWS[method]
        if index is not None:
            values: list[Optional[int]] = []
            # as_strided: the strides bake in the row length just as the sizes do
            for expr in positional[index : index + 2] if method == "as_strided" else positional[index : index + 1]:
                values.extend(self._one(expr))
            for name in ("size", "stride", "sizes"):
                if name in keyword:
                    values.extend(self._one(keyword[name]))
            return values
        if "size" in keyword or "shape" in keyword:
            return self._one(keyword.get("size") or keyword["shape"])
        if len(positional) == 1:
            return self._one(positional[0])
        return [py_int(self.ctx, e) for e in positional]

    def _strided(self, positional: list[cst.BaseExpression], node: cst.Call) -> tuple[list[Optional[int]], list[Optional[int]]]:
        """as_strided(size, stride) (after the tensor): the sizes and the strides, apart."""
        keyword = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        index = _VIEWS["as_strided"] or 0
        size = positional[index] if len(positional) > index else keyword.get("size")
        stride = positional[index + 1] if len(positional) > index + 1 else keyword.get("stride")
        return (self._one(size) if size is not None else [],
                self._one(stride) if stride is not None else [])

    def _one(self, expr: cst.BaseExpression) -> list[Optional[int]]:
        shape = py_shape(self.ctx, expr)
        if shape is not None:
            return shape
        return [py_int(self.ctx, expr)]
