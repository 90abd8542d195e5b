"""A value's method taken as a value rather than called where it is written: `x.mm`,
`getattr(x, NAME)`, `object.__getattribute__(x, NAME)`, `type(x).__getattribute__(x, NAME)`,
`x.__getattribute__(NAME)`, `operator.attrgetter(NAME)(x)`, `inspect.getattr_static(x, NAME)`,
with NAME a string the file fixes (a literal, a module or class constant, a sum of them), or a
name bound to one of these. Calling such a value, or handing it to something that calls it
(`map`, `functools.partial`, `sorted(key=)`, a helper), calls the method (red team round 13).
Not a rule file; read by value_calls.py and torch_call_kinds.py."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.context import FileContext
from gatekeeper.static.names import bound_string
from gatekeeper.static.walk import children, subtree

# calls that fetch an attribute of their first argument by the name in their second
_FETCHERS = frozenset({"builtins.getattr", "inspect.getattr_static"})


def constant_name(ctx: FileContext, expr: cst.BaseExpression, depth: int = 0) -> Optional[str]:
    """The string an expression holds when the file fixes it: a literal, a constant of the
    module or the class body (`_SLOT`, `self._SLOT`, `cls._SLOT`), a sum of such strings, or a
    name bound to another such name."""
    if depth > 4:
        return None
    text = bound_string(ctx.resolver, expr)
    if text is not None:
        return text
    kind = type(expr)
    if kind is cst.BinaryOperation and type(expr.operator) is cst.Add:  # "m" + "m"
        left, right = constant_name(ctx, expr.left, depth + 1), constant_name(ctx, expr.right, depth + 1)
        return left + right if left is not None and right is not None else None
    if kind is cst.Name:
        binding = ctx.resolver.lookup(expr.value)
        if binding is not None and binding.kind == "local" and binding.value is not None \
                and type(binding.value) in (cst.Name, cst.BinaryOperation, cst.Attribute):
            return constant_name(ctx, binding.value, depth + 1)
    if kind is cst.Attribute and type(expr.value) is cst.Name:
        owner = expr.value.value
        if owner in ("self", "cls") or any(c.name.value == owner for c in ctx.classes):
            value = _class_body_value(ctx, expr.attr.value)
            return constant_name(ctx, value, depth + 1) if value is not None else None
    return None


def _class_body_value(ctx: FileContext, name: str) -> Optional[cst.BaseExpression]:
    """The expression a name is bound to in the body of the innermost enclosing class."""
    for scope in reversed(ctx.resolver.stack):
        if scope.kind == "class":
            binding = scope.names.get(name)
            return binding.value if binding is not None and binding.kind == "local" else None
    return None


def fetched_attribute(ctx: FileContext, expr: cst.BaseExpression) -> Optional[tuple[str, cst.BaseExpression]]:
    """(name, receiver) when `expr` fetches an attribute of `receiver` by a fixed name."""
    if type(expr) is cst.Subscript:  # type(x).__dict__[N], vars(type(x))[N]: the function itself
        return _namespace_entry(ctx, expr)
    if type(expr) is not cst.Call:
        return None
    func = expr.func
    args = [a.value for a in expr.args if a.keyword is None and not a.star]
    getter = func
    if type(func) is cst.Name:  # get = operator.attrgetter(NAME); get(x)
        binding = ctx.resolver.lookup(func.value)
        getter = binding.value if binding is not None and binding.kind == "local" else None
    if type(getter) is cst.Call:  # operator.attrgetter(NAME)(x)
        if ctx.qualname(getter.func) == "operator.attrgetter" and len(getter.args) == 1 and len(args) == 1:
            name = constant_name(ctx, getter.args[0].value)
            return (name, args[0]) if name else None
        return None
    qual = ctx.qualname(func)
    if type(func) is cst.Attribute and func.attr.value == "__getattribute__":
        if len(args) == 2:  # object.__getattribute__(x, N), type(x).__getattribute__(x, N)
            name = constant_name(ctx, args[1])
            return (name, args[0]) if name else None
        if len(args) == 1 and qual is None:  # x.__getattribute__(N)
            name = constant_name(ctx, args[0])
            return (name, func.value) if name else None
        return None
    if qual in _FETCHERS and len(args) >= 2:
        name = constant_name(ctx, args[1])
        return (name, args[0]) if name else None
    return None


def method_value(ctx: FileContext, expr: cst.BaseExpression, depth: int = 0) -> Optional[tuple[str, cst.BaseExpression]]:
    """(method name, receiver) when `expr` is a method of a value taken as a value: `x.mm`
    (not a module path), a fetch by a fixed name, or a local name bound to one of them."""
    if depth > 4:
        return None
    kind = type(expr)
    if kind is cst.Attribute:
        if ctx.qualname(expr) is not None:
            return None  # `torch.mean`, `np.dot`, `tl.sum`: a module's function, judged by its path
        return expr.attr.value, expr.value
    if kind is cst.Subscript:  # type(x).__dict__[N]; fs[0] with fs = [p.mm]; [p.mm][0]
        return fetched_attribute(ctx, expr) or table_method(ctx, _display(ctx, expr.value))
    if kind is cst.Call:
        func = expr.func
        if type(func) is cst.Attribute and func.attr.value == "get":  # fs.get("f") with fs = {"f": p.mm}
            found = table_method(ctx, _display(ctx, func.value))
            if found is not None:
                return found
        return fetched_attribute(ctx, expr) or _returned_method(ctx, expr, depth)
    if kind is cst.Name:
        binding = ctx.resolver.lookup(expr.value)
        if binding is not None and binding.kind == "local" and binding.value is not None:
            return method_value(ctx, binding.value, depth + 1)
    return None


def _display(ctx: FileContext, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The expression itself, or what a local name holds (a display to look into)."""
    if type(expr) is cst.Name:
        binding = ctx.resolver.lookup(expr.value)
        return binding.value if binding is not None and binding.kind == "local" else None
    return expr


