"""Does the own kernel's output reach what the function returns? Not a rule file.

For each forward-path function that launches an own kernel (directly, or through a helper
of the file that does), the statements are followed in order, tracking which names hold
kernel output (the result of a launch, or a buffer a launch that returns nothing wrote)
and which hold a torch result. When every `return` gives a torch result and the kernel
output stays in locals that nothing reads, the kernel's work is discarded: torch computed
what the function returns.

Conservative on purpose (a miss here is left to the run-time work attribution):
- a launch whose result is not used (a bare call, a Triton `k[grid](...)`) is taken to
  write every tensor passed to it, inputs included;
- a name written with a torch result inside a branch or loop keeps its kernel output
  (only a straight-line reassignment overwrites);
- output stored on `self`, written into a parameter, or handed to any call that is not
  torch's escapes the analysis, and nothing is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gatekeeper.static.syntax import self_attr
from gatekeeper.static.walk import walk

if TYPE_CHECKING:
    from gatekeeper.analyses.torch_usage import Kernel, TorchUsage

_OVERWRITE_METHODS = frozenset({"copy_", "set_"})


@dataclass
class Discarded:
    function: str
    ret: cst.Return  # the first return, which gives a torch result
    kernel: "Kernel"


@dataclass
class _State:
    kernel_made: set[str] = field(default_factory=set)
    torch_made: set[str] = field(default_factory=set)
    unknown_made: set[str] = field(default_factory=set)  # from calls the analysis cannot see into
    escaped: bool = False
    returns: list[tuple[cst.Return, str]] = field(default_factory=list)


def _root(expr: cst.BaseExpression) -> Optional[str]:
    """The variable an expression is a view or part of: `y`, `self.buf`."""
    while True:
        if type(expr) is cst.Name:
            return expr.value
        if type(expr) is cst.Attribute:
            key = self_attr(expr)
            if key is not None:
                return key
            expr = expr.value
        elif type(expr) is cst.Subscript:
            expr = expr.value
        elif type(expr) is cst.Call and type(expr.func) is cst.Attribute:
            expr = expr.func.value  # y.view(-1), y.contiguous()
        else:
            return None


class _Flow:
    def __init__(self, usage: "TorchUsage", launches: dict[int, "Kernel"], helpers: set[str],
                 params: set[str]) -> None:
        self.usage = usage
        self.launches = launches
        self.helpers = helpers  # names of file functions that launch kernels
        self.params = params
        self.use_nodes = {id(u.node) for u in usage.uses if u.node is not None}

    def kind(self, expr: cst.BaseExpression, state: _State) -> str:
        """kernel | torch | unknown | plain."""
        torch = False
        unknown = False
        for entering, node in walk(expr):
            if not entering:
                continue
            if id(node) in self.launches or self._helper_call(node):
                return "kernel"
            if type(node) in (cst.Name, cst.Attribute):
                root = _root(node)
                if root is not None and root in state.kernel_made:
                    return "kernel"
                if root is not None and root in state.torch_made:
                    torch = True
                if root is not None and root in state.unknown_made:
                    unknown = True
            if id(node) in self.use_nodes:
                torch = True
            elif type(node) is cst.Call and not self._torch_call(node):
                unknown = True
        return "unknown" if unknown else "torch" if torch else "plain"

    def _helper_call(self, node: cst.CSTNode) -> bool:
        if type(node) is not cst.Call:
            return False
        func = node.func
        name = func.value if (type(func) is cst.Name) else func.attr.value if (type(func) is cst.Attribute) else None
        return name in self.helpers

    def _torch_call(self, node: cst.Call) -> bool:
        qual = self.usage.ctx.qualname(node.func) or ""
        if qual.startswith(("torch.", "builtins.", "math.")):
            return True
        # a tensor method (view, contiguous, size) on a local value
        return type(node.func) is cst.Attribute and self.usage.ops.known_tensor_method(node.func.attr.value)

    # statements -----------------------------------------------------------------------
    def block(self, body: object, state: _State, nested: bool) -> None:
        for stmt in getattr(body, "body", ()) or ():
            self.statement(stmt, state, nested)

    def statement(self, stmt: cst.CSTNode, state: _State, nested: bool) -> None:
        if type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                self.small(small, state, nested)
        elif type(stmt) in (cst.FunctionDef, cst.ClassDef):
            return
        elif type(stmt) in (cst.For, cst.While):
            for _ in range(2):  # a later statement of the body feeds an earlier one next time round
                self.block(stmt.body, state, True)
            if stmt.orelse is not None:
                self.block(stmt.orelse.body, state, True)
        elif type(stmt) is cst.If:
            self.block(stmt.body, state, True)
            if stmt.orelse is not None:
                orelse = stmt.orelse
                if type(orelse) is cst.If:
                    self.statement(orelse, state, True)
                else:
                    self.block(orelse.body, state, True)
        elif type(stmt) is cst.Try:
            self.block(stmt.body, state, True)
            for handler in stmt.handlers:
                self.block(handler.body, state, True)
            for extra in (stmt.orelse, stmt.finalbody):
                if extra is not None:
                    self.block(extra.body, state, True)
        elif type(stmt) is cst.With:
            self.block(stmt.body, state, nested)
        else:
            state.escaped = True  # match statements and the like: not followed

    def small(self, small: cst.CSTNode, state: _State, nested: bool) -> None:
        if type(small) is cst.Return:
            if small.value is not None:
                state.returns.append((small, self.kind(small.value, state)))
            return
        if type(small) is cst.Assign:
            self.launch_writes(small.value, state, assigned=True)
            kind = self.kind(small.value, state)
            for target in small.targets:
                self.bind(target.target, kind, state, nested)
            return
        if type(small) is cst.AnnAssign and small.value is not None:
            self.launch_writes(small.value, state, assigned=True)
            self.bind(small.target, self.kind(small.value, state), state, nested)
            return
        if type(small) is cst.AugAssign:
            self.launch_writes(small.value, state, assigned=True)
            if self.kind(small.value, state) == "kernel":
                self.bind(small.target, "kernel", state, True)
            return
        if type(small) is cst.Expr:
            value = small.value
            if type(value) is cst.Call and type(value.func) is cst.Attribute \
                    and value.func.attr.value in _OVERWRITE_METHODS and value.args:
                kind = self.kind(value.args[0].value, state)  # out.copy_(torch result)
                if kind == "torch":
                    self.bind(value.func.value, "torch", state, nested)
                    return
            self.launch_writes(value, state, assigned=False)
            if type(value) is cst.Call and self.kind(value, state) in ("kernel", "unknown"):
                # `outs.append(h)`, `helper(h, buf)`: the call may store or write what it is given
                for entering, node in walk(value):
                    if entering and type(node) in (cst.Name, cst.Attribute):
                        root = _root(node)
                        if root is not None and root not in ("self", "torch"):
                            self.mark_kernel(root, state)

    def launch_writes(self, expr: cst.BaseExpression, state: _State, *, assigned: bool) -> None:
        """A launch whose result is not kept writes the tensors passed to it."""
        for entering, node in walk(expr):
            if not entering or type(node) is not cst.Call:
                continue
            is_launch = id(node) in self.launches or self._helper_call(node)
            if not is_launch:
                continue
            triton = type(node.func) is cst.Subscript
            if assigned and not triton:
                continue
            for arg in node.args:
                for sub_entering, sub in walk(arg.value):
                    if sub_entering and type(sub) in (cst.Name, cst.Attribute):
                        root = _root(sub)
                        if root is not None:
                            self.mark_kernel(root, state)

    def mark_kernel(self, root: str, state: _State) -> None:
        state.kernel_made.add(root)
        state.torch_made.discard(root)
        if root.startswith("self.") or root in self.params:
            state.escaped = True  # kernel output stored where the caller can read it

    def bind(self, target: cst.BaseExpression, kind: str, state: _State, nested: bool) -> None:
        if type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self.bind(element.value, kind, state, nested)
            return
        if type(target) is cst.StarredElement:
            self.bind(target.value, kind, state, nested)
            return
        root = _root(target)
        if root is None:
            return
        whole = type(target) is cst.Name or (type(target) is cst.Attribute and root.startswith("self."))
        if kind == "kernel":
            self.mark_kernel(root, state)
        elif kind == "unknown":
            state.unknown_made.add(root)
            state.torch_made.discard(root)
        elif whole and not nested:
            state.kernel_made.discard(root)  # overwritten in straight-line code
            state.unknown_made.discard(root)
            if kind == "torch":
                state.torch_made.add(root)
            else:
                state.torch_made.discard(root)


def find_discarded(usage: "TorchUsage") -> list[Discarded]:
    kernels = usage.kernels
    if not kernels:
        return []
    launches = {id(k.node): k for k in kernels}
    # File functions that launch: calling them is a launch too (one level is enough for the
    # usual forward -> helper -> kernel; deeper chains are left to the run-time check).
    helpers = {k.function.rsplit(".", 1)[-1] for k in kernels if k.function != "<module>"}
    functions: dict[str, tuple[cst.FunctionDef, "Kernel"]] = {}
    for k in kernels:
        fn = next((p for p in k.path if type(p) is cst.FunctionDef), None)
        if fn is not None and k.function not in functions:
            functions[k.function] = (fn, k)
    for key in _callers_of(usage, helpers):
        fn = _def_of(usage, key)
        if fn is not None and key not in functions:
            functions[key] = (fn, kernels[0])
    out: list[Discarded] = []
    for key, (fn, kernel) in functions.items():
        own = fn.name.value
        params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
        flow = _Flow(usage, launches, helpers - {own}, params)
        state = _State()
        flow.block(fn.body, state, False)
        if state.escaped or not state.returns:
            continue
        if all(kind == "torch" for _, kind in state.returns):
            out.append(Discarded(key, state.returns[0][0], kernel))
    return out


def _callers_of(usage: "TorchUsage", helpers: set[str]) -> set[str]:
    out: set[str] = set()
    for callee, callers in usage.ctx.calls.items():
        if callee.rsplit(".", 1)[-1] in helpers:
            out.update(c for c in callers if usage.in_forward(c))
    return out


def _def_of(usage: "TorchUsage", key: str) -> Optional[cst.FunctionDef]:
    parts = key.split(".")
    body: object = usage.ctx.module
    for part in parts:
        found = None
        for stmt in getattr(getattr(body, "body", None), "body", None) or getattr(body, "body", ()):
            if type(stmt) in (cst.FunctionDef, cst.ClassDef) and stmt.name.value == part:
                found = stmt
                break
        if found is None:
            return None
        body = found
    return body if (type(body) is cst.FunctionDef) else None
