"""Branches on sampled input magnitudes that pick a cheaper path, for GK541. Not a rule file.

A *magnitude read* is a reduction or scalar read (`.abs().amax()`, `.max()`, `.std()`,
`.norm()`, `.item()`, `torch.amax(x)`...) of an input or of a view / elementwise function of
one, compared with a non-zero threshold (`< 0.5`, `> 1e-3`), or any value read of a constant
sample of an input (`x[0, 0].item()`, `x.flatten()[:1024].std()`). An exact whole-input
test (`torch.all(x == 0)`) is not one: when the result of that case is exact it is a sound
shortcut, and GK540 with its run-time check handles it.

A *cheaper path* is an arm of the branch that
- returns without computing: zeros / empty / ones / full tensors, an input itself, its
  `clone()` / `detach()`, a constant, the input times zero;
- lowers precision: casts an input (or a value computed from one) to fp16 / bf16 / fp8
  while the other path does not;
- calls a function whose name says it approximates (`approx`, `taylor`, `low_order`,
  `lowp`, `truncated`, `fp16`, `half`, `bf16`) while the other path does not.
"""

from __future__ import annotations

import re
from typing import Iterator, Optional

import libcst as cst

from gatekeeper.static.walk import children as node_children

from gatekeeper.static.context import FileContext

VALUE_METHODS = frozenset({
    "item", "tolist", "any", "all", "max", "min", "amax", "amin", "aminmax", "std", "var", "mean",
    "sum", "norm", "count_nonzero", "median", "nansum", "nanmean",
})
VALUE_FUNCTIONS = frozenset(f"torch.{n}" for n in (
    "any", "all", "max", "min", "amax", "amin", "std", "var", "mean", "sum", "norm", "count_nonzero",
    "median", "linalg.norm", "linalg.vector_norm", "std_mean", "var_mean",
))
_VIEWS = frozenset({"abs", "flatten", "reshape", "view", "contiguous", "float", "double", "detach", "square",
                    "ravel", "t", "transpose", "permute", "squeeze", "unsqueeze", "to", "cpu", "neg"})
_SHORTCUTS = frozenset(f"torch.{n}" for n in ("zeros_like", "zeros", "empty_like", "empty", "ones_like", "ones",
                                                "full_like", "full"))
_SHORTCUT_METHODS = frozenset({"clone", "new_zeros", "new_empty", "new_ones", "zero_", "detach", "new_full"})
_LOW_DTYPES = frozenset({"float16", "half", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                         "float8_e5m2fnuz"})
_LOW_METHODS = frozenset({"half", "bfloat16"})
APPROX_NAME = re.compile(r"approx|taylor|low_?order|lowp|low_?prec|truncat|fp16|half|bf16|fp8", re.IGNORECASE)
_ORDER = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)


class Scope:
    """One function: its tensor parameters and the locals computed from them."""

    def __init__(self, params: set[str]) -> None:
        self.derived = set(params)
        self.params = set(params)
        self.reads: dict[str, str] = {}  # local holding a value read -> the input it was read from
        self.sampled: set[str] = set()  # locals that are constant samples of an input
        self.tests: dict[str, tuple[str, str]] = {}  # locals holding a magnitude test: (input, how)


def root(scope: Scope, expr: cst.BaseExpression, ctx: FileContext) -> tuple[Optional[str], bool]:
    """(the input an expression is a view / elementwise function of, whether it is a sample)."""
    current, sampled = expr, False
    for _ in range(12):
        kind = type(current)
        if kind is cst.Name:
            name = current.value  # type: ignore[attr-defined]
            return (name, sampled or name in scope.sampled) if name in scope.derived else (None, False)
        if kind is cst.Subscript:
            sampled = sampled or _constant_index(current)  # type: ignore[arg-type]
            current = current.value  # type: ignore[attr-defined]
        elif kind is cst.Call and type(current.func) is cst.Attribute and current.func.attr.value in _VIEWS:  # type: ignore[attr-defined]
            current = current.func.value  # type: ignore[attr-defined]
        elif kind is cst.Call and current.args and (ctx.qualname(current.func) or "").rsplit(".", 1)[-1] in _VIEWS:  # type: ignore[attr-defined]
            current = current.args[0].value  # type: ignore[attr-defined]
        elif kind is cst.Call and _own_function_of_input(scope, current, ctx):  # type: ignore[arg-type]
            # `_ext.absmax(x)`: the submission's own reduction computes from the input as torch's would
            current = next(a.value for a in current.args  # type: ignore[attr-defined]
                           if root(scope, a.value, ctx)[0] is not None)
        elif kind is cst.Comparison:
            current = current.left  # type: ignore[attr-defined]  # (x == 0).all()
        elif kind is cst.UnaryOperation:
            current = current.expression  # type: ignore[attr-defined]
        else:
            return None, False
    return None, False