def table_method(ctx: FileContext, value: Optional[cst.BaseExpression]) -> Optional[tuple[str, cst.BaseExpression]]:
    """The first method value held in a dict / list / tuple display (`[p.mm]`, `{"f": p.mm}`)."""
    if type(value) is cst.Dict:
        items = [e.value for e in value.elements if type(e) is cst.DictElement]
    elif type(value) in (cst.List, cst.Tuple):
        items = [e.value for e in value.elements if type(e) is not cst.StarredElement]
    else:
        return None
    for item in items:
        if type(item) in (cst.Attribute, cst.Call, cst.Name):
            found = method_value(ctx, item)
            if found is not None:
                return found
    return None


def _namespace_entry(ctx: FileContext, expr: cst.Subscript) -> Optional[tuple[str, cst.BaseExpression]]:
    if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Index:
        return None
    holder = expr.value
    if type(holder) is cst.Attribute and holder.attr.value == "__dict__":
        owner = holder.value
    elif type(holder) is cst.Call and len(holder.args) == 1 and ctx.qualname(holder.func) == "builtins.vars":
        owner = holder.args[0].value
    else:
        return None
    if ctx.qualname(owner) is not None:
        return None  # `torch.Tensor.__dict__["mm"]`: the resolver names it
    name = constant_name(ctx, expr.slice[0].slice.value)
    return (name, owner) if name else None


_DEFS = "_gk_module_defs"


def _returned_method(ctx: FileContext, call: cst.Call, depth: int) -> Optional[tuple[str, cst.BaseExpression]]:
    """`_fetch(p)` where the file's `def _fetch(t): return object.__getattribute__(t, _SLOT)` (or
    `return t.mm`): the method value a module-level helper returns."""
    if type(call.func) is not cst.Name:
        return None
    binding = ctx.resolver.lookup(call.func.value)
    if binding is None or binding.kind != "def":
        return None
    returned = ctx.__dict__.get(_DEFS)
    if returned is None:  # each module-level function's returned values, read once per file
        returned = ctx.__dict__[_DEFS] = {s.name.value: _returns(s.body) for s in ctx.module.body
                                          if type(s) is cst.FunctionDef}
    for value in returned.get(call.func.value, ()):
        found = method_value(ctx, value, depth + 1)
        if found is not None:
            return found
    return None


def _returns(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """The values the function's own `return` statements give (not those of nested functions)."""
    out: list[cst.BaseExpression] = []
    for child in children(node):  # the engine's walk: libcst's `.children` rebuilds every node
        if type(child) in (cst.FunctionDef, cst.ClassDef) or isinstance(child, cst.BaseExpression):
            continue  # nested definitions return their own values; expressions hold no statements
        if type(child) is cst.Return and child.value is not None:
            out.append(child.value)
        else:
            out.extend(_returns(child))
    return out


_CALLERS = "_gk_parameters_called"
_CALLING_MODULES = ("builtins.", "functools.", "itertools.", "operator.", "concurrent.", "threading.")


def called_parameters(ctx: FileContext, func: cst.BaseExpression) -> Optional[tuple[list[str], set[str]]]:
    """For a module-level function of the file: its parameter names in order, and those its body
    calls, returns or hands to a caller of callables (`map`, `functools.reduce`, a thread); None
    for any other callee. `def _clip(x, hi)` that passes `hi` to a clamp takes a number there."""
    if type(func) is not cst.Name:
        return None
    binding = ctx.resolver.lookup(func.value)
    if binding is None or binding.kind != "def":
        return None
    table = ctx.__dict__.setdefault(_CALLERS, {})
    if func.value not in table:
        node = next((s for s in ctx.module.body if type(s) is cst.FunctionDef and s.name.value == func.value), None)
        table[func.value] = None if node is None else _parameter_roles(ctx, node)
    return table[func.value]


def _parameter_roles(ctx: FileContext, node: cst.FunctionDef) -> tuple[list[str], set[str]]:
    params = node.params
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    called: set[str] = set()
    if type(params.star_arg) is cst.Param:
        called.add("*")  # `def run(fn, *args)`: what lands in *args is unknown
    for sub in subtree(node.body):
        if type(sub) is cst.Call:
            if type(sub.func) is cst.Name:
                called.add(sub.func.value)
            if (ctx.qualname(sub.func) or "").startswith(_CALLING_MODULES):
                called.update(a.value.value for a in sub.args if type(a.value) is cst.Name)
        elif type(sub) is cst.Return and type(sub.value) is cst.Name:
            called.add(sub.value.value)
    return names, called & (set(names) | {"*"})
