"""What a name reaches when it is not written as one dotted path (red team round 14):

- Tensor's base class is Tensor: `torch._C.TensorBase.mm` (and the old alias `_TensorBase`) is
  `torch.Tensor.mm`, the very method object (`torch.Tensor.__mro__` is Tensor, TensorBase, object).
- `functools.reduce(getattr, ("_C", "_VariableFunctions", "mm"), torch)` folds the attribute
  reads into `torch._C._VariableFunctions.mm`, as `operator.attrgetter("a.b")` does.
- A function picked by its name out of a table torch hands back
  (`[f for f in torch.overrides.get_overridable_functions()[torch] if f.__name__ == "mm"][0]`,
  `next(...)`, `{f.__name__: f for f in ...}["mm"]`, `[v for k, v in vars(torch).items() if k == "mm"]`)
  is that torch function: torch's tables hold torch's own callables, and the name fixes which.
  So is an entry keyed by a torch op (`torch._decomp.get_decompositions([...])[aten.addmm.default]`:
  the op's decomposition, which computes with torch).

Each returns a qualified name or None; the resolver (names.py) calls them only for the node
kinds they read, so the common path costs nothing."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.string_values import Resolver, bound_string, string_value

# Tensor's base classes (torch.Tensor.__mro__), whose methods are Tensor's methods
_TENSOR_BASES = ("torch._C.TensorBase", "torch._C._TensorBase")


def canonical_class(qual: str) -> str:
    """`torch._C.TensorBase.mm` is `torch.Tensor.mm`."""
    for base in _TENSOR_BASES:
        if qual == base or qual.startswith(base + "."):
            return "torch.Tensor" + qual[len(base):]
    return qual


def _strings(resolver: Resolver, expr: cst.BaseExpression) -> Optional[list[str]]:
    if type(expr) is cst.Name:  # a name bound to a tuple or list of strings
        binding = resolver.lookup(expr.value)
        expr = binding.value if binding is not None and binding.kind == "local" and binding.value is not None else expr
    if type(expr) not in (cst.Tuple, cst.List):
        return None
    parts = [bound_string(resolver, e.value) if type(e) is cst.Element else None for e in expr.elements]
    return parts if parts and all(p and p.isidentifier() for p in parts) else None  # type: ignore[return-value]


def folded_getattr(resolver: Resolver, call: cst.Call, func: Optional[str]) -> Optional[str]:
    """`functools.reduce(getattr, names, base)`: the dotted attribute of `base`."""
    if func not in ("functools.reduce", "_functools.reduce") or len(call.args) != 3:
        return None
    if resolver.qualname(call.args[0].value) != "builtins.getattr":
        return None
    parts = _strings(resolver, call.args[1].value)
    base = resolver.qualname(call.args[2].value)
    return f"{base}.{'.'.join(parts)}" if parts and base else None


def _torch_root(resolver: Resolver, expr: cst.BaseExpression) -> bool:
    """A collection torch hands back: a torch call's result (indexed, or its `.values()` /
    `.items()` / `.keys()`), or a torch module's namespace (`vars(torch)`, `torch.__dict__`)."""
    for _ in range(8):
        kind = type(expr)
        if kind is cst.Name:  # a module-level name bound to such a collection (`_D = get_decompositions(...)`)
            binding = resolver.lookup(expr.value)
            if binding is None or binding.kind != "local" or binding.value is None:
                return False
            expr = binding.value
        elif kind is cst.Subscript:
            expr = expr.value
        elif kind is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in ("values", "items", "keys"):
            expr = expr.func.value
        elif kind is cst.Attribute and expr.attr.value == "__dict__":
            return (resolver.qualname(expr.value) or "").split(".")[0] == "torch"
        elif kind is cst.Call:
            func = resolver.qualname(expr.func) or ""
            if func == "builtins.vars" and expr.args:
                return (resolver.qualname(expr.args[0].value) or "").split(".")[0] == "torch"
            return func.startswith("torch.")
        else:
            return False
    return False


