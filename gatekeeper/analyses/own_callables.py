"""Does a call run the submission's own compiled code, however the callable was reached?
Not a rule file.

TorchUsage sees an own launch when it is written out (`_ext.f(x)`, `k[grid](x)`,
`self.op = _ext.f; self.op(x)`). Agents also reach their extension through

    run = _mod().softmax_rows              a lazily built module (a getter that loads it once)
    self._fast = lambda t: run(t)          a closure / a stored lambda over it
    _max = _ext.max                        a module-level alias (named like a torch op)
    lib = ctypes.CDLL(path); lib.f(...)    a native library of its own (raw C entry points)
    f = CFUNCTYPE(None, c_void_p)(addr)    a raw C function pointer
    Fn.k = cp.RawKernel(src, "k")          a kernel compiled from its own source (CuPy, jiterator,
    m = cp.RawModule(code=src)             a module of them: m.get_function("k"))

This module answers `OwnCallables.call_is_own(call)` by following, on demand, the bindings
of the file: names (per function scope, then enclosing scopes, then the module; `global`
statements bind at module level), `self.X` and `Class.X` attributes, what functions return,
lambdas and `functools.partial`. A name counts as own when one of its bindings is (`_FN =
None` first is the usual lazy slot) and none is a torch callable. One pass over the
statements of the module, made only when a file has a call the traversal could not place.
"""

from __future__ import annotations

from typing import Optional, Protocol

import libcst as cst

from gatekeeper.static.names import string_value
from gatekeeper.static.walk import walk

from gatekeeper.static.context import FileContext


class _Usage(Protocol):
    """What this module reads from TorchUsage (which imports it)."""

    ctx: FileContext
    holders: set[str]
    loader_functions: set[str]
    kernel_defs: set[str]

    def _is_loader_call(self, value: cst.BaseExpression) -> bool: ...

# ctypes and numpy entry points that load a native library: its functions are the
# submission's compiled code unless the library is a vendor one (cuBLAS through ctypes is
# still cuBLAS).
NATIVE_LOADERS = frozenset({
    "ctypes.CDLL", "ctypes.PyDLL", "ctypes.WinDLL", "ctypes.cdll.LoadLibrary", "ctypes.pydll.LoadLibrary",
    "ctypes.windll.LoadLibrary", "numpy.ctypeslib.load_library",
})
_FUNCTION_TYPES = frozenset({"ctypes.CFUNCTYPE", "ctypes.PYFUNCTYPE", "ctypes.WINFUNCTYPE"})
# Calls that compile the submission's own kernel source into a callable: calling what they
# return launches that kernel (`k = cp.RawKernel(src, "name"); k(grid, block, args)`).
KERNEL_FACTORIES = frozenset({
    "cupy.RawKernel", "cupy.ElementwiseKernel", "cupy.ReductionKernel", "triton.compile", "tilelang.compile",
    "torch.cuda.jiterator._create_jit_fn", "torch.cuda.jiterator._create_multi_output_jit_fn",
})
# ... and calls that compile a source into a module whose functions are fetched by name.
MODULE_FACTORIES = frozenset({"cupy.RawModule", "pycuda.compiler.SourceModule"})
_FETCHERS = frozenset({"get_function", "get_kernel"})
_LAST = {q.rsplit(".", 1)[-1] for q in KERNEL_FACTORIES | MODULE_FACTORIES}


def _factory(ctx_qualname: Optional[str], func: cst.BaseExpression, table: frozenset[str]) -> bool:
    """`func` is one of `table`; by its last name when the qualname is out of reach (after the
    traversal, a module imported inside a function no longer resolves: `import cupy as cp`
    in forward)."""
    if ctx_qualname is not None:
        return ctx_qualname in table
    last = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None
    return last in _LAST and any(q.endswith("." + last) for q in table)
VENDOR_LIBRARIES = ("cublas", "cudnn", "cusparse", "cufft", "curand", "cusolver", "nccl", "cutensor", "torch",
                    "libc.", "libm.", "msvcrt")
