"""Data the torch-fallback analysis records (uses, kernel launches, per-function frames),
the tables it consults, and small syntax helpers. Not a rule file: it defines no rule."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Protocol

import libcst as cst

from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.names import dotted
from gatekeeper.static.syntax import is_self_attr, self_attr

if TYPE_CHECKING:
    from gatekeeper.static.context import FileContext

ELEMENTWISE = {
    cst.Add: "add", cst.Subtract: "sub", cst.Multiply: "mul", cst.Divide: "div",
    cst.FloorDivide: "floor_divide", cst.Modulo: "remainder", cst.Power: "pow",
    cst.AddAssign: "add", cst.SubtractAssign: "sub", cst.MultiplyAssign: "mul",
    cst.DivideAssign: "div", cst.FloorDivideAssign: "floor_divide", cst.ModuloAssign: "remainder",
    cst.PowerAssign: "pow",
}
OPERATOR_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floor_divide": "//", "remainder": "%", "pow": "**", "neg": "-"}
TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag", "grad"})
_CONTAINER_CALLS = frozenset({"list", "dict", "set", "tuple", "sorted", "str", "range", "len", "int", "float", "frozenset", "OrderedDict", "defaultdict", "deque"})
_SCALAR_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "complex", "bytes"})
CONTAINER_CLASSES = frozenset({"Sequential", "ModuleList", "ModuleDict"})
PY_BUILTINS = frozenset(dir(__import__("builtins")))
PY_COMPUTE = {
    "builtins.sum": "sum", "builtins.abs": "abs", "builtins.pow": "pow", "builtins.max": "max",
    "builtins.min": "min", "builtins.round": "round", "builtins.divmod": "remainder",
    "operator.matmul": "matmul", "operator.mul": "mul", "operator.add": "add", "operator.sub": "sub",
    "operator.truediv": "div", "operator.pow": "pow", "operator.neg": "neg", "operator.imul": "mul",
    "operator.iadd": "add", "operator.itruediv": "div", "operator.imatmul": "matmul",
}
# Imported packages whose functions are not the submission's kernels.
_NOT_EXTENSIONS = frozenset({
    "torch", "numpy", "np", "scipy", "einops", "triton", "tilelang", "cupy", "numba",
    "pytest", "typing_extensions", "packaging", "psutil", "kernelbench", "popcorn_pri",
})



@dataclass
class Fallback:
    kind: str  # try | if
    node: cst.CSTNode  # the Try / If / IfExp statement
    condition: str  # exception | input | device | flag | dead
    kernel: str  # the own kernel on the other path


@dataclass
class Use:
    kind: str  # function | layer | method | operator | aten | cpp | vendor
    op: str  # short name: mean, linear, matmul, add
    qual: str  # what the user wrote, resolved: torch.mean, torch.nn.Linear, Tensor.mean, @
    heavy: bool
    function: str = "<cpp>"
    node: Optional[cst.CSTNode] = None
    path: tuple[cst.CSTNode, ...] = ()  # ancestors up to the enclosing function
    cpp: Optional[tuple[CppSource, int]] = None
    fallback: Optional["Fallback"] = None
    receiver: Optional[str] = None  # method uses: how the receiver was written
    deferred: bool = False  # in a lambda or functools.partial: runs later, wherever it is written
    more_layers: int = 0  # layer uses: other torch.nn compute layers the same call runs (a Sequential)


def path_to_function(ctx: "FileContext", node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """`node` and its ancestors up to the enclosing function (or the module): a use's path."""
    out = [node]
    for parent in ctx.ancestors(node):
        out.append(parent)
        if type(parent) in (cst.FunctionDef, cst.Module):
            break
    return tuple(out)


@dataclass
class Kernel:
    what: str  # how it was launched, for messages
    function: str
    path: tuple[cst.CSTNode, ...]
    node: cst.CSTNode
    # Deferred checks, resolved in TorchUsage.resolve().
    needs_def: Optional[str] = None  # a def name that must be a kernel-decorated function
    needs_ext: Optional[tuple[str, str]] = None  # (receiver key, attribute) of an extension call


class UsageFacts(Protocol):
    """What the path and work analyses (torch_fallback_paths, kernel_work) read from TorchUsage,
    declared here so that they need not import torch_usage, which imports them."""

    ctx: "FileContext"
    kernels: list[Kernel]
    uses: list[Use]
    self_calls: list[tuple[str, cst.Call, str, tuple[cst.CSTNode, ...]]]

    def in_forward(self, key: str) -> bool: ...


@dataclass
class Frame:
    key: str
    kernel_def: bool
    tensor_names: set[str] = field(default_factory=set)
    containers: set[str] = field(default_factory=set)
    layer_aliases: dict[str, str] = field(default_factory=dict)  # loop var -> self attr


def extension_module(qual: str) -> bool:
    """`qual` is a function of an imported module that is neither torch, the standard
    library, nor a known numeric/utility package: a prebuilt extension of the submission."""
    if qual.startswith("."):
        return True  # from .kernels import fused: the submission's own package
    root = qual.split(".", 1)[0]
    return root not in sys.stdlib_module_names and root not in _NOT_EXTENSIONS and root != "builtins"


def receiver_key(expr: cst.BaseExpression) -> Optional[str]:
    if type(expr) is cst.Name:
        return expr.value
    if is_self_attr(expr):
        return self_attr(expr)
    if type(expr) is cst.Call and type(expr.func) is cst.Name:
        return f"call:{expr.func.value}"
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and _class_like(expr.func.value):
        # `_Lazy.get().f(...)`: a class's getter (a classmethod or staticmethod that builds the
        # extension and returns it), keyed as the function the loader call sits in
        return f"call:{expr.func.value.value}.{expr.func.attr.value}"  # type: ignore[attr-defined]
    if type(expr) is cst.Attribute and _class_like(expr.value):
        return f"{expr.value.value}.{expr.attr.value}"  # type: ignore[attr-defined]  # a class attribute: Fn.ext = load_inline(...)
    return None


def _class_like(expr: cst.BaseExpression) -> bool:
    """A name spelled as a class (`Fn`, `_Lazy`): a leading underscore keeps it private, not lower."""
    return type(expr) is cst.Name and expr.value.lstrip("_")[:1].isupper()


def is_container(value: Optional[cst.BaseExpression]) -> bool:
    if value is None:
        return False
    if type(value) in (cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp,
                          cst.SimpleString, cst.FormattedString, cst.ConcatenatedString):
        return True
    return type(value) is cst.Call and type(value.func) is cst.Name and value.func.value in _CONTAINER_CALLS


def tensor_params(params: cst.Parameters) -> set[str]:
    """Parameters of a forward that hold tensors: all but the first (self / ctx), minus
    those annotated as Python scalars and those with a default unless annotated Tensor."""
    names: set[str] = set()
    every = [*params.posonly_params, *params.params][1:] + list(params.kwonly_params)
    for param in every:
        annotation = dotted(param.annotation.annotation) if param.annotation is not None else None
        if annotation is None and param.annotation is not None:
            annotation = "?"
        if annotation is not None and "Tensor" not in annotation:
            continue
        if param.default is not None and annotation is None:
            continue
        names.add(param.name.value)
    if type(params.star_arg) is cst.Param:
        names.add(params.star_arg.name.value)
    return names
