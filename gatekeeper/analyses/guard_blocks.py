"""Conditions in forward-path code that cannot make a call behave differently when timed.
Not a rule file; GK110 asks it about each condition that reads a harness signal.

- a once-block: `if _EXT is None: ... _EXT = load_inline(...)` (or `if not self.built:
  ... self.built = True`) runs on the first call only; what it reads there (the
  environment, to pick the target arch) is decided once, like a read in `__init__`;
- a harmless guard: `if not self.compiled and not torch.cuda.is_current_stream_capturing():
  _launch(x, y); torch.cuda.synchronize(); self.compiled = True`, an `if` without `else`
  whose body only synchronises, sets constant flags or build settings, and runs launches
  that the same block repeats unconditionally after it: whichever way it goes, the call
  computes the same thing.
A body that returns, assigns a computed value, or calls anything else keeps the condition
a signal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gatekeeper.static.names import dotted
from gatekeeper.static.walk import subtree

if TYPE_CHECKING:
    from gatekeeper.static.context import FileContext

_SYNC = frozenset({"synchronize", "wait", "record", "wait_stream", "wait_event", "empty_cache"})
_CONSTANTS = (cst.Integer, cst.Float, cst.SimpleString)


def _slot(expr: cst.BaseExpression) -> Optional[str]:
    """The slot a once-test reads: `_EXT is None`, `not self.built`, `X is None or ...`."""
    if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Not:
        return _slot(expr.expression)
    if type(expr) is cst.Comparison and len(expr.comparisons) == 1 \
            and type(expr.comparisons[0].operator) in (cst.Is, cst.Equal) \
            and type(expr.comparisons[0].comparator) is cst.Name and expr.comparisons[0].comparator.value == "None":
        return _slot(expr.left)
    if type(expr) is cst.BooleanOperation:
        return _slot(expr.left) or _slot(expr.right)
    name = dotted(expr)
    return name if name and (name.count(".") == 0 or name.startswith(("self.", "cls."))) else None


def _assigns(body: cst.CSTNode, slot: str) -> bool:
    for node in subtree(body, into_functions=False):
        if type(node) in (cst.Assign, cst.AnnAssign, cst.AugAssign):
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
            if any(dotted(t) == slot for t in targets):
                return True
    return False


def once_block(ctx: "FileContext", node: cst.CSTNode) -> bool:
    """`node` sits in the body of an `if` that runs at most once: its test reads a slot
    (a module global, `self.X`) as unset, and the body sets that slot."""
    child = node
    for parent in ctx.ancestors(node):
        if type(parent) is cst.FunctionDef:
            return False
        if type(parent) is cst.If and child is parent.body:
            slot = _slot(parent.test)
            if slot is not None and _assigns(parent.body, slot):
                return True
        child = parent
    return False


def _callee(stmt: cst.BaseSmallStatement) -> Optional[str]:
    if type(stmt) is cst.Expr and type(stmt.value) is cst.Call:
        func = stmt.value.func
        if type(func) is cst.Subscript:
            func = func.value
        return dotted(func)
    return None


def harmless_guard(ctx: "FileContext", stmt: cst.CSTNode) -> bool:
    """An `if` without else whose body cannot change what the call computes."""
    if type(stmt) is not cst.If or stmt.orelse is not None:
        return False
    later = _calls_after(ctx, stmt)
    for line in getattr(stmt.body, "body", ()):
        if type(line) is not cst.SimpleStatementLine:
            return False
        for small in line.body:
            if type(small) is cst.Pass:
                continue
            callee = _callee(small)
            if callee is not None:
                if callee.rsplit(".", 1)[-1] in _SYNC or callee in later:
                    continue
                return False
            if type(small) is cst.Assign and type(small.value) in (*_CONSTANTS, cst.Name) and all(
                    dotted(t.target) is not None for t in small.targets):
                if type(small.value) is cst.Name and small.value.value not in ("True", "False", "None"):
                    return False
                if any(_read_elsewhere(ctx, dotted(t.target), stmt) for t in small.targets):
                    return False  # a flag another branch reads would carry the signal on
                continue  # self.compiled = True: the guard's own latch
            return False
    return True


def _calls_after(ctx: "FileContext", stmt: cst.CSTNode) -> set[str]:
    """Callees of plain call statements that follow `stmt` in its block."""
    block = ctx.parent(stmt)
    body = getattr(block, "body", None)
    if not isinstance(body, (list, tuple)):
        return set()
    out: set[str] = set()
    seen = False
    for item in body:
        if item is stmt:
            seen = True
            continue
        if seen and type(item) is cst.SimpleStatementLine:
            for small in item.body:
                callee = _callee(small)
                if callee is not None:
                    out.add(callee)
    return out


def _read_elsewhere(ctx: "FileContext", slot: Optional[str], guard: cst.If) -> bool:
    """`slot` is read somewhere other than the guard's own test (an assignment target is not a read)."""
    own = {id(n) for n in subtree(guard.test)}
    targets: set[int] = set()
    for node in subtree(ctx.module):
        if type(node) in (cst.Assign, cst.AnnAssign, cst.AugAssign):
            for t in ([t.target for t in node.targets] if type(node) is cst.Assign else [node.target]):
                targets.add(id(t))
        elif type(node) in (cst.Name, cst.Attribute) and id(node) not in own and id(node) not in targets \
                and dotted(node) == slot:
            return True
    return False
