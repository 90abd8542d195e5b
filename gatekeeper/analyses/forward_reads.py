"""Which module-level names the forward path reads. Not a rule file.

A value computed once at import (`_CHECKED = sys.argv[0].endswith("worker.py")`) steers the
timed call when a function on the forward path reads it, directly or through another
module-level name built from it (`_FAST = not _CHECKED`). Decide this in `finish()`, when
the call graph is complete.
"""

from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from gatekeeper.static.context import FileContext


def _names_in(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

    node.visit(_Names())
    return found


_PASS_THROUGH = ("builtins.", "os.path.", "operator.", "re.")


def _passes_on(ctx: FileContext, call: cst.Call, arg: cst.Arg) -> bool:
    """Whether the call's result carries this argument's value on: a builtin or string helper
    (`str(p)`, `os.path.basename(p)`) or a method of a value (`" ".join(sys.argv)`)."""
    if arg.keyword is not None:
        return False
    qual = ctx.qualname(call.func) or ""
    return qual.startswith(_PASS_THROUGH) or (type(call.func) is cst.Attribute and not qual)


def _value_names(ctx: FileContext, node: cst.CSTNode) -> set[str]:
    """Names whose value flows into the value of `node`: not the arguments of a call to a
    function of the file's or a library's (`load_inline(..., verbose=VERBOSE)` builds an
    extension, it does not carry VERBOSE on), except builtins and string helpers
    (`str(p)`, `os.path.basename(p)`), whose result is the argument transformed."""
    found: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

        def visit_Call(self, call: cst.Call) -> bool:
            call.func.visit(self)
            for arg in call.args:
                if _passes_on(ctx, call, arg):
                    arg.value.visit(self)
            return False

    node.visit(_Names())
    return found


def _functions(module: cst.Module) -> Iterable[tuple[str, cst.FunctionDef]]:
    """(key, definition) of module functions and class methods, keyed as ctx.function_key is."""
    for stmt in module.body:
        if type(stmt) is cst.FunctionDef:
            yield stmt.name.value, stmt
        elif type(stmt) is cst.ClassDef:
            for inner in stmt.body.body:
                if type(inner) is cst.FunctionDef:
                    yield f"{stmt.name.value}.{inner.name.value}", inner


def forward_reads(ctx: FileContext) -> set[str]:
    """Names read by a function that runs in the model's call (memoised per file)."""
    cached: Optional[set[str]] = ctx.__dict__.get("_forward_reads")
    if cached is None:
        cached = set()
        for key, fn in _functions(ctx.module):
            if not ctx.is_init_only(key):
                cached |= _names_in(fn.body) | {n for p in fn.params.params if p.default is not None
                                                for n in _names_in(p.default)}
        ctx.__dict__["_forward_reads"] = cached
    return cached


def module_targets(ctx: FileContext, node: cst.CSTNode) -> Optional[set[str]]:
    """The names a module-level assignment containing `node` binds, or None when `node` is
    not in a module-level assignment (inside a function, or a bare expression)."""
    statement: Optional[cst.CSTNode] = None
    child = node
    for parent in ctx.ancestors(node):
        if type(parent) in (cst.FunctionDef, cst.Lambda, cst.ClassDef):
            return None
        if type(parent) is cst.Call and type(child) is cst.Arg and statement is None and not _passes_on(ctx, parent, child):
            return None  # `load_inline(..., verbose="-v" in sys.argv)`: configuration, not the value
        child = parent
        if type(parent) in (cst.Assign, cst.AnnAssign, cst.AugAssign) and statement is None:
            statement = parent
    if statement is None:
        return None
    targets = [t.target for t in statement.targets] if type(statement) is cst.Assign else [statement.target]
    return {n for t in targets for n in _names_in(t)}


def reaches_forward(ctx: FileContext, names: set[str]) -> bool:
    """Whether the forward path reads one of `names` or a module-level name built from them."""
    tainted = set(names)
    for _ in range(8):  # module-level chains are short
        grown = {name for name, values in ctx.constants.items()
                 if name not in tainted and any(_value_names(ctx, v) & tainted for v in values)}
        if not grown:
            break
        tainted |= grown
    return bool(tainted & forward_reads(ctx))
