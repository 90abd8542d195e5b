"""Which inputs of the problem are integer metadata (lengths, offsets, indices), and which
parameters of the submission receive them. This file defines no rule.

An integer input's values are the work's size (`max(lengths)` picks a split count, the
number of tiles, the grid), not the data a numeric shortcut would sniff. The problem says
which inputs are integers: in `get_inputs()` a `torch.randint(...)`, `torch.arange(...)`, or
a tensor built with an integer or bool `dtype=`. The submission's `forward` takes them at
the same positions; a module-level helper called with one of those names at a position
receives it too (followed a few calls deep).
"""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from gatekeeper.static.problem_facts import ProblemFacts
from gatekeeper.static.walk import subtree

_INT_BUILDERS = frozenset({"randint", "arange", "randperm", "tril_indices", "triu_indices"})
_INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "long", "int", "uint8", "bool", "short"})
_MAX_HOPS = 3


def integer_input_positions(problem_module: cst.Module) -> frozenset[int]:
    """Positions in the list `get_inputs()` returns that hold integer tensors."""
    for stmt in problem_module.body:
        if type(stmt) is not cst.FunctionDef or stmt.name.value != "get_inputs":
            continue
        local: dict[str, cst.BaseExpression] = {}
        for sub in subtree(stmt):
            if type(sub) is cst.Assign and len(sub.targets) == 1 and type(sub.targets[0].target) is cst.Name:
                local[sub.targets[0].target.value] = sub.value
        for sub in subtree(stmt):
            if type(sub) is cst.Return and type(sub.value) in (cst.List, cst.Tuple):
                out = set()
                for k, element in enumerate(sub.value.elements):
                    value = element.value
                    if type(value) is cst.Name and value.value in local:
                        value = local[value.value]
                    if _is_integer_tensor(value):
                        out.add(k)
                return frozenset(out)
    return frozenset()


_ATTR = "_gk_integer_positions"


def problem_integer_positions(problem: ProblemFacts) -> frozenset[int]:
    """`reference_integer_positions` of the problem's reference, kept on its facts: the same
    for every submission to the problem."""
    found = problem.__dict__.get(_ATTR)
    if found is None:
        found = problem.__dict__[_ATTR] = reference_integer_positions(problem.tree)
    return found


def reference_integer_positions(tree: ast.Module) -> frozenset[int]:
    """`integer_input_positions` read from CPython's tree of the reference (its libcst tree
    is parsed only on demand). The same choices: a local name stands for its first
    assignment in the function (the one libcst's reversed walk meets last), and the
    list or tuple returned last in the text (the one that walk meets first) is read."""
    for stmt in tree.body:
        if type(stmt) not in (ast.FunctionDef, ast.AsyncFunctionDef) or stmt.name != "get_inputs":
            continue
        nodes = sorted((n for n in ast.walk(stmt) if type(n) in (ast.Assign, ast.Return)),
                       key=lambda n: (n.lineno, n.col_offset))
        local: dict[str, ast.expr] = {}
        for sub in nodes:
            if type(sub) is ast.Assign and len(sub.targets) == 1 and type(sub.targets[0]) is ast.Name:
                local.setdefault(sub.targets[0].id, sub.value)
        returns = [sub for sub in nodes if type(sub) is ast.Return and type(sub.value) in (ast.List, ast.Tuple)]
        if returns:
            out = set()
            for k, element in enumerate(returns[-1].value.elts):  # type: ignore[union-attr]
                value = element.value if type(element) is ast.Starred else element
                if type(value) is ast.Name and value.id in local:
                    value = local[value.id]
                if _is_integer_tensor_ast(value):
                    out.add(k)
            return frozenset(out)
    return frozenset()


