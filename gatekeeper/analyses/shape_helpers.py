"""Shared helpers of the hardcoded-shape rules (GK2xx). This file defines no rule.

- `sizes_for(problem)`: the problem's dimensions and their products, the numbers a Python
  shape (allocation, view, comparison) would spell out if it baked in the nominal shape.
  Offsets and vector counts (`problem.explain`) only mean something in kernel index math.
- `py_int` / `py_shape`: constant values of Python expressions (literals, arithmetic,
  module constants that no local name shadows).
- `size_read_kind`: whether an expression reads a size from a tensor (`x.size(1)`,
  `x.shape[2]`, `tuple(x.shape)`, ...).
- `is_setting`, `sized_holder`, `only_raises`: launch-setting tables (GK205) and capacities
  checked against the need (GK201).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Optional, Union

import libcst as cst

from gatekeeper.static.names import int_value
from gatekeeper.static.walk import subtree
from gatekeeper.static.syntax import in_main_guard  # noqa: F401 - re-exported to the GK2xx rules

from gatekeeper.static.problem_facts import MIN_SIGNIFICANT, ProblemFacts, dimension_labels, product_text

if TYPE_CHECKING:
    from gatekeeper.static.context import FileContext

_MAX_DEPTH = 8
# Kept on the facts object itself: a cache keyed by id() answered with another problem's
# sizes once the first facts were freed and the id reused (a batch over more problems than
# the problem cache holds frees them), and reported a size of the wrong problem.
_ATTR = "_gk_problem_sizes"


@dataclass
class ProblemSizes:
    """Dimensions and products of dimensions of one problem, with what each one means."""

    names: dict[int, str] = field(default_factory=dict)
    meaning: dict[int, str] = field(default_factory=dict)
    exprs: dict[int, str] = field(default_factory=dict)  # 768 -> "B*D"

    def shape_size(self, value: int) -> Optional[str]:
        return self.meaning.get(value) if value > 1 else None

    def count_for(self, count: int, block: int) -> Optional[str]:
        """Why `count` programs of `block` elements cover exactly one of the problem's sizes."""
        if block <= 0 or count <= 1:
            return None
        for size, expr in self.exprs.items():
            if -(-size // block) == count:
                return f"ceil({expr} / {block}) = {count}, with {expr} = {size}"
        return None


def sizes_for(problem: ProblemFacts) -> ProblemSizes:
    cached = problem.__dict__.get(_ATTR)
    if cached is not None:
        return cached
    label = {v: k for v, k in dimension_labels(problem.constants, getattr(problem, "free_dims", None)).items() if v > 1}
    nominal = set(problem.constants.values())
    dims = sorted(problem.dims)[:10]
    # A fixed dimension (one size in every declared shape: a head width of 128) is part of
    # the problem, not a free size: it explains a size only together with a free one.
    fixed = fixed_values(problem)
    out = ProblemSizes(names={d: label.get(d, str(d)) for d in dims})
    for d in dims:
        if d in fixed:
            continue
        where = " in a declared shape" if d not in nominal and d in label else ""
        out.meaning[d] = f"the problem dimension {out.names[d]} = {d}{where}"
        out.exprs[d] = out.names[d]
    for size in range(2, len(dims) + 1):
        for combo in combinations(dims, size):
            if fixed and all(d in fixed for d in combo):
                continue
            product = 1
            for d in combo:
                product *= d
            if product in fixed:
                continue  # the value of a fixed dimension (HEAD_DIM = 128) is never a free size, whatever product it equals
            expr = product_text([out.names[d] for d in combo])
            out.exprs.setdefault(product, expr)
            out.meaning.setdefault(product, f"{expr} = {product}")
    problem.__dict__[_ATTR] = out
    return out


def fixed_values(problem: ProblemFacts) -> frozenset[int]:
    """Sizes only the problem's fixed dimensions take (ProblemFacts.fixed_values; empty for a
    problem without declared shapes)."""
    return getattr(problem, "fixed_values", frozenset())


def significant_match(values: list[int], sizes: ProblemSizes) -> list[tuple[int, str]]:
    """The literals of a shape that are the problem's sizes, when they are enough to say
    the shape is the nominal one: one of them large (>= 17), or at least two different
    ones. `(3, 3)` for a problem with 3 channels is a 3x3 kernel, not two matches."""
    matched = [(v, why) for v in values if (why := sizes.shape_size(v)) is not None]
    if any(v >= MIN_SIGNIFICANT for v, _ in matched) or len({v for v, _ in matched}) >= 2:
        return matched
    return []


# Python constants ---------------------------------------------------------------------
def module_constant(ctx: "FileContext", name: str) -> Optional[cst.BaseExpression]:
    """The single value of a module-level constant `name`, unless a local name shadows it."""
    values = ctx.constants.get(name)
    if not values or len(values) != 1:
        return None
    binding = ctx.resolver.lookup(name)
    if binding is not None and ctx.resolver.module_scope.names.get(name) is not binding:
        return None
    return values[0]


def py_int(ctx: "FileContext", expr: cst.BaseExpression, depth: int = 0) -> Optional[int]:
    if depth > _MAX_DEPTH:
        return None
    if type(expr) is cst.Integer:
        return int_value(expr)
    if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Minus:
        inner = py_int(ctx, expr.expression, depth + 1)
        return -inner if inner is not None else None
    if type(expr) is cst.BinaryOperation:
        left = py_int(ctx, expr.left, depth + 1)
        right = py_int(ctx, expr.right, depth + 1) if left is not None else None
        if left is None or right is None:
            return None
        op = expr.operator
        if type(op) is cst.Add:
            return left + right
        if type(op) is cst.Subtract:
            return left - right
        if type(op) is cst.Multiply:
            return left * right
        if type(op) is cst.FloorDivide and right:
            return left // right
        if type(op) is cst.LeftShift and 0 <= right < 64:
            return left << right
        return None
    if type(expr) is cst.Name:
        value = module_constant(ctx, expr.value)
        return py_int(ctx, value, depth + 1) if value is not None else None
    return None


def py_shape(ctx: "FileContext", expr: cst.BaseExpression, depth: int = 0) -> Optional[list[Optional[int]]]:
    """A shape display: its entries' constant values (None where an entry is not constant),
    through module constants and `torch.Size([...])`. None when `expr` is not a shape display."""
    if depth > _MAX_DEPTH:
        return None
    if type(expr) in (cst.Tuple, cst.List):
        if any(type(e) is cst.StarredElement for e in expr.elements):
            return None
        return [py_int(ctx, e.value) for e in expr.elements]
    if type(expr) is cst.Name:
        value = module_constant(ctx, expr.value)
        return py_shape(ctx, value, depth + 1) if value is not None else None
    if type(expr) is cst.Call and len(expr.args) == 1 and (ctx.qualname(expr.func) or "").endswith(".Size"):
        return py_shape(ctx, expr.args[0].value, depth + 1)
    return None


def shape_text(values: list[Optional[int]]) -> str:
    return "(" + ", ".join("?" if v is None else str(v) for v in values) + ")"


# Size reads ---------------------------------------------------------------------------
_SIZE_METHODS = frozenset({"size", "numel", "nelement"})


def size_read_kind(ctx: "FileContext", expr: cst.BaseExpression, unpacked: frozenset[str] = frozenset()) -> Optional[str]:
    """"size" for one size read from a tensor (`x.size(1)`, `x.shape[2]`, `x.numel()`, a
    product of those, a local bound to one), "shape" for a whole shape (`x.shape`,
    `x.size()`, `tuple(x.shape)`, a tuple of size reads), else None.

    Locals are followed to their binding, each binding at most once per question and within
    a fixed budget of nodes: a self-referential binding (`k = (k, k, k)`) or a long chain of
    wide tuples answers "unknown" (None), never an endless recursion that would be blamed on
    the submission."""
    return _SizeReads(ctx, unpacked).kind(expr, 0)


_SIZE_READ_BUDGET = 256


class _SizeReads:
    def __init__(self, ctx: "FileContext", unpacked: frozenset[str]) -> None:
        self.ctx, self.unpacked = ctx, unpacked
        self.budget = _SIZE_READ_BUDGET
        self.active: set[int] = set()  # bindings being resolved on the current path

    def kind(self, expr: cst.BaseExpression, depth: int) -> Optional[str]:
        self.budget -= 1
        if self.budget < 0 or depth > _MAX_DEPTH:
            return None
        depth += 1
        if type(expr) is cst.Attribute:
            return "shape" if expr.attr.value == "shape" else None
        if type(expr) is cst.Call:
            func = expr.func
            if type(func) is cst.Attribute and func.attr.value in _SIZE_METHODS:
                if func.attr.value == "size" and not expr.args:
                    return "shape"
                return "size"
            if type(func) is cst.Name and func.value in ("tuple", "list") and len(expr.args) == 1:
                return "shape" if self.kind(expr.args[0].value, depth) == "shape" else None
            return None
        if type(expr) is cst.Subscript:
            inner = self.kind(expr.value, depth)
            if inner != "shape" or len(expr.slice) != 1:
                return None
            return "shape" if (type(expr.slice[0].slice) is cst.Slice) else "size"
        if type(expr) in (cst.Tuple, cst.List) and expr.elements:
            if all(self.kind(e.value, depth) == "size" for e in expr.elements):
                return "shape"
            return None
        if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Multiply:
            if self.kind(expr.left, depth) == "size" and self.kind(expr.right, depth) == "size":
                return "size"
            return None
        if type(expr) is cst.Name:
            if expr.value in self.unpacked:
                return "size"
            binding = self.ctx.resolver.lookup(expr.value)
            if binding is not None and binding.kind == "local" and binding.value is not None and binding.value is not expr:
                value = binding.value
                if type(value) in (cst.Attribute, cst.Call, cst.Subscript, cst.Tuple, cst.BinaryOperation) \
                        and id(value) not in self.active:
                    self.active.add(id(value))
                    try:
                        return self.kind(value, depth)
                    finally:
                        self.active.discard(id(value))
        return None


# Where code runs -------------------------------------------------------------------------
_HARNESS_FUNCTIONS = frozenset({"get_inputs", "get_init_inputs"})


def reach(ctx: "FileContext", key: str) -> str:
    """"harness" for a copy of the problem's `get_inputs()` (agents often paste it along; it
    builds the benchmark's inputs, not outputs), "init" for code that only runs at
    construction or import, "dead" for a plain function nothing calls by name, else
    "forward". Decide in finish()."""
    if key in _HARNESS_FUNCTIONS:
        return "harness"
    if ctx.is_init_only(key):
        return "init"
    if "." not in key and key != "<module>" and not ctx.calls.get(key):
        return "dead"
    return "forward"


# Match statements ------------------------------------------------------------------------
# A literal a dispatch compares against: a size, or a shape tuple (None for a wildcard).
Literal = Union[int, tuple]


def pattern_literals(ctx: "FileContext", pattern: cst.MatchPattern, kind: str) -> list[Literal]:
    """The sizes (kind "size") or shapes (kind "shape", None for a capture) a `case` pattern
    matches literally; [] when it matches anything else."""
    if type(pattern) is cst.MatchOr:
        out: list[Literal] = []
        for element in pattern.patterns:
            out.extend(pattern_literals(ctx, element.pattern, kind))
        return out
    if type(pattern) is cst.MatchAs and pattern.pattern is not None:
        return pattern_literals(ctx, pattern.pattern, kind)
    if type(pattern) is cst.MatchValue and kind == "size":
        value = py_int(ctx, pattern.value)
        return [value] if value is not None and value > 1 else []
    if type(pattern) in (cst.MatchList, cst.MatchTuple) and kind == "shape":
        values: list[Optional[int]] = []
        for element in pattern.patterns:
            inner = getattr(element, "value", None)
            if type(element) is cst.MatchSequenceElement and type(inner) is cst.MatchAs and inner.pattern is None:
                values.append(None)  # a capture such as `b` matches any size
                continue
            if type(element) is not cst.MatchSequenceElement or type(inner) is not cst.MatchValue:
                return []
            value = py_int(ctx, inner.value)
            if value is None:
                return []
            values.append(value)
        return [tuple(values)] if any(v is not None and v > 1 for v in values) else []
    return []


# Tuning tables and capacities ---------------------------------------------------------------
ORDERING = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)


