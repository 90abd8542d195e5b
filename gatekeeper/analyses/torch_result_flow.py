"""Which torch uses can reach what a function gives back? Not a rule file.

Torch that never touches the result is not doing the timed work: a build-time self-test of
the freshly built extension (`if not torch.allclose(ext.f(t), torch.softmax(t)): raise`), a
sanity check, a probe whose value only decides whether to raise. The torch-fallback rules
judge only uses whose value can reach the result.

A backward slice over one function, flow-insensitive and conservative (when in doubt a
statement counts as reaching the result):
- sinks: `return`/`yield`, `break`/`continue`, a store to `self.X`, to a `global` name, or
  into / onto an object the function did not create (`out[...] = v`, `obj.attr = v`);
- an expression statement reaches the result when a call in it may write a name that does,
  or anything the function did not create (a parameter, `self`, a module global): it may
  write what it hands to a call that is not a pure torch op and the object whose method it
  calls (`y.copy_(t)`, `k[grid](x, t)`, `outs.append(t)`, `_ext.f(x)`); a pure torch call
  whose value is dropped (`torch.softmax(t)` in a warm-up loop) reaches nothing;
- an in-place method (`y.add_(t)`, `out=y`) anywhere writes its receiver, and a call that is
  not a pure torch op (a kernel launch, a helper) may write every argument it is handed;
- a name bound to a tuple, list, set or dict display (`args = (x, y, out)`) holds its elements:
  a call handed the container (`k[grid](*args)`) may write each of them;
- an assignment reaches the result when its target does; an `if`/`while`/`for`/`with`
  header when a statement under it does (control dependence). A condition whose branch only
  raises (or asserts) reaches nothing.
Statement kinds it does not model (match, class bodies) make every use of the function count.
TorchUsage asks it about torch uses and about own launches alike: a launch whose output never
reaches the result (a self-test of the build) is not the kernel doing the work either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

import libcst as cst

from gatekeeper.static.python_ast import on_forget
from gatekeeper.static.walk import walk

if TYPE_CHECKING:
    from gatekeeper.analyses.torch_usage_model import Use

_SINKS = (cst.Return, cst.Break, cst.Continue)
_NEUTRAL = (cst.Raise, cst.Assert, cst.Pass, cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal, cst.Del)
_COMPOUND = (cst.If, cst.While, cst.For, cst.With, cst.Try, cst.TryStar)


@dataclass(eq=False)
class _Unit:
    node: cst.CSTNode
    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    sink: bool = False
    binds: set[str] = field(default_factory=set)  # names an assignment binds (not written through)
    children: list["_Unit"] = field(default_factory=list)  # statements under a header
    relevant: bool = False


class _Unsupported(Exception):
    pass


def _names(expr: Optional[cst.CSTNode]) -> set[str]:
    """Variables an expression reads: `x`, and `self.buf` as one name."""
    out: set[str] = set()
    if expr is None:
        return out
    skip: set[int] = set()
    for entering, node in walk(expr):
        if not entering or id(node) in skip:
            continue
        if type(node) is cst.Attribute:
            skip.add(id(node.attr))
            if type(node.value) is cst.Name and node.value.value == "self":
                out.add(f"self.{node.attr.value}")
        elif type(node) is cst.Name:
            out.add(node.value)
        elif type(node) is cst.Arg and node.keyword is not None:
            skip.add(id(node.keyword))
    return out


def _root(target: cst.BaseExpression) -> Optional[str]:
    while True:
        if type(target) is cst.Name:
            return target.value
        if type(target) is cst.Attribute:
            if type(target.value) is cst.Name and target.value.value == "self":
                return f"self.{target.attr.value}"
            target = target.value
        elif type(target) is cst.Subscript:
            target = target.value
        else:
            return None


Pure = Callable[[cst.Call], bool]
# A library's attribute handed to a call (`t.to(torch.bfloat16)`, `dtype=np.float32`): a value
# no call can write, not an object of the caller's (without it every `.to(torch.bfloat16)` made
# the line a store into the module `torch`, and a self-test's set-up reached the result).
Constant = Callable[[cst.BaseExpression], bool]


def _scan(expr: Optional[cst.CSTNode], pure: Pure, receivers: bool = False,
          constant: Optional[Constant] = None) -> tuple[set[str], set[str]]:
    """One walk: the variables an expression reads, and the roots it may write: `y.add_(t)`,
    `torch.mul(a, b, out=y)`, what it hands to a call that is not a pure torch op (a launch
    `k[grid](x, y)` or `_ext.f(x, out)` writes its arguments) and, with `receivers`, the
    objects whose impure methods it calls (`outs.append(y)`, `self._run(x)`)."""
    reads: set[str] = set()
    writes: set[str] = set()
    if expr is None:
        return reads, writes
    skip: set[int] = set()
    for entering, node in walk(expr):
        if not entering or id(node) in skip:
            continue
        kind = type(node)
        if kind is cst.Name:
            reads.add(node.value)
        elif kind is cst.Attribute:
            skip.add(id(node.attr))
            if type(node.value) is cst.Name and node.value.value == "self":
                reads.add(f"self.{node.attr.value}")
        elif kind is cst.Arg:
            if node.keyword is not None:
                skip.add(id(node.keyword))
        elif kind is cst.Call:
            func = node.func
            impure = not pure(node)
            if type(func) is cst.Attribute:
                method = func.attr.value
                if (method.endswith("_") and not method.startswith("_")) or (receivers and impure):
                    root = _root(func.value)
                    if root:
                        writes.add(root)
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "out":
                    writes.update(_names(arg.value))
                elif impure and not (constant is not None and constant(arg.value)):
                    root = _root(arg.value)
                    if root:
                        writes.add(root)
    return reads, writes


class _Function:
    def __init__(self, function: cst.FunctionDef, pure: Pure, constant: Optional[Constant] = None) -> None:
        self.pure, self.constant = pure, constant
        self.globals: set[str] = set()
        self.units: dict[int, _Unit] = {}  # id(small statement or header expression) -> unit
        self.all: list[_Unit] = []
        self.created: set[str] = set()  # names the function binds itself
        self.holds: dict[str, set[str]] = {}  # args = (x, out): writing args may write x and out
        self.block(function.body, None)

    def add(self, key: cst.CSTNode, unit: _Unit, parent: Optional[_Unit]) -> _Unit:
        self.units[id(key)] = unit
        self.all.append(unit)
        if parent is not None:
            parent.children.append(unit)
        return unit

    def block(self, body: cst.BaseSuite, parent: Optional[_Unit]) -> None:
        items = body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()
        for stmt in items:
            self.statement(stmt, parent)

    def statement(self, stmt: cst.CSTNode, parent: Optional[_Unit]) -> None:
        if type(stmt) is cst.SimpleStatementLine or type(stmt) is cst.SimpleStatementSuite:
            for small in stmt.body:
                self.small(small, parent)
            return
        if type(stmt) is cst.FunctionDef:  # a closure: binds its name, reads what its body reads
            self.created.add(stmt.name.value)
            self.add(stmt, _Unit(stmt, reads=_names(stmt.body), writes={stmt.name.value}), parent)
            return
        if type(stmt) not in _COMPOUND:
            raise _Unsupported
        header = self.add(stmt, _Unit(stmt), parent)
        if type(stmt) in (cst.If, cst.While):
            header.reads, header.writes = _scan(stmt.test, self.pure, constant=self.constant)
        elif type(stmt) is cst.For:
            header.reads, header.writes = _scan(stmt.iter, self.pure, constant=self.constant)
            header.writes |= _names(stmt.target)
            self.created |= _names(stmt.target)
        elif type(stmt) is cst.With:
            for item in stmt.items:
                reads, writes = _scan(item.item, self.pure, constant=self.constant)
                header.reads |= reads
                header.writes |= writes
                if item.asname is not None:
                    header.writes |= _names(item.asname.name)
                    self.created |= _names(item.asname.name)
        self.block(stmt.body, header)
        orelse = getattr(stmt, "orelse", None)
        if type(orelse) is cst.If:
            self.statement(orelse, header)  # elif: its test decides the branches below it
        elif orelse is not None:
            self.block(orelse.body, header)
        for handler in getattr(stmt, "handlers", ()):
            self.block(handler.body, header)
        final = getattr(stmt, "finalbody", None)
        if final is not None:
            self.block(final.body, header)

    def small(self, small: cst.CSTNode, parent: Optional[_Unit]) -> None:
        kind = type(small)
        unit = _Unit(small)
        if kind in (cst.Global, cst.Nonlocal):
            self.globals.update(n.name.value for n in small.names)
        if isinstance(small, _SINKS):
            unit.sink, unit.reads = True, _names(getattr(small, "value", None))
        elif kind in (cst.Assign, cst.AnnAssign, cst.AugAssign):
            targets = [t.target for t in small.targets] if kind is cst.Assign else [small.target]
            unit.reads, unit.writes = _scan(small.value, self.pure, constant=self.constant)
            if kind is cst.AugAssign:
                unit.reads |= _names(small.target)
            for target in targets:
                if type(target) is cst.Name:
                    self._note_container(target.value, small.value)
                if type(target) in (cst.Name, cst.Tuple, cst.List):
                    names = _names(target)
                    unit.writes |= names
                    unit.binds |= names
                    self.created |= names
                else:  # obj.attr = v, out[i] = v: writes the object, reads the index
                    root = _root(target)
                    unit.reads |= _names(target)
                    if root is None or root.startswith("self."):
                        unit.sink = True
                    else:
                        unit.writes.add(root)
        elif kind is cst.Expr:  # a bare call: what it may write is what it is handed (or its receiver)
            value = small.value
            if type(value) in (cst.Yield, cst.Await):
                unit.sink = True
            unit.reads, unit.writes = _scan(value, self.pure, receivers=True, constant=self.constant)
        elif not isinstance(small, _NEUTRAL):
            raise _Unsupported
        self.add(small, unit, parent)

    def _note_container(self, name: str, value: Optional[cst.BaseExpression]) -> None:
        if isinstance(value, (cst.Tuple, cst.List, cst.Set)):
            items = [e.value for e in value.elements]
        elif isinstance(value, cst.Dict):
            items = [e.value for e in value.elements]
        else:
            return
        roots = {r for r in map(_root, items) if r}
        if roots:
            self.holds.setdefault(name, set()).update(roots)

    def _held_too(self, writes: set[str]) -> set[str]:
        """`writes` with every name a written container holds, transitively."""
        out, todo = set(writes), list(writes)
        while todo:
            for held in self.holds.get(todo.pop(), ()):
                if held not in out:
                    out.add(held)
                    todo.append(held)
        return out

    def solve(self) -> None:
        if self.holds:
            for unit in self.all:
                if unit.writes - unit.binds:
                    unit.writes = unit.binds | self._held_too(unit.writes - unit.binds)
        outside = lambda names: {n for n in names if n not in self.created or n in self.globals}  # noqa: E731
        for unit in self.all:
            if unit.writes & self.globals or any(w.startswith("self.") for w in unit.writes):
                unit.sink = True
            if unit.writes and outside(unit.writes) and type(unit.node) is not cst.FunctionDef:
                unit.sink = True  # y.add_(t), k(x, out), obj.update(...) on a parameter, self or a module object
        relevant: set[str] = set()
        changed = True
        while changed:
            changed = False
            for unit in self.all:
                if unit.relevant:
                    continue
                if unit.sink or unit.writes & relevant or any(c.relevant for c in unit.children):
                    unit.relevant = True
                    relevant |= unit.reads
                    changed = True


_CACHE: dict[int, tuple[cst.FunctionDef, Optional[_Function]]] = {}


def _analysis(function: cst.FunctionDef, pure: Pure, constant: Optional[Constant] = None) -> Optional[_Function]:
    hit = _CACHE.get(id(function))
    if hit is not None and hit[0] is function:
        return hit[1]
    try:
        result: Optional[_Function] = _Function(function, pure, constant)
        result.solve()  # type: ignore[union-attr]
    except _Unsupported:
        result = None
    if len(_CACHE) >= 128:
        _CACHE.clear()
    _CACHE[id(function)] = (function, result)
    return result


def outside_result(path: tuple[cst.CSTNode, ...], pure: Pure, constant: Optional[Constant] = None) -> bool:
    """The value of the node at `path[0]` (its ancestors up to the enclosing function)
    cannot reach what that function returns, stores or writes. `pure(call)`: the call
    writes none of its arguments (a torch op that is not in place)."""
    if not path or type(path[-1]) is not cst.FunctionDef:
        return False
    for node in path:
        if type(node) is cst.Return:
            return False  # returned: reaches the result (the common case needs no analysis)
        if isinstance(node, cst.BaseSmallStatement) or isinstance(node, cst.BaseCompoundStatement):
            break
    analysis = _analysis(path[-1], pure, constant)  # type: ignore[arg-type]
    if analysis is None:
        return False
    for node in path:
        unit = analysis.units.get(id(node))
        if unit is not None:
            return not unit.relevant
    return False


def use_outside_result(use: "Use", pure: Pure, constant: Optional[Constant] = None) -> bool:
    return use.node is not None and not use.deferred and outside_result(use.path, pure, constant)


on_forget(_CACHE.clear)  # entries hold the file's nodes
