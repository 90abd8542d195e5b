"""Positions for just the nodes that are reported.

libcst's PositionProvider records a range for every node of the module (about 4x the cost
of parsing). Here code generation runs once per file that has findings, and stops as soon
as the last wanted node has been generated.
"""

from __future__ import annotations

import ast
from contextlib import contextmanager
from typing import Iterable, Iterator, Optional

import libcst as cst
from libcst._position import CodePosition, CodeRange
from libcst.metadata.position_provider import PositionProvidingCodegenState


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


def _top_level_lines(module: cst.Module, text: str) -> Optional[list[int]]:
    """First source line of each libcst top-level statement (decorators included, leading
    comments and blank lines excluded), from CPython's fast `ast` parser."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    firsts = [min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", []))]) for n in tree.body]
    lines: list[int] = []
    index = 0
    for stmt in module.body:
        if index >= len(firsts):
            return None
        lines.append(firsts[index])
        # `a = 1; b = 2` is one libcst statement and two ast statements.
        index += len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
    return lines if index == len(firsts) else None


def _codegen(node: cst.CSTNode, module: cst.Module, holder: _Holder, line: int) -> None:
    state = _TargetedState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        provider=holder,  # type: ignore[arg-type]
    )
    state.line = line
    try:
        node._codegen(state)
    except _Done:
        pass


def positions_for(
    module: cst.Module,
    nodes: Iterable[cst.CSTNode],
    parents: Optional[dict[cst.CSTNode, cst.CSTNode]] = None,
    text: Optional[str] = None,
) -> dict[int, CodeRange]:
    """Ranges keyed by id(node), for the given nodes (which must belong to module).

    With `parents` and `text`, only the top-level statements holding the nodes are
    generated, each starting at the line CPython's parser gives for it."""
    wanted = {id(n): n for n in nodes}
    if not wanted:
        return {}
    tops = _top_level_lines(module, text) if parents is not None and text is not None else None
    if tops is None:
        holder = _Holder(set(wanted))
        _codegen(module, module, holder, 1)
        return {k: holder._computed[n] for k, n in wanted.items() if n in holder._computed}
    index_of = {id(stmt): i for i, stmt in enumerate(module.body)}
    groups: dict[int, list[cst.CSTNode]] = {}
    for node in wanted.values():
        top = node
        while parents.get(top) is not None and parents[top] is not module:  # type: ignore[union-attr]
            top = parents[top]  # type: ignore[index]
        if id(top) in index_of:
            groups.setdefault(index_of[id(top)], []).append(node)
    out: dict[int, CodeRange] = {}
    for index, members in groups.items():
        stmt = module.body[index]
        holder = _Holder({id(n) for n in members})
        _codegen(stmt, module, holder, tops[index] - len(stmt.leading_lines))
        out.update({id(n): holder._computed[n] for n in members if n in holder._computed})
    return out
