"""The traversal of the static engine: one depth-first walk of the tree that keeps scopes
(for name resolution), parents, the enclosing function and class and a call graph, and
calls the rules' `visit_<Node>` / `leave_<Node>` handlers, dispatched by node type."""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Optional, Sequence

import libcst as cst

from gatekeeper.static.context import FileContext
from gatekeeper.static.cpp_sources import LOADERS, SourceExtractor
from gatekeeper.static.names import Binding
from gatekeeper.static.rule import SWITCHED_OFF, Rule
from gatekeeper.static.walk import FIELD_GETTERS, LEAF_TYPES, field_getter

Handler = Callable[[cst.CSTNode], object]


_HANDLERS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def handler_names(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
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
            visit_names, leave_names = handler_names(cls)
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
    (_EXTRAS, None) where extra handlers go. Computed once per rule set and node type, and
    bound to the rule instances once per RuleSet (rule_set.py), which files reuse."""
    found = templates.get(kind)
    if found is None:
        name = kind.__name__
        enter: list[tuple[int, object]] = []
        if name in _BEFORE:
            enter.append((_ENGINE, _BEFORE[name]))
        if name == "SimpleString":
            enter.append((_ENGINE, Traversal._collect_string))
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


class Traversal:
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
                rule = rules[position]
                handler = getattr(rule, what)  # type: ignore[arg-type]
                # a rule instance may switch a handler off for this file (see _RuleSet.check_switches)
                if handler is not None and what not in rule.__dict__.get(SWITCHED_OFF, ()):
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
        getters, leaf = FIELD_GETTERS, LEAF_TYPES
        stack: list = [module]
        while stack:
            item = stack.pop()
            kind = type(item)
            if kind is tuple:
                for handler in item[1]:
                    handler(item[0])
                continue
            plan = plans.get(kind)
            if plan is None:
                plan = plans[kind] = self._plans(kind)
            for handler in plan[0]:
                handler(item)
            if plan[1]:  # most node types have nothing to do on leaving: no marker for them
                stack.append((item, plan[1]))
            # walk.children(item), inlined; a node without child nodes (a Name) pushes nothing
            kids = []
            for value in (getters.get(kind) or field_getter(kind))(item):
                value_kind = type(value)
                if value_kind is tuple or value_kind is list:
                    kids.extend(value)
                elif value_kind not in leaf:
                    kids.append(value)
            if kids:
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
    "Call": Traversal._record_call,
    "FunctionDef": Traversal._enter_function,
    "ClassDef": Traversal._enter_class,
    "Lambda": Traversal._enter_lambda,
    **{name: Traversal._enter_comprehension for name in _COMPREHENSION_NAMES},
}
_AFTER: dict[str, Callable] = {
    "Assign": Traversal._after_assign,
    "AnnAssign": Traversal._after_ann_assign,
    "For": Traversal._after_for,
    "CompFor": Traversal._after_for,
    "WithItem": Traversal._after_with_item,
    "ExceptHandler": Traversal._after_except,
    "NamedExpr": Traversal._after_named_expr,
}
_ON_LEAVE: dict[str, Callable] = {
    "FunctionDef": Traversal._leave_function,
    "ClassDef": Traversal._leave_class,
    "Lambda": Traversal._pop_scope,
    **{name: Traversal._pop_scope for name in _COMPREHENSION_NAMES},
}


def _last(func: cst.BaseExpression) -> str:
    return func.value if (type(func) is cst.Name) else func.attr.value  # type: ignore[union-attr]


def _directly_in_class(ctx: FileContext, node: cst.FunctionDef) -> bool:
    parent = ctx.parents.get(node)
    grand = ctx.parents.get(parent) if parent is not None else None
    return type(grand) is cst.ClassDef
