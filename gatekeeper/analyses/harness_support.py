"""Shared helpers for the GK4xx rules (reference reuse, tampering, introspection, dynamic
code, sandbox escapes). Not a rule file: it defines no rule with a `code`.

- `resolve`: `ctx.qualname` plus the indirections these hacks use to reach a module:
  `sys.modules["x"]`, `importlib.import_module("x")`, `__import__("x")`, `globals()["x"]`,
  `__builtins__["eval"]`, `X.__dict__["y"]`, `vars(X)["y"]`, and `getattr` with a name
  held in a module constant. Results are memoised per node for the current traversal.
- `UseRule`: a rule that reports every reference to a set of qualified names (outermost
  attribute only), and the imports of them when nothing else was reported.
- `strings_in`: the string literals an argument is built from (command lines).
C++ helpers live in cpp_source.py.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Severity
from gatekeeper.static.context import FileContext
from gatekeeper.static.names import dotted, string_value
from gatekeeper.static.rule import Rule
from gatekeeper.static.syntax import argument, in_main_guard  # noqa: F401 - in_main_guard is re-exported to the GK4xx rules

_CACHE_ATTR = "_gk4_resolved"
# Module globals that `dir(builtins)` also lists; in a module they are the module's own.
_MODULE_DUNDERS = frozenset({"__builtins__", "__spec__", "__name__", "__doc__", "__loader__",
                             "__package__", "__file__", "__path__"})
_MISSING = object()


def literal(ctx: FileContext, expr: Optional[cst.BaseExpression]) -> Optional[str]:
    """A string literal, or a module constant bound once to a string literal."""
    if expr is None:
        return None
    if type(expr) in (cst.SimpleString, cst.ConcatenatedString):
        return string_value(expr)
    if type(expr) is cst.Name:
        values = ctx.constants.get(expr.value, [])
        if len(values) == 1 and type(values[0]) in (cst.SimpleString, cst.ConcatenatedString):
            return string_value(values[0])
    return None


def resolve(ctx: FileContext, expr: Optional[cst.BaseExpression]) -> Optional[str]:
    if expr is None:
        return None
    cache: Optional[dict[int, Optional[str]]] = ctx.__dict__.get(_CACHE_ATTR)
    if cache is None:  # not setdefault: that builds an empty dict on every call
        cache = ctx.__dict__[_CACHE_ATTR] = {}
    key = id(expr)
    hit = cache.get(key, _MISSING)
    if hit is not _MISSING:
        return hit  # type: ignore[return-value]
    value = _resolve(ctx, expr)
    cache[key] = value
    return value


def _resolve(ctx: FileContext, expr: cst.BaseExpression) -> Optional[str]:
    kind = type(expr)  # not isinstance: libcst nodes are ABCs (slow checks); these four are final
    if kind is cst.Name:
        name = expr.value
        if name in _MODULE_DUNDERS:
            return "builtins" if name == "__builtins__" and ctx.resolver.lookup(name) is None else None
        # Most names of a file are locals and parameters: those resolve without a scope walk.
        return ctx.resolver.name_qualname(name) if ctx.resolver.may_name_a_path(name) else None
    if kind is cst.Attribute:
        base = resolve(ctx, expr.value)
        if base:
            return f"{base}.{expr.attr.value}"
        # `cls.target`, `self.target`: what the class body bound it to (`target = torch.cuda.Event`);
        # not what `__init__` stored on the instance (`self.layers = nn.ModuleList(...)` is an object)
        if type(expr.value) is cst.Name and expr.value.value in ("self", "cls") \
                and ctx.resolver.lookup(expr.value.value) is not None:
            return ctx.resolver.class_body_value(expr.attr.value)
        return None
    if kind is cst.Subscript:
        return _subscript(ctx, expr)
    if kind is cst.Call:
        plain = ctx.qualname(expr)
        if plain is not None:
            return plain
        func = resolve(ctx, expr.func)
        if func in ("importlib.import_module", "builtins.__import__"):
            name = literal(ctx, argument(expr, 0, "name"))
            return name if name and all(p.isidentifier() for p in name.split(".")) else None
        if func == "builtins.getattr":
            base = resolve(ctx, argument(expr, 0))
            name = literal(ctx, argument(expr, 1))
            return f"{base}.{name}" if base and name and name.isidentifier() else None
    return None


def subscript_key(ctx: FileContext, expr: cst.Subscript) -> Optional[str]:
    if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Index:
        return None
    return literal(ctx, expr.slice[0].slice.value)


def _subscript(ctx: FileContext, expr: cst.Subscript) -> Optional[str]:
    key = subscript_key(ctx, expr)
    if key is None or not all(p.isidentifier() for p in key.split(".")):
        return None
    base = expr.value
    if type(base) is cst.Call:
        func = resolve(ctx, base.func)
        if func in ("builtins.globals", "builtins.locals") and not base.args:
            return ctx.qualname(cst.Name(key)) if key.isidentifier() else None
        if func == "builtins.vars" and len(base.args) == 1:
            owner = resolve(ctx, base.args[0].value)
            return f"{owner}.{key}" if owner else None
        return None
    owner = resolve(ctx, base)
    if owner is None:
        return None
    if owner == "sys.modules":
        return key
    if owner.endswith(".__dict__"):
        return f"{owner[: -len('.__dict__')]}.{key}"
    if owner == "builtins":
        return f"builtins.{key}"
    return None


_MATCHERS: dict[tuple[str, ...], tuple[frozenset[str], tuple[str, ...]]] = {}


def matches(qual: Optional[str], names: tuple[str, ...]) -> Optional[str]:
    """The entry of `names` that `qual` is or lies under (`torch.cuda` covers
    `torch.cuda.Event`); entries ending in `*` match as plain prefixes (`os.exec*`)."""
    if not qual:
        return None
    matcher = _MATCHERS.get(names)
    if matcher is None:
        exact = frozenset(n for n in names if not n.endswith("*"))
        prefixes = tuple(n[:-1] if n.endswith("*") else n + "." for n in names)
        matcher = _MATCHERS[names] = (exact, prefixes)
    exact, prefixes = matcher
    if qual in exact:
        return qual
    if not qual.startswith(prefixes):
        return None
    for name, prefix in zip(names, prefixes):
        if qual.startswith(prefix):
            return name
    return None


_BINDING_PARENTS = frozenset({cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr})
_NOT_USES = frozenset({cst.Arg, cst.Param, cst.FunctionDef, cst.ClassDef, cst.AsName, cst.NameItem})


class _Hub:
    """The UseRules of one file, indexed by the first part of the names they watch."""

    def __init__(self) -> None:
        self.leader: Optional["UseRule"] = None
        self.by_root: dict[str, list["UseRule"]] = {}

    def add(self, rule: "UseRule", roots: frozenset[str]) -> None:
        if self.leader is None:
            self.leader = rule
        for root in roots:
            self.by_root.setdefault(root, []).append(rule)


_ROOTS: dict[type, frozenset[str]] = {}  # per rule class: the first parts of its NAMES
_LEADER_ONLY = ("visit_Name", "visit_Attribute", "visit_Subscript", "visit_Call")  # handlers only the leader runs


class UseRule(Rule):
    """Reports references to `NAMES` (qualified names, see `matches`). An import of one of
    them is reported only when nothing in the file used it, so each hack gets one finding
    per use site rather than one more at the import."""

    NAMES: tuple[str, ...] = ()

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._imports: list[tuple[cst.CSTNode, str]] = []
        self._used = False
        self._in_import = 0
        hub = self.ctx.__dict__.get("_gk4_hub")
        if hub is None:
            hub = self.ctx.__dict__["_gk4_hub"] = _Hub()
        self._hub: _Hub = hub
        roots = _ROOTS.get(type(self))
        if roots is None:
            roots = _ROOTS[type(self)] = frozenset(n.split(".", 1)[0].rstrip("*") for n in self.NAMES)
        self._hub.add(self, roots)
        if self._hub.leader is not self:
            # Only the leader walks names; the engine skips handlers set to None.
            self.switch_off_inherited(UseRule, _LEADER_ONLY)

    # hooks ---------------------------------------------------------------------------
    def describe(self, qual: str, entry: str, node: cst.CSTNode) -> Optional[tuple[str, Optional[Severity]]]:
        """Message (and severity override) for a use, or None to let it pass."""
        return self.message.format(name=qual), None

    # imports -------------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        self._in_import += 1
        for alias in node.names:
            full = dotted(alias.name)
            entry = matches(full, self.NAMES)
            if full and entry:
                self._imports.append((alias, full))

    def leave_Import(self, node: cst.Import) -> None:
        self._in_import -= 1

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._in_import += 1
        if node.relative or node.module is None:
            return
        base = dotted(node.module) or ""
        if type(node.names) is cst.ImportStar:
            if matches(base, self.NAMES) or any(n.startswith(base + ".") for n in self.NAMES):
                self._emit(node, base, matches(base, self.NAMES) or base)
            return
        for alias in node.names:
            full = f"{base}.{dotted(alias.name)}"
            if matches(full, self.NAMES):
                self._imports.append((alias, full))

    def leave_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._in_import -= 1

    # uses ----------------------------------------------------------------------------
    # Names and attributes are most of a file, so one instance (the hub's leader) resolves
    # each node once and hands it to the rules whose names start with its root.
    def visit_Name(self, node: cst.Name) -> None:
        hub = self._hub
        if hub.leader is not self or self._in_import:
            return
        qual = resolve(self.ctx, node)
        if qual is None:
            return
        rules = hub.by_root.get(qual.split(".", 1)[0])
        if not rules:
            return
        parent = self.ctx.parent(node)
        kind = type(parent)
        if kind is cst.Attribute and parent.attr is node:  # type: ignore[union-attr]
            return  # `model.eval`: an attribute name, not the builtin
        if kind in _NOT_USES and not (kind is cst.Arg and parent.value is node):  # type: ignore[union-attr]
            return  # keyword names, parameters, definitions, `as` names
        if kind in _BINDING_PARENTS and getattr(parent, "target", None) is node:
            return  # `run = eval`: the binding is not a use; its value and later calls are
        for rule in rules:
            rule._check(node, qual)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._dispatch(node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self._hub.leader is self and subscript_key(self.ctx, node) is not None:
            self._dispatch(node)

    def visit_Call(self, node: cst.Call) -> None:
        # importlib.import_module("subprocess").run / __import__("os").system
        if self._hub.leader is self and _is_dynamic_import(node):
            self._dispatch(node)

    def _dispatch(self, node: cst.BaseExpression) -> None:
        hub = self._hub
        if hub.leader is not self or self._in_import:
            return
        qual = resolve(self.ctx, node)
        if qual is None:
            return
        for rule in hub.by_root.get(qual.split(".", 1)[0], ()):
            rule._check(node, qual)

    def _check(self, node: cst.BaseExpression, qual: str) -> None:
        entry = matches(qual, self.NAMES)
        if entry is None:
            return
        parent = self.ctx.parent(node)
        if type(parent) is cst.Attribute and parent.value is node and matches(resolve(self.ctx, parent), self.NAMES):  # type: ignore[union-attr]
            return  # the enclosing attribute reports it
        self._emit(node, qual, entry)

    def _emit(self, node: cst.CSTNode, qual: str, entry: str) -> None:
        if any(type(a) is cst.Annotation for a in self.ctx.ancestors(node)):
            return  # a type hint (`code: types.CodeType`) runs nothing
        described = self.describe(qual, entry, node)
        if described is None:
            return
        message, severity = described
        self._used = True
        self.report(node, message, evidence={"name": qual}, severity=severity)

    def finish(self) -> None:
        if self._used:
            return
        for node, full in self._imports:
            described = self.describe(full, matches(full, self.NAMES) or full, node)
            if described is not None:
                self.report(node, described[0], evidence={"name": full}, severity=described[1])


def use_verb(ctx: FileContext, node: cst.CSTNode) -> str:
    """How a matched name is used, for messages: `sys.settrace(f)` is called, `f.f_locals`
    is read, `from sys import _getframe` is imported."""
    parent = ctx.parent(node)
    if type(parent) is cst.Call and parent.func is node:
        return "called"
    if type(node) in (cst.ImportAlias, cst.ImportFrom):
        return "imported"
    return "read"


def _is_dynamic_import(call: cst.Call) -> bool:
    """`importlib.import_module("x")`, `__import__("x")`, `getattr(mod, "x")`: calls that
    `resolve` can name."""
    func = call.func
    last = func.value if (type(func) is cst.Name) else func.attr.value if (type(func) is cst.Attribute) else ""
    return last in ("import_module", "__import__", "getattr")


def strings_in(ctx: FileContext, expr: Optional[cst.BaseExpression], depth: int = 0) -> list[str]:
    """String literals in an argument: a literal, a list/tuple of them, f-string text,
    concatenations, module constants."""
    if expr is None or depth > 6:
        return []
    value = literal(ctx, expr)
    if value is not None:
        return [value]
    if type(expr) in (cst.List, cst.Tuple):
        out: list[str] = []
        for element in expr.elements:
            out.extend(strings_in(ctx, element.value, depth + 1))
        return out
    if type(expr) is cst.FormattedString:
        return [p.value for p in expr.parts if type(p) is cst.FormattedStringText]
    if type(expr) is cst.BinaryOperation:
        return strings_in(ctx, expr.left, depth + 1) + strings_in(ctx, expr.right, depth + 1)
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in ("split", "join", "format"):
        return strings_in(ctx, expr.func.value, depth + 1) + [
            s for a in expr.args for s in strings_in(ctx, a.value, depth + 1)]
    if type(expr) is cst.Name:
        binding = ctx.resolver.lookup(expr.value)
        if binding is not None and binding.kind == "local" and binding.value is not None:
            return strings_in(ctx, binding.value, depth + 1)
    return []
