from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_support import literal, matches, resolve, subscript_key
from gatekeeper.static.syntax import argument
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

# Compute libraries where `getattr(torch, dtype_name)` or `getattr(F, activation)` picks a
# dtype or an op: suspicious, not proof.
_COMPUTE = ("torch", "triton", "numpy", "math", "cupy")
_ACCESSORS = ("builtins.getattr", "builtins.setattr", "builtins.delattr", "operator.attrgetter")
# Calls that hand over a module's whole namespace.
_ENUMERATORS = ("builtins.vars", "inspect.getmembers")


class ComputedGetattr(Rule):
    """Looks up an attribute of a module (or another imported object) by a name computed at
    run time: `getattr(os, name)`, `setattr(torch, name, f)`, `delattr(mod, n)`,
    `operator.attrgetter(name)`, `vars(mod)[name]`, `mod.__dict__[name]`,
    `__builtins__[name]`, and the whole namespace handed over (`vars(mod)`, `mod.__dict__`,
    `inspect.getmembers(mod)`: a table of its functions, picked from later by a key). A name
    held in a module constant string counts as a literal.

    Why it games the benchmark: `getattr(builtins, "ev" + "al")` or
    `getattr(os, codecs.decode("flfgrz", "rot13"))` reaches a forbidden function without
    naming it, so every other rule misses it.

    Not flagged: `getattr(self, "weight")` and `getattr(x, name)` on objects that are not
    imported modules, and `getattr(torch, "float16")` with a literal name. A computed name
    on a compute library (`getattr(torch, dtype_name)`, `getattr(F, activation)`) is a
    warning: it is how configurable models pick a dtype or an activation.
    """

    code = "GK432"
    name = "ComputedGetattr"
    category = Category.DYNAMIC_CODE
    severity = Severity.ERROR
    summary = "getattr/setattr on a module with a computed name"
    message = "`{how}` reads `{owner}.<computed>`: the name is built at run time, so no check can tell what it reaches."
    hint = (
        "Name the attribute directly (`torch.float16`, `F.relu`), or map the allowed names "
        "explicitly: `{'relu': F.relu, 'gelu': F.gelu}[name]`."
    )
    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    w = getattr(self, 'weight')
                    return x
        """)),
        Valid(snippet("""
            import torch
            dt = getattr(torch, 'float16')
        """)),
        Valid(snippet("""
            DT = 'bfloat16'
            import torch
            dt = getattr(torch, DT)
        """)),
        Valid(snippet("""
            def pick(obj, name):
                return getattr(obj, name)
        """)),
        # the submission's own objects and a literal key are no computed reach
        Valid(snippet("""
            import torch
            class Cfg:
                pass
            def ops(ext, cfg):
                table = {n: f for n, f in vars(ext).items() if n.startswith('gemm_')}
                return table, vars(cfg), vars(torch)['float16'], torch.__dict__['bfloat16']
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import builtins
            f = getattr(builtins, 'ev' + 'al')
        """), line=2, message="`getattr` reads `builtins.<computed>`"),
        Invalid(snippet("""
            import os
            name = ''.join(['sys', 'tem'])
            getattr(os, name)('nvidia-smi -lgc 1980')
        """), line=3, message="`getattr` reads `os.<computed>`"),
        Invalid(snippet("""
            import torch
            def patch(name, fn):
                setattr(torch, name, fn)
        """), line=3, message="`setattr` reads `torch.<computed>`"),
        Invalid(snippet("""
            import codecs, os
            run = vars(os)[codecs.decode('flfgrz', 'rot13')]
        """), line=2, message="`namespace[...]` reads `os.<computed>`"),
        Invalid(snippet("""
            def g(n):
                return __builtins__[n]
        """), line=2, message="`namespace[...]` reads `builtins.<computed>`"),
        # a registry of a torch namespace's functions, picked by a key later (round 7, 2026-12-06)
        Invalid(snippet("""
            import torch.nn.functional as F
            _REGISTRY = {n: f for n, f in vars(F).items() if callable(f)}
        """), line=2, message="`vars(...)` reads `torch.nn.functional.<computed>`"),
        Invalid(snippet("""
            import os
            table = dict(os.__dict__)
        """), line=2, message="`__dict__` reads `os.<computed>`"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.indexed: set[int] = set()  # namespaces read by a subscript, judged there
        if "__dict__" not in self.ctx.text:  # most files: no attribute handler to call
            self.switch_off_inherited(ComputedGetattr, ("visit_Attribute",))

    def visit_Call(self, node: cst.Call) -> None:
        func = resolve(self.ctx, node.func)
        if func in _ENUMERATORS and node.args and id(node) not in self.indexed:
            # `{n: f for n, f in vars(F).items()}`, `inspect.getmembers(torch)`: every attribute
            # of the module becomes a value picked later by a key no check sees
            owner = resolve(self.ctx, node.args[0].value)
            if owner is not None:
                self._report(node, f"{func.replace('builtins.', '')}(...)", owner, compute=bool(matches(owner, _COMPUTE)))
            return
        if func not in _ACCESSORS:
            return
        if func == "operator.attrgetter":
            if node.args and literal(self.ctx, argument(node, 0)) is None:
                self._report(node, "operator.attrgetter", "<object>", compute=False)
            return
        owner = resolve(self.ctx, argument(node, 0))
        name = argument(node, 1)
        if owner is None or name is None or literal(self.ctx, name) is not None:
            return
        self._report(node, func.replace("builtins.", ""), owner, compute=bool(matches(owner, _COMPUTE)))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "__dict__" and id(node) not in self.indexed:
            owner = resolve(self.ctx, node.value)
            if owner is not None:
                self._report(node, "__dict__", owner, compute=bool(matches(owner, _COMPUTE)))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self.indexed.add(id(node.value))  # `vars(m)[k]`, `m.__dict__[k]`: judged here, by the key
        if subscript_key(self.ctx, node) is not None or len(node.slice) != 1:
            return
        owner = self._namespace(node.value)
        if owner is not None:
            self._report(node, "namespace[...]", owner, compute=bool(matches(owner, _COMPUTE)))

    def _namespace(self, expr: cst.BaseExpression) -> Optional[str]:
        if type(expr) is cst.Name and expr.value == "__builtins__":
            return "builtins"
        if type(expr) is cst.Attribute and expr.attr.value == "__dict__":
            return resolve(self.ctx, expr.value)
        if type(expr) is cst.Call and resolve(self.ctx, expr.func) == "builtins.vars" and expr.args:
            return resolve(self.ctx, expr.args[0].value)
        return None

    def _report(self, node: cst.CSTNode, how: str, owner: str, *, compute: bool) -> None:
        severity = Severity.WARNING if compute and self.active_severity == Severity.ERROR else None
        self.report(node, self.message.format(how=how, owner=owner), evidence={"owner": owner}, severity=severity)
