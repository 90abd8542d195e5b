"""Caches of input-derived values keyed by identity alone, for GK108. Not a rule file.

An *identity read* of an input: `id(x)`, `hash(x)`, `x.data_ptr()`, `x.untyped_storage()`,
`x.storage()`, `x._cdata`, or `x is <stored>` / `x is not <stored>`. It names the object
or the memory, not the values in it: an in-place update (`x.mul_(2)`, `x.copy_(y)`,
the harness's fresh values written into the same buffer) keeps every identity and changes
every value. `x._version` is what changes with them.

A value *computed from an input's values*: an expression that uses an input (or a local
computed from one) other than through metadata (`x.shape`, `x.dtype`, `x.data_ptr()`) or
an allocation shaped like it (`torch.empty_like(x)`), and is not a view chain of it
(`x.t()`, `x.view(...)`, `x[0]`: those read the live storage when used). `.contiguous()`
after a transpose or permute copies, so it counts.
"""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from gatekeeper.static.walk import children as node_children

from gatekeeper.static.context import FileContext

IDENTITY_METHODS = frozenset({"data_ptr", "untyped_storage", "storage", "_cdata"})
IDENTITY_BUILTINS = frozenset({"builtins.id", "builtins.hash"})
METADATA = frozenset({"shape", "dtype", "device", "data_ptr", "stride", "size", "numel", "dim", "ndim",
                      "is_contiguous", "element_size", "storage_offset", "layout", "requires_grad", "is_cuda",
                      "nbytes", "itemsize", "untyped_storage", "storage", "_cdata", "_version", "get_device",
                      "is_floating_point", "nelement"})
ALLOCATORS = frozenset({"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
                        "new_empty", "new_zeros", "new_ones", "new_full", "empty", "zeros", "ones", "full"})
VIEWS = frozenset({"view", "reshape", "t", "transpose", "permute", "contiguous", "expand", "expand_as",
                   "squeeze", "unsqueeze", "flatten", "detach", "narrow", "as_strided", "view_as", "unflatten",
                   "movedim", "swapaxes", "select", "unbind", "chunk", "split"})
_TRANSPOSES = frozenset({"t", "transpose", "permute", "movedim", "swapaxes", "mT", "T"})
GRAPH_CALLS = frozenset({"torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.make_graphed_callables",
                         "torch.cuda.graphs.CUDAGraph", "torch.cuda.graphs.graph"})


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if type(current) not in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            stack.extend(node_children(current))


def identity_read(ctx: FileContext, expr: cst.CSTNode, inputs: set[str]) -> Optional[str]:
    """How `expr` reads an input's identity (`x.data_ptr()`, `id(x)`, `x is ...`), or None."""
    for node in children(expr):
        if type(node) is cst.Call:
            func = node.func
            if type(func) is cst.Attribute and func.attr.value in IDENTITY_METHODS and _mentions(func.value, inputs):
                return f"`.{func.attr.value}()`"
            if node.args and ctx.qualname(func) in IDENTITY_BUILTINS and _mentions(node.args[0].value, inputs):
                return f"`{func.value}(...)`" if type(func) is cst.Name else "`id(...)`"  # type: ignore[attr-defined]
        elif type(node) is cst.Attribute and node.attr.value == "_cdata" and _mentions(node.value, inputs):
            return "`._cdata`"
        elif type(node) is cst.Comparison:
            left = node.left
            for target in node.comparisons:
                if type(target.operator) in (cst.Is, cst.IsNot):
                    sides = (left, target.comparator)
                    if any(type(s) is cst.Name and s.value in inputs for s in sides) and not any(
                            type(s) is cst.Name and s.value in ("None", "True", "False") for s in sides):
                        return "`is`"
                left = target.comparator
    return None


def mentions_version(expr: cst.CSTNode) -> bool:
    return any(type(n) is cst.Attribute and n.attr.value == "_version" for n in children(expr))


def _mentions(expr: cst.CSTNode, names: set[str]) -> bool:
    return any(type(n) is cst.Name and n.value in names for n in children(expr))


def value_of_input(ctx: FileContext, expr: cst.BaseExpression, views: set[str], computed: set[str]) -> Optional[str]:
    """The input whose values `expr` computes from, or None (metadata, allocation, views, the
    input itself). `views`: inputs and locals that are views of them; `computed`: locals
    computed from their values."""
    if type(expr) is cst.Name and expr.value in computed:
        return expr.value
    if view_chain(expr, views):
        return None
    inputs = views | computed
    parents: dict[int, cst.CSTNode] = {}
    for node in children(expr):
        for child in node_children(node):
            parents[id(child)] = node
    for node in children(expr):
        if type(node) is not cst.Name or node.value not in inputs:
            continue
        parent = parents.get(id(node))
        if type(parent) is cst.Attribute and parent.value is node and parent.attr.value in METADATA:
            continue  # x.shape, x.data_ptr()
        if type(parent) is cst.Arg:
            call = parents.get(id(parent))
            name = _callee(ctx, call.func) if type(call) is cst.Call else None
            if name in ALLOCATORS or name in ("len", "tuple", "id", "hash", "type", "isinstance"):
                continue  # torch.empty_like(x), len(x)
        if type(parent) is cst.Attribute and parent.value is node and parent.attr.value in ALLOCATORS:
            continue  # x.new_empty(...)
        return node.value
    return None


def _callee(ctx: FileContext, func: cst.BaseExpression) -> Optional[str]:
    qual = ctx.qualname(func)
    if qual:
        return qual.rsplit(".", 1)[-1]
    return func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None


def view_chain(expr: cst.BaseExpression, inputs: set[str]) -> bool:
    """`x`, `x.t()`, `x[0]`, `x.view(n, -1)`: the live storage of an input, no copy
    (`.contiguous()` right after a transpose copies)."""
    current = expr
    for _ in range(12):
        if type(current) is cst.Name:
            return current.value in inputs
        if type(current) is cst.Subscript:
            current = current.value
        elif type(current) is cst.Attribute and current.attr.value in ("T", "mT"):
            current = current.value
        elif type(current) is cst.Call and type(current.func) is cst.Attribute and current.func.attr.value in VIEWS:
            inner = current.func.value
            if current.func.attr.value == "contiguous" and _starts_with_transpose(inner):
                return False
            current = inner
        else:
            return False
    return False


def _starts_with_transpose(expr: cst.BaseExpression) -> bool:
    if type(expr) is cst.Attribute:
        return expr.attr.value in _TRANSPOSES
    return type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in _TRANSPOSES


def has_graph(ctx: FileContext, nodes: list[cst.CSTNode]) -> bool:
    """A CUDA graph captured or replayed here: its replays read the live inputs."""
    for top in nodes:
        for node in children(top):
            if type(node) in (cst.Call, cst.Attribute) and ctx.qualname(node.func if type(node) is cst.Call else node) in GRAPH_CALLS:
                return True
            if type(node) is cst.Attribute and node.attr.value in ("replay", "capture_begin"):
                return True
    return False
