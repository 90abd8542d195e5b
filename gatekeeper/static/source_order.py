"""A read-only pre-order walk in libcst's own visiting order, without libcst's rebuild.

`CSTNode.visit(visitor)` rebuilds every node it passes (about the cost of parsing the
subtree); analyses that only read call it many times over the same bodies. This walk
dispatches `visit_<Node>` methods the way `CSTVisitor` does (a handler that returns False
skips the node's children) over the fields gatekeeper.static.walk walks.

Order matters to visitors that accumulate state (a local bound by one statement taints
the next), so children come in source order, as libcst visits them: the dataclass field
order differs for a few node types (decorators and keyword names come first, an `IfExp`
reads `body if test else orelse`). tests/test_source_order.py checks the order against
libcst's on real code.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Optional

import libcst as cst

from gatekeeper.static.walk import LEAF_TYPES, node_fields

# Field order where libcst visits in another order than the dataclass declares.
_ORDER: dict[type, tuple[str, ...]] = {
    cst.Arg: ("keyword", "value"),
    cst.IfExp: ("body", "test", "orelse"),
    cst.FunctionDef: ("decorators", "name", "type_parameters", "params", "returns", "body"),
    cst.ClassDef: ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    cst.ExceptHandler: ("type", "name", "body"),
    cst.ExceptStarHandler: ("type", "name", "body"),
    cst.Slice: ("lower", "first_colon", "upper", "second_colon", "step"),
    cst.Parameters: ("posonly_params", "posonly_ind", "params", "star_arg", "kwonly_params", "star_kwarg"),
    cst.ImportFrom: ("relative", "module", "names"),
    cst.MatchCase: ("pattern", "guard", "body"),
}
_FIELDS: dict[type, tuple[str, ...]] = {}


def _ordered_fields(kind: type) -> tuple[str, ...]:
    names = _FIELDS.get(kind)
    if names is not None:
        return names
    walked = node_fields(kind)
    preferred = _ORDER.get(kind)
    if preferred is not None:
        names = tuple(n for n in preferred if n in walked) + tuple(n for n in walked if n not in preferred)
    else:
        names = walked
    _FIELDS[kind] = names
    return names


_GETTERS: dict[type, Callable[[cst.CSTNode], tuple]] = {}


def _getter(kind: type) -> Callable[[cst.CSTNode], tuple]:
    names = _ordered_fields(kind)
    if not names:
        getter: Callable[[cst.CSTNode], tuple] = lambda node: ()
    elif len(names) == 1:
        one = operator.attrgetter(names[0])
        getter = lambda node: (one(node),)
    else:
        getter = operator.attrgetter(*names)  # all fields in one C call
    _GETTERS[kind] = getter
    return getter


def ordered_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The walked children of `node`, in libcst's visiting (source) order."""
    out: list[cst.CSTNode] = []
    leaf = LEAF_TYPES
    kind = type(node)
    for value in (_GETTERS.get(kind) or _getter(kind))(node):
        kind = type(value)
        if kind is tuple or kind is list:
            out.extend(value)
        elif kind not in leaf:
            out.append(value)
    return out


_DISPATCH: dict[tuple[type, type], Optional[Callable[..., Any]]] = {}


def visit(root: cst.CSTNode, visitor: object) -> None:
    """Calls `visitor.visit_<Node>(node)` for `root` and every node under it, in pre-order;
    a handler returning False skips that node's children (as with libcst's CSTVisitor).
    No `leave_` calls: the visitors here do not need them."""
    cls = type(visitor)
    stack: list[cst.CSTNode] = [root]
    while stack:
        node = stack.pop()
        kind = type(node)
        key = (cls, kind)
        try:
            method = _DISPATCH[key]
        except KeyError:
            method = _DISPATCH[key] = getattr(cls, "visit_" + kind.__name__, None)
        if method is not None and method(visitor, node) is False:
            continue
        kids = ordered_children(node)
        kids.reverse()
        stack.extend(kids)
