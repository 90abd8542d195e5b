"""Which statements before a `return` write the stored tensor it hands back. Not a rule file.

The return-value flow (returns.py) asks this for every `return` of storage kept across
calls (`return self.y`): was it produced afresh on the way, and how sure is that? The
answer is one of five kinds, weakest first:

- NONE: nothing on the path can write it. Only then may a rule say "certain: the call
  hands back an earlier result".
- MAYBE: nothing names it, but a call the analysis cannot see into could write it: a
  stored callable (`plan[1]()`, a bound graph replay kept in a tuple), a method of `self`,
  an extension function when the storage was handed to native code elsewhere in the file,
  a helper handed `self`; or a write that runs only on some paths (a loop body, one arm of
  an `if` without `else`) under a test that does not read the stored state.
- OPAQUE: handed to a call that may write it, directly, through a local alias or inside a
  container (`bufs = (x, self.y)`; `self._bufs = (self.y,)` then `run((x, *self._bufs))`).
- VISIBLE: a whole write we can see (`copy_`, `out=`, a graph replay, an in-place method).
- FRESH: rebound to a new value.

Branches merge as dominance does: a write in every arm of an `if`/`elif`/`else` chain
dominates the return (the weakest arm's kind); a write in some arms only is MAYBE. A
write guarded by a test of persistent state (`if self.y is None:`, `if k not in
self._cache:`) is the cache being filled on a miss and does not count: that is the very
pattern the cached-output rules look for.
"""

from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from gatekeeper.static.context import FileContext
from gatekeeper.static.persistence import PersistenceTracker
from gatekeeper.static.syntax import store_key
from gatekeeper.static.walk import subtree

NONE, MAYBE, OPAQUE, VISIBLE, FRESH = "none", "maybe", "opaque", "visible", "fresh"
RANK = {NONE: 0, MAYBE: 1, OPAQUE: 2, VISIBLE: 3, FRESH: 4}
# Methods whose result is the tensor's contents again (a copy or a view).
# numpy's `copy`, `.numpy()` and `torch.from_numpy` / `torch.as_tensor` hand back the same contents too.
PASS_THROUGH = frozenset({"clone", "detach", "contiguous", "to", "view", "view_as", "reshape", "float", "half", "cuda",
                          "copy", "numpy", "from_numpy", "as_tensor"})
READS = frozenset({"size", "dim", "numel", "stride", "data_ptr", "is_contiguous", "expand_as", "as_strided", "type_as",
                   "item", "tolist", "get", "keys", "values", "items", "element_size", "nelement"})
# Qualified-name prefixes of calls that cannot reach Python state they are not handed.
_SEEN = ("torch.", "builtins.", "math.", "triton.", "numpy.", "functools.", "operator.", "itertools.", "os.")
_CONTAINER_MAKERS = frozenset({"builtins.tuple", "builtins.list", "builtins.dict", "types.SimpleNamespace"})

Write = tuple[str, str]  # (kind, the statement that wrote it, for messages)


def stronger(a: Write, b: Write) -> Write:
    return b if RANK[b[0]] > RANK[a[0]] else a


