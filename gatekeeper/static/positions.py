"""Positions for just the nodes that are reported.

libcst's PositionProvider records a range for every node of the module (about 4x the cost
of parsing). Here code generation runs once per file that has findings, and stops as soon
as the last wanted node has been generated.
"""

from __future__ import annotations

import ast
from contextlib import contextmanager
from typing import Iterable, Iterator, Optional, Sequence

import libcst as cst
from libcst._position import CodePosition, CodeRange
from libcst.metadata.position_provider import PositionProvidingCodegenState

from gatekeeper.static.ast_positions import ranges_from_ast
from gatekeeper.static.python_ast import parse_python


class _Done(Exception):
    pass


class _Holder:
    def __init__(self, targets: set[int]) -> None:
        self._computed: dict[cst.CSTNode, CodeRange] = {}
        self.targets = targets
        self.left = len(targets)


class _TargetedState(PositionProvidingCodegenState):
    @contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None) -> Iterator[None]:
        start = CodePosition(self.line, self.column)
        yield  # on _Done, propagate without recording (children may be missing)
        computed = self.provider._computed  # type: ignore[attr-defined]
        end = CodePosition(self.line, self.column)
        if start_node is not None and start_node in computed:
            start = computed[start_node].start
        if end_node is not None and end_node in computed:
            end = computed[end_node].end
        computed[node] = CodeRange(start, end)

    def after_codegen(self, node: cst.CSTNode) -> None:
        super().after_codegen(node)
        holder = self.provider
        if id(node) in holder.targets:  # type: ignore[attr-defined]
            holder.left -= 1  # type: ignore[attr-defined]
            if holder.left <= 0:  # type: ignore[attr-defined]
                raise _Done


def _first_lines(stmts: list[ast.stmt]) -> list[int]:
    return [min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", []))]) for n in stmts]


def pair_statements(cst_body: Sequence[cst.CSTNode], ast_body: list[ast.stmt]) -> Optional[list[tuple[int, Optional[ast.stmt]]]]:
    """(first line, the ast statement) for each libcst statement of a body; None when the
    two parsers disagree on the body's shape. `a = 1; b = 2` is one libcst statement and
    two ast statements; the ast statement is kept only for a one-to-one pair."""
    firsts = _first_lines(ast_body)
    out: list[tuple[int, Optional[ast.stmt]]] = []
    index = 0
    for stmt in cst_body:
        if index >= len(firsts):
            return None
        width = len(stmt.body) if (type(stmt) is cst.SimpleStatementLine) else 1
        out.append((firsts[index], ast_body[index] if width == 1 else None))
        index += width
    return out if index == len(firsts) else None


def _codegen(node: cst.CSTNode, module: cst.Module, holder: _Holder, line: int, indent: str = "") -> None:
    state = _TargetedState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        provider=holder,  # type: ignore[arg-type]
    )
    state.line = line
    if indent:
        # A statement generated on its own: its block's indentation is not on the stack.
        state.indent_tokens.append(indent)
    try:
        node._codegen(state)
    except _Done:
        pass


_BLOCKS = (cst.ClassDef, cst.FunctionDef, cst.If, cst.For, cst.While, cst.With, cst.Try)
# The ast statement whose `body` is the libcst block's `body` (not else/elif/except arms:
# a node there is generated with its whole compound statement).
_AST_BLOCKS = {
    cst.ClassDef: (ast.ClassDef,), cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.If: (ast.If,), cst.For: (ast.For, ast.AsyncFor), cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith), cst.Try: (ast.Try,),
}


def _path_to(node: cst.CSTNode, module: cst.Module, parents: dict) -> list[cst.CSTNode]:
    """The statements from the top level down to `node`, through class and def bodies."""
    chain: list[cst.CSTNode] = []
    current: Optional[cst.CSTNode] = node
    while current is not None and current is not module:
        parent = parents.get(current)
        if isinstance(current, cst.BaseStatement) and (
            parent is module or (type(parent) is cst.IndentedBlock and isinstance(parents.get(parent), _BLOCKS)
                                 and getattr(parents.get(parent), "body", None) is parent)
        ):
            chain.append(current)
        current = parent
    chain.reverse()
    return chain