_DEPTH = 8
Scope = int  # id() of a FunctionDef, 0 for the module


def native_loader(ctx_qualname: Optional[str], call: cst.Call) -> bool:
    """`ctypes.CDLL("./softmax.so")`: a native library that is not a vendor's."""
    if ctx_qualname not in NATIVE_LOADERS:
        return False
    name = string_value(call.args[0].value) if call.args else None
    return not (name and any(v in name.lower() for v in VENDOR_LIBRARIES))


class OwnCallables:
    def __init__(self, usage: _Usage) -> None:
        self.usage = usage
        self.ctx = usage.ctx
        self.names: dict[Scope, dict[str, list[tuple[cst.BaseExpression, Scope]]]] = {0: {}}
        self.enclosing: dict[Scope, Scope] = {}
        self.selfs: dict[str, list[tuple[cst.BaseExpression, Scope]]] = {}
        self.attrs: dict[str, list[tuple[cst.BaseExpression, Scope]]] = {}  # `Fn.kernel = ...`, by "Fn.kernel"
        self.returns: dict[str, list[tuple[cst.BaseExpression, Scope]]] = {}
        self._bodies: dict[int, bool] = {}
        self._index()

    def _index(self) -> None:
        """One pass over the statements (not into expressions): bindings and returns."""
        work: list[tuple[object, Optional[tuple[cst.FunctionDef, set[str]]]]] = [(self.ctx.module, None)]
        while work:
            block, frame = work.pop()
            scope = id(frame[0]) if frame else 0
            for stmt in getattr(block, "body", ()):
                kind = type(stmt)
                if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
                    for small in stmt.body:
                        self._small(small, scope, frame)
                elif kind is cst.FunctionDef:
                    self.enclosing[id(stmt)] = scope
                    self.names[id(stmt)] = {}
                    # a def binds its name: `def run(t): return ext.f(t)`; `self.run = run`
                    self.names.setdefault(scope, {}).setdefault(stmt.name.value, []).append((stmt, scope))
                    work.append((stmt.body, (stmt, set())))
                elif kind is cst.ClassDef:
                    work.append((stmt.body, frame))
                else:  # if / for / while / with / try / match: their blocks, in the same scope
                    for part in _blocks(stmt):
                        work.append((part, frame))

    def _small(self, small: cst.CSTNode, scope: Scope, frame: Optional[tuple[cst.FunctionDef, set[str]]]) -> None:
        kind = type(small)
        if kind in (cst.Global, cst.Nonlocal) and frame:
            frame[1].update(n.name.value for n in small.names)
        elif kind is cst.Assign or (kind is cst.AnnAssign and small.value is not None):
            targets = [t.target for t in small.targets] if kind is cst.Assign else [small.target]
            for target in targets:
                self._bind(target, small.value, scope, [frame] if frame else [])
        elif kind is cst.Return and small.value is not None and frame:
            self.returns.setdefault(frame[0].name.value, []).append((small.value, scope))

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression, scope: Scope,
              stack: list[tuple[cst.FunctionDef, set[str]]]) -> None:
        if type(target) is cst.Name:
            declared = stack[-1][1] if stack else set()
            where = 0 if target.value in declared else scope
            self.names.setdefault(where, {}).setdefault(target.value, []).append((value, scope))
        elif type(target) is cst.Attribute and type(target.value) is cst.Name:
            if target.value.value == "self":
                self.selfs.setdefault(target.attr.value, []).append((value, scope))
            else:
                self.attrs.setdefault(f"{target.value.value}.{target.attr.value}", []).append((value, scope))

    # questions ----------------------------------------------------------------------
    def scope_of(self, node: cst.CSTNode) -> Scope:
        for parent in self.ctx.ancestors(node):
            if type(parent) is cst.FunctionDef:
                return id(parent)
        return 0

    def call_is_own(self, call: cst.Call) -> bool:
        return self.callable(call.func, self.scope_of(call), 0)

    def _lookup(self, name: str, scope: Scope) -> list[tuple[cst.BaseExpression, Scope]]:
        seen = 0
        while True:
            found = self.names.get(scope, {}).get(name)
            if found:
                return found
            if scope == 0 or seen > _DEPTH:
                return []
            scope = self.enclosing.get(scope, 0)
            seen += 1

    def _any(self, values: list[tuple[cst.BaseExpression, Scope]], test, depth: int) -> bool:
        """One binding passes and none is a torch callable (`f = torch.softmax` elsewhere)."""
        hits = False
        for value, scope in values:
            if (self.ctx.qualname(value) or "").startswith("torch."):
                return False
            hits = hits or test(value, scope, depth + 1)
        return hits

    def _body_launches(self, fn: cst.CSTNode, scope: Scope, depth: int) -> bool:
        """A lambda or def whose body calls an own callable (memoised: defs are asked often)."""
        hit = self._bodies.get(id(fn))
        if hit is None:
            self._bodies[id(fn)] = False  # a def that calls itself
            hit = any(type(node) is cst.Call and self.callable(node.func, scope, depth + 1)
                      for entering, node in walk(fn.body) if entering)  # type: ignore[attr-defined]
            if hit or depth < _DEPTH // 2:  # a miss deep in the chain may be the depth limit's
                self._bodies[id(fn)] = hit
            else:
                del self._bodies[id(fn)]
        return hit

    def module(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> bool:
        """`expr` evaluates to the submission's own extension module or native library."""
        if depth > _DEPTH:
            return False
        usage = self.usage
        kind = type(expr)
        if kind is cst.Name:
            return expr.value in usage.holders or self._any(self._lookup(expr.value, scope), self.module, depth)
        if kind is cst.Attribute:
            if type(expr.value) is cst.Name and expr.value.value == "self":
                return f"self.{expr.attr.value}" in usage.holders or \
                    self._any(self.selfs.get(expr.attr.value, []), self.module, depth)
            if type(expr.value) is not cst.Name:
                return False
            key = f"{expr.value.value}.{expr.attr.value}"
            return key in usage.holders or self._any(self.attrs.get(key, []), self.module, depth)
        if kind is cst.Call:
            qual = self.ctx.qualname(expr.func)
            if usage._is_loader_call(expr) or native_loader(qual, expr) or _factory(qual, expr.func, MODULE_FACTORIES):
                return True
            name = self._own_function_name(expr.func)
            if name is None:
                return False
            return name in usage.loader_functions or self._any(self.returns.get(name, []), self.module, depth)
        return False

    def callable(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> bool:
        """`expr` evaluates to a function of the submission's own compiled code."""
        if depth > _DEPTH:
            return False
        kind = type(expr)
        if kind is cst.Name:
            return expr.value in self.usage.kernel_defs or self._any(self._lookup(expr.value, scope), self.callable, depth)
        if kind is cst.Attribute:
            if type(expr.value) is cst.Name and expr.value.value == "self":
                return self._any(self.selfs.get(expr.attr.value, []), self.callable, depth)
            if type(expr.value) is cst.Name and self._any(self.attrs.get(f"{expr.value.value}.{expr.attr.value}", []),
                                                          self.callable, depth):
                return True  # Fn.kernel = cp.RawKernel(...): a class attribute holding the kernel
            return not expr.attr.value.startswith("__") and self.module(expr.value, scope, depth + 1)
        if kind is cst.Subscript:  # k[grid]
            return type(expr.value) is cst.Name and expr.value.value in self.usage.kernel_defs
        if kind is cst.Lambda or kind is cst.FunctionDef:
            return self._body_launches(expr, scope if kind is cst.Lambda else id(expr), depth)
        if kind is cst.IfExp:
            return self.callable(expr.body, scope, depth + 1) and self.callable(expr.orelse, scope, depth + 1)
        if kind is cst.Call:
            found = self.ctx.qualname(expr.func)
            if found == "functools.partial" and expr.args:
                return self.callable(expr.args[0].value, scope, depth + 1)
            if _factory(found, expr.func, KERNEL_FACTORIES):
                return True
            if found == "builtins.getattr" and len(expr.args) >= 2 and string_value(expr.args[1].value):
                return self.module(expr.args[0].value, scope, depth + 1)  # getattr(_ext, "f")
            if type(expr.func) is cst.Attribute and expr.func.attr.value in _FETCHERS:
                return self.module(expr.func.value, scope, depth + 1)  # mod.get_function("k")
            name = self._own_function_name(expr.func)
            if name is not None:  # self.fn = self._load_kernel(): what the loader returns
                return self._any(self.returns.get(name, []), self.callable, depth)
            # CFUNCTYPE(restype, *argtypes)(address): a raw C function pointer
            return type(expr.func) is cst.Call and (self.ctx.qualname(expr.func.func) or "") in _FUNCTION_TYPES
        return False

    def _own_function_name(self, func: cst.BaseExpression) -> Optional[str]:
        """`f` for `f(...)`, `self.f(...)`, `cls.f(...)` and `Fn.f(...)` of a class of the file:
        a function or method of the file, by name."""
        if type(func) is cst.Name:
            return func.value
        if type(func) is cst.Attribute and type(func.value) is cst.Name:
            owner = func.value.value
            if owner in ("self", "cls"):
                return func.attr.value
            binding = self.ctx.resolver.lookup(owner)
            if binding is not None and binding.kind == "class":
                return func.attr.value
        return None


class _Elif:
    """An `elif` seen as a block of one statement (no node is built)."""

    def __init__(self, body: tuple[cst.If]) -> None:
        self.body = body


def _blocks(stmt: cst.CSTNode) -> list[object]:
    """The statement blocks of a compound statement (body, else/elif, handlers, finally, cases)."""
    out: list[cst.CSTNode] = []
    body = getattr(stmt, "body", None)
    if body is not None:
        out.append(body)
    orelse = getattr(stmt, "orelse", None)
    if orelse is not None:
        out.append(_Elif((orelse,)) if type(orelse) is cst.If else orelse.body)
    for handler in getattr(stmt, "handlers", ()):
        out.append(handler.body)
    final = getattr(stmt, "finalbody", None)
    if final is not None:
        out.append(final.body)
    for case in getattr(stmt, "cases", ()):
        out.append(case.body)
    return out


def fetched_at_run_time(own: OwnCallables, call: cst.Call) -> bool:
    """The callee is fetched by a computation gatekeeper cannot follow (`fn = getattr(mod,
    name)`, `fn = registry[key]`, `self.op = table.get(name)`, a callable parameter), so it may
    be the submission's own launch. Torch callables, builtins, lambdas, defs and classes of
    the file are followed elsewhere and are not opaque."""
    func = call.func
    scope = own.scope_of(call)
    if type(func) is cst.Name:
        values = own._lookup(func.value, scope)
        if not values:
            return _is_parameter(own, call, func.value)
    elif type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
        values = own.selfs.get(func.attr.value, [])
    else:
        return False
    return any(_opaque_value(own, value) for value, _ in values)


def _opaque_value(own: OwnCallables, value: cst.BaseExpression) -> bool:
    if type(value) is cst.Subscript:
        return True  # OPS[name]: a table of callables (torch tables are placed by the traversal)
    if type(value) is not cst.Call:
        return False
    qual = own.ctx.qualname(value.func) or ""
    if qual.startswith(("torch.", "functools.", "operator.")):
        return False
    if qual == "builtins.getattr":
        return len(value.args) < 2 or string_value(value.args[1].value) is None  # a computed name
    func = value.func
    return type(func) is cst.Attribute and func.attr.value in ("get", "pop", "__getitem__")


def _is_parameter(own: OwnCallables, call: cst.Call, name: str) -> bool:
    for parent in own.ctx.ancestors(call):
        if type(parent) is cst.FunctionDef:
            params = parent.params
            return any(p.name.value == name for p in (*params.posonly_params, *params.params, *params.kwonly_params))
    return False