class StoredWrites:
    """One per file; `dominating(ret, value, origin)` during the traversal (the tracker's
    current frame is the function of `ret`)."""

    def __init__(self, ctx: FileContext, tracker: PersistenceTracker) -> None:
        self.ctx = ctx
        self.tracker = tracker
        self._contains: Optional[dict[str, set[str]]] = None  # storage key -> keys it holds
        self._native: set[str] = set()  # keys handed to a call outside torch somewhere in the file

    # the file-wide facts, built on first use --------------------------------------------
    def _scan_file(self) -> dict[str, set[str]]:
        if self._contains is not None:
            return self._contains
        contains: dict[str, set[str]] = {}
        for node in subtree(self.ctx.module):
            if type(node) is cst.Assign:
                held = _held_keys(self.ctx, node.value)
                if held:
                    for target in node.targets:
                        for key in _target_keys(target.target):
                            contains.setdefault(key, set()).update(held)
            elif type(node) is cst.Call and not self._seen_call(node):
                for arg in node.args:
                    self._native.update(k for n in subtree(arg.value, into_functions=False)
                                        if (k := _key(n)) is not None)
        self._contains = contains
        return contains

    def _holders(self, origin_key: str) -> set[str]:
        """Keys (persistent or local) whose value holds the origin: aliases and containers."""
        contains = self._scan_file()
        holders = {origin_key}
        for _ in range(3):  # containers of containers
            holders |= {k for k, held in contains.items() if held & holders}
        return holders - {origin_key, "self"}

    def _escaped(self, origin_key: str) -> bool:
        """Was the storage (or something it holds) handed to native code somewhere?"""
        contains = self._scan_file()
        inside = {origin_key}
        for _ in range(3):
            inside |= {k for key in list(inside) for k in contains.get(key, ())}
        return bool(inside & self._native)

    # the walk up from the return -----------------------------------------------------
    def dominating(self, ret: cst.Return, value: cst.BaseExpression, origin: str) -> Write:
        okey = storage_key(origin)
        fn = next((a for a in self.ctx.ancestors(ret) if type(a) in (cst.FunctionDef, cst.Lambda)), None)
        scan = _Scan(self, origin, okey, store_key(_unwrap(value)), self._holders(okey),
                     _locals_of(fn) if type(fn) is cst.FunctionDef else set())
        if type(fn) is cst.FunctionDef:
            assigns = [n for n in subtree(fn.body, into_functions=False) if type(n) is cst.Assign]
            for _ in range(2):  # flow-insensitive: an alias made anywhere in the function counts
                for node in assigns:
                    scan.note_alias(node)
        own = scan.expr(value, returned=True)
        if own[0] != NONE:
            return own
        best: Write = (NONE, "")
        child: cst.CSTNode = ret
        for anc in self.ctx.ancestors(ret):
            if anc is fn:
                break
            body = getattr(anc, "body", None)
            if isinstance(body, (tuple, list)):
                index = next((i for i, s in enumerate(body) if s is child), None)
                for stmt in body[:index] if index is not None else ():
                    best = stronger(best, scan.stmt(stmt))
            child = anc
        return best

    def handed_on(self, ret: cst.Return, local: str) -> Write:
        """How the caller may write what a helper returned into `local` before `ret` returns
        it (`out = self._buffer(x); kernel[grid](x, out); return out`): the strongest write
        of a call that is handed `local` (or a view of it), never the call that bound it.
        Calls on other values do not count: the helper's storage is reached only through
        `local` here."""
        fn = next((a for a in self.ctx.ancestors(ret) if type(a) is cst.FunctionDef), None)
        if fn is None:
            return (NONE, "")
        scan = _Scan(self, f"<local {local}>", f"<local {local}>", None, {local}, _locals_of(fn))
        bound = {id(n.value) for n in subtree(fn.body, into_functions=False) if type(n) is cst.Assign
                 and any(type(t.target) is cst.Name and t.target.value == local for t in n.targets)}
        best: Write = (NONE, "")
        for node in subtree(fn.body, into_functions=False):
            if type(node) is not cst.Call or id(node) in bound:
                continue
            handed = [a.value for a in node.args] + ([node.func.value] if type(node.func) is cst.Attribute else [])
            if not any(type(n) is cst.Name and n.value == local for h in handed for n in subtree(h, into_functions=False)):
                continue
            write: Write = (scan._call(node, False), _short(node))
            guarded = any(type(a) in (cst.If, cst.For, cst.While, cst.Try, cst.IfExp)
                          for a in self._ancestors_within(node, fn))
            best = stronger(best, _weak(write) if guarded else write)
        return best

    def _ancestors_within(self, node: cst.CSTNode, fn: cst.FunctionDef) -> list[cst.CSTNode]:
        out: list[cst.CSTNode] = []
        for anc in self.ctx.ancestors(node):
            if anc is fn:
                break
            out.append(anc)
        return out

    def _seen_call(self, call: cst.Call) -> bool:
        """A call that cannot write Python state it is not handed: torch, builtins, a
        Triton launch (kernels keep no state), a tensor method that reads."""
        if type(call.func) is cst.Subscript:
            return True
        if type(call.func) is cst.Attribute and call.func.attr.value in (PASS_THROUGH | READS):
            return True
        qual = self.ctx.qualname(call.func) or ""
        return qual.startswith(_SEEN) and not qual.startswith("torch.ops.")  # custom ops may write


