"""Which of the submission's top-level definitions are its own work, for GK400, GK401 and
GK403. Not a rule file.

Real submissions paste the reference's helper classes (`DenseBlock`, `PatchEmbed`) and
then change some of them, or keep the reference's `forward` text while building their own
layers in `__init__`. Whether such code runs the reference's computation depends on what
the names it uses are bound to, not on the text of one method:

- a top-level class or function of the submission is *own* unless the reference defines
  one of the same name with the same normalised body (every method alike: a pasted copy);
- a top-level name bound by assignment (`ext = load_inline(...)`, `k = triton.jit(f)`) is
  own unless the reference binds the same name;
- a method *delegates to own code* when it names an own name, or reads a `self.`
  attribute that its class (or a base the submission defines) builds from an own name,
  directly or through locals (`layers.append(Fused(...))`) and helper methods
  (`self._make_layer(...)` whose body names an own name).

Everything is computed lazily (only when a rule has a match to judge) and memoised per
module, so the common file pays nothing.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import libcst as cst

from gatekeeper.analyses.body_fingerprint import fingerprint, import_map, index_module, reference_fingerprint
from gatekeeper.analyses.reference_top_level import libcst_kind, methods, reference_definitions
from gatekeeper.static.context import FileContext
from gatekeeper.static.source_order import visit

_GROWERS = frozenset({"append", "extend", "insert", "add", "update", "add_module", "register_module"})


def _top_level(module: cst.Module) -> dict[str, cst.CSTNode]:
    """Top-level classes, functions and assigned names (also one level into if/try)."""
    out: dict[str, cst.CSTNode] = {}
    _take(module.body, out)
    return out


def _take(stmts: Sequence[cst.CSTNode], out: dict[str, cst.CSTNode]) -> None:
    # A module-level function, not a closure that calls itself: that closure is a reference
    # cycle, which kept `out` (and the file's tree through it) alive until the next collection.
    for stmt in stmts:
        if type(stmt) in (cst.ClassDef, cst.FunctionDef):
            out[stmt.name.value] = stmt  # type: ignore[attr-defined]
        elif type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                targets = []
                if type(small) is cst.Assign:
                    targets = [t.target for t in small.targets]
                elif type(small) is cst.AnnAssign and small.value is not None:
                    targets = [small.target]
                for target in targets:
                    for name in _target_names(target):
                        out.setdefault(name, small)
        elif type(stmt) is cst.If and not _is_main_guard(stmt):
            _take(stmt.body.body, out)
            if type(stmt.orelse) is cst.Else:
                _take(stmt.orelse.body.body, out)
        elif type(stmt) is cst.Try:
            _take(stmt.body.body, out)
            for handler in stmt.handlers:
                _take(handler.body.body, out)


def _is_main_guard(stmt: cst.If) -> bool:
    test = stmt.test
    return type(test) is cst.Comparison and type(test.left) is cst.Name and test.left.value == "__name__"


def _target_names(target: cst.BaseExpression) -> list[str]:
    if type(target) is cst.Name:
        return [target.value]
    if type(target) in (cst.Tuple, cst.List):
        return [n for e in target.elements for n in _target_names(e.value)]
    return []


def _methods(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    return {s.name.value: s for s in cls.body.body if type(s) is cst.FunctionDef} \
        if (type(cls.body) is cst.IndentedBlock) else {}


class _Names:
    """Bare names, `self.x` attributes read, and `self.m(...)` methods called, in a subtree
    (nested functions included: a closure built in `__init__` still builds the layer)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.attrs: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if type(node.value) is cst.Name and node.value.value == "self":
            self.attrs.add(node.attr.value)
            return False
        return True


def _names(node: Optional[cst.CSTNode]) -> _Names:
    found = _Names()
    if node is not None:
        visit(node, found)  # libcst's own visit rebuilds the subtree: 10x slower
    return found


