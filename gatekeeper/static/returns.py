"""What reaches `ModelNew.forward`'s return value.

The cached-output rules ask two questions a per-function view cannot answer: does this
value become the model's output, and is this call's result computed afresh? This module
records, during the engine's one traversal, every `return` with what it returns (a
persistent storage origin, the helper calls whose result it is, the extension functions it
hands persistent storage to), and which stored storage the statements that dominate the
return write into. At the end it follows the returned helper calls from the roots
(`ModelNew.forward`, else every `forward`/`__call__`) to the functions whose return value
is the model's output.

Deliberately over-approximate where it must guess: a helper named like a defined function
is followed (by its last name, as the forward path does), and a call to a method of `self`
before the return counts as a write the analysis cannot see ("opaque").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional

import libcst as cst

from gatekeeper.static.context import FileContext
from gatekeeper.static.forward_path import is_root
from gatekeeper.static.persistence import PersistenceTracker
from gatekeeper.static.syntax import store_key
from gatekeeper.static.walk import subtree

# How the storage a return hands back was produced on the path to that return, and the
# methods whose result is the tensor's contents again (stored_writes.py defines both).
from gatekeeper.static.stored_writes import (  # noqa: E402 - re-exported for the rules
    FRESH, MAYBE, NONE, OPAQUE, PASS_THROUGH, VISIBLE, StoredWrites, storage_key, stronger,
)


@dataclass
class ReturnSite:
    node: cst.Return
    value: cst.BaseExpression
    key: str
    origin: Optional[str] = None  # the persistent storage the value denotes
    stored: Optional[str] = None  # the same, through copies and views (`self._c[k].clone()`)
    write: str = NONE  # how the dominating statements produced it (see the constants)
    how: str = ""  # the statement that wrote it, for messages
    callees: list[str] = field(default_factory=list)  # calls whose result is the value
    handed: list[tuple[str, int, str]] = field(default_factory=list)  # (extension fn, arg index, origin)


@dataclass
class _Frame:
    key: str
    call_locals: dict[str, list[str]] = field(default_factory=dict)  # local -> callees it holds


class ReturnFlow:
    """Feed from a rule's visitors: `enter_function`, `leave_function`, `declare`,
    `assign`, `on_return`, `add_cpp`; query in `finish`: `forward_sites`, `reaching`."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.tracker = PersistenceTracker(ctx)
        self.writes = StoredWrites(ctx, self.tracker)
        self.stack: list[_Frame] = []
        self.sites: dict[str, list[ReturnSite]] = {}
        self.instances: dict[str, str] = {}  # "Cls.attr" -> class instantiated there
        self.cpp_returns: dict[str, set[int]] = {}
        self.copies: dict[str, set[tuple[str, str]]] = {}  # key -> (dest local, source local) of `dest.copy_(src)`
        self._reaching: Optional[set[str]] = None
        self.decorators: dict[str, list[str]] = {}  # function key -> the names of its decorators

    @classmethod
    def shared(cls, ctx: FileContext, owner: object) -> tuple["ReturnFlow", bool]:
        """One flow per file for all the rules that use it; the first rule to ask feeds it
        (whichever rules are enabled), the others only read it."""
        flow = ctx.__dict__.get("_return_flow")
        if flow is None:
            flow = ctx.__dict__["_return_flow"] = cls(ctx)
            return flow, True
        return flow, False

    # feeding -------------------------------------------------------------------
    def enter_function(self) -> None:
        self.tracker.enter_function()
        self.stack.append(_Frame(self.ctx.function_key))
        node = self.ctx.functions[-1] if self.ctx.functions else None
        if node is not None and node.decorators:  # `@_staged def forward`: the wrapper it returns runs instead
            names = [_last_name(d.decorator.func if type(d.decorator) is cst.Call else d.decorator)
                     for d in node.decorators]
            self.decorators[self.ctx.function_key] = [n for n in names if n]

    def leave_function(self) -> None:
        self.tracker.leave_function()
        if self.stack:
            self.stack.pop()

    def declare(self, node: cst.Global | cst.Nonlocal) -> None:
        self.tracker.declare(node)

    def assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.tracker.assign(target.target, node.value)
            if not self.stack:
                continue
            t = target.target
            if type(t) is cst.Name and type(node.value) is cst.Call:
                self.stack[-1].call_locals.setdefault(t.value, []).extend(self._callees(node.value))
            if (type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == "self"
                    and self.ctx.class_name and type(node.value) is cst.Call and type(node.value.func) is cst.Name):
                self.instances[f"{self.ctx.class_name}.{t.attr.value}"] = node.value.func.value

    def note_call(self, call: cst.Call) -> None:
        """Record `out.copy_(hit)`: a value copied into a local the function may return."""
        func = call.func
        if (self.stack and type(func) is cst.Attribute and func.attr.value == "copy_"
                and type(func.value) is cst.Name and call.args):
            for node in subtree(call.args[0].value, into_functions=False):
                if type(node) is cst.Name:
                    self.copies.setdefault(self.stack[-1].key, set()).add((func.value.value, node.value))

    def add_cpp(self, functions) -> None:
        for fn in functions:
            if fn.returns_params:
                self.cpp_returns.setdefault(fn.name, set()).update(fn.returns_params)

    def on_return(self, node: cst.Return) -> None:
        if not self.stack or node.value is None or self.stack[-1].key.endswith("__init__"):
            return
        frame = self.stack[-1]
        for value in _elements(node.value):
            site = ReturnSite(node, value, frame.key)
            site.origin = self.tracker.origin(value)
            inner = unwrap(value)
            if type(inner) is cst.Call:
                site.callees = self._callees(inner)
                for index, arg in enumerate(a for a in inner.args if a.keyword is None and not a.star):
                    origin = self.tracker.origin(arg.value)
                    if origin is not None:
                        site.handed.append((_last_name(inner.func), index, origin))
            elif type(inner) is cst.Name and inner.value in frame.call_locals:
                site.callees = list(frame.call_locals[inner.value])
            site.stored = site.origin or self.tracker.origin(unwrap(value))
            if site.stored is not None:
                site.write, site.how = self._dominating_write(node, value, site.stored)
            self.sites.setdefault(frame.key, []).append(site)

    # queries -------------------------------------------------------------------
    def reaching(self) -> set[str]:
        """Keys of the functions whose return value becomes the model's output."""
        if self._reaching is not None:
            return self._reaching
        defined = self.ctx.defined
        by_last: dict[str, set[str]] = {}
        for key in defined:
            by_last.setdefault(key.rsplit(".", 1)[-1], set()).add(key)
        roots = [k for k in defined if k in ("ModelNew.forward", "ModelNew.__call__")]
        if not roots:
            roots = [k for k in defined if is_root(self.ctx, k)]
        roots += [wrapper for root in list(roots) for wrapper in self._wrappers(root, defined)]
        reached: set[str] = set()
        stack = list(roots)
        while stack:
            key = stack.pop()
            if key in reached:
                continue
            reached.add(key)
            for site in self.sites.get(key, ()):
                for callee in site.callees:
                    stack.extend(self._resolve(callee, defined, by_last))
        self._reaching = reached
        return reached

    def _wrappers(self, key: str, defined: set[str]) -> list[str]:
        """The functions a decorator of the file returns in place of `key` (`def _staged(fn): ...
        def run(self, x): ...; return run`): they run as the model's call (red team round 11:
        a memo in the decorator's closure)."""
        out = []
        for name in self.decorators.get(key, ()):
            for site in self.sites.get(name, ()) if name in defined else ():
                inner = _name(unwrap(site.value))
                for candidate in (f"{name}.{inner}", inner) if inner is not None else ():
                    if candidate in defined:  # a nested function's key may be its own name
                        out.append(candidate)
                        break
        return out

    def forward_sites(self) -> Iterator[ReturnSite]:
        """Every returned value that is the model's output (or part of a returned tuple)."""
        for key in sorted(self.reaching()):
            yield from self.sites.get(key, ())

    def caller_write(self, site: ReturnSite) -> tuple[str, str]:
        """How a function that returns `site`'s helper result through a local writes it on
        the way (`out = self._buffer(x); kernel[grid](x, out); return out`): the strongest
        write over the reaching callers (stored_writes.handed_on), NONE when none does."""
        defined = self.ctx.defined
        by_last: dict[str, set[str]] = {}
        for key in defined:
            by_last.setdefault(key.rsplit(".", 1)[-1], set()).add(key)
        best: tuple[str, str] = (NONE, "")
        for key in self.reaching():
            for caller in self.sites.get(key, ()):
                local = _name(unwrap(caller.value))
                if local is None or not any(site.key in self._resolve(c, defined, by_last) for c in caller.callees):
                    continue
                best = stronger(best, self.writes.handed_on(caller.node, local))
        return best

    def extension_returns(self, site: ReturnSite) -> Optional[tuple[str, int, str]]:
        """(function, argument, origin) when the value is an extension call whose C++ body
        returns the persistent storage it was handed."""
        for name, index, origin in site.handed:
            if index in self.cpp_returns.get(name, set()):
                return name, index, origin
        return None

    def returns_expr(self, key: str, node: cst.CSTNode) -> bool:
        """True when `node` (inside function `key`) is, or flows into, that function's
        returned value: part of a return, assigned to a returned local, or copied into one."""
        returned = {_name(unwrap(s.value)) for s in self.sites.get(key, ())} - {None}
        for anc in self.ctx.ancestors(node):
            if type(anc) is cst.Return:
                return True
            if type(anc) is cst.AssignTarget:
                return False  # a store into the cache, not a read of it
            if type(anc) in (cst.Assign, cst.AugAssign, cst.AnnAssign):
                targets = [t.target for t in anc.targets] if (type(anc) is cst.Assign) else [anc.target]
                names = {t.value for t in targets if type(t) is cst.Name}
                copied = {dest for dest, src in self.copies.get(key, ()) if src in names}
                return bool((names | copied) & returned)
            if type(anc) is cst.Call and type(anc.func) is cst.Attribute and anc.func.attr.value == "copy_":
                return _name(anc.func.value) in returned
            if type(anc) in (cst.SimpleStatementLine, cst.FunctionDef):
                return False
        return False

    def guarded_returns(self, key: str, test_node: cst.CSTNode) -> list[ReturnSite]:
        """Returns of stored values, not written on the way, inside the branch whose test
        holds `test_node` (for an `else`-less `if`, the branch body)."""
        branch = next((a for a in self.ctx.ancestors(test_node) if type(a) in (cst.If, cst.IfExp, cst.While)), None)
        if branch is None or not _within(self.ctx, test_node, branch.test):
            return []
        out = []
        for site in self.sites.get(key, ()):
            if site.stored is None or site.write != NONE:
                continue  # only stored values handed back without being written on the way
            if type(branch) is cst.IfExp:
                if _within(self.ctx, site.value, branch):
                    out.append(site)
            elif any(a is branch for a in self.ctx.ancestors(site.node)):
                out.append(site)
        return out

    # helpers -------------------------------------------------------------------
    def _callees(self, call: cst.Call) -> list[str]:
        func = call.func
        if type(func) is cst.Name:
            return [func.value]
        if type(func) is not cst.Attribute:
            return []
        attr = func.attr.value
        base = func.value
        cls = self.ctx.class_name
        if type(base) is cst.Name and base.value == "self" and cls:
            out = [f"{cls}.{attr}"]
            made = self.instances.get(f"{cls}.{attr}")
            if made:
                out += [f"{made}.forward", f"{made}.__call__"]
            return out
        if attr == "apply" and type(base) is cst.Name:
            return [f"{base.value}.forward"]
        return [attr]

    def _resolve(self, callee: str, defined: set[str], by_last: dict[str, set[str]]) -> set[str]:
        if callee in defined:
            return {callee}
        found = set(by_last.get(callee.rsplit(".", 1)[-1], set()))
        # `_run = _make_runner()`: the function a factory returns.
        for value in self.ctx.constants.get(callee, []):
            if type(value) is cst.Call and type(value.func) is cst.Name and value.func.value in defined:
                for site in self.sites.get(value.func.value, ()):
                    name = _name(site.value)
                    if name and name in defined:
                        found.add(name)
        return found

    def _dominating_write(self, ret: cst.Return, value: cst.BaseExpression, origin: str) -> tuple[str, str]:
        """How the statements that run before `ret` produced the stored value it returns
        (stored_writes.py: FRESH, VISIBLE, OPAQUE, MAYBE or NONE)."""
        return self.writes.dominating(ret, value, origin)


def unwrap(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`x.clone()`, `x.detach().contiguous()`, `torch.clone(x)` -> x."""
    while type(expr) is cst.Call:
        func = expr.func
        if type(func) is cst.Attribute and func.attr.value in PASS_THROUGH:
            if type(func.value) is cst.Name and func.value.value in ("torch",) and expr.args:
                expr = expr.args[0].value
            else:
                expr = func.value
        else:
            break
    return expr


def _elements(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    if type(value) in (cst.Tuple, cst.List):
        return [e.value for e in value.elements if type(e) is cst.Element]
    if type(value) is cst.Dict:
        return [e.value for e in value.elements if type(e) is cst.DictElement]
    return [value]


def _name(expr: cst.BaseExpression) -> Optional[str]:
    return expr.value if (type(expr) is cst.Name) else None


def _last_name(func: cst.BaseExpression) -> str:
    if type(func) is cst.Attribute:
        return func.attr.value
    return func.value if (type(func) is cst.Name) else ""


def _within(ctx: FileContext, node: cst.CSTNode, container: cst.CSTNode) -> bool:
    return node is container or any(a is container for a in ctx.ancestors(node))
