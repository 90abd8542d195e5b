"""Where the file's own functions are called from, and whether a call is conditional.

Not a rule file. A helper's body runs only where it is called: `if not fits: return
self._reference(x)` before a kernel launch makes `_reference` a fallback, whatever its body
computes (torch_fallback_paths propagates fallbacks through such helpers; GK403 holds a
reference copy reached only that way for the run-time check).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.context import FileContext
from gatekeeper.static.walk import subtree


def _callee(func: cst.BaseExpression, owner: Optional[str]) -> Optional[str]:
    """The function key a call names, as the traversal keys definitions: `helper(...)` is
    `helper`, `self.helper(...)` inside class C is `C.helper`."""
    if type(func) is cst.Name:
        return func.value
    if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self" and owner:
        return f"{owner}.{func.attr.value}"
    return None


def call_sites(ctx: FileContext, keys: set[str]) -> dict[str, list[tuple[cst.Call, str]]]:
    """For each function key in `keys`: (call, key of the function holding it) of every call
    that names it directly. A function also reached another way (stored, passed on, looked up
    by name) has sites this does not list; callers decide what that means."""
    out: dict[str, list[tuple[cst.Call, str]]] = {}
    names = {key.rsplit(".", 1)[-1] for key in keys}
    for node in subtree(ctx.module):
        if type(node) is not cst.Call:
            continue
        func = node.func
        last = func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else None
        if last not in names:
            continue  # most calls: no need to find what encloses them
        owner, holder = _enclosing(ctx, node)
        key = _callee(node.func, owner)
        if key in keys:
            out.setdefault(key, []).append((node, holder))
    return out


def _enclosing(ctx: FileContext, node: cst.CSTNode) -> tuple[Optional[str], str]:
    """(class name, function key) around `node`: the key as the traversal builds it."""
    function: Optional[cst.FunctionDef] = None
    for parent in ctx.ancestors(node):
        if type(parent) is cst.FunctionDef and function is None:
            function = parent
        elif type(parent) is cst.ClassDef:
            name = parent.name.value
            if function is None:
                return name, "<module>"
            block = ctx.parent(function)
            direct = type(block) is cst.IndentedBlock and ctx.parent(block) is parent
            return name, f"{name}.{function.name.value}" if direct else function.name.value
    return None, function.name.value if function is not None else "<module>"


def conditional(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Whether `node` runs only on some calls of its function: it sits in a branch of an
    `if`/`else`, a conditional expression, or a `try` handler (not in their tests), or after
    an early `return` inside an `if` or `try` of the same block."""
    child = node
    for parent in ctx.ancestors(node):
        if type(parent) in (cst.FunctionDef, cst.Module, cst.Lambda):
            return False
        if type(parent) in (cst.If, cst.IfExp) and child is not parent.test:
            return True
        if type(parent) is cst.ExceptHandler:
            return True
        if _after_early_return(parent, child):
            return True
        child = parent
    return False


def _after_early_return(block: cst.CSTNode, child: cst.CSTNode) -> bool:
    """Whether an `if` or `try` before `child` in `block` returns in its body."""
    body = getattr(block, "body", None)
    if not isinstance(body, (list, tuple)):
        return False
    for stmt in body:
        if stmt is child:
            return False
        if type(stmt) in (cst.If, cst.Try) and _returns(stmt.body):
            return True
    return False


def _returns(suite: cst.BaseSuite) -> bool:
    if type(suite) is cst.IndentedBlock:
        return any(type(s) is cst.SimpleStatementLine and any(type(x) is cst.Return for x in s.body)
                   for s in suite.body)
    if type(suite) is cst.SimpleStatementSuite:
        return any(type(x) is cst.Return for x in suite.body)
    return False


def name_references(module: cst.Module, names: set[str]) -> dict[str, int]:
    """How often the code spells each of `names` (its `def` included; strings and comments not;
    `.attr` is a Name too), in one walk: a function referenced only by its calls is reached
    only there."""
    counts = dict.fromkeys(names, 0)
    for node in subtree(module):
        if type(node) is cst.Name and node.value in counts:
            counts[node.value] += 1
    return counts
