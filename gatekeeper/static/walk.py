"""A fast read-only walk over a libcst tree.

`CSTNode.visit` rebuilds every node it passes (it is built for transformers), which costs
about as much as parsing. Rules only read, so the engine walks the dataclass fields itself,
skipping whitespace and punctuation fields that no rule inspects. Iterative, so a
pathologically nested file cannot exhaust the Python stack.
"""

from __future__ import annotations

import dataclasses
import operator
from enum import Enum
from typing import Callable, Iterator

import libcst as cst

# Fields that only hold formatting, never code a rule looks at.
_SKIP_FIELDS = frozenset({
    "leading_lines", "lines_after_decorators", "header", "footer", "lpar", "rpar", "comma",
    "semicolon", "colon", "dot", "whitespace", "trailing_whitespace", "newline", "indent",
    "equal", "star", "default_indent", "default_newline", "encoding", "has_trailing_newline",
    "first_line", "empty_lines", "lbracket", "rbracket", "lbrace", "rbrace", "arrow", "asynchronous",
})
_LEAVES = (str, int, bool, float, type(None), Enum)
LEAF_TYPES = frozenset({str, int, bool, float, type(None), cst.MaybeSentinel})
# Node classes that are formatting or operator tokens: no rule visits them (a rule reads
# `node.operator` directly), so they are not walked.
_TOKEN_CLASSES: tuple[type, ...] = (
    cst.BaseParenthesizableWhitespace, cst.TrailingWhitespace, cst.Newline, cst.EmptyLine,
    cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual, cst.LeftParen, cst.RightParen,
    cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace,
    cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp, cst.BaseAugOp,
    cst.ImportStar, cst.Asynchronous,
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def _is_token_field(declared: object) -> bool:
    if declared in (str, bool):
        return True
    return isinstance(declared, type) and issubclass(declared, _TOKEN_CLASSES)


def node_fields(kind: type) -> tuple[str, ...]:
    names = _FIELDS.get(kind)
    if names is None:
        names = tuple(
            f.name for f in dataclasses.fields(kind)
            if f.name not in _SKIP_FIELDS and not f.name.startswith("whitespace") and not _is_token_field(f.type)
        )
        _FIELDS[kind] = names
    return names


FIELD_GETTERS: dict[type, Callable[[cst.CSTNode], tuple]] = {}


def field_getter(kind: type) -> Callable[[cst.CSTNode], tuple]:
    """The walked fields of a node type as one tuple, read in C (an attrgetter): the
    per-field getattr loop was the largest part of the engine's own traversal cost."""
    names = node_fields(kind)
    if not names:
        getter: Callable[[cst.CSTNode], tuple] = lambda node: ()
    elif len(names) == 1:
        one = operator.attrgetter(names[0])
        getter = lambda node: (one(node),)
    else:
        getter = operator.attrgetter(*names)
    FIELD_GETTERS[kind] = getter
    return getter


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    leaf = LEAF_TYPES
    kind = type(node)
    getter = FIELD_GETTERS.get(kind) or field_getter(kind)
    for value in getter(node):
        kind = type(value)
        if kind is tuple or kind is list:
            out.extend(value)  # libcst sequences hold nodes only
        elif kind not in leaf:
            out.append(value)
    return out


def walk(root: cst.CSTNode) -> Iterator[tuple[bool, cst.CSTNode]]:
    """Yields (True, node) on entering a node and (False, node) on leaving it."""
    stack: list[tuple[bool, cst.CSTNode]] = [(True, root)]
    getters, leaf = FIELD_GETTERS, LEAF_TYPES
    while stack:
        entering, node = stack.pop()
        yield entering, node
        if entering:
            stack.append((False, node))
            # children(node), inlined: the analyses walk subtrees hundreds of thousands of times a batch
            kids: list[cst.CSTNode] = []
            for value in (getters.get(type(node)) or field_getter(type(node)))(node):
                kind = type(value)
                if kind is tuple or kind is list:
                    kids.extend(value)
                elif kind not in leaf:
                    kids.append(value)
            for child in reversed(kids):
                stack.append((True, child))


_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def subtree(root: cst.CSTNode, *, into_functions: bool = True) -> Iterator[cst.CSTNode]:
    """Every node under root (root included), depth first. Use this in rules instead of
    libcst's `node.children`, which rebuilds nodes and is ~10x slower."""
    stack = [root]
    getters, leaf = FIELD_GETTERS, LEAF_TYPES
    while stack:
        node = stack.pop()
        yield node
        kind = type(node)
        if not into_functions and node is not root and kind in _SCOPES:
            continue
        # children(node), inlined (see walk); the same nodes pushed in the same order
        kids: list[cst.CSTNode] = []
        for value in (getters.get(kind) or field_getter(kind))(node):
            value_kind = type(value)
            if value_kind is tuple or value_kind is list:
                kids.extend(value)
            elif value_kind not in leaf:
                kids.append(value)
        stack.extend(kids)