class _Scan:
    """The statements of one function, for one returned origin."""

    def __init__(self, owner: StoredWrites, origin: str, okey: str, ret_key: Optional[str], holders: set[str],
                 local_names: set[str]) -> None:
        self.owner = owner
        self.tracker = owner.tracker
        self.origin = origin
        self.okey = okey
        self.ret_key = ret_key
        self.holders = set(holders)
        self.locals = local_names
        self.escaped: Optional[bool] = None

    def stmt(self, stmt: cst.CSTNode, guarded: bool = False) -> Write:
        """The write a statement makes when it runs; `guarded`: it runs on some paths only."""
        kind = type(stmt)
        if kind is cst.SimpleStatementLine:
            best: Write = (NONE, "")
            for small in stmt.body:
                if type(small) is cst.Assign:
                    keys = {store_key(t.target) for t in small.targets}
                    if (self.ret_key in keys or self.okey in keys) and self.tracker.origin(small.value) is None:
                        return (NONE, "") if guarded else (FRESH, "")  # elsewhere it is not the stored value
                if type(small) in (cst.Expr, cst.Assign, cst.AugAssign, cst.AnnAssign):
                    best = stronger(best, self.expr(small, returned=False))
            return _weak(best) if guarded else best
        if kind is cst.With:
            return self.block(stmt.body.body, guarded)
        if kind is cst.Try:
            best = self.block(stmt.body.body, guarded)
            for handler in stmt.handlers:
                best = stronger(best, _weak(self.block(handler.body.body, True)))
            if stmt.orelse is not None:
                best = stronger(best, _weak(self.block(stmt.orelse.body.body, True)))
            if stmt.finalbody is not None:
                best = stronger(best, self.block(stmt.finalbody.body.body, guarded))
            return best
        if kind is cst.If:
            return self._branches(stmt, guarded)
        if kind in (cst.For, cst.While):
            best = _weak(self.block(stmt.body.body, True))
            if stmt.orelse is not None:
                best = stronger(best, _weak(self.block(stmt.orelse.body.body, True)))
            return best
        return (NONE, "")

    def block(self, body: Iterable[cst.CSTNode], guarded: bool) -> Write:
        best: Write = (NONE, "")
        for inner in body:
            best = stronger(best, self.stmt(inner, guarded))
        return best

    def _branches(self, node: cst.If, guarded: bool) -> Write:
        arms: list[Write] = []
        tests: list[cst.BaseExpression] = []
        current: Optional[cst.CSTNode] = node
        while type(current) is cst.If:
            tests.append(current.test)
            arms.append(self.block(current.body.body, guarded))
            current = current.orelse
        complete = current is not None
        if complete:
            arms.append(self.block(current.body.body, guarded))  # type: ignore[union-attr]
        weakest = min(arms, key=lambda w: RANK[w[0]])
        if complete and weakest[0] != NONE:
            return _weak(weakest) if guarded else weakest  # every arm writes it: the write dominates
        if any(self._reads_state(t) for t in tests):
            return (NONE, "")  # filled on a cache miss: the pattern itself, not a recompute
        return _weak(max(arms, key=lambda w: RANK[w[0]]))

    def _reads_state(self, test: cst.BaseExpression) -> bool:
        for n in subtree(test, into_functions=False):
            if type(n) in (cst.Name, cst.Attribute, cst.Subscript) and self.tracker.origin(n) is not None:
                return True
        return False

    def note_alias(self, node: cst.Assign) -> None:
        """`bufs = (x, self.y)`, `y = bufs[1]`: locals that hold the origin (not
        `out = torch.empty_like(self.y)`, a fresh tensor)."""
        held = _held_keys(self.owner.ctx, node.value)
        if held & self.holders or self.okey in held:
            for target in node.targets:
                self.holders.update(_target_keys(target.target))

    def _mentions(self, n: cst.CSTNode) -> bool:
        key = _key(n)
        if key is not None and key in self.holders:
            return True
        found = self.tracker.origin(n)  # type: ignore[arg-type]
        return found is not None and (found == self.origin or self.origin.startswith(found)
                                      or found.startswith(self.origin))

    def expr(self, root: cst.CSTNode, *, returned: bool) -> Write:
        best: Write = (NONE, "")
        for node in subtree(root, into_functions=False):
            if type(node) is cst.Call:
                best = stronger(best, (self._call(node, returned), _short(node)))
        return best

    def _call(self, node: cst.Call, returned: bool) -> str:
        func = node.func
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method in PASS_THROUGH or method in READS:
                return NONE  # a view or a copy of the stored tensor reads it
            if method == "replay" and not node.args:
                return VISIBLE
            if method.endswith("_") and not method.startswith("_") and self._mentions(func.value):
                return VISIBLE
        seen = self.owner._seen_call(node) and not any(
            a.keyword is not None and a.keyword.value == "inplace" for a in node.args)  # F.relu(y, inplace=True)
        for arg in node.args:
            value = arg.value
            if seen and not (arg.keyword is not None and arg.keyword.value == "out") and type(func) is not cst.Subscript \
                    and not _last(func).endswith("_"):
                continue  # torch reads what it is handed, unless told to write it (out=, `torch.add_`)
            if any(self._mentions(n) for n in subtree(value, into_functions=False)
                   if type(n) in (cst.Name, cst.Attribute, cst.Subscript)):
                return VISIBLE if arg.keyword is not None and arg.keyword.value == "out" else OPAQUE
            if type(value) is cst.Name and value.value == "self" and self.okey.startswith("self."):
                return OPAQUE  # a helper handed the module can write any of its attributes
        if returned:
            return NONE
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            return OPAQUE  # a method of self may write the stored tensor
        if type(func) in (cst.Name, cst.Subscript) and self.tracker.origin(func) is not None:
            return MAYBE  # a stored callable (a bound graph replay, a closure) may write it
        if seen or _local_root(func, self.locals):
            return NONE
        if self.escaped is None:
            self.escaped = self.owner._escaped(self.okey) or not self.okey.startswith("self.")
        return MAYBE if self.escaped else NONE


