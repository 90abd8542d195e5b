"""What the problem says about torch ops: the ops its reference computes, the ops it
forbids and the ops it allows. Not a rule file: it defines no rule with a `code`.

- forbidden: the sidecar's `forbidden = [...]` (`<problem>.toml`) and, for
  KernelBench-Hard layouts, the `forbidden:` list of a `problem.yaml` beside the problem,
  as gatekeeper.problem.load_problem put them on the facts (`declared_forbidden`).
- allowed: the sidecar's `allowed_ops = [...]` (`declared_allowed`).
- reference: the compute ops the reference's classes (`Model` and its blocks) call, as op families
  (torch_policy.toml `[families]`): `nn.Linear` and `x @ w.t()` are both `matmul`.

Read once per problem file and kept on the ProblemFacts object.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Optional

import ast

from gatekeeper.analyses.torch_policy_table import policy
from gatekeeper.analyses.torch_op_table import short_op, torch_ops
from gatekeeper.static.problem_facts import ProblemFacts

_ATTR = "_gk3_problem_ops"
_OPERATORS = {ast.MatMult: "matmul", ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
              ast.Pow: "pow"}
# Calls in a reference that never compute output values.
_NOT_OPS = frozenset({"super", "__init__", "forward", "Module", "Parameter", "register_buffer", "append"})
_BUILTINS = frozenset(dir(__import__("builtins")))


@dataclass(frozen=True)
class ProblemOps:
    reference: Counter[str]  # op families the reference computes, and at how many places
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...]


EMPTY = ProblemOps(Counter(), (), ())


def problem_ops(problem: Optional[ProblemFacts]) -> ProblemOps:
    if problem is None:
        return EMPTY
    cached = problem.__dict__.get(_ATTR)
    if cached is None:
        cached = ProblemOps(_reference_families(problem.tree), problem.declared_forbidden, problem.declared_allowed)
        problem.__dict__[_ATTR] = cached
    return cached


def _reference_families(tree: ast.Module) -> Counter[str]:
    """Read from CPython's tree of the reference (its libcst tree is parsed only on demand):
    the same calls and binary operators as libcst's, in any order (a Counter)."""
    ops = torch_ops()
    table = policy()
    names: list[str] = []
    for stmt in tree.body:
        # Model and the blocks it is built from (level-3 references define several classes)
        if type(stmt) is not ast.ClassDef:
            continue
        for method in stmt.body:
            if type(method) in (ast.FunctionDef, ast.AsyncFunctionDef):
                # __init__ builds the layers (nn.Conv2d); its other work is parameter set-up
                names += _ops_in(method, ops, layers_only=method.name == "__init__")
    return Counter(table.family(n) for n in names)


def _ops_in(method: ast.AST, ops, *, layers_only: bool) -> list[str]:  # type: ignore[no-untyped-def]
    names: list[str] = []
    for node in ast.walk(method):
        if type(node) is ast.BinOp and type(node.op) in _OPERATORS:
            if not layers_only:
                names.append(_OPERATORS[type(node.op)])
        elif type(node) is ast.Call:
            func = node.func
            name = func.attr if (type(func) is ast.Attribute) else None
            if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == "self":
                continue  # self.fc(x): the layer is counted where it is built (nn.Linear)
            if type(func) is ast.Name and func.id not in _BUILTINS:
                name = func.id  # from torch import relu; a builtin such as len() is not an op
            if not name or name in _NOT_OPS or (layers_only and not name[:1].isupper()):
                continue
            if _computes(ops, name):
                names.append(short_op(name))
    return names


def _computes(ops, name: str) -> bool:  # type: ignore[no-untyped-def]
    if ops.method_is_compute(name):
        return True
    if name in ops.allowed_methods or name in ops.metadata_methods:
        return False
    if name[:1].isupper():
        return ops.function_is_compute(f"torch.nn.{name}") and name not in ("Sequential", "ModuleList", "ModuleDict")
    return ops.function_is_compute(f"torch.{name}")
