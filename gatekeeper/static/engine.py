"""The static engine: one parse, one traversal, every rule.

The traversal (traversal.py) keeps scopes, parents, the enclosing function and class, and
a call graph; rules get `visit_<Node>` / `leave_<Node>` calls dispatched by node type, so
adding a rule adds no traversal. Rule instances are kept from file to file (rule_set.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Sequence, Union

import libcst as cst

from gatekeeper.report import Finding
from gatekeeper.static.context import FileContext
from gatekeeper.static.module_constants import collect_module_constants
from gatekeeper.static.problem_facts import ProblemFacts
from gatekeeper.static.rule import Rule
from gatekeeper.static.rule_set import RuleSet, give_back, take_rule_set
from gatekeeper.static.traversal import Traversal


def scan_file(ctx: FileContext, module: cst.Module) -> None:
    """Fill `ctx` (constants, C++ sources, calls, definitions) without running any rule:
    what the build stage needs to find the extensions a file compiles."""
    collect_module_constants(ctx)
    Traversal(ctx, []).run(module)


def run_rules(
    module: cst.Module,
    *,
    path: str,
    text: str,
    rule_classes: Sequence[type[Rule]],
    profile: str,
    settings: dict[str, dict],
    severities: dict[str, object],
    problem: Optional[ProblemFacts],
    folder: Union[Path, None, Callable[[], Optional[Path]]],
) -> list[Finding]:
    ctx = FileContext(path=path, text=text, module=module, profile=profile, problem=problem, folder=folder)
    collect_module_constants(ctx)
    classes = tuple(cls for cls in rule_classes if problem is not None or not cls.needs_problem)
    held = take_rule_set(classes)
    try:
        return _run(held, ctx, module, settings, severities)
    finally:
        # The rules and the file context refer to each other; cut those cycles here so the
        # syntax tree is freed now by reference counting, not later by a collection that
        # first traverses all of it (about a tenth of the stage on real files).
        ctx.__dict__.clear()
        give_back(classes, held)


def _run(held: RuleSet, ctx: FileContext, module: cst.Module, settings: dict[str, dict],
         severities: dict[str, object]) -> list[Finding]:
    rules = held.rules
    for rule in rules:
        type(rule).__init__(rule, ctx, settings.get(rule.code, {}), severities[rule.code])  # type: ignore[arg-type]
    held.check_switches()
    traversal = held.traversal
    traversal.start(ctx)
    traversal.run(module)
    # Strings that look like C++ but were not seen reaching load_inline (helpers, dicts).
    for node in traversal.strings:
        if type(ctx.parents.get(node)) is cst.Expr:
            continue  # a docstring or bare string statement is prose, never compiled
        join = _enclosing_join(ctx, node)
        extra = traversal.extractor.from_join(join) if join is not None else traversal.extractor.from_literal(node)
        if extra is not None:
            ctx.cpp_sources.append(extra)
    checks, finishes = held.calls()
    for source in ctx.cpp_sources:
        for check in checks:
            check(source)
    for finish in finishes:
        finish()
    return ctx.materialise()


def _enclosing_join(ctx: FileContext, node: cst.CSTNode) -> Optional[cst.Call]:
    """The `"sep".join([...])` call whose list holds the literal, if any."""
    element = ctx.parents.get(node)
    holder = ctx.parents.get(element) if type(element) is cst.Element else None
    arg = ctx.parents.get(holder) if type(holder) in (cst.List, cst.Tuple) else None
    call = ctx.parents.get(arg) if type(arg) is cst.Arg else None
    if type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value == "join":
        return call
    return None