_BUILTINS = frozenset({"len", "max", "min", "range", "int", "float", "bool", "abs", "sum", "tuple", "list", "id",
                       "isinstance", "getattr", "hasattr", "type", "print", "round", "divmod", "sorted", "any", "all"})


def _own_function_of_input(scope: Scope, call: cst.Call, ctx: FileContext) -> bool:
    """A call of the submission's own code (an extension function, a helper, a kernel
    wrapper) given an input: `_ext.absmax(x)`, `self.reduce(x)`. Torch's functions and
    Python's builtins are not: their reads are the view and value lists above."""
    func = call.func
    if type(func) is cst.Name and func.value in _BUILTINS:
        return False
    qual = ctx.qualname(func) or ""
    if qual.startswith(("torch.", "triton.", "numpy.", "math.")) or qual in _BUILTINS:
        return False
    if type(func) is cst.Attribute and root(scope, func.value, ctx)[0] is not None:
        return False  # a method of the input itself (`x.size(0)`): metadata or a view, handled above
    return any(type(a.value) is cst.Name and a.value.value in scope.derived for a in call.args)


def _constant_index(sub: cst.Subscript) -> bool:
    """`x[0]`, `x[0, 0]`, `x[:1024]`, `x[::64]`: a constant part of the input."""
    for element in sub.slice:
        index = element.slice
        if type(index) is cst.Index and type(index.value) is cst.Integer:
            return True
        if type(index) is cst.Slice and any(type(b) is cst.Integer for b in (index.upper, index.step)):
            return True
    return False


def value_read(scope: Scope, expr: cst.BaseExpression, ctx: FileContext) -> Optional[tuple[str, bool]]:
    """(input, sampled) when expr is a value read of an input-derived tensor."""
    if type(expr) is cst.Name and expr.value in scope.reads:
        return scope.reads[expr.value], expr.value in scope.sampled
    if type(expr) is cst.Call:
        func = expr.func
        if type(func) is cst.Attribute and func.attr.value in VALUE_METHODS:
            name, sampled = root(scope, func.value, ctx)
            if name is not None:
                return name, sampled
        if expr.args and ctx.qualname(func) in VALUE_FUNCTIONS:
            name, sampled = root(scope, expr.args[0].value, ctx)
            if name is not None:
                return name, sampled
        if type(func) is cst.Name and func.value in ("float", "bool", "int", "abs") and expr.args:
            inner = expr.args[0].value
            read = value_read(scope, inner, ctx)
            if read is None and type(inner) is cst.Call and _own_function_of_input(scope, inner, ctx):
                name, sampled = root(scope, inner, ctx)  # `float(_ext.absmax(x))`
                return (name, sampled) if name is not None else None
            return read
        if type(func) is cst.Attribute and func.attr.value in ("item", "abs"):
            return value_read(scope, func.value, ctx)
    return None