class _Index:
    def __init__(self, ctx: FileContext) -> None:
        self.mine = _top_level(ctx.module)
        # The reference's side from CPython's tree: its libcst tree is parsed only on demand.
        self.theirs, self._imports_theirs = reference_definitions(ctx.problem) if ctx.problem is not None else ({}, {})
        self._imports_mine = import_map(ctx.module)
        self._own: dict[str, bool] = {}
        self._ctx = ctx
        self._indexed = False
        self._names: dict[int, tuple[cst.CSTNode, _Names]] = {}
        self._flow_nodes: dict[int, tuple[cst.CSTNode, list]] = {}

    def names(self, node: Optional[cst.CSTNode]) -> _Names:
        """`_names(node)`, memoised: the fixpoint below asks for the same subtrees again."""
        found = self._names.get(id(node))
        if found is None or found[0] is not node:
            found = self._names[id(node)] = (node, _names(node))  # type: ignore[assignment]
        return found[1]

    def flow_nodes(self, body: cst.CSTNode) -> list[tuple[Callable[..., None], cst.CSTNode]]:
        found = self._flow_nodes.get(id(body))
        if found is None or found[0] is not body:
            collector = _FlowNodes()
            visit(body, collector)
            found = self._flow_nodes[id(body)] = (body, collector.found)  # type: ignore[assignment]
        return found[1]

    def is_own(self, name: str) -> bool:
        cached = self._own.get(name)
        if cached is None:
            self._own[name] = False  # while judging: a cycle of pasted classes is not own
            cached = self._own[name] = self._judge(name) or self._uses_own(name)
        return cached

    def _uses_own(self, name: str) -> bool:
        """A pasted class or function that builds or calls own code (a pasted `BasicLayer`
        building the submission's rewritten `SwinBlock`) runs own code too."""
        node = self.mine.get(name)
        if type(node) not in (cst.ClassDef, cst.FunctionDef):
            return False
        return bool(self.own_among(self.names(node).names - {name}))

    def _judge(self, name: str) -> bool:
        mine = self.mine.get(name)
        if mine is None:
            return False
        theirs = self.theirs.get(name)
        if theirs is None:
            return True
        if not self._indexed:  # fingerprints from the ast trees, not from generated code
            self._indexed = True
            index_module(self._ctx.module, self._ctx.text)
        kind = libcst_kind(theirs)
        if type(mine) is cst.ClassDef and kind is cst.ClassDef:
            a, b = _methods(mine), methods(theirs)  # type: ignore[arg-type]
            if a.keys() != b.keys():
                return True
            return any(fingerprint(a[m], self._imports_mine) != reference_fingerprint(b[m], self._imports_theirs) for m in a)
        if type(mine) is cst.FunctionDef and kind is cst.FunctionDef:
            return fingerprint(mine, self._imports_mine) != reference_fingerprint(theirs, self._imports_theirs)
        return type(mine) is not kind or type(mine) not in (cst.Assign, cst.AnnAssign)

    def own_among(self, names: set[str]) -> set[str]:
        return {n for n in names if n in self.mine and self.is_own(n)}

    def class_chain(self, cls: cst.ClassDef) -> list[cst.ClassDef]:
        """The class and the bases the submission itself defines, nearest first."""
        chain, todo, seen = [], [cls], set()
        while todo:
            current = todo.pop(0)
            if current.name.value in seen:
                continue
            seen.add(current.name.value)
            chain.append(current)
            for base in current.bases:
                if type(base.value) is cst.Name:
                    found = self.mine.get(base.value.value)
                    if type(found) is cst.ClassDef:
                        todo.append(found)
        return chain

    def tainted_attrs(self, cls: cst.ClassDef) -> set[str]:
        """`self.` attributes and methods of the class that are, or run, own code: attributes
        built (in any method) from own code, and methods whose body names own code or reads
        such an attribute."""
        methods: dict[str, cst.FunctionDef] = {}
        for current in reversed(self.class_chain(cls)):
            methods.update(_methods(current))
        reads = {m: self.names(f.body) for m, f in methods.items()}
        tainted = {m for m, found in reads.items() if self.own_among(found.names)}
        for _ in range(4):  # attributes built from attributes and helper methods: a short fixpoint
            before = len(tainted)
            for method in methods.values():
                # `act_layer=FusedGELU`: a parameter whose default is own code
                local = {p.name.value for p in (*method.params.params, *method.params.kwonly_params)
                         if p.default is not None and self.own_among(self.names(p.default).names)}
                for _ in range(2):
                    _Flow(self, local, tainted).run(method.body)
            tainted |= {m for m, found in reads.items() if found.attrs & tainted}
            if len(tainted) == before:
                break
        return tainted


