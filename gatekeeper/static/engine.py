"""The static engine: one parse, one traversal, every rule.

The traversal keeps scopes (for name resolution), parents, the enclosing function and
class, and a call graph; rules get `visit_<Node>` / `leave_<Node>` calls dispatched by node
type, so adding a rule adds no traversal.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

import libcst as cst

from gatekeeper.report import Finding
from gatekeeper.static.context import FileContext
from gatekeeper.static.cpp_sources import LOADERS, SourceExtractor
from gatekeeper.static.module_constants import collect_module_constants
from gatekeeper.static.names import Binding
from gatekeeper.static.problem_facts import ProblemFacts
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import children

Handler = Callable[[cst.CSTNode], object]


_HANDLERS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _handler_names(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The node types a rule class visits and leaves (computed once per class)."""
    found = _HANDLERS.get(cls)
    if found is None:
        names = dir(cls)
        found = (tuple(a[6:] for a in names if a.startswith("visit_")),
                 tuple(a[6:] for a in names if a.startswith("leave_")))
        _HANDLERS[cls] = found
    return found


_INDEXES: dict[tuple[type, ...], tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]] = {}


def _index(classes: tuple[type, ...]) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    """For a rule set: node type name -> positions of the rules that visit / leave it, in
    rule order. Computed once per rule set, so a file pays only for the node types it has."""
    found = _INDEXES.get(classes)
    if found is None:
        visits: dict[str, list[int]] = defaultdict(list)
        leaves: dict[str, list[int]] = defaultdict(list)
        for position, cls in enumerate(classes):
            visit_names, leave_names = _handler_names(cls)
            for kind in visit_names:
                visits[kind].append(position)
            for kind in leave_names:
                leaves[kind].append(position)
        found = _INDEXES[classes] = ({k: tuple(v) for k, v in visits.items()},
                                     {k: tuple(v) for k, v in leaves.items()})
    return found


_ENGINE, _EXTRAS = -1, -2
_Spec = tuple[tuple[int, object], ...]
_TEMPLATES: dict[tuple[type, ...], dict[type, tuple[_Spec, _Spec]]] = {}  # rule set -> node type -> plan


def _template(templates: dict[type, tuple[_Spec, _Spec]], visit_index: dict[str, tuple[int, ...]],
              leave_index: dict[str, tuple[int, ...]], kind: type) -> tuple[_Spec, _Spec]:
    """What to call on entering and leaving a node type, for a rule set: (rule position,
    handler name) for a rule's handler, (_ENGINE, function) for the engine's bookkeeping,
    (_EXTRAS, None) where extra handlers go. Computed once per rule set and node type; each
    file only binds it to its rule instances."""
    found = templates.get(kind)
    if found is None:
        name = kind.__name__
        enter: list[tuple[int, object]] = []
        if name in _BEFORE:
            enter.append((_ENGINE, _BEFORE[name]))
        if name == "SimpleString":
            enter.append((_ENGINE, _Traversal._collect_string))
        enter += [(i, "visit_" + name) for i in visit_index.get(name, ())]
        enter.append((_EXTRAS, None))
        if name in _AFTER:
            enter.append((_ENGINE, _AFTER[name]))
        leave: list[tuple[int, object]] = [(i, "leave_" + name) for i in leave_index.get(name, ())]
        leave.append((_EXTRAS, None))
        if name in _ON_LEAVE:
            leave.append((_ENGINE, _ON_LEAVE[name]))
        found = templates[kind] = (tuple(enter), tuple(leave))
    return found