def sized_holder(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The tensor whose size `expr` reads: `buf.numel()`, `buf.size(0)`, `buf.shape[0]`,
    `len(buf)`; None otherwise."""
    if type(expr) is cst.Call:
        func = expr.func
        if type(func) is cst.Attribute and func.attr.value in ("numel", "size", "nelement"):
            return func.value
        if type(func) is cst.Name and func.value == "len" and len(expr.args) == 1:
            return expr.args[0].value
    if type(expr) is cst.Subscript and type(expr.value) is cst.Attribute and expr.value.attr.value == "shape":
        return expr.value.value
    return None


def only_raises(body: cst.BaseSuite) -> bool:
    stmts = body.body if type(body) is cst.IndentedBlock else [body]
    return bool(stmts) and all(
        type(stmt) in (cst.SimpleStatementLine, cst.SimpleStatementSuite)
        and all(type(small) is cst.Raise for small in stmt.body) for stmt in stmts)


def is_setting(expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Literals and containers of literals, and calls of literals (`triton.Config({...},
    num_warps=4)`, `dict(BLOCK=128)`): data, not code."""
    if depth > 4:
        return False
    if type(expr) in (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString):
        return True
    if type(expr) is cst.Name:
        return expr.value in ("True", "False", "None")
    if type(expr) is cst.UnaryOperation:
        return is_setting(expr.expression, depth + 1)
    if type(expr) in (cst.Tuple, cst.List, cst.Set):
        return all(type(e) is cst.Element and is_setting(e.value, depth + 1) for e in expr.elements)
    if type(expr) is cst.Dict:
        return all(type(e) is cst.DictElement and is_setting(e.key, depth + 1) and is_setting(e.value, depth + 1)
                   for e in expr.elements)
    if type(expr) is cst.Call:
        return all(is_setting(a.value, depth + 1) for a in expr.args)
    return False


_SIZE_READS = frozenset({"shape", "size", "numel", "dim", "ndim"})


def under_size_test(ctx: "FileContext", node: cst.CSTNode) -> bool:
    """Inside a branch taken on a tensor's sizes (`if x.shape[1:] == (16, 48):`)? A fast path
    for the nominal shape next to a general one is honest when the test is exact, which only
    running other shapes tells (GK602): a literal there is never certain."""
    child, parent = node, ctx.parent(node)
    while parent is not None and type(parent) not in (cst.FunctionDef, cst.Module):
        if type(parent) in (cst.If, cst.IfExp) and child is not parent.test and _reads_sizes(parent.test):
            return True
        child, parent = parent, ctx.parent(parent)
    return False


def _reads_sizes(test: cst.BaseExpression) -> bool:
    for item in subtree(test):
        if type(item) is cst.Attribute and item.attr.value in _SIZE_READS:
            return True
        if type(item) is cst.Call and type(item.func) is cst.Name and item.func.value == "len":
            return True
    return False
