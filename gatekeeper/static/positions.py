"""Positions for just the nodes that are reported.

libcst's PositionProvider records a range for every node of the module (about 4x the cost
of parsing). Here code generation runs once per file that has findings, and stops as soon
as the last wanted node has been generated.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator

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


def positions_for(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[int, CodeRange]:
    """Ranges keyed by id(node), for the given nodes (which must belong to module)."""
    wanted = {id(n): n for n in nodes}
    if not wanted:
        return {}
    holder = _Holder(set(wanted))
    state = _TargetedState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        provider=holder,  # type: ignore[arg-type]
    )
    try:
        module._codegen(state)
    except _Done:
        pass
    return {key: holder._computed[node] for key, node in wanted.items() if node in holder._computed}