class _Traversal:
    def __init__(self, ctx: Optional[FileContext], rules: Sequence[Rule]) -> None:
        self.rules = rules
        classes = tuple(type(rule) for rule in rules)
        self.visit_index, self.leave_index = _index(classes)
        self.templates = _TEMPLATES.setdefault(classes, {})
        # Extra handlers by node type name, called after the rules' (tests add probes here).
        self.visits: dict[str, list[Handler]] = defaultdict(list)
        self.leaves: dict[str, list[Handler]] = defaultdict(list)
        # Bound handler plans by node type; kept across files by a reused rule set.
        self.plans: dict[type, tuple[tuple[Handler, ...], tuple[Handler, ...]]] = {}
        if ctx is not None:
            self.start(ctx)

    def start(self, ctx: FileContext) -> None:
        """Point the traversal at a new file."""
        self.ctx = ctx
        self.extractor = SourceExtractor(ctx.resolver, ctx.constants, ctx.folder)
        self.strings: list[cst.SimpleString] = []

    def stop(self) -> None:
        """Drop the file: a reused traversal must not keep its tree alive."""
        self.ctx = self.extractor = None  # type: ignore[assignment]
        self.strings = []

    def _plans(self, kind: type) -> tuple[tuple[Handler, ...], tuple[Handler, ...]]:
        """Everything to call on entering and on leaving a node type, in order: the
        engine's own bookkeeping around the rules' handlers (see _template)."""
        enter, leave = _template(self.templates, self.visit_index, self.leave_index, kind)
        return self._bind(enter, self.visits.get(kind.__name__)), self._bind(leave, self.leaves.get(kind.__name__))

    def _bind(self, spec: tuple[tuple[int, object], ...], extras: Optional[list[Handler]]) -> tuple[Handler, ...]:
        rules = self.rules
        out: list[Handler] = []
        for position, what in spec:
            if position >= 0:
                handler = getattr(rules[position], what)  # type: ignore[arg-type]
                if handler is not None:  # a rule instance may switch a handler off for this file
                    out.append(handler)
            elif position == _ENGINE:
                out.append(what.__get__(self))  # type: ignore[attr-defined]
            elif extras:
                out.extend(extras)
        return tuple(out)

    def _collect_string(self, node: cst.SimpleString) -> None:
        if len(node.value) > 24:
            self.strings.append(node)

    def run(self, module: cst.Module) -> None:
        """Depth-first over the tree (the walk of gatekeeper.static.walk, inlined: this loop
        is the engine's hot path). A tuple on the stack marks leaving its node."""
        parents = self.ctx.parents
        plans = self.plans
        stack: list = [module]
        while stack:
            item = stack.pop()
            if type(item) is tuple:
                for handler in item[1]:
                    handler(item[0])
                continue
            kind = type(item)
            plan = plans.get(kind)
            if plan is None:
                plan = plans[kind] = self._plans(kind)
            for handler in plan[0]:
                handler(item)
            if plan[1]:  # most node types have nothing to do on leaving: no marker for them
                stack.append((item, plan[1]))
            kids = children(item)
            for child in kids:
                parents[child] = item
            kids.reverse()
            stack.extend(kids)

    # bookkeeping that rules rely on -----------------------------------------------
    def _enter_function(self, node: cst.FunctionDef) -> None:
        ctx, res = self.ctx, self.ctx.resolver
        res.bind(node.name.value, Binding("def"))
        owner = ctx.class_name if ctx.classes and _directly_in_class(ctx, node) else None
        key = f"{owner}.{node.name.value}" if owner else node.name.value
        ctx.defined.add(key)
        ctx.functions.append(node)
        ctx.function_keys.append(key)
        res.push("function")
        res.bind_params(node.params)

    def _leave_function(self, node: cst.FunctionDef) -> None:
        self.ctx.functions.pop()
        self.ctx.function_keys.pop()
        self.ctx.resolver.pop()

    def _enter_class(self, node: cst.ClassDef) -> None:
        self.ctx.resolver.bind(node.name.value, Binding("class"))
        self.ctx.classes.append(node)
        self.ctx.resolver.push("class")

    def _leave_class(self, node: cst.ClassDef) -> None:
        self.ctx.classes.pop()
        self.ctx.resolver.pop()

    def _enter_lambda(self, node: cst.Lambda) -> None:
        self.ctx.resolver.push("lambda")
        self.ctx.resolver.bind_params(node.params)

    def _enter_comprehension(self, node: cst.CSTNode) -> None:
        self.ctx.resolver.push("comprehension")

    def _pop_scope(self, node: cst.CSTNode) -> None:
        self.ctx.resolver.pop()

    # Bound after rules ran, so a rule sees the name as it was before this statement.
    def _after_assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.ctx.resolver.bind_target(target.target, node.value)

    def _after_ann_assign(self, node: cst.AnnAssign) -> None:
        self.ctx.resolver.bind_target(node.target, node.value)

    def _after_for(self, node: cst.For) -> None:
        self.ctx.resolver.bind_target(node.target, None)

    def _after_with_item(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self.ctx.resolver.bind_target(node.asname.name, None)

    def _after_except(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self.ctx.resolver.bind_target(node.name.name, None)

    def _after_named_expr(self, node: cst.NamedExpr) -> None:
        self.ctx.resolver.bind_target(node.target, None)

    def _record_call(self, call: cst.Call) -> None:
        ctx = self.ctx
        func = call.func
        callee: Optional[str] = None
        if type(func) is cst.Name:
            callee = func.value
        elif type(func) is cst.Attribute:
            if type(func.value) is cst.Name and func.value.value == "self" and ctx.class_name:
                callee = f"{ctx.class_name}.{func.attr.value}"
            elif func.attr.value == "apply" and type(func.value) is cst.Name:
                callee = f"{func.value.value}.forward"
            else:
                callee = func.attr.value
        if callee is not None:
            ctx.calls.setdefault(callee, set()).add(ctx.function_key)
        qual = ctx.qualname(func) or ""  # remembered: most rules visiting the call ask again
        if qual in LOADERS or (type(func) in (cst.Name, cst.Attribute) and _last(func) == "load_inline"):
            ctx.cpp_sources.extend(self.extractor.from_call(call, qual or "load_inline"))


_COMPREHENSION_NAMES = ("ListComp", "SetComp", "DictComp", "GeneratorExp")
_BEFORE: dict[str, Callable] = {
    "Import": lambda t, n: t.ctx.resolver.bind_import(n),
    "ImportFrom": lambda t, n: t.ctx.resolver.bind_import_from(n),
    "Call": _Traversal._record_call,
    "FunctionDef": _Traversal._enter_function,
    "ClassDef": _Traversal._enter_class,
    "Lambda": _Traversal._enter_lambda,
    **{name: _Traversal._enter_comprehension for name in _COMPREHENSION_NAMES},
}
_AFTER: dict[str, Callable] = {
    "Assign": _Traversal._after_assign,
    "AnnAssign": _Traversal._after_ann_assign,
    "For": _Traversal._after_for,
    "CompFor": _Traversal._after_for,
    "WithItem": _Traversal._after_with_item,
    "ExceptHandler": _Traversal._after_except,
    "NamedExpr": _Traversal._after_named_expr,
}
_ON_LEAVE: dict[str, Callable] = {
    "FunctionDef": _Traversal._leave_function,
    "ClassDef": _Traversal._leave_class,
    "Lambda": _Traversal._pop_scope,
    **{name: _Traversal._pop_scope for name in _COMPREHENSION_NAMES},
}


def _last(func: cst.BaseExpression) -> str:
    return func.value if (type(func) is cst.Name) else func.attr.value  # type: ignore[union-attr]


def _directly_in_class(ctx: FileContext, node: cst.FunctionDef) -> bool:
    parent = ctx.parents.get(node)
    grand = ctx.parents.get(parent) if parent is not None else None
    return type(grand) is cst.ClassDef


def scan_file(ctx: FileContext, module: cst.Module) -> None:
    """Fill `ctx` (constants, C++ sources, calls, definitions) without running any rule:
    what the build stage needs to find the extensions a file compiles."""
    collect_module_constants(ctx)
    _Traversal(ctx, []).run(module)


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
    held = _take_rule_set(classes)
    try:
        return _run(held, ctx, module, settings, severities)
    finally:
        # The rules and the file context refer to each other; cut those cycles here so the
        # syntax tree is freed now by reference counting, not later by a collection that
        # first traverses all of it (about a tenth of the stage on real files).
        for rule in held.rules:
            rule.__dict__.clear()
        held.traversal.stop()
        ctx.__dict__.clear()
        _IDLE.setdefault(classes, []).append(held)


def _run(held: "_RuleSet", ctx: FileContext, module: cst.Module, settings: dict[str, dict],
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
        extra = traversal.extractor.from_literal(node)
        if extra is not None:
            ctx.cpp_sources.append(extra)
    for source in ctx.cpp_sources:
        for rule in rules:
            rule.check_cpp(source)
    for rule in rules:
        rule.finish()
    return ctx.materialise()


class _RuleSet:
    """One instance of each rule of a rule set, and the traversal over them, reused from
    file to file: each file runs every rule's `__init__` again on an emptied instance (the
    same state as a new one), while the handlers bound for each node type are kept. On
    real files, building the rules and binding their handlers anew was ~2% of the stage."""

    def __init__(self, classes: tuple[type[Rule], ...]) -> None:
        self.rules: list[Rule] = [cls.__new__(cls) for cls in classes]
        self.traversal = _Traversal(None, self.rules)
        self.handlers = [frozenset(f"visit_{n}" for n in v) | frozenset(f"leave_{n}" for n in l)
                         for v, l in map(_handler_names, classes)]
        self.switched_off: Optional[list[tuple[int, str]]] = []

    def check_switches(self) -> None:
        """Forget the bound plans unless this file's rules override the same handlers on
        their instances as the last file's did, all with None (switched off)."""
        rules, handlers = self.rules, self.handlers
        overriding = [i for i, free in enumerate(map(frozenset.isdisjoint, handlers, map(vars, rules))) if not free]
        off: list[tuple[int, str]] = []
        for position in overriding:
            state = vars(rules[position])
            for name in handlers[position].intersection(state):
                if state[name] is not None:  # a handler swapped for another: bind afresh every file
                    self.switched_off = None
                    self.traversal.plans.clear()
                    return
                off.append((position, name))
        off.sort()
        if off != self.switched_off:
            self.switched_off = off
            self.traversal.plans.clear()


# Idle rule sets by rule classes: a file takes one (or builds one) and gives it back when
# done, so concurrent or nested checks never share instances.
_IDLE: dict[tuple[type[Rule], ...], list[_RuleSet]] = {}


def _take_rule_set(classes: tuple[type[Rule], ...]) -> _RuleSet:
    idle = _IDLE.get(classes)
    if idle:
        try:
            return idle.pop()
        except IndexError:  # another thread took the last one
            pass
    if len(_IDLE) > 16:
        _IDLE.clear()
    return _RuleSet(classes)
