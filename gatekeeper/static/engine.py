"""The static engine: one parse, one traversal, every rule.

The traversal keeps scopes (for name resolution), parents, the enclosing function and
class, and a call graph; rules get `visit_<Node>` / `leave_<Node>` calls dispatched by node
type, so adding a rule adds no traversal.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Callable, Optional, Sequence

import libcst as cst

from gatekeeper.report import Finding
from gatekeeper.static.context import FileContext
from gatekeeper.static.cpp_sources import LOADERS, SourceExtractor
from gatekeeper.static.names import Binding
from gatekeeper.static.problem_facts import ProblemFacts
from gatekeeper.static.rule import Rule

Handler = Callable[[cst.CSTNode], object]
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


class _Traversal(cst.CSTVisitor):
    def __init__(self, ctx: FileContext, rules: Sequence[Rule]) -> None:
        self.ctx = ctx
        self.stack: list[cst.CSTNode] = []
        self.visits: dict[str, list[Handler]] = defaultdict(list)
        self.leaves: dict[str, list[Handler]] = defaultdict(list)
        for rule in rules:
            for attr in dir(type(rule)):
                if attr.startswith("visit_"):
                    self.visits[attr[6:]].append(getattr(rule, attr))
                elif attr.startswith("leave_"):
                    self.leaves[attr[6:]].append(getattr(rule, attr))
        self.extractor = SourceExtractor(ctx.resolver, ctx.constants, ctx.folder)
        self.strings: list[cst.SimpleString] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        ctx = self.ctx
        if self.stack:
            ctx.parents[node] = self.stack[-1]
        self.stack.append(node)
        kind = type(node).__name__
        if kind == "SimpleString" and len(node.value) > 24:  # type: ignore[attr-defined]
            self.strings.append(node)  # type: ignore[arg-type]
        self._bind_before(node)
        for handler in self.visits.get(kind, ()):
            handler(node)
        self._bind_after(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        kind = type(original_node).__name__
        for handler in self.leaves.get(kind, ()):
            handler(original_node)
        ctx = self.ctx
        if isinstance(original_node, cst.FunctionDef):
            ctx.functions.pop()
            ctx.function_keys.pop()
            ctx.resolver.pop()
        elif isinstance(original_node, cst.ClassDef):
            ctx.classes.pop()
            ctx.resolver.pop()
        elif isinstance(original_node, (cst.Lambda, *_COMPREHENSIONS)):
            ctx.resolver.pop()
        self.stack.pop()

    # bookkeeping that rules rely on -----------------------------------------------
    def _bind_before(self, node: cst.CSTNode) -> None:
        ctx, res = self.ctx, self.ctx.resolver
        if isinstance(node, cst.Import):
            res.bind_import(node)
        elif isinstance(node, cst.ImportFrom):
            res.bind_import_from(node)
        elif isinstance(node, cst.Call):
            self._record_call(node)
        elif isinstance(node, cst.FunctionDef):
            res.bind(node.name.value, Binding("def"))
            owner = ctx.class_name if ctx.classes and ctx.parents.get(node) is not None and _directly_in_class(ctx, node) else None
            key = f"{owner}.{node.name.value}" if owner else node.name.value
            ctx.defined.add(key)
            ctx.functions.append(node)
            ctx.function_keys.append(key)
            res.push("function")
            res.bind_params(node.params)
        elif isinstance(node, cst.ClassDef):
            res.bind(node.name.value, Binding("class"))
            ctx.classes.append(node)
            res.push("class")
        elif isinstance(node, cst.Lambda):
            res.push("lambda")
            res.bind_params(node.params)
        elif isinstance(node, _COMPREHENSIONS):
            res.push("comprehension")

    def _bind_after(self, node: cst.CSTNode) -> None:
        res = self.ctx.resolver
        # Bind after rules ran, so a rule sees the name as it was before this statement.
        if isinstance(node, cst.Assign):
            for target in node.targets:
                res.bind_target(target.target, node.value)
        elif isinstance(node, cst.AnnAssign):
            res.bind_target(node.target, node.value)
        elif isinstance(node, (cst.For, cst.CompFor)):
            res.bind_target(node.target, None)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            res.bind_target(node.asname.name, None)
        elif isinstance(node, cst.ExceptHandler) and node.name is not None:
            res.bind_target(node.name.name, None)
        elif isinstance(node, cst.NamedExpr):
            res.bind_target(node.target, None)

    def _record_call(self, call: cst.Call) -> None:
        ctx = self.ctx
        func = call.func
        callee: Optional[str] = None
        if isinstance(func, cst.Name):
            callee = func.value
        elif isinstance(func, cst.Attribute):
            if isinstance(func.value, cst.Name) and func.value.value == "self" and ctx.class_name:
                callee = f"{ctx.class_name}.{func.attr.value}"
            elif func.attr.value == "apply" and isinstance(func.value, cst.Name):
                callee = f"{func.value.value}.forward"
            else:
                callee = func.attr.value
        if callee is not None:
            ctx.calls.setdefault(callee, set()).add(ctx.function_key)
        qual = ctx.resolver.qualname(func) or ""
        if qual in LOADERS or (isinstance(func, (cst.Name, cst.Attribute)) and _last(func) == "load_inline"):
            ctx.cpp_sources.extend(self.extractor.from_call(call, qual or "load_inline"))


def _last(func: cst.BaseExpression) -> str:
    return func.value if isinstance(func, cst.Name) else func.attr.value  # type: ignore[union-attr]


def _directly_in_class(ctx: FileContext, node: cst.FunctionDef) -> bool:
    parent = ctx.parents.get(node)
    grand = ctx.parents.get(parent) if parent is not None else None
    return isinstance(grand, cst.ClassDef)


def _collect_constants(ctx: FileContext) -> None:
    """Module-level `NAME = value` and `NAME += value`, and imports, before the traversal, so
    a function above an import or a string defined below its use still resolves."""
    for stmt in ctx.module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    if isinstance(target.target, cst.Name):
                        ctx.constants.setdefault(target.target.value, []).append(small.value)
            elif isinstance(small, cst.AnnAssign) and small.value is not None and isinstance(small.target, cst.Name):
                ctx.constants.setdefault(small.target.value, []).append(small.value)
            elif isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign) and isinstance(small.target, cst.Name):
                ctx.constants.setdefault(small.target.value, []).append(small.value)
            elif isinstance(small, cst.Import):
                ctx.resolver.bind_import(small)
            elif isinstance(small, cst.ImportFrom):
                ctx.resolver.bind_import_from(small)


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
    folder: Optional[Path],
) -> list[Finding]:
    ctx = FileContext(path=path, text=text, module=module, profile=profile, problem=problem, folder=folder)
    _collect_constants(ctx)
    rules = [
        cls(ctx, settings.get(cls.code, {}), severities[cls.code])  # type: ignore[arg-type]
        for cls in rule_classes
        if problem is not None or not cls.needs_problem
    ]
    traversal = _Traversal(ctx, rules)
    module.visit(traversal)
    # Strings that look like C++ but were not seen reaching load_inline (helpers, dicts).
    for node in traversal.strings:
        extra = traversal.extractor.from_literal(node)
        if extra is not None:
            ctx.cpp_sources.append(extra)
    for source in ctx.cpp_sources:
        for rule in rules:
            rule.check_cpp(source)
    for rule in rules:
        rule.finish()
    return ctx.materialise()
