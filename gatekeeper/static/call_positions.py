"""Ranges of call expressions from CPython's `ast`, without generating code.

Most findings point at a call (`torch.matmul(...)`, `load_inline(...)`). Each libcst Call
is exactly one ast Call, and both trees cover the same source, so the calls of one
statement, libcst's in source pre-order and CPython's sorted by where they start (outer
first on a tie), pair one to one; CPython's positions then give the range that libcst's
PositionProvider would (parentheses excluded on both sides). On all 98,029 calls in
../shared/corpus the two agree. A statement with an f-string (whose inner positions
older Pythons get wrong) or with counts that differ returns None: the caller then
generates the code as before.
"""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst
from libcst._position import CodePosition, CodeRange

from gatekeeper.static.source_order import ordered_children


def _libcst_calls(stmt: cst.CSTNode) -> Optional[list[cst.Call]]:
    out: list[cst.Call] = []
    stack = [stmt]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.FormattedString:
            return None
        if kind is cst.Call:
            out.append(node)  # type: ignore[arg-type]
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


def call_ranges(stmt: cst.CSTNode, ast_stmt: ast.stmt, lines: list[str]) -> Optional[dict[int, CodeRange]]:
    """Range of every call in `stmt` by id, or None when the pairing is not certain."""
    mine = _libcst_calls(stmt)
    if mine is None:
        return None
    theirs: list[ast.Call] = []
    for node in ast.walk(ast_stmt):
        if isinstance(node, ast.JoinedStr):
            return None
        if isinstance(node, ast.Call):
            theirs.append(node)
    if len(mine) != len(theirs):
        return None
    theirs.sort(key=lambda n: (n.lineno, n.col_offset, -(n.end_lineno or 0), -(n.end_col_offset or 0)))
    out: dict[int, CodeRange] = {}
    for call, node in zip(mine, theirs):
        if node.end_lineno is None or node.end_col_offset is None:
            return None
        out[id(call)] = CodeRange(CodePosition(node.lineno, _column(lines, node.lineno, node.col_offset)),
                                  CodePosition(node.end_lineno, _column(lines, node.end_lineno, node.end_col_offset)))
    return out
