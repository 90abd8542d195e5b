from __future__ import annotations

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

# Dunders through which a checker compares or converts a result.
DUNDERS = frozenset({
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__float__", "__int__",
    "__index__", "__complex__", "__array__", "__array_ufunc__", "__array_function__", "__array_interface__",
    "__cuda_array_interface__", "__dlpack__", "__getattr__", "__getattribute__", "__class__",
    "__instancecheck__", "__subclasscheck__", "__sub__", "__rsub__", "__abs__",
})
# Classes that are never outputs: their own dunders are not about comparing results.
NOT_OUTPUTS = ("torch.nn.Module", "torch.nn.modules.module.Module", "torch.autograd.Function",
               "builtins.Exception", "builtins.dict", "enum.Enum", "enum.IntEnum", "typing.NamedTuple")


class ReturnsDeferredObject(Rule):
    """A class defined in the submission overrides how its instances compare or convert
    (`__eq__`, `__lt__`..., `__bool__`, `__float__`, `__array__`, `__sub__`, `__abs__`,
    `__getattr__`/`__getattribute__`, a `__class__` property, ...) and the submission creates
    instances of it on the per-call path (in `forward` or a function it calls), outside the
    class itself: the object that `forward` hands back is then not a tensor, or not only one.

    Why it games the benchmark: the checker compares the output with the reference through
    exactly these hooks (`==`, `allclose` via `__array__`/`__sub__`/`__abs__`, `float()`,
    `isinstance` via a faked `__class__`), so the object can compute when compared (after
    the timed region) or simply report equality. A class that is never instantiated, or only
    at import or construction time (`__init__`, module level), and `nn.Module` /
    `autograd.Function` / `Enum` / `dict` / exception classes, are not flagged; a
    `torch.Tensor` subclass is reported by GK520 instead.
    """

    code = "GK522"
    name = "ReturnsDeferredObject"
    category = Category.LAZY_OUTPUT
    severity = Severity.ERROR
    summary = "returns an object whose class overrides comparison or conversion"
    message = (
        "`{cls}` overrides {dunders} and is instantiated by the submission: an output built from it can "
        "compute only when compared (outside the timed region) or decide the comparison itself."
    )
    hint = (
        "Return a plain `torch.Tensor` written by your kernel; keep helper classes free of comparison and "
        "conversion dunders (`__eq__`, `__array__`, `__float__`, `__getattr__`, `__class__`)."
    )
    VALID = [
        # never instantiated, and a Module with a custom __getattr__
        Valid(snippet("""
            class Spec:
                def __eq__(self, other):
                    return True
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __getattr__(self, name):
                    return super().__getattr__(name)
                def forward(self, x):
                    return _ext.run(x)
        """)),
        # a key object built once at construction time
        Valid(snippet("""
            class Key:
                def __eq__(self, other):
                    return isinstance(other, Key)
                def __hash__(self):
                    return 1
            class ModelNew:
                def __init__(self):
                    self.key = Key()
                def forward(self, x):
                    return _ext.run(x)
        """)),
        Valid(snippet("""
            from dataclasses import dataclass
            @dataclass
            class Cfg:
                block: int = 256
            def forward(x):
                return _ext.run(x, Cfg().block)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            class Thunk:
                def __init__(self, f, x):
                    self.f, self.x = f, x
                def __eq__(self, other):
                    return self.f(self.x) == other
            def forward(x):
                return Thunk(_ext.run, x)
        """), line=7, message="`Thunk` overrides `__eq__` and is instantiated by the submission"),
        Invalid(snippet("""
            class Fake:
                @property
                def __class__(self):
                    import torch
                    return torch.Tensor
                def __array__(self, dtype=None):
                    return compute()
            class ModelNew:
                def forward(self, x):
                    out = Fake()
                    return out
        """), line=10, message="`Fake` overrides `__class__`"),
        Invalid(snippet("""
            class Proxy:
                def __getattr__(self, name):
                    return getattr(_materialise(self), name)
            make = Proxy
            def forward(x):
                return make()
        """), line=6, message="`Proxy` overrides `__getattr__` and is instantiated by the submission"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.suspicious: dict[str, tuple[cst.ClassDef, list[str]]] = {}
        self.aliases: dict[str, str] = {}
        self.calls: list[tuple[cst.Call, str, tuple[str, ...], str]] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            qual = self.ctx.qualname(base.value) or ""
            if qual.startswith(NOT_OUTPUTS):
                return
        found: list[str] = []
        body = node.body.body if (type(node.body) is cst.IndentedBlock) else ()
        for stmt in body:
            if type(stmt) is cst.FunctionDef and stmt.name.value in DUNDERS:
                found.append(stmt.name.value)
            elif type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Assign:
                        found.extend(t.target.value for t in small.targets
                                     if type(t.target) is cst.Name and t.target.value in DUNDERS)
        if found:
            self.suspicious[node.name.value] = (node, found)

    def visit_Assign(self, node: cst.Assign) -> None:
        # `make = Proxy`: an alias of a local class
        if type(node.value) is cst.Name and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
            self.aliases[node.targets[0].target.value] = node.value.value

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Name:
            inside = tuple(c.name.value for c in self.ctx.classes)
            self.calls.append((node, node.func.value, inside, self.ctx.function_key))

    def finish(self) -> None:
        reported: set[str] = set()
        for call, name, inside, key in self.calls:
            cls = self.aliases.get(name, name)
            if cls not in self.suspicious or cls in inside or cls in reported:
                continue
            if self.ctx.is_init_only(key):
                continue  # built once at import or construction: not a per-call output
            reported.add(cls)
            dunders = self.suspicious[cls][1]
            self.report(call, self.message.format(cls=cls, dunders=", ".join(f"`{d}`" for d in dunders)),
                        evidence={"class": cls, "dunders": dunders})