def positions_for(
    module: cst.Module,
    nodes: Iterable[cst.CSTNode],
    parents: Optional[dict[cst.CSTNode, cst.CSTNode]] = None,
    text: Optional[str] = None,
) -> dict[int, CodeRange]:
    """Ranges keyed by id(node), for the given nodes (which must belong to module).

    With `parents` and `text`, only the innermost statement holding each node (descending
    through class and def bodies) is generated, starting at the line and with the
    indentation CPython's parser gives for it."""
    wanted = {id(n): n for n in nodes}
    if not wanted:
        return {}
    tree = None
    if parents is not None and text is not None:
        try:
            tree = parse_python(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
    top = pair_statements(module.body, tree.body) if tree is not None else None
    if top is None:
        holder = _Holder(set(wanted))
        _codegen(module, module, holder, 1)
        return {k: holder._computed[n] for k, n in wanted.items() if n in holder._computed}
    lines = text.splitlines()  # type: ignore[union-attr]
    groups: dict[int, tuple[cst.CSTNode, int, str, Optional[ast.stmt], list[cst.CSTNode]]] = {}
    paired: dict[int, Optional[list[tuple[int, Optional[ast.stmt]]]]] = {id(module.body): top}  # by id of a libcst body
    for node in wanted.values():
        found = _locate_statement(node, module, tree, parents, lines, paired)  # type: ignore[arg-type]
        if found is None:
            continue
        stmt, line, indent, ast_stmt = found
        groups.setdefault(id(stmt), (stmt, line, indent, ast_stmt, []))[4].append(node)
    out: dict[int, CodeRange] = {}
    for stmt, line, indent, ast_stmt, members in groups.values():
        fast = ranges_from_ast(stmt, ast_stmt, members, lines) if ast_stmt is not None else None
        if fast is not None:
            out.update(fast)
            continue
        holder = _Holder({id(n) for n in members})
        _codegen(stmt, module, holder, line - len(stmt.leading_lines), indent)  # type: ignore[attr-defined]
        out.update({id(n): holder._computed[n] for n in members if n in holder._computed})
    return out


def _locate_statement(node: cst.CSTNode, module: cst.Module, tree: ast.Module, parents: dict,
                      lines: list[str], paired: dict[int, Optional[list[tuple[int, Optional[ast.stmt]]]]],
                      ) -> Optional[tuple[cst.CSTNode, int, str, Optional[ast.stmt]]]:
    """The innermost statement to generate for `node`, its first line and indentation, and
    CPython's statement for it when the two pair one to one. `paired` keeps each body's
    pairing for the other nodes of the file (a file's findings share their outer bodies)."""
    chain = _path_to(node, module, parents)
    if not chain:
        return None
    cst_body: Sequence[cst.CSTNode] = module.body
    ast_body: list[ast.stmt] = tree.body
    best: Optional[tuple[cst.CSTNode, int, str, Optional[ast.stmt]]] = None
    for stmt in chain:
        key = id(cst_body)
        if key in paired:
            pairs = paired[key]
        else:
            pairs = paired[key] = pair_statements(cst_body, ast_body)
        if pairs is None:
            return best
        try:
            line, ast_stmt = pairs[next(i for i, s in enumerate(cst_body) if s is stmt)]
        except StopIteration:
            return best
        if ast_stmt is None and stmt is not chain[-1]:
            return best
        source = lines[line - 1] if 0 < line <= len(lines) else ""
        indent = source[: len(source) - len(source.lstrip(" \t"))] if best is not None else ""
        best = (stmt, line, indent, ast_stmt)
        if not isinstance(ast_stmt, _AST_BLOCKS.get(type(stmt), ())):
            return best
        body = stmt.body
        if type(body) is not cst.IndentedBlock:
            return best
        cst_body, ast_body = body.body, ast_stmt.body
    return best
