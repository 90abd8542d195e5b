"""What counts as the reference problem, for the GK40x rules and file reads. Not a rule file.

A module is the reference when a component of its dotted name is the problem file's stem,
`reference` / `ref` / `problem` (and plurals and `_model` forms), a KernelBench level
(`level1`), or a `kernelbench` module other than the shims the problem itself imports. The
reference class is `Model`, plus every class the problem file defines, except the class the
submission defines (`entry_name`: `ModelNew`, or `Model` for a KernelBench-Hard problem).
"""

from __future__ import annotations

import ast
import re
from typing import Optional

import libcst as cst

from gatekeeper.analyses.harness_support import resolve
from gatekeeper.static.context import FileContext
from gatekeeper.static.names import dotted

REFERENCE_PARTS = frozenset({"reference", "references", "ref", "refs", "problem", "problems",
                             "reference_model", "ref_model", "reference_impl", "ref_impl", "reference_solution"})
KERNELBENCH_SHIMS = ("kernelbench.distributed_collectives",)
_LEVEL = re.compile(r"^level_?\d+$", re.IGNORECASE)
_LIBRARIES = ("torch", "triton", "numpy", "jax", "cupy", "transformers")


def problem_stem(ctx: FileContext) -> Optional[str]:
    return ctx.problem.name if ctx.problem is not None else None


def is_reference_module(ctx: FileContext, name: Optional[str]) -> bool:
    if not name:
        return False
    if name == "__main__":
        return False  # reading __main__ is GK423; importing Model from it is caught by name
    lowered = name.lower()
    if lowered.split(".", 1)[0] in _LIBRARIES:
        return False  # torch.ao.nn.quantized.reference, torch._refs: the library's own modules
    if lowered.startswith("kernelbench"):
        return not any(lowered == s or lowered.startswith(s + ".") for s in KERNELBENCH_SHIMS)
    stem = problem_stem(ctx)
    for part in lowered.split("."):
        if part in REFERENCE_PARTS or _LEVEL.match(part) or (stem and part == stem.lower()):
            return True
    return False


def is_reference_path(ctx: FileContext, text: Optional[str]) -> bool:
    """A file path whose file name is the reference module's (`reference.py`, `../problem.py`)."""
    if not text:
        return False
    name = text.replace("\\", "/").rsplit("/", 1)[-1]
    stem = name[:-3] if name.endswith(".py") else None
    return bool(stem) and is_reference_module(ctx, stem)


_DEFAULT_NAMES = frozenset({"Model"})
_ATTR = "_gk_model_names"  # kept on the facts, whose entry class is fixed


def entry_name(ctx: FileContext) -> str:
    """The class the submission must define: the problem format's (`Model` in KernelBench-Hard)."""
    return ctx.problem.entry if ctx.problem is not None else "ModelNew"


def model_names(ctx: FileContext) -> frozenset[str]:
    problem = ctx.problem
    if problem is None:
        return _DEFAULT_NAMES
    names = problem.__dict__.get(_ATTR)
    if names is None:
        found = {"Model"}
        for stmt in problem.tree.body:  # CPython's tree: the reference's libcst one is parsed only on demand
            if type(stmt) is ast.ClassDef:
                found.add(stmt.name)
        names = problem.__dict__[_ATTR] = frozenset(found - {"ModelNew", problem.entry})
    return names


def reference_model(ctx: FileContext, expr: cst.BaseExpression) -> Optional[str]:
    """How `expr` names the reference model class, or None."""
    text = dotted(expr)
    if text is None:
        # `load_module().Model`, `mods["ref"].Model`: a model class fetched from a module
        # object the resolver cannot name.
        if type(expr) is cst.Attribute and expr.attr.value in model_names(ctx):
            qual = resolve(ctx, expr)
            if qual is None or qual.split(".")[0] not in _LIBRARIES:
                return qual or f"<module>.{expr.attr.value}"
        return None
    qual = resolve(ctx, expr)
    if qual is not None and "." in qual and is_reference_module(ctx, qual.rsplit(".", 1)[0]):
        return qual
    last = text.rsplit(".", 1)[-1]
    if last not in model_names(ctx):
        return None
    if qual is None:
        return text  # a bare `Model` the submission does not import, a pasted copy, `mod.Model`
    if qual.startswith("__main__."):
        return qual
    if qual.split(".")[0] in _LIBRARIES:
        return None
    return qual
