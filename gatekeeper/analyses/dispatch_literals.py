"""The literal sizes and shapes a shape dispatch compares against (`n == 48`,
`x.shape in {(16, 48), ...}`, a dict keyed by shapes), and what they mean for the problem:
all fixed dimensions, or the problem's nominal sizes. What GK205 judges. Not a rule file:
it defines no rule with a `code`; nothing here reports."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.analyses.shape_helpers import Literal, fixed_values, module_constant, py_int, py_shape, sizes_for
from gatekeeper.static.context import FileContext
from gatekeeper.static.problem_facts import ProblemFacts


def dispatch_literal(ctx: FileContext, expr: cst.BaseExpression, kind: str) -> Optional[Literal]:
    if kind == "size":
        value = py_int(ctx, expr)
        return value if value is not None and value > 1 else None
    shape = py_shape(ctx, expr)
    # `(x.size(0), 48)`: entries that are not constants match anything
    if shape is None or not any(v is not None and v > 1 for v in shape):
        return None
    return tuple(shape)


def dispatch_members(ctx: FileContext, expr: cst.BaseExpression, kind: str) -> list[Literal]:
    if type(expr) is cst.Name:
        value = module_constant(ctx, expr.value)
        if value is None or type(value) not in (cst.Tuple, cst.List, cst.Set, cst.Dict):
            return []
        expr = value
    if type(expr) is cst.Dict:
        items = [e.key for e in expr.elements if type(e) is cst.DictElement]
    elif type(expr) in (cst.Tuple, cst.List, cst.Set):
        items = [e.value for e in expr.elements]
    else:
        return []
    out = [lit for item in items if (lit := dispatch_literal(ctx, item, kind)) is not None]
    return out


def all_fixed(problem: ProblemFacts, literals: list[Literal]) -> bool:
    fixed = fixed_values(problem)
    values = [v for lit in literals for v in (lit if isinstance(lit, tuple) else (lit,)) if v is not None and v > 1]
    return bool(fixed) and bool(values) and all(v in fixed for v in values)


def nominal_meaning(problem: Optional[ProblemFacts], literals: list[Literal]) -> Optional[str]:
    if problem is None:
        return None
    sizes = sizes_for(problem)
    for lit in literals:
        values = list(lit) if isinstance(lit, tuple) else [lit]
        meanings = [sizes.shape_size(v) for v in values if v is not None and v > 1]
        if meanings and all(meanings):
            return "is the problem's nominal size (" + ", ".join(
                m.replace("the problem dimension ", "") for m in meanings if m) + ")"
    return None