def magnitude_tests(scope: Scope, test: cst.BaseExpression, ctx: FileContext) -> Iterator[tuple[str, str]]:
    """(input, how) for each magnitude read in a branch condition. A sample read does not
    count when the same condition also tests the whole input exactly (`x[0, 0] == 0 and
    torch.all(x == 0)`: the sample is only a cheap first check)."""
    found: list[tuple[str, str, str]] = []  # (input, how, kind)
    stack: list[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        if type(node) is cst.Name and node.value in scope.tests:  # `small = x.norm() < 10.0`; `if small:`
            found.append((*scope.tests[node.value], "threshold"))
            continue
        read = value_read(scope, node, ctx) if type(node) in (cst.Call, cst.Name) else None
        if read is not None:
            found.append((read[0], "a value read from a constant sample of it", "sample" if read[1] else "exact"))
            continue
        if type(node) is cst.Comparison:
            left = node.left
            for target in node.comparisons:
                right = target.comparator
                for mine, other in ((left, right), (right, left)):
                    read = value_read(scope, mine, ctx)
                    if read is not None and not read[1] and type(target.operator) in _ORDER and _nonzero_number(other):
                        found.append((read[0], f"its magnitude compared with the threshold {_text(other)}", "threshold"))
                left = right
        stack.extend(node_children(node))
    exact = {name for name, _, kind in found if kind == "exact"}
    for name, how, kind in found:
        if kind == "threshold" or (kind == "sample" and name not in exact):
            yield name, how


def _nonzero_number(expr: cst.BaseExpression) -> bool:
    if type(expr) is cst.UnaryOperation:
        expr = expr.expression
    if type(expr) in (cst.Integer, cst.Float):
        try:
            return float(expr.value.replace("_", "")) != 0.0
        except ValueError:
            return False
    return False


def _text(expr: cst.BaseExpression) -> str:
    return cst.Module(body=[]).code_for_node(expr)


# arms -------------------------------------------------------------------------------------
def cheaper(ctx: FileContext, scope: Scope, arm: list[cst.CSTNode], other: list[cst.CSTNode]) -> Optional[str]:
    """What makes `arm` the cheaper path compared with `other`, or None."""
    shortcut = _shortcut_return(ctx, scope, arm)
    if shortcut:
        return f"returns {shortcut} without computing the result"
    low = _lowers_precision(ctx, arm)
    if low and not _lowers_precision(ctx, other):
        return f"computes in lower precision ({low})"
    approx = _approx_call(ctx, arm)
    if approx and not _approx_call(ctx, other):
        return f"calls `{approx}`, an approximation"
    return None


def _walk(nodes: list[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        if type(node) not in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            stack.extend(reversed(node_children(node)))


def _shortcut_return(ctx: FileContext, scope: Scope, arm: list[cst.CSTNode]) -> Optional[str]:
    for node in arm[:3]:
        value = node.value if type(node) is cst.Return else node if isinstance(node, cst.BaseExpression) else None
        if type(node) is cst.SimpleStatementLine:
            value = next((s.value for s in node.body if type(s) is cst.Return), None)
        if value is None:
            continue
        if type(value) is cst.Name and value.value in scope.params:
            return f"the input `{value.value}` itself"
        if type(value) in (cst.Integer, cst.Float):
            return f"the constant {value.value}"
        if type(value) is cst.Call:
            qual = ctx.qualname(value.func)
            if qual in _SHORTCUTS:
                return f"`{qual}(...)`"
            func = value.func
            if type(func) is cst.Attribute and func.attr.value in _SHORTCUT_METHODS \
                    and type(func.value) is cst.Name and func.value.value in scope.params:
                return f"`{func.value.value}.{func.attr.value}()`"
        if type(value) is cst.BinaryOperation and type(value.operator) is cst.Multiply and any(
                type(s) in (cst.Integer, cst.Float) and _is_zero(s) for s in (value.left, value.right)):
            return "the input times zero"
    return None


def _is_zero(expr: cst.BaseExpression) -> bool:
    try:
        return float(expr.value.replace("_", "")) == 0.0  # type: ignore[attr-defined]
    except ValueError:
        return False


def _lowers_precision(ctx: FileContext, nodes: list[cst.CSTNode]) -> Optional[str]:
    for node in _walk(nodes):
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in _LOW_METHODS:
            return f"`.{node.func.attr.value}()`"
        if type(node) is cst.Attribute:
            qual = ctx.qualname(node) or ""
            if qual.startswith("torch.") and qual[6:] in _LOW_DTYPES:
                return f"`{qual}`"
    return None


def _approx_call(ctx: FileContext, nodes: list[cst.CSTNode]) -> Optional[str]:
    for node in _walk(nodes):
        if type(node) is cst.Call:
            func = node.func
            name = func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else None
            if type(func) is cst.Subscript and type(func.value) is cst.Name:
                name = func.value.value  # kernel[grid](...)
            if name and APPROX_NAME.search(name):
                return name
    return None


def arms(node: cst.CSTNode) -> tuple[list[cst.CSTNode], list[cst.CSTNode]]:
    """The two paths of an if statement (the else arm is the code after it when the body
    returns) or of a conditional expression."""
    if type(node) is cst.IfExp:
        return [node.body], [node.orelse]
    body = list(node.body.body) if type(node.body) is cst.IndentedBlock else [node.body]  # type: ignore[attr-defined]
    orelse = node.orelse  # type: ignore[attr-defined]
    if type(orelse) is cst.Else:
        other = list(orelse.body.body) if type(orelse.body) is cst.IndentedBlock else [orelse.body]
    elif type(orelse) is cst.If:
        other = [orelse]
    else:
        other = []
    return body, other


# C++ --------------------------------------------------------------------------------------
_CPP_REDUCTIONS = frozenset({"max", "amax", "min", "amin", "std", "var", "mean", "sum", "norm"})
_CPP_LOW = frozenset({"kHalf", "kBFloat16", "Half", "BFloat16", "half", "__half", "__nv_bfloat16",
                      "kFloat8_e4m3fn", "kFloat8_e5m2", "__float2half", "__float2bfloat16"})
_CPP_SHORTCUTS = frozenset({"zeros_like", "zeros", "empty_like", "empty", "ones_like", "full_like", "zero_"})
_CPP_ORDER = frozenset({"<", "<=", ">", ">="})


def cpp_sniffs(source) -> Iterator[tuple[int, str, str]]:  # type: ignore[no-untyped-def]
    """(offset of the `if`, input, what the cheaper path does) for each C++ branch on a
    reduction read back with `.item()` and compared with a non-zero number, whose body
    returns a shortcut or computes in lower precision while the rest of the function does not."""
    from gatekeeper.analyses.cpp_postfix import chain_root
    from gatekeeper.analyses.stream_support import call_args

    tokens = source.tokens
    functions = source.functions
    for i, tok in enumerate(tokens):
        if tok.text != "if" or i + 1 >= len(tokens) or tokens[i + 1].text != "(":
            continue
        args, close = call_args(tokens, i)
        cond = [t for arg in args for t in arg]
        texts = [t.text for t in cond]
        if "item" not in texts or not (_CPP_REDUCTIONS & set(texts)) or not (_CPP_ORDER & set(texts)):
            continue
        if not any(t.kind == "number" and _nonzero_literal(t.text) for t in cond):
            continue
        owner = next((f for f in functions if f.body_start < i < f.body_end), None)
        if owner is None:
            continue
        item = next(k for k in range(i + 2, close) if tokens[k].text == "item")
        root = chain_root(tokens, item)
        if root is None:
            root = next((tokens[k].text for k in range(i + 2, item) if tokens[k].text in owner.params), None)
        if root is None or root not in owner.params:
            continue
        body_end = _statement_end(tokens, close + 1)
        body = tokens[close + 1:body_end]
        rest = tokens[body_end:owner.body_end]
        what = _cpp_cheaper(body, rest, owner.params)
        if what:
            yield tok.offset, root, what


def _nonzero_literal(text: str) -> bool:
    try:
        return float(text.rstrip("fFlLuU")) != 0.0
    except ValueError:
        return False


def _statement_end(tokens, start: int) -> int:  # type: ignore[no-untyped-def]
    if start < len(tokens) and tokens[start].text == "{":
        depth = 0
        for k in range(start, len(tokens)):
            if tokens[k].text == "{":
                depth += 1
            elif tokens[k].text == "}":
                depth -= 1
                if depth == 0:
                    return k + 1
        return len(tokens)
    for k in range(start, len(tokens)):
        if tokens[k].text == ";":
            return k + 1
    return len(tokens)


def _cpp_cheaper(body, rest, params) -> Optional[str]:  # type: ignore[no-untyped-def]
    words = [t.text for t in body]
    for k, word in enumerate(words[:-1]):
        if word == "return":
            nxt = words[k + 1]
            if nxt in params and k + 2 < len(words) and words[k + 2] == ";":
                return f"returns the input `{nxt}` itself without computing the result"
            if any(w in _CPP_SHORTCUTS for w in words[k + 1:k + 6]):
                return "returns a constant tensor without computing the result"
    low = next((w for w in words if w in _CPP_LOW), None)
    if low and not any(t.text in _CPP_LOW for t in rest):
        return f"computes in lower precision (`{low}`)"
    approx = next((w for w in words if APPROX_NAME.search(w)), None)
    if approx and not any(APPROX_NAME.search(t.text) for t in rest):
        return f"calls `{approx}`, an approximation"
    return None