def _is_integer_tensor_ast(expr: ast.expr) -> bool:
    if type(expr) is ast.Call and type(expr.func) is ast.Attribute and expr.func.attr in _FLOAT_CASTS:
        return False
    for sub in ast.walk(expr):
        if type(sub) is ast.Call:
            func = sub.func
            name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else ""
            if name in _INT_BUILDERS:
                return True
            for kw in sub.keywords:
                value = kw.value
                dtype = value.attr if type(value) is ast.Attribute else value.id if type(value) is ast.Name else None
                if kw.arg == "dtype" and dtype in _INT_DTYPES:
                    return True
        elif type(sub) is ast.Attribute and sub.attr in ("long", "int", "bool", "short") and type(sub.value) is not ast.Name:
            return True
    return False


_FLOAT_CASTS = frozenset({"float", "half", "double", "bfloat16"})


def _is_integer_tensor(expr: cst.BaseExpression) -> bool:
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in _FLOAT_CASTS:
        return False  # `torch.randint(...).float()`: float data drawn from integers
    for sub in subtree(expr):
        if type(sub) is cst.Call:
            func = sub.func
            name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
            if name in _INT_BUILDERS:
                return True
            for arg in sub.args:
                if arg.keyword is not None and arg.keyword.value == "dtype" and _dtype_name(arg.value) in _INT_DTYPES:
                    return True
        elif type(sub) is cst.Attribute and sub.attr.value in ("long", "int", "bool", "short") and type(
                sub.value) is not cst.Name:
            return True  # `x.long()`, `(...).int()`
    return False


def _dtype_name(expr: cst.BaseExpression) -> Optional[str]:
    if type(expr) is cst.Attribute:
        return expr.attr.value
    if type(expr) is cst.Name:
        return expr.value
    return None


def integer_parameters(module: cst.Module, entry: str, positions: frozenset[int]) -> dict[int, set[str]]:
    """id() of a FunctionDef of `module` (the entry class's `forward`, module-level helpers)
    -> the parameters that receive the problem's integer inputs."""
    if not positions:
        return {}
    helpers = {s.name.value: s for s in module.body if type(s) is cst.FunctionDef}
    out: dict[int, set[str]] = {}
    for stmt in module.body:
        if type(stmt) is cst.ClassDef and stmt.name.value == entry:
            for item in stmt.body.body:
                if type(item) is cst.FunctionDef and item.name.value == "forward":
                    names = [p.name.value for p in item.params.params if p.name.value not in ("self", "cls")]
                    found = {names[k] for k in positions if k < len(names)}
                    if found:
                        out[id(item)] = found
                        _follow(item, found, helpers, out, 0)
    return out


def _follow(fn: cst.FunctionDef, ints: set[str], helpers: dict[str, cst.FunctionDef],
            out: dict[int, set[str]], hops: int) -> None:
    """Helpers called with an integer name at a position receive it in that parameter."""
    if hops >= _MAX_HOPS:
        return
    for sub in subtree(fn.body):
        if type(sub) is not cst.Call or type(sub.func) is not cst.Name or sub.func.value not in helpers:
            continue
        callee = helpers[sub.func.value]
        params = [p.name.value for p in callee.params.params]
        got: set[str] = set()
        for k, arg in enumerate(sub.args):
            root = _root_name(arg.value)
            if root in ints:
                if arg.keyword is not None:
                    got.add(arg.keyword.value)
                elif arg.star == "" and k < len(params):
                    got.add(params[k])
        new = got - out.get(id(callee), set())
        if new:
            out.setdefault(id(callee), set()).update(new)
            _follow(callee, out[id(callee)], helpers, out, hops + 1)


def _root_name(expr: cst.BaseExpression) -> Optional[str]:
    """`lengths`, `lengths.contiguous()`, `lengths.to(...)`: the name a view or move is of."""
    for _ in range(6):
        if type(expr) is cst.Name:
            return expr.value
        if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in (
                "contiguous", "to", "cuda", "int", "long", "view", "reshape", "flatten"):
            expr = expr.func.value
        else:
            return None
    return None