def _name_test(test: cst.BaseExpression, element: str, key: Optional[str]) -> Optional[str]:
    """`f.__name__ == "mm"` (either side), `getattr(f, "__name__") == "mm"`, or `k == "mm"` for the
    key of an `items()` pair: the name the test fixes."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    if type(test.comparisons[0].operator) is not cst.Equal:
        return None
    sides = (test.left, test.comparisons[0].comparator)
    for named, literal in (sides, sides[::-1]):
        name = string_value(literal)
        if name is None:
            continue
        if type(named) is cst.Attribute and named.attr.value in ("__name__", "__qualname__") \
                and type(named.value) is cst.Name and named.value.value == element:
            return name
        if type(named) is cst.Call and type(named.func) is cst.Name and named.func.value == "getattr" \
                and len(named.args) >= 2 and type(named.args[0].value) is cst.Name \
                and named.args[0].value.value == element and string_value(named.args[1].value) == "__name__":
            return name
        if key is not None and type(named) is cst.Name and named.value == key:
            return name
    return None


def _picked(resolver: Resolver, comp: cst.BaseExpression) -> Optional[str]:
    """The torch function a list / generator comprehension over a torch table keeps by name."""
    if type(comp) not in (cst.ListComp, cst.GeneratorExp) or type(comp.elt) is not cst.Name:
        return None
    loop = comp.for_in
    if loop.inner_for_in is not None or len(loop.ifs) != 1 or not _torch_root(resolver, loop.iter):
        return None
    element, key = comp.elt.value, None
    target = loop.target
    if type(target) is cst.Tuple and len(target.elements) == 2 and all(type(e.value) is cst.Name for e in target.elements):
        key = target.elements[0].value.value  # type: ignore[attr-defined]
        if target.elements[1].value.value != element:  # type: ignore[attr-defined]
            return None
    elif type(target) is not cst.Name or target.value != element:
        return None
    name = _name_test(loop.ifs[0].test, element, key)
    return f"{_namespace(resolver, loop.iter)}.{name}" if name and name.isidentifier() else None


def _namespace(resolver: Resolver, table: cst.BaseExpression) -> str:
    """`get_overridable_functions()[torch.Tensor]` holds Tensor's methods; other tables torch's functions."""
    if type(table) is cst.Subscript and len(table.slice) == 1 and type(table.slice[0].slice) is cst.Index:
        keyed = resolver.qualname(table.slice[0].slice.value)
        if keyed == "torch.Tensor":
            return keyed
    return "torch"


def picked_by_name(resolver: Resolver, expr: cst.BaseExpression) -> Optional[str]:
    """`[... if f.__name__ == "mm"][0]`, `next(... if f.__name__ == "mm")`,
    `{f.__name__: f for f in table}["mm"]`: torch's function of that name."""
    if type(expr) is cst.Call:
        if resolver.qualname(expr.func) == "builtins.next" and expr.args:
            return _picked(resolver, expr.args[0].value)
        return None
    if type(expr) is not cst.Subscript or len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Index:
        return None
    holder, index = expr.value, expr.slice[0].slice.value
    if type(holder) in (cst.Call, cst.Subscript, cst.Name) and type(index) is cst.Attribute and _torch_root(resolver, holder):
        keyed = resolver.qualname(index)  # get_decompositions([...])[torch.ops.aten.addmm.default]: the op's own body
        if keyed and keyed.startswith("torch."):
            return keyed
    if type(holder) is cst.Name:  # `_T = {f.__name__: f for f in ...}` then `_T["mm"]`
        binding = resolver.lookup(holder.value)
        if binding is not None and binding.kind == "local" and type(binding.value) in (cst.ListComp, cst.DictComp):
            holder = binding.value
    if type(holder) is cst.ListComp:
        return _picked(resolver, holder)
    if type(holder) is cst.DictComp and type(holder.value) is cst.Name and holder.for_in.inner_for_in is None \
            and not holder.for_in.ifs and type(holder.for_in.target) is cst.Name \
            and holder.for_in.target.value == holder.value.value and _torch_root(resolver, holder.for_in.iter):
        key = holder.key
        name = string_value(index)
        if name and name.isidentifier() and type(key) is cst.Attribute and key.attr.value == "__name__" \
                and type(key.value) is cst.Name and key.value.value == holder.value.value:
            return f"torch.{name}"
    return None
