from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.identity_caches import (
    children, has_graph, identity_read, mentions_version, value_of_input, view_chain,
)
from gatekeeper.static.examples import Invalid, Valid, snippet
from gatekeeper.static.rule import Rule
from gatekeeper.static.syntax import is_self_attr

_ENTRIES = ("forward", "__call__")


@dataclass
class _Scope:
    node: cst.FunctionDef
    views: set[str]  # forward's tensor inputs and locals that are views of them
    computed: set[str] = field(default_factory=set)  # locals computed from their values
    keys: dict[str, cst.BaseExpression] = field(default_factory=dict)  # local -> value, for keys
    assigns: list[cst.Assign] = field(default_factory=list)  # local assignments, classified lazily
    replayed: int = 0  # how many of them are classified into views / computed / keys


class CachesInputByIdentity(Rule):
    """forward keeps, across calls, a value computed from an input's values (a converted,
    transposed or packed copy, a kernel's result) and refreshes it only when the input's
    identity changes: the store is keyed by `id(x)` / `x.data_ptr()` /
    `x.untyped_storage()`, or guarded by `if x.data_ptr() != self._ptr:` / `if x is not
    self._src:` (also with an early return: `if ...: return use(self._xt)` then the
    refresh), and nothing in the key or the guard reads `x._version`.

    Why it games the benchmark: identity does not change when the values do. A harness
    that writes new values into the same input buffer (in place, as timing loops and
    CUDA-graph harnesses do) gets results computed from the old values, and the skipped
    conversion is timed as if the kernel did it. Certain: without `_version` such a cache
    is wrong for every in-place update of the input.

    Not flagged: caches whose key or guard reads `._version`; caches of the module's own
    parameters and buffers (`self.weight.data_ptr()` keying a packed weight; forward's
    inputs are its parameters); keys by shape or dtype (launch configurations); storing the
    input itself or a view of it (`self._x = x`, `x.t()`: they read the live storage);
    CUDA graphs captured on the input and replayed (the replay recomputes); a result memo
    that is returned as the output (GK102 / GK106 report it).
    """

    code = "GK108"
    name = "CachesInputByIdentity"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    summary = "caches a value computed from an input, keyed by its identity without `_version`"
    message = ("{target} keeps a value computed from the input `{input}` across calls and is refreshed only when "
               "the input's identity (read with {key}) changes, never when `{input}._version` does: after an in-place update of `{input}` (same object, same "
               "memory, new values) forward computes from the old values.")
    hint = (
        "Recompute from the input on every call. If a cache keyed by identity is really needed, add the input's "
        "`_version` to the key (`(x.data_ptr(), x._version)`), or cache only what comes from the module's own "
        "parameters."
    )
    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    key = (x.data_ptr(), x._version)
                    if key != self._key:
                        self._xt = x.t().contiguous()
                        self._key = key
                    return _ext.mm(self._xt, self.weight)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    n = x.shape[0]
                    if n not in self._plans:
                        self._plans[n] = make_plan(x.float().shape)
                    return _ext.run(x, self._plans[n])
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    w = self.weight
                    if w.data_ptr() != self._wptr:
                        self._packed = pack(w)
                        self._wptr = w.data_ptr()
                    return _ext.mm(x, self._packed)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if x.data_ptr() != self._ptr:
                        self._x = x.view(x.shape[0], -1)
                        self._out = torch.empty_like(x)
                        self._ptr = x.data_ptr()
                    _ext.run(self._x, self._out)
                    return self._out.clone()
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if x.data_ptr() != self._ptr:
                        self._xt = x.t().contiguous()
                        self._ptr = x.data_ptr()
                    return _ext.mm(self._xt, self.weight)
        """), line=5, message="`self._xt` keeps a value computed from the input `x`"),
        Invalid(snippet("""
            import torch
            _packed = {}
            class ModelNew(torch.nn.Module):
                def forward(self, a, b):
                    k = id(b)
                    if k not in _packed:
                        _packed[k] = _ext.pack(b.float())
                    return _ext.mm(a, _packed[k])
        """), line=7, message="`_packed[...]` keeps a value computed from the input `b`"),
        Invalid(snippet("""
            import torch
            import weakref
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self._t = weakref.WeakKeyDictionary()
                def forward(self, x):
                    if x not in self._t:
                        self._t[x] = x.t().contiguous()
                    return _ext.mm(self._t[x], self.weight)
        """), line=9, message="`x` itself as the key (a tensor hashes by identity)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if x is self._src:
                        return _ext.run(self._half)
                    self._half = x.half()
                    self._src = x
                    return _ext.run(self._half)
        """), line=6, message="refreshed only when the input's identity (read with `is`) changes"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.scopes: list[Optional[_Scope]] = []
        self.stores: list[tuple[str, cst.Assign, str, _Scope, int]] = []  # key, node, target, scope, locals before
        self.helpers: dict[str, tuple[set[str], cst.BaseExpression]] = {}  # one-return functions, for keys

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        body = node.body.body if type(node.body) is cst.IndentedBlock else ()
        if len(body) == 1 and type(body[0]) is cst.SimpleStatementLine and type(body[0].body[0]) is cst.Return \
                and body[0].body[0].value is not None:  # `def _key(t): return t.data_ptr()`
            params = {p.name.value for p in (*node.params.posonly_params, *node.params.params)} - {"self"}
            self.helpers[node.name.value] = (params, body[0].body[0].value)
        if node.name.value in _ENTRIES and self.ctx.classes:
            params = {p.name.value for p in (*node.params.posonly_params, *node.params.params)} - {"self"}
            self.scopes.append(_Scope(node, params))
        else:
            self.scopes.append(None)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        scope = self.scopes[-1] if self.scopes else None
        if scope is None or len(node.targets) != 1:
            return
        target = node.targets[0].target
        if type(target) is cst.Name:
            scope.assigns.append(node)  # classified in finish, only for functions that store
            return
        where = self._persistent(target)
        if where is not None:
            self.stores.append((self.ctx.function_key, node, where, scope, len(scope.assigns)))

    def _replay(self, scope: _Scope, upto: int) -> None:
        """Classify the locals assigned before a store: views of an input, values computed
        from one, keys. Stores come in source order, so each function is replayed once."""
        for node in scope.assigns[scope.replayed:upto]:
            name = node.targets[0].target.value  # type: ignore[attr-defined]
            scope.keys[name] = node.value
            if self._guard(node.value, scope) is not None:
                continue  # a key (`key = _ident(x)`), not a value
            if value_of_input(self.ctx, node.value, scope.views, scope.computed):
                scope.computed.add(name)
                scope.views.discard(name)
            elif view_chain(node.value, scope.views):  # `xt = x.t()`: still the input's storage
                scope.views.add(name)
        scope.replayed = max(scope.replayed, upto)

    def _persistent(self, target: cst.BaseExpression) -> Optional[str]:
        """`self._x` / `self._cache[k]` / `CACHE[k]` (a module global): storage kept across calls."""
        if is_self_attr(target):
            return f"`self.{target.attr.value}`"  # type: ignore[attr-defined]
        if type(target) is cst.Subscript:
            base = target.value
            if is_self_attr(base):
                return f"`self.{base.attr.value}[...]`"  # type: ignore[attr-defined]
            if type(base) is cst.Name and base.value in self.ctx.constants:
                return f"`{base.value}[...]`"
        return None

    def _unguarded_key(self, node: cst.Assign, target: cst.BaseExpression, scope: _Scope) -> Optional[str]:
        """How the store is keyed or guarded by identity without `_version`, or None."""
        if type(target) is cst.Subscript and len(target.slice) == 1 and type(target.slice[0].slice) is cst.Index:
            key = target.slice[0].slice.value
            found = self._guard(key, scope)
            if found is not None:
                return found or None
            followed = self._follow(key, scope)
            parts = [e.value for e in followed.elements] if type(followed) is cst.Tuple else [followed]
            held = next((p.value for p in parts if type(p) is cst.Name and p.value in scope.views), None)
            if held is not None and not mentions_version(followed):
                return f"`{held}` itself as the key (a tensor hashes by identity)"
        for ancestor in self.ctx.ancestors(node):
            if ancestor is scope.node:
                break
            if type(ancestor) is cst.If:
                found = self._guard(ancestor.test, scope)
                if found is not None:
                    return found or None
        # early return: `if x is self._src: return ...` earlier in the same block
        statement = next((a for a in self.ctx.ancestors(node) if type(a) is cst.SimpleStatementLine), None)
        block = self.ctx.parent(statement) if statement is not None else None
        if type(block) is cst.IndentedBlock and statement in block.body:
            for earlier in block.body[:list(block.body).index(statement)]:
                if type(earlier) is cst.If and _returns(earlier.body):
                    found = self._guard(earlier.test, scope)
                    if found is not None:
                        return found or None
        return None

    def _guard(self, test: cst.BaseExpression, scope: _Scope) -> Optional[str]:
        """'' for a guard that reads `_version`, the identity read for one that does not, None
        for a test that is not an identity guard."""
        test = self._follow(test, scope)
        how = identity_read(self.ctx, test, scope.views | scope.computed)
        if how is not None:
            return "" if mentions_version(test) else how
        for node in children(test):  # `self._key(x)` / `_key(x)`: a helper that returns an identity read
            if type(node) is not cst.Call:
                continue
            func = node.func
            name = func.value if type(func) is cst.Name else func.attr.value if is_self_attr(func) else None
            if name in self.helpers and any(type(n) is cst.Name and n.value in scope.views
                                            for a in node.args for n in children(a.value)):
                params, returned = self.helpers[name]
                inner = identity_read(self.ctx, returned, params)
                if inner is not None:
                    return "" if mentions_version(returned) or mentions_version(test) else f"`{name}()`, which reads {inner}"
        return None

    def _follow(self, expr: cst.BaseExpression, scope: _Scope) -> cst.BaseExpression:
        """A key held in a local (`k = id(b)`) is the expression it was built from."""
        if type(expr) is cst.Name and expr.value in scope.keys:
            return scope.keys[expr.value]
        if type(expr) is cst.Comparison:
            parts = [self._follow(expr.left, scope)] + [self._follow(t.comparator, scope) for t in expr.comparisons]
            if any(p is not o for p, o in zip(parts, [expr.left] + [t.comparator for t in expr.comparisons])):
                return cst.Tuple([cst.Element(p) for p in parts] + [cst.Element(expr)])
        return expr

    def finish(self) -> None:
        for key, node, where, scope, upto in self.stores:
            if self.ctx.is_init_only(key):
                continue
            self._replay(scope, upto)
            source = value_of_input(self.ctx, node.value, scope.views, scope.computed)
            if source is None:
                continue
            if self._guard(node.value, scope) is not None:
                continue  # storing the key itself (`self._key = key`)
            how = self._unguarded_key(node, node.targets[0].target, scope)
            if how is None:
                continue
            if _returns_store(scope.node, node.targets[0].target):
                continue  # a memo of the output itself: GK102 / GK106
            if has_graph(self.ctx, [scope.node.body]):
                continue  # a CUDA graph captured on the input: its replays read the live input
            self.report(node, self.message.format(target=where, input=source, key=how),
                        evidence={"store": where, "input": source, "key": how})


def _returns(body: cst.BaseSuite) -> bool:
    return any(type(n) is cst.Return for n in children(body))


def _returns_store(function: cst.FunctionDef, target: cst.BaseExpression) -> bool:
    """forward returns the stored value itself (`return self._out`, `return self._out.clone()`)."""
    stored = cst.Module(body=[]).code_for_node(target.value if type(target) is cst.Subscript else target)
    for node in children(function.body):
        if type(node) is cst.Return and node.value is not None:
            value = node.value
            if type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in ("clone", "detach"):
                value = value.func.value
            if type(value) is cst.Subscript:
                value = value.value
            if cst.Module(body=[]).code_for_node(value) == stored:
                return True
    return False
