"""A light, scope-aware name resolver that runs inside the engine's one traversal.

libcst's QualifiedNameProvider is exact but costs ~10x a parse; this resolver covers what
reward hacks use: `import x as y`, `from x import y as z`, aliases by assignment
(`mm = torch.matmul`, `F = torch.nn.functional`), `getattr(mod, "literal")`, attributes of
`self` bound to a module function, and shadowing by parameters and local variables.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from gatekeeper.static.string_values import bound_string, string_value  # noqa: F401 - used here and re-exported

from gatekeeper.static.name_folds import canonical_class, folded_getattr, picked_by_name

# Calls that return torch's module for a device (torch.cuda where the benchmark runs).
_DEVICE_MODULE_GETTERS = frozenset({"torch.get_device_module", "torch._utils._get_device_module"})

# what a torch call returns, for `type(...)` of it
_MADE_TYPES = {"torch.cuda.current_stream": "torch.cuda.Stream", "torch.cuda.default_stream": "torch.cuda.Stream",
               "torch.cuda.Stream": "torch.cuda.Stream", "torch.cuda.Event": "torch.cuda.Event",
               "torch.cuda.CUDAGraph": "torch.cuda.CUDAGraph", "torch.cuda.streams.Stream": "torch.cuda.Stream"}
_BUILTINS = frozenset(dir(builtins)) - {"None", "True", "False", "Ellipsis", "NotImplemented"}


@dataclass
class Binding:
    kind: str  # import | alias | local | param | def | class
    qualname: Optional[str] = None
    value: Optional[cst.BaseExpression] = None


@dataclass
class Scope:
    kind: str  # module | class | function | lambda | comprehension
    names: dict[str, Binding] = field(default_factory=dict)


def dotted(expr: cst.BaseExpression) -> Optional[str]:
    """`a.b.c` as a string, or None when the expression is not a plain dotted name."""
    if type(expr) is cst.Name:
        return expr.value
    if type(expr) is cst.Attribute:
        base = dotted(expr.value)
        return f"{base}.{expr.attr.value}" if base else None
    return None


def paired_values(target: cst.BaseExpression, value: Optional[cst.BaseExpression]
                  ) -> Optional[list[cst.BaseExpression]]:
    """The values a tuple assignment gives each target (`a, b = x, y`), where both sides are
    displays of the same length without a starred element; else None."""
    if type(target) not in (cst.Tuple, cst.List) or type(value) not in (cst.Tuple, cst.List):
        return None
    left, right = target.elements, value.elements  # type: ignore[union-attr]
    if len(left) != len(right) or any(type(e) is cst.StarredElement for e in (*left, *right)):
        return None
    return [e.value for e in right]


def int_value(expr: cst.BaseExpression) -> Optional[int]:
    """The value of an int literal (`768`, `0x300`, `1_024`), without a compile per call."""
    if type(expr) is not cst.Integer:
        return None
    text = expr.value.replace("_", "").lower()
    try:
        if text.startswith(("0x", "0o", "0b")):
            return int(text, 0)
        return int(text)
    except ValueError:
        return None


# torch.nn classes whose instances are tensors, not layers: `self.w = nn.Parameter(...)`
# must stay storage (the cached-output rules follow it), not resolve to a class name.
_TENSOR_CLASSES = frozenset({"Parameter", "UninitializedParameter", "Buffer", "UninitializedBuffer"})


def _torch_nn_class(qual: Optional[str]) -> Optional[str]:
    """`torch.nn.Linear` when `qual` names a torch.nn module class, else None: so that
    `self.fc = nn.Linear(...)` makes `self.fc` resolve to `torch.nn.Linear`."""
    if not qual or not qual.startswith("torch.nn."):
        return None
    last = qual.rsplit(".", 1)[-1]
    if not last[:1].isupper() or last in _TENSOR_CLASSES:
        return None
    return qual


class NameResolver:
    def __init__(self) -> None:
        self.stack: list[Scope] = [Scope("module")]
        self.self_attrs: dict[str, str] = {}
        # Bumped by every change of what a name means (a binding, a scope entered or left),
        # so an answer remembered at one epoch is still the answer at the same epoch.
        self.epoch = 0
        # Every name ever bound to a module path (import or alias), in any scope: a name
        # outside it that is not a builtin resolves to nothing, whatever the scopes hold.
        self.path_names: set[str] = set()

    # scopes ---------------------------------------------------------------
    def push(self, kind: str) -> None:
        self.epoch += 1
        self.stack.append(Scope(kind))

    def pop(self) -> None:
        if len(self.stack) > 1:
            self.epoch += 1
            self.stack.pop()

    @property
    def module_scope(self) -> Scope:
        return self.stack[0]

    def bind(self, name: str, binding: Binding) -> None:
        self.epoch += 1
        self.stack[-1].names[name] = binding
        if binding.kind == "import" or binding.kind == "alias":
            self.path_names.add(name)

    def lookup(self, name: str) -> Optional[Binding]:
        innermost = len(self.stack) - 1
        for depth in range(innermost, -1, -1):
            scope = self.stack[depth]
            # Python: a class body's names are not visible from functions nested in it.
            if scope.kind == "class" and depth != innermost:
                continue
            if name in scope.names:
                return scope.names[name]
        return None

    # bindings ---------------------------------------------------------------
    def bind_import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted(alias.name)
            if full is None:
                continue
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                self.bind(alias.asname.name.value, Binding("import", full))
            else:
                top = full.split(".")[0]
                self.bind(top, Binding("import", top))

    def bind_import_from(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            base = "." * len(node.relative) + (dotted(node.module) or "" if node.module else "")
        else:
            base = dotted(node.module) or ""
        if type(node.names) is cst.ImportStar:
            self.bind(f"*{base}", Binding("import", base))
            return
        for alias in node.names:
            name = dotted(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                local = alias.asname.name.value
            self.bind(local, Binding("import", f"{base}.{name}" if base else name))

    def _literal_import(self, call: cst.Call) -> Optional[str]:
        """The module `importlib.import_module("a.b")` (absolute, a literal name) imports, else None."""
        if len(call.args) != 1 or call.args[0].keyword is not None:
            return None
        name = string_value(call.args[0].value)
        if not name or name.startswith(".") or self.qualname(call.func) != "importlib.import_module":
            return None
        return name if all(part.isidentifier() for part in name.split(".")) else None

    def bind_target(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression]) -> None:
        """Record an assignment target. A name bound to a resolvable module path is an alias."""
        if type(target) is cst.Name:
            qual = self.qualname(value) if value is not None else None
            if type(value) is cst.Call and qual is None:
                module = self._literal_import(value)
                if module is not None:  # `m = importlib.import_module("a.b")` is `import a.b as m`
                    self.bind(target.value, Binding("import", module))
                    return
            if qual is not None:
                self.bind(target.value, Binding("alias", qual, value))
            else:
                self.bind(target.value, Binding("local", None, value))
        elif type(target) in (cst.Tuple, cst.List):
            values = paired_values(target, value)  # `_M, _K = 1024, 2048` binds each to its own
            for k, element in enumerate(target.elements):
                inner = element.value
                if type(inner) is cst.StarredElement:
                    inner = inner.value
                self.bind_target(inner, values[k] if values else None)
        elif type(target) is cst.StarredElement:
            self.bind_target(target.value, None)
        elif (
            type(target) is cst.Attribute
            and type(target.value) is cst.Name
            and target.value.value == "self"
            and value is not None
        ):
            qual = self.qualname(value)
            if qual is None and type(value) is cst.Call:
                qual = _torch_nn_class(self.qualname(value.func))
            if qual is not None:
                self.epoch += 1
                self.self_attrs[target.attr.value] = qual

    def bind_params(self, params: cst.Parameters) -> None:
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if type(extra) is cst.Param:
                every.append(extra)
        for param in every:
            self.bind(param.name.value, Binding("param"))

    # resolution -------------------------------------------------------------
    def may_name_a_path(self, name: str) -> bool:
        """False when `name` resolves to nothing here for sure (see path_names)."""
        return name in self.path_names or name in _BUILTINS

    def name_qualname(self, name: str) -> Optional[str]:
        """What the bare name `name` refers to here (see qualname)."""
        binding = self.lookup(name)
        if binding is None:
            return f"builtins.{name}" if name in _BUILTINS else None
        if binding.kind in ("import", "alias"):
            qual = binding.qualname
            return canonical_class(qual) if qual and "TensorBase" in qual else qual  # from torch._C import TensorBase
        return None

    def qualname(self, expr: Optional[cst.BaseExpression]) -> Optional[str]:
        """The fully qualified name an expression refers to, or None if it is not a module
        path (a local variable, a call result, a parameter...)."""
        # `type(x) is` rather than isinstance: libcst nodes are ABCs, whose isinstance check
        # costs ~10x, and this runs for most names of a file. Name/Attribute/Call are final.
        kind = type(expr)
        if kind is cst.Name:
            return self.name_qualname(expr.value)
        if kind is cst.Attribute:
            if type(expr.value) is cst.Name and expr.value.value == "self":
                if self.lookup("self") is not None and expr.attr.value in self.self_attrs:
                    return self.self_attrs[expr.attr.value]
            if type(expr.value) is cst.Name and expr.value.value in ("self", "cls") \
                    and self.lookup(expr.value.value) is not None:
                held = self.class_body_value(expr.attr.value)
                if held is not None:
                    return held  # `cls.target` with `target = torch.cuda.Event` in the class body
            base = self.qualname(expr.value)
            if base and expr.attr.value == "torch" and base.startswith("torch."):
                return "torch"  # `torch.backends.cudnn.torch`: a torch module's import of torch is torch
            if not base:
                return None
            return canonical_class(f"{base}.{expr.attr.value}") if "TensorBase" in base or expr.attr.value.endswith(
                "TensorBase") else f"{base}.{expr.attr.value}"
        if kind is cst.Call:
            func = self.qualname(expr.func)
            if func in _DEVICE_MODULE_GETTERS:
                return "torch.cuda"  # `torch.get_device_module(x.device)`: torch.cuda on a GPU
            # getattr(torch, "mean") is torch.mean
            if func == "builtins.getattr" and len(expr.args) >= 2:
                base = self.qualname(expr.args[0].value)
                attr = bound_string(self, expr.args[1].value)
                if base and attr and attr.isidentifier():
                    return f"{base}.{attr}"
            # functools.reduce(getattr, ("_C", "mm"), torch), next(f for f in <torch table> if f.__name__ == "mm")
            if func in ("functools.reduce", "_functools.reduce"):
                return folded_getattr(self, expr, func)
            if func == "builtins.next":
                return picked_by_name(self, expr)
            # `torch.Tensor.mm.__get__(a)` is `a.mm`: the method, bound through the descriptor protocol
            if func and func.endswith(".__get__") and func.startswith("torch."):
                return func[:-len(".__get__")]
            # `type(torch.cuda.current_stream())` is the stream class (`type(s)(priority=-1)` makes one)
            if func == "builtins.type" and len(expr.args) == 1:
                made = self.qualname(expr.args[0].value.func) if type(expr.args[0].value) is cst.Call else None
                if made in _MADE_TYPES:
                    return _MADE_TYPES[made]
            # operator.attrgetter("linalg.norm")(torch) is torch.linalg.norm
            getter = expr.func
            if type(getter) is cst.Call and expr.args and getter.args \
                    and self.qualname(getter.func) == "operator.attrgetter":
                base = self.qualname(expr.args[0].value)
                attr = bound_string(self, getter.args[0].value)
                if base and attr and all(part.isidentifier() for part in attr.split(".")):
                    return f"{base}.{attr}"
        if kind is cst.Subscript:
            return self._namespace_entry(expr) or picked_by_name(self, expr)
        return None

    def class_body_value(self, name: str) -> Optional[str]:
        """What a name bound in the body of the enclosing class refers to, when it is a module path."""
        for scope in reversed(self.stack):
            if scope.kind != "class":
                continue
            binding = scope.names.get(name)
            if binding is not None and binding.kind in ("alias", "import"):
                return binding.qualname
            if binding is not None and binding.kind == "local" and isinstance(binding.value, cst.BaseExpression) \
                    and type(binding.value) in (cst.Name, cst.Attribute):
                return self.qualname(binding.value)
            return None
        return None

    def _namespace_entry(self, expr: cst.Subscript) -> Optional[str]:
        """`torch.__dict__["mm"]`, `vars(torch)["mm"]`, `torch.Tensor.__dict__["mm"]`: the
        attribute, read from the namespace's dict instead of by name."""
        if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Index:
            return None
        holder = expr.value
        base = None
        if type(holder) is cst.Attribute and holder.attr.value == "__dict__":
            base = self.qualname(holder.value)
        elif type(holder) is cst.Call and len(holder.args) == 1 and self.qualname(holder.func) == "builtins.vars":
            base = self.qualname(holder.args[0].value)
        attr = bound_string(self, expr.slice[0].slice.value) if base else None
        return f"{base}.{attr}" if base and attr and attr.isidentifier() else None
