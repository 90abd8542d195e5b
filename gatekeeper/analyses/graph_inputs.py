"""What a CUDA graph's forward copies in, for GK111: which locals are computed from the contents
of the inputs (not their shapes or keys), which writes copy values into a buffer, and which
helpers of the file copy (or key on the address of) what they are handed. Not a rule file."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.walk import subtree

# Tensor metadata: a value computed from these is not computed from the tensor's contents.
_META_ATTRS = frozenset({"shape", "dtype", "device", "is_cuda", "ndim", "layout", "requires_grad", "is_sparse"})
_META_METHODS = frozenset({"size", "stride", "dim", "numel", "nelement", "data_ptr", "element_size",
                           "is_contiguous", "storage_offset", "get_device"})


def is_slice_write(target: cst.BaseExpression) -> bool:
    """`buf[...] = v`, `buf[:] = v`, `buf[:, :n] = v`: a write into a tensor's elements. A keyed
    store (`self.graphs[key] = (g, sx, out)`) is a table entry, not a copy."""
    if type(target) is not cst.Subscript:
        return False
    for element in target.slice:
        inner = element.slice
        if type(inner) is cst.Slice:
            if _empty(inner):
                return False  # `sx[:0] = x[:0]` writes nothing
            continue
        if type(inner) is cst.Index and type(inner.value) is cst.Ellipsis:
            continue
        return False
    return True


def empty_subscript(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Subscript and any(type(e.slice) is cst.Slice and _empty(e.slice) for e in expr.slice)


def _empty(piece: cst.Slice) -> bool:
    lower, upper = piece.lower, piece.upper
    if type(upper) is not cst.Integer:
        return False
    return upper.evaluated_value == 0 or (type(lower) is cst.Integer and lower.evaluated_value >= upper.evaluated_value)


def _targets(expr: cst.BaseExpression) -> frozenset[str]:
    """The local names a binding target binds (`a`, `a, (b, *c)`); an attribute or item is no local."""
    if type(expr) is cst.Name:
        return frozenset({expr.value})
    if type(expr) in (cst.Tuple, cst.List):
        out: set[str] = set()
        for element in expr.elements:  # type: ignore[attr-defined]
            out |= _targets(element.value)
        return frozenset(out)
    return frozenset()


def content_roots(expr: cst.CSTNode) -> frozenset[str]:
    """The names whose contents an expression's value is computed from: `x.contiguous()` and
    `zip(ins, (x, y))` read x, while `(x.shape, x.dtype)`, a subscript's key (`cache[key]`) and a
    lambda read no tensor's contents."""
    kind = type(expr)
    if kind is cst.Name:
        return frozenset({expr.value})  # type: ignore[attr-defined]
    if kind is cst.Attribute:
        return frozenset() if expr.attr.value in _META_ATTRS else content_roots(expr.value)  # type: ignore[attr-defined]
    if kind is cst.Subscript:
        return content_roots(expr.value)  # type: ignore[attr-defined]
    if kind is cst.Call:
        func = expr.func  # type: ignore[attr-defined]
        out = frozenset().union(*(content_roots(a.value) for a in expr.args))  # type: ignore[attr-defined]
        if type(func) is cst.Attribute:
            if func.attr.value in _META_METHODS:
                return frozenset()
            return out | content_roots(func.value)
        return out
    if kind in (cst.Lambda, cst.SimpleString, cst.Integer, cst.Float, cst.FormattedString, cst.Comparison):
        return frozenset()
    if kind in (cst.GeneratorExp, cst.ListComp, cst.SetComp):
        return content_roots(expr.elt)  # type: ignore[attr-defined]  # its targets are bound by visit_CompFor
    return frozenset(n.value for n in subtree(expr, into_functions=False) if type(n) is cst.Name)


def helper_summary(frame: dict) -> tuple[list[str], Optional[str], set[str]]:
    """(positional parameters, the *args name, the parameters whose contents the function copies
    into a buffer or whose address it takes)."""
    used: set[str] = set()
    for param in frame["params"]:
        derived = fresh_inputs(frame, {param})
        if any(not content_roots(expr).isdisjoint(derived) for expr in (*frame["sources"], *frame["ptrs"])):
            used.add(param)
    return frame["positional"], frame["star"], used


def hands_inputs_to_helper(call: cst.Call, helper: Optional[tuple[list[str], Optional[str], set[str]]],
                            inputs: set[str]) -> bool:
    """Whether `call` hands a value computed from the inputs to a parameter the helper copies
    from or keys on."""
    if helper is None:
        return False
    positional, star, used = helper
    index = 0
    for arg in call.args:
        if arg.keyword is not None:
            name: Optional[str] = arg.keyword.value
        elif arg.star:
            name = star
        else:
            name = positional[index] if index < len(positional) else star
            index += 1
        if name in used and not content_roots(arg.value).isdisjoint(inputs):
            return True
    return False


def fresh_inputs(frame: dict, params: Optional[set[str]] = None) -> set[str]:
    """The parameters and the locals computed from their contents through any binding (`x_in =
    x.contiguous()`, `for dst, src in zip(ins, (x, y))`, `(a.data_ptr() for a in args)`)."""
    inputs = set(frame["params"] if params is None else params)
    bindings = [(_targets(target), content_roots(value)) for target, value in frame["assigns"]]
    changed = True
    while changed:  # to a fixed point: a local may be bound from one bound later in a loop
        changed = False
        for targets, roots in bindings:
            if not targets <= inputs and not roots.isdisjoint(inputs):
                inputs |= targets
                changed = True
    return inputs