def _weak(write: Write) -> Write:
    """A write that may not run: it makes "no write" uncertain, nothing more. A rebinding
    that may not run says nothing about the paths where the stored value is returned."""
    if write[0] == FRESH:
        return (NONE, "")
    return (MAYBE, write[1]) if write[0] != NONE else write


def _last(func: cst.BaseExpression) -> str:
    if type(func) is cst.Attribute:
        return func.attr.value
    return func.value if type(func) is cst.Name else ""


def _key(n: cst.CSTNode) -> Optional[str]:
    if type(n) in (cst.Name, cst.Attribute):
        return store_key(n)  # type: ignore[arg-type]
    return None


def _target_keys(target: cst.BaseExpression) -> list[str]:
    if type(target) in (cst.Tuple, cst.List):
        return [k for e in target.elements for k in _target_keys(e.value)]
    if type(target) is cst.Subscript:
        return _target_keys(target.value)  # `self._bufs[0] = y`: the container holds y
    key = store_key(target)
    return [key] if key is not None else []


def _held_keys(ctx: FileContext, value: cst.BaseExpression) -> set[str]:
    """The names and self attributes a container display (or a bare alias) holds."""
    kind = type(value)
    if kind in (cst.Name, cst.Attribute):
        key = store_key(value)
        return {key} if key is not None and key != "self" else set()
    if kind in (cst.Tuple, cst.List, cst.Set):
        return {k for e in value.elements for k in _held_keys(ctx, e.value)}  # type: ignore[attr-defined]
    if kind is cst.Dict:
        return {k for e in value.elements if type(e) is cst.DictElement for k in _held_keys(ctx, e.value)}  # type: ignore[attr-defined]
    if kind is cst.Call and (ctx.qualname(value.func) or "") in _CONTAINER_MAKERS:  # type: ignore[attr-defined]
        return {k for a in value.args for k in _held_keys(ctx, a.value)}  # type: ignore[attr-defined]
    if kind in (cst.StarredElement, cst.Subscript):
        return _held_keys(ctx, value.value)  # type: ignore[attr-defined]
    return set()


def _locals_of(fn: cst.FunctionDef) -> set[str]:
    names = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
    names.discard("self")
    for node in subtree(fn.body, into_functions=False):
        if type(node) is cst.AssignTarget and type(node.target) is cst.Name:
            names.add(node.target.value)
    return names


def _local_root(func: cst.BaseExpression, names: set[str]) -> bool:
    """`y.add(...)`, `out.view(...)`: a method of a local value, not a module's function."""
    while type(func) in (cst.Attribute, cst.Subscript, cst.Call):
        func = func.func if type(func) is cst.Call else func.value  # type: ignore[attr-defined]
    return type(func) is cst.Name and func.value in names


def storage_key(origin: str) -> str:
    """"module global _OUT[...]" -> "_OUT"; "self._y" -> "self._y"."""
    for prefix in ("module global ", "closure variable ", "class attribute ", "function attribute "):
        origin = origin.removeprefix(prefix)
    return origin.split("[")[0]


def _unwrap(expr: cst.BaseExpression) -> cst.BaseExpression:
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in PASS_THROUGH:
        expr = expr.func.value
    return expr


def _short(node: cst.CSTNode) -> str:
    try:
        text = cst.Module([]).code_for_node(node)
    except Exception:  # noqa: BLE001 - a message detail, never worth failing over
        return ""
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."