class _Flow:
    """One pass of "is this value built from own code" over a method body."""

    def __init__(self, index: _Index, local: set[str], attrs: set[str]) -> None:
        self.index, self.local, self.attrs = index, local, attrs

    def run(self, body: cst.CSTNode) -> None:
        # The fixpoint runs each method many times; its handlers never prune, so the nodes
        # they see are listed once per body (in source order) and replayed.
        for handler, node in self.index.flow_nodes(body):
            handler(self, node)

    def _tainted(self, expr: Optional[cst.CSTNode]) -> bool:
        found = self.index.names(expr)
        return bool(self.index.own_among(found.names) or found.names & self.local or found.attrs & self.attrs)

    def _store(self, target: cst.BaseExpression) -> None:
        if type(target) is cst.Name:
            self.local.add(target.value)
        elif type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == "self":
            self.attrs.add(target.attr.value)
        elif type(target) is cst.Subscript:
            self._store(target.value)
        elif type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self._store(element.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._tainted(node.value):
            for target in node.targets:
                self._store(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and self._tainted(node.value):
            self._store(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._tainted(node.value):
            self._store(node.target)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self._tainted(node.body):  # `def conv_fused(i, o): return FusedConv(i, o)` inside `__init__`
            self.local.add(node.name.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self._tainted(node.body):  # a layer class defined inside `__init__`
            self.local.add(node.name.value)

    def visit_For(self, node: cst.For) -> None:
        if self._tainted(node.iter):
            self._store(node.target)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in _GROWERS and any(self._tainted(a.value) for a in node.args):
            self._store(func.value)  # `layers.append(Fused(...))`, `self.add_module("f", Fused())`
        elif type(func) is cst.Name and func.value == "setattr" and len(node.args) >= 3 \
                and self._tainted(node.args[2].value) and type(node.args[0].value) is cst.Name:
            # `setattr(self, name, Fused())`: which attribute is unknown; every read counts
            self.attrs.add("*")


class _FlowNodes:
    """Collects, in visiting order, the nodes that _Flow has a handler for."""

    def __init__(self) -> None:
        self.found: list[tuple[Callable[..., None], cst.CSTNode]] = []


for _name, _handler in list(vars(_Flow).items()):
    if _name.startswith("visit_"):
        setattr(_FlowNodes, _name, (lambda h: lambda self, node: self.found.append((h, node)))(_handler))


def index(ctx: FileContext) -> _Index:
    found = ctx.__dict__.get("_gk4_local")  # one per checked file, dropped with its context
    if found is None:
        found = ctx.__dict__["_gk4_local"] = _Index(ctx)
    return found


def is_pasted_class(ctx: FileContext, name: str) -> bool:
    """A top-level class of the submission that is the reference's class of that name, unchanged."""
    idx = index(ctx)
    return type(idx.mine.get(name)) is cst.ClassDef and name in idx.theirs and not idx.is_own(name)


def is_own_class(ctx: FileContext, name: str) -> bool:
    """A top-level class of the submission that the reference does not define as it is."""
    idx = index(ctx)
    return type(idx.mine.get(name)) is cst.ClassDef and idx.is_own(name)


def delegates_to_own_code(ctx: FileContext, cls: Optional[cst.ClassDef], function: cst.FunctionDef) -> bool:
    """`function` (a method of `cls`, or a module-level function when `cls` is None) runs
    the submission's own code: it names an own definition, or reads an attribute the
    class builds from one."""
    idx = index(ctx)
    used = idx.names(function.body)
    if idx.own_among(used.names):
        return True
    if cls is None or not used.attrs:
        return False
    tainted = idx.tainted_attrs(cls)
    return bool(used.attrs & tainted) or "*" in tainted
