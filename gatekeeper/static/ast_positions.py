"""Ranges of calls and a few other expressions from CPython's `ast`, without generating code.

Most findings point at a call (`torch.matmul(...)`, `load_inline(...)`), an operation, a
subscript, an attribute or the string literal holding C++ source. Each libcst node of those kinds is exactly one ast node and
both trees cover the same source, so the nodes of one kind in one statement, libcst's in
source pre-order and CPython's sorted by where they start (outer first on a tie), pair one
to one; CPython's positions then give the range libcst's PositionProvider would
(parentheses excluded on both sides). On ../shared/corpus the two agree on every node
of those kinds (98,029 calls, 170,158 attributes, 33,508 operations, 8,655 subscripts,
1,230 augmented assignments, 18,350 string literals). A statement with an f-string
(whose inner positions older Pythons get wrong), with adjacent string literals, or with
counts that differ returns None: the caller then generates the code.
"""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst
from libcst._position import CodePosition, CodeRange

from gatekeeper.static.source_order import ordered_children


# libcst node types that are exactly one ast node each, covering the same source.
# A string literal is one ast Constant unless adjacent literals join (then declined).
PAIRED: dict[type, type] = {cst.Call: ast.Call, cst.BinaryOperation: ast.BinOp, cst.AugAssign: ast.AugAssign,
                            cst.Subscript: ast.Subscript, cst.Attribute: ast.Attribute,
                            cst.SimpleString: ast.Constant}
_DECLINE = (cst.FormattedString, cst.ConcatenatedString)


def _libcst_nodes(stmt: cst.CSTNode, kind: type) -> Optional[list[cst.CSTNode]]:
    out: list[cst.CSTNode] = []
    stack = [stmt]
    while stack:
        node = stack.pop()
        if type(node) in _DECLINE:
            return None
        if type(node) is kind:
            out.append(node)
        kids = ordered_children(node)
        kids.reverse()
        stack.extend(kids)
    return out


def _column(lines: list[str], line: int, byte_offset: int) -> int:
    """CPython counts columns in UTF-8 bytes; libcst in characters."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    if text.isascii():
        return byte_offset
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace"))


def node_ranges(stmt: cst.CSTNode, ast_stmt: ast.stmt, kind: type, lines: list[str]) -> Optional[dict[int, CodeRange]]:
    """Range of every node of `kind` (a key of PAIRED) in `stmt`, by id, or None when the
    pairing is not certain."""
    mine = _libcst_nodes(stmt, kind)
    if mine is None:
        return None
    wanted = PAIRED[kind]
    theirs: list = []
    for node in ast.walk(ast_stmt):
        if isinstance(node, ast.JoinedStr):
            return None
        if type(node) is wanted and (wanted is not ast.Constant or type(node.value) in (str, bytes)):
            theirs.append(node)
    if len(mine) != len(theirs):
        return None
    theirs.sort(key=lambda n: (n.lineno, n.col_offset, -(n.end_lineno or 0), -(n.end_col_offset or 0)))
    out: dict[int, CodeRange] = {}
    for mine_node, node in zip(mine, theirs):
        if node.end_lineno is None or node.end_col_offset is None:
            return None
        out[id(mine_node)] = CodeRange(CodePosition(node.lineno, _column(lines, node.lineno, node.col_offset)),
                                  CodePosition(node.end_lineno, _column(lines, node.end_lineno, node.end_col_offset)))
    return out


def ranges_from_ast(stmt: cst.CSTNode, ast_stmt: ast.stmt, members: list[cst.CSTNode],
                    lines: list[str]) -> Optional[dict[int, CodeRange]]:
    """Ranges of `members` (nodes of `stmt`) by id, when every one of them can be paired."""
    if not all(type(n) in PAIRED for n in members):
        return None
    found: dict[int, CodeRange] = {}
    for kind in {type(n) for n in members}:
        ranges = node_ranges(stmt, ast_stmt, kind, lines)
        if ranges is None:
            return None
        found.update(ranges)
    if not all(id(n) in found for n in members):
        return None
    return {id(n): found[id(n)] for n in members}
