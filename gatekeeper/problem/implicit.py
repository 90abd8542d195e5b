"""Implicit jitter: rewrite the module int constants that size the problem's inputs.

KernelBench problems say `batch_size = 16` at module level and use it in `get_inputs()` /
`get_init_inputs()`. The sizing constants are the module-level integer assignments those
two functions read (directly or through other constants, `N = M * 2`), except those only
passed to the explicit jitter object (`popcorn_pri.jitter_int(R)` already jitters R) and
small ones (below `min_size`: dims, kernel sizes, strides) unless the sidecar names them.

Small sizes that only `get_inputs` reads (not `get_init_inputs`: there a small int is a
kernel size, a stride or an axis) are jittered too, by one step (a rank count of 4 becomes
3 and 5), so a kernel with the 4 baked in is seen (`small_input_constants`).
"""

from __future__ import annotations

import random
from typing import Iterable, Optional

import libcst as cst

from gatekeeper.static.int_arith import fold_cst_literal

from gatekeeper.problem.jitter import JitterSpec, jitter_value

SIZING_FUNCTIONS = ("get_inputs", "get_init_inputs")
JITTER_METHODS = ("jitter_int", "jitter")


def _int_value(node: cst.BaseExpression) -> Optional[int]:
    return fold_cst_literal(node)  # `M = 1024 * 2` is a size constant as `M = 2048` is


class _Names(cst.CSTVisitor):
    """Names read in a subtree, skipping arguments of explicit jitter calls."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Call(self, node: cst.Call) -> Optional[bool]:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in JITTER_METHODS:
            func.visit(self)
            return False
        return True

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def _names_in(node: cst.CSTNode) -> set[str]:
    visitor = _Names()
    node.visit(visitor)
    return visitor.names


def _module_assignments(module: cst.Module) -> dict[str, cst.BaseExpression]:
    found: dict[str, cst.BaseExpression] = {}
    for statement in module.body:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
                found[small.targets[0].target.value] = small.value
            elif type(small) is cst.AnnAssign and type(small.target) is cst.Name and small.value is not None:
                found[small.target.value] = small.value
    return found


def sizing_constants(module: cst.Module, functions: tuple[str, ...] = SIZING_FUNCTIONS) -> dict[str, int]:
    """Module int constants that (transitively) size get_inputs / get_init_inputs."""
    assigned = _module_assignments(module)
    used: set[str] = set()
    for statement in module.body:
        if type(statement) is cst.FunctionDef and statement.name.value in functions:
            used |= _names_in(statement.body)
    todo, seen = list(used), set()
    result: dict[str, int] = {}
    while todo:
        name = todo.pop()
        if name in seen or name not in assigned:
            continue
        seen.add(name)
        value = _int_value(assigned[name])
        if value is not None:
            result[name] = value
        else:
            todo.extend(_names_in(assigned[name]))
    return result


class _Rewrite(cst.CSTTransformer):
    def __init__(self, values: dict[str, int]) -> None:
        self.values = values
        self.depth = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.depth += 1

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.depth -= 1
        return updated

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.depth += 1

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.depth -= 1
        return updated

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        target = updated.targets[0].target if len(updated.targets) == 1 else None
        if self.depth == 0 and type(target) is cst.Name and target.value in self.values \
                and _int_value(updated.value) is not None:
            return updated.with_changes(value=cst.Integer(str(self.values[target.value])))
        return updated

    def leave_AnnAssign(self, original: cst.AnnAssign, updated: cst.AnnAssign) -> cst.AnnAssign:
        if self.depth == 0 and type(updated.target) is cst.Name and updated.target.value in self.values \
                and updated.value is not None and _int_value(updated.value) is not None:
            return updated.with_changes(value=cst.Integer(str(self.values[updated.target.value])))
        return updated


SMALL_MIN = 2  # a size of 1 changes broadcasting, not only the size


def small_input_constants(module: cst.Module, min_size: int) -> dict[str, int]:
    """Sizes below `min_size` (and at least 2) read by get_inputs and not by get_init_inputs."""
    inputs = sizing_constants(module, ("get_inputs",))
    init = sizing_constants(module, ("get_init_inputs",))
    return {k: v for k, v in inputs.items() if k not in init and SMALL_MIN <= v < min_size}


def small_step(n: int, spec: JitterSpec, bounds: Optional[tuple[int, int]] = None) -> int:
    """One step off a small size: down for a smaller trial, up for a larger one."""
    value = n - 1 if spec.scale < 1 and n - 1 >= SMALL_MIN else n + 1
    if bounds is not None:
        value = min(max(value, bounds[0]), bounds[1])
    return value


def choose_constants(constants: dict[str, int], min_size: int, named: Iterable[str]) -> dict[str, int]:
    named = set(named)
    return {k: v for k, v in constants.items() if v >= min_size or k in named}


def jitter_source(module: cst.Module, chosen: dict[str, int], spec: JitterSpec,
                  ranges: Optional[dict[str, tuple[int, int]]] = None,
                  align: Optional[dict[str, int]] = None,
                  small: Iterable[str] = ()) -> tuple[str, dict[str, int]]:
    """The problem's source with the chosen constants jittered, and the new values. Those
    named in `small` move by one step (small_step) instead of by the trial's scale."""
    if spec.nominal or not chosen:
        return module.code, dict(chosen)
    rng = random.Random(spec.seed ^ 0x5EED)
    small = set(small)
    values = {name: small_step(n, spec, (ranges or {}).get(name)) if name in small
              else jitter_value(n, spec, rng, (align or {}).get(name, 1), (ranges or {}).get(name))
              for name, n in sorted(chosen.items())}
    return module.visit(_Rewrite(values)).code, values


def rewrite_constants(module: cst.Module, values: dict[str, int]) -> str:
    """The module's source with these module-level int constants set (a canonical shape)."""
    return module.visit(_Rewrite(values)).code


def module_int_constants(module: cst.Module) -> dict[str, int]:
    """Module-level `NAME = <int literal>` assignments."""
    found = {name: _int_value(value) for name, value in _module_assignments(module).items()}
    return {name: value for name, value in found.items() if value is not None}
