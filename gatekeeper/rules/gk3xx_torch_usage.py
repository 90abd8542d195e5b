"""Finds torch compute and own-kernel launches during the engine's one traversal.

Not a rule file: it defines no rule with a `code`. One `TorchUsage` per file is shared by
every GK3xx rule (kept on the FileContext); the first GK3xx rule constructed feeds it the
traversal events, and every rule reads the finished result in `finish()`.

A *use* is one place where torch (or ATen, or a vendor library) computes: a torch function,
an nn layer, a tensor compute method, an arithmetic operator on a tensor, a torch.ops.aten
op, or a C++ call. An *own kernel* is a launch of the submission's own code: a Triton (or
other JIT) kernel, a function of an extension built with load_inline/load, or a
torch.ops.<own namespace> op. Whether a use is in the forward path is decided in
`resolve()`, when the call graph is complete.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from gatekeeper.static.context import FileContext
from gatekeeper.static.cpp_sources import LOADERS, CppSource
from gatekeeper.static.names import dotted, string_value
from gatekeeper.rules.gk3xx_cpp_usage import scan_cpp
from gatekeeper.rules.gk3xx_fallbacks import Fallback, find_fallbacks
from gatekeeper.rules.gk3xx_torch_ops import TorchOps, short_op, torch_ops
from gatekeeper.static.cpp_functions import CppFunction, functions

_ELEMENTWISE = {
    cst.Add: "add", cst.Subtract: "sub", cst.Multiply: "mul", cst.Divide: "div",
    cst.FloorDivide: "floor_divide", cst.Modulo: "remainder", cst.Power: "pow",
    cst.AddAssign: "add", cst.SubtractAssign: "sub", cst.MultiplyAssign: "mul",
    cst.DivideAssign: "div", cst.FloorDivideAssign: "floor_divide", cst.ModuloAssign: "remainder",
    cst.PowerAssign: "pow",
}
_OPERATOR_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floor_divide": "//", "remainder": "%", "pow": "**", "neg": "-"}
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag", "grad"})
_CONTAINER_CALLS = frozenset({"list", "dict", "set", "tuple", "sorted", "str", "range", "len", "int", "float", "frozenset", "OrderedDict", "defaultdict", "deque"})
_SCALAR_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "complex", "bytes"})
_CONTAINER_CLASSES = frozenset({"Sequential", "ModuleList", "ModuleDict"})
_ATTR = "_gk3_torch_usage"
_PY_BUILTINS = frozenset(dir(__import__("builtins")))
_PY_COMPUTE = {
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


@dataclass
class Kernel:
    what: str  # how it was launched, for messages
    function: str
    path: tuple[cst.CSTNode, ...]
    node: cst.CSTNode
    # Deferred checks, resolved in TorchUsage.resolve().
    needs_def: Optional[str] = None  # a def name that must be a kernel-decorated function
    needs_ext: Optional[tuple[str, str]] = None  # (receiver key, attribute) of an extension call


@dataclass
class _Frame:
    key: str
    kernel_def: bool
    tensor_names: set[str] = field(default_factory=set)
    containers: set[str] = field(default_factory=set)
    layer_aliases: dict[str, str] = field(default_factory=dict)  # loop var -> self attr


class TorchUsage:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.ops: TorchOps = torch_ops()
        self.uses: list[Use] = []
        self.kernels: list[Kernel] = []
        self.frames: list[_Frame] = []
        self.kernel_defs: set[str] = set()
        self.loader_functions: set[str] = set()  # functions whose body calls load_inline
        self.holders: set[str] = set()  # names / self.X bound to an extension module
        self.holder_calls: dict[str, str] = {}  # name -> function it was assigned from
        self.ext_functions: set[str] = set()  # functions=[...] and C++ function names
        self.self_layers: dict[str, list[str]] = {}  # self attr -> torch.nn classes in it
        self.self_tensors: set[str] = set()
        self.self_foreign: set[str] = set()  # self attrs holding containers or non-torch objects
        self.class_attrs: dict[str, str] = {}  # class-body `op = torch.mean`
        self.self_calls: list[tuple[str, cst.Call, str, tuple[cst.CSTNode, ...]]] = []
        self.has_cuda_kernel = False
        self.has_own_loops = False
        self._function_cache: dict[int, list[CppFunction]] = {}
        self.cpp_seen = False
        self._resolved = False

    @classmethod
    def of(cls, ctx: FileContext) -> tuple["TorchUsage", bool]:
        """The file's shared instance, and whether the caller is the first (the feeder)."""
        existing = ctx.__dict__.get(_ATTR)
        if existing is not None:
            return existing, False
        usage = cls(ctx)
        ctx.__dict__[_ATTR] = usage
        return usage, True

    # traversal events -----------------------------------------------------------
    def enter_function(self, node: cst.FunctionDef) -> None:
        outer_kernel = bool(self.frames) and self.frames[-1].kernel_def
        kernel_def = outer_kernel or any(self._is_kernel_decorator(d) for d in node.decorators)
        if kernel_def:
            self.kernel_defs.add(node.name.value)
        frame = _Frame(self.ctx.function_key, kernel_def)
        if node.name.value in ("forward", "__call__") and self.ctx.classes:
            frame.tensor_names.update(_tensor_params(node.params))
        self.frames.append(frame)

    def leave_function(self) -> None:
        if self.frames:
            self.frames.pop()

    def _is_kernel_decorator(self, decorator: cst.Decorator) -> bool:
        expr = decorator.decorator
        if isinstance(expr, cst.Call):
            expr = expr.func
        qual = self.ctx.qualname(expr)
        return bool(qual) and self.ops.is_kernel_decorator(qual)  # type: ignore[arg-type]

    @property
    def _in_kernel(self) -> bool:
        return bool(self.frames) and self.frames[-1].kernel_def

    def assign(self, targets: list[cst.BaseExpression], value: cst.BaseExpression) -> None:
        loader = self._is_loader_call(value)
        for target in targets:
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                attr = target.attr.value
                if loader:
                    self.holders.add(f"self.{attr}")
                layers = self._nn_classes_in(value, 0)
                if _is_container(value) or self._foreign_object(value):
                    self.self_foreign.add(attr)
                if layers:
                    self.self_layers[attr] = layers
                elif isinstance(value, cst.Call) and (self.ctx.qualname(value.func) or "").startswith("torch."):
                    self.self_tensors.add(attr)
                if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                    self.holder_calls[f"self.{attr}"] = value.func.value
            elif isinstance(target, cst.Name):
                name = target.value
                if self.ctx.classes and not self.frames:
                    qual = self.ctx.qualname(value)
                    if qual is not None:
                        self.class_attrs[name] = qual
                if loader:
                    self.holders.add(name)
                elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                    self.holder_calls[name] = value.func.value
                if self.frames:
                    frame = self.frames[-1]
                    if self.tensorish(value):
                        frame.tensor_names.add(name)
                    else:
                        frame.tensor_names.discard(name)
                    if _is_container(value):
                        frame.containers.add(name)

    def loop(self, node: cst.For) -> None:
        """`for layer in self.layers:` makes `layer(x)` a call of what self.layers holds."""
        if not self.frames or not isinstance(node.target, cst.Name):
            return
        it = node.iter
        if isinstance(it, cst.Attribute) and isinstance(it.value, cst.Name) and it.value.value == "self":
            self.frames[-1].layer_aliases[node.target.value] = it.attr.value

    def call(self, node: cst.Call) -> None:
        ctx = self.ctx
        func = node.func
        qual = ctx.qualname(func)
        if self._is_loader_call(node):
            self.loader_functions.add(ctx.function_key)
            self._record_ext_names(node)
            return
        if self._in_kernel:
            return
        if isinstance(ctx.parent(node), cst.Decorator):
            return
        # own kernels --------------------------------------------------------------
        if isinstance(func, cst.Subscript):
            base = func.value
            base_qual = ctx.qualname(base)
            if _is_self_attr(base):  # self.layers[i](x): a call of what the container holds
                self.self_calls.append((base.attr.value, node, ctx.function_key, ()))  # type: ignore[union-attr]
            elif isinstance(base, cst.Name) and base_qual is None:  # kernel[grid](...)
                binding = ctx.resolver.lookup(base.value)
                table = self._torch_table(binding.value if binding is not None else None)
                if table is not None:  # OPS["mean"](x): a dict or list of torch functions
                    self._torch_call(node, table)
                else:
                    self._kernel(node, f"{base.value}[grid]", needs_def=None if binding is None else base.value)
            elif base_qual and not base_qual.startswith(("torch.", "builtins.")):
                self._kernel(node, f"{base_qual}[grid]")
            return
        if isinstance(func, cst.Name) and qual is None:
            qual = self._star_import(func.value)
            if qual is None:
                self._kernel(node, func.value, needs_def=func.value)
                self._maybe_layer_name(node, func.value)
                return
        if qual is not None and qual.startswith(("builtins.", "operator.", "einops.", "opt_einsum.")):
            self._python_compute(node, qual)
            return
        if qual is not None and qual.startswith("torch."):
            self._torch_call(node, qual)
            return
        if qual is not None and isinstance(func, cst.Attribute) and _extension_module(qual):
            self._kernel(node, qual)  # a prebuilt extension: import fused_cuda; fused_cuda.f(x)
            return
        if qual is None and isinstance(func, cst.Call):
            inner = ctx.qualname(func.func) or ""
            if self._nn_compute_class(inner):
                self._use("layer", inner, node, op=inner.rsplit(".", 1)[-1])
            elif inner == "builtins.getattr" and len(func.args) >= 2:  # getattr(x, "mean")(0)
                name = string_value(func.args[1].value)
                if name and self.ops.method_is_compute(name) and self._may_be_tensor(func.args[0].value):
                    self._use("method", f"Tensor.{name}", node, op=name)
            return
        if qual == "functools.partial" and node.args:  # partial(torch.mean, dim=0): a deferred call
            target = ctx.qualname(node.args[0].value) or ""
            if target.startswith("torch.") and self.ops.function_is_compute(target) \
                    and not any(p[:1].isupper() for p in target.split(".")):
                self._use("function", target, node, op=target.rsplit(".", 1)[-1], deferred=True)
            return
        if qual is None and isinstance(func, cst.Attribute):
            self._method_call(node, func)

    def _star_import(self, name: str) -> Optional[str]:
        """`from torch.nn.functional import *` then `linear(x, w)`."""
        if self.ctx.resolver.lookup(name) is not None or name in _PY_BUILTINS:
            return None
        for key, binding in self.ctx.resolver.module_scope.names.items():
            if key.startswith("*torch") and binding.qualname:
                return f"{binding.qualname}.{name}"
        return None

    def _torch_table(self, value: Optional[cst.BaseExpression]) -> Optional[str]:
        """The first torch compute function held in a dict / list / tuple literal."""
        if isinstance(value, cst.Dict):
            items = [e.value for e in value.elements if isinstance(e, cst.DictElement)]
        elif isinstance(value, (cst.List, cst.Tuple)):
            items = [e.value for e in value.elements]
        else:
            return None
        for item in items:
            qual = self.ctx.qualname(item)
            if qual and qual.startswith("torch.") and self.ops.function_is_compute(qual):
                return qual
        return None

    def _python_compute(self, node: cst.Call, qual: str) -> None:
        """`sum(x)`, `abs(x)`, `max(a, b)`, `operator.matmul(a, b)`, `einops.reduce(...)`:
        Python functions that make torch compute when handed tensors."""
        root, _, last = qual.partition(".")
        if root in ("einops", "opt_einsum"):
            if last in ("reduce", "einsum", "contract", "repeat"):
                self._use("function", qual, node, op="einsum" if "einsum" in last or last == "contract" else last)
            return
        op = _PY_COMPUTE.get(qual)
        if op is None:
            return
        if op == "matmul" or any(self.tensorish(a.value) for a in node.args):
            self._use("function", qual, node, op=op)

    def _torch_call(self, node: cst.Call, qual: str) -> None:
        ops = self.ops
        namespace = ops.torch_op_namespace(qual)
        if namespace is not None:
            ns, op = namespace
            if ns in ops.op_namespaces:
                self._use("aten", qual, node, op=op)
            else:
                self._kernel(node, qual)
            return
        parts = qual.split(".")
        k = next((i for i, p in enumerate(parts) if p[:1].isupper()), None)
        if k is None:
            if ops.function_is_compute(qual):
                self._use("function", qual, node, op=parts[-1])
            return
        cls, rest = ".".join(parts[: k + 1]), parts[k + 1 :]
        func = node.func
        if cls.startswith("torch.nn."):
            if not rest:
                if _is_self_attr(func):
                    self._self_layer_call(node, func.attr.value, cls)  # type: ignore[union-attr]
            elif rest[0] in ("forward", "__call__"):
                owner = func.value if isinstance(func, cst.Attribute) else None
                if owner is not None and _is_self_attr(owner):
                    self._self_layer_call(node, owner.attr.value, cls)  # type: ignore[union-attr]
                else:
                    self._layer_use(node, [cls])
            elif ops.method_is_compute(rest[-1]):
                self._use("method", f"Tensor.{rest[-1]}", node, op=rest[-1])
        elif cls == "torch.Tensor" and rest and ops.method_is_compute(rest[-1]):
            self._use("method", qual, node, op=rest[-1])

    def _self_layer_call(self, node: cst.Call, attr: str, cls: str) -> None:
        classes = self.self_layers.get(attr) or [cls]
        self._layer_use(node, classes)

    def _layer_use(self, node: cst.Call, classes: list[str]) -> None:
        compute = [c for c in classes if self._nn_compute_class(c)]
        if not compute:
            return
        heavy = [c for c in compute if self.ops.is_heavy(c.rsplit(".", 1)[-1])]
        main = (heavy or compute)[0]
        label = main if len(compute) == 1 else f"{main} (+{len(compute) - 1} more torch.nn layers)"
        self._use("layer", label, node, op=main.rsplit(".", 1)[-1], heavy=bool(heavy))

    def _maybe_layer_name(self, node: cst.Call, name: str) -> None:
        frame = self.frames[-1] if self.frames else None
        if frame is not None and name in frame.layer_aliases:
            self.self_calls.append((frame.layer_aliases[name], node, self.ctx.function_key, ()))
            return
        binding = self.ctx.resolver.lookup(name)
        if binding is not None and binding.kind == "local" and binding.value is not None:
            value = binding.value
            classes = self._nn_classes_in(value, 0) if isinstance(value, cst.Call) else []
            if classes:
                self._layer_use(node, classes)
            elif isinstance(value, cst.Attribute) and self.ops.method_is_compute(value.attr.value) \
                    and self._may_be_tensor(value.value):  # m = x.mean; m(0)
                self._use("method", f"Tensor.{value.attr.value}", node, op=value.attr.value)

    def _method_call(self, node: cst.Call, func: cst.Attribute) -> None:
        ctx = self.ctx
        receiver = func.value
        name = func.attr.value
        if _is_self_attr(func):
            # self.fc(x) assigned after forward in the file: decided in resolve()
            self.self_calls.append((name, node, ctx.function_key, ()))
            return
        key = _receiver_key(receiver)
        if key is not None and (key in self.holders or not self.ops.known_tensor_method(name)):
            self._kernel(node, f"{key}.{name}", needs_ext=(key, name))
        if not self.ops.method_is_compute(name):
            return
        if not self._may_be_tensor(receiver):
            return
        self._use("method", f"Tensor.{name}", node, op=name, receiver=key)

    def _may_be_tensor(self, receiver: cst.BaseExpression) -> bool:
        """False for receivers that are surely not tensors: self, containers, literals,
        objects made by a non-torch call (`logger = logging.getLogger()`; `logger.log`)."""
        if isinstance(receiver, cst.Name):
            if receiver.value in ("self", "cls"):
                return False
            frame = self.frames[-1] if self.frames else None
            if frame is not None and receiver.value in frame.containers:
                return False
            binding = self.ctx.resolver.lookup(receiver.value)
            if binding is not None and binding.kind == "local":
                return not (_is_container(binding.value) or self._foreign_object(binding.value))
            return True
        if _is_self_attr(receiver):
            return receiver.attr.value not in self.self_foreign  # type: ignore[union-attr]
        return not isinstance(receiver, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString,
                                         cst.List, cst.Dict, cst.Set, cst.Tuple, cst.Integer, cst.Float))

    def _foreign_object(self, value: Optional[cst.BaseExpression]) -> bool:
        if not isinstance(value, cst.Call):
            return False
        qual = self.ctx.qualname(value.func)
        return qual is not None and not qual.startswith("torch.")

    def operator(self, node: cst.CSTNode) -> None:
        if self._in_kernel or not self.frames:
            return
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.MatrixMultiply):
                self._use("operator", "@", node, op="matmul", heavy=True)
                return
            op = _ELEMENTWISE.get(type(node.operator))
            if op is None or isinstance(self.ctx.parent(node), (cst.BinaryOperation, cst.UnaryOperation)):
                return
            if self.tensorish(node.left) or self.tensorish(node.right):
                self._use("operator", _OPERATOR_SYMBOL[op], node, op=op, heavy=False)
        elif isinstance(node, cst.AugAssign):
            if isinstance(node.operator, cst.MatrixMultiplyAssign):
                self._use("operator", "@=", node, op="matmul", heavy=True)
                return
            op = _ELEMENTWISE.get(type(node.operator))
            if op is not None and (self.tensorish(node.target) or self.tensorish(node.value)):
                self._use("operator", _OPERATOR_SYMBOL[op] + "=", node, op=op, heavy=False)
        elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            if not isinstance(self.ctx.parent(node), (cst.BinaryOperation, cst.UnaryOperation)) and self.tensorish(node.expression):
                self._use("operator", "-", node, op="neg", heavy=False)

    # tensor-ness ------------------------------------------------------------------
    def tensorish(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> bool:
        """The expression is (statically) a tensor: a forward tensor parameter, a local
        assigned from one, a tensor method's or torch function's result, or arithmetic on
        those. Sizes (`x.size(0)`, `x.shape[1]`, `x.numel()`) are not."""
        if expr is None or depth > 12:
            return False
        if isinstance(expr, cst.Name):
            return bool(self.frames) and expr.value in self.frames[-1].tensor_names
        if isinstance(expr, cst.Attribute):
            if _is_self_attr(expr):
                return expr.attr.value in self.self_tensors
            return expr.attr.value in _TENSOR_ATTRS and self.tensorish(expr.value, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self.tensorish(expr.value, depth + 1)
        if isinstance(expr, cst.BinaryOperation):
            return self.tensorish(expr.left, depth + 1) or self.tensorish(expr.right, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self.tensorish(expr.expression, depth + 1)
        if isinstance(expr, cst.IfExp):
            return self.tensorish(expr.body, depth + 1) or self.tensorish(expr.orelse, depth + 1)
        if isinstance(expr, (cst.GeneratorExp, cst.ListComp)):  # sum(x[i] for i in range(n))
            return self.tensorish(expr.elt, depth + 1)
        if isinstance(expr, cst.Call):
            qual = self.ctx.qualname(expr.func)
            if qual is not None:
                return qual.startswith("torch.") and not qual.startswith("torch.ops.") and self.ops.returns_tensor(qual)
            func = expr.func
            if isinstance(func, cst.Attribute) and not _is_self_attr(func):
                receiver = func.value
                if isinstance(receiver, cst.Name) and self.frames and receiver.value in self.frames[-1].containers:
                    return False
                if _receiver_key(receiver) in self.holders:
                    return True  # the extension's result: a tensor
                return self.ops.method_returns_tensor(func.attr.value)
        return False

    # records --------------------------------------------------------------------------
    def _path(self, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        out = [node]
        for parent in self.ctx.ancestors(node):
            out.append(parent)
            if isinstance(parent, (cst.FunctionDef, cst.Module)):
                break
        return tuple(out)

    def _use(self, kind: str, qual: str, node: cst.CSTNode, *, op: str, heavy: Optional[bool] = None,
             receiver: Optional[str] = None, deferred: bool = False) -> None:
        if self._in_kernel:
            return  # the submission's own kernel code
        path = self._path(node)
        deferred = deferred or any(isinstance(p, cst.Lambda) for p in path)
        if not self.frames and not deferred:
            return  # module level: import-time set-up (a module-level lambda runs later)
        if heavy is None:
            heavy = self.ops.is_heavy(op, qual)
        self.uses.append(Use(kind, short_op(op), qual, heavy, self.ctx.function_key, node, path,
                             receiver=receiver, deferred=deferred))

    def _kernel(self, node: cst.CSTNode, what: str, *, needs_def: Optional[str] = None,
                needs_ext: Optional[tuple[str, str]] = None) -> None:
        if not self.frames:
            return
        self.kernels.append(Kernel(what, self.ctx.function_key, (), node, needs_def, needs_ext))

    def _is_loader_call(self, value: cst.BaseExpression) -> bool:
        if not isinstance(value, cst.Call):
            return False
        qual = self.ctx.qualname(value.func) or ""
        if qual in LOADERS:
            return True
        return isinstance(value.func, cst.Name) and value.func.value == "load_inline"

    def _record_ext_names(self, call: cst.Call) -> None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "functions":
                values = arg.value.elements if isinstance(arg.value, (cst.List, cst.Tuple)) else [arg.value]
                for element in values:
                    text = string_value(element.value if isinstance(element, cst.BaseElement) else element)
                    if text:
                        self.ext_functions.add(text)

    def _nn_compute_class(self, qual: str) -> bool:
        if not qual.startswith("torch.nn.") or not qual.rsplit(".", 1)[-1][:1].isupper():
            return False
        return self.ops.function_is_compute(qual) and qual.rsplit(".", 1)[-1] not in _CONTAINER_CLASSES

    def _nn_classes_in(self, expr: cst.BaseExpression, depth: int) -> list[str]:
        """torch.nn classes constructed in an expression (through Sequential, ModuleList,
        list literals and comprehensions)."""
        if depth > 6:
            return []
        out: list[str] = []
        if isinstance(expr, cst.Call):
            qual = self.ctx.qualname(expr.func) or ""
            if self._nn_compute_class(qual):
                out.append(qual)
            for arg in expr.args:
                out += self._nn_classes_in(arg.value, depth + 1)
        elif isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            for element in expr.elements:
                out += self._nn_classes_in(element.value, depth + 1)
        elif isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            out += self._nn_classes_in(expr.elt, depth + 1)
        elif isinstance(expr, cst.Dict):
            for element in expr.elements:
                if isinstance(element, cst.DictElement):
                    out += self._nn_classes_in(element.value, depth + 1)
        elif isinstance(expr, cst.BinaryOperation):  # [nn.Linear(...)] * n
            out += self._nn_classes_in(expr.left, depth + 1) + self._nn_classes_in(expr.right, depth + 1)
        return out

    # C++ ------------------------------------------------------------------------------
    def cpp(self, source: CppSource) -> None:
        if not source.text.strip() or (source.origin == "string literal" and not _looks_like_code(self.ctx, source)):
            return
        self.cpp_seen = True
        has_kernel, found = scan_cpp(source, self.ops, self._functions)
        self.has_cuda_kernel |= has_kernel
        # A CPU extension's own loops are its kernel (the CPU fixtures in CI are such).
        self.has_own_loops |= any(t.kind == "ident" and t.text in ("for", "while") for t in source.tokens)
        for kind, chain, offset in found:
            op = chain.split("::")[-1]
            self.uses.append(Use(kind, short_op(op), chain, kind == "vendor" or self.ops.is_heavy(op), cpp=(source, offset)))

    # after the traversal ---------------------------------------------------------------
    def resolve(self) -> None:
        if self._resolved:
            return
        self._resolved = True
        for attr, node, key, _ in self.self_calls:
            if attr not in self.class_attrs and attr not in self.self_layers:
                continue
            path = self._path(node)
            alias = self.class_attrs.get(attr, "")
            plain = not any(part[:1].isupper() for part in alias.split("."))
            if alias.startswith("torch.") and plain and self.ops.function_is_compute(alias):
                self.uses.append(Use("function", short_op(alias.rsplit(".", 1)[-1]), alias,
                                     self.ops.is_heavy(alias.rsplit(".", 1)[-1], alias), key, node, path))
                continue
            classes = self.self_layers.get(attr)
            if classes:
                compute = [c for c in classes if self._nn_compute_class(c)]
                if compute:
                    heavy = [c for c in compute if self.ops.is_heavy(c.rsplit(".", 1)[-1])]
                    main = (heavy or compute)[0]
                    label = main if len(compute) == 1 else f"{main} (+{len(compute) - 1} more torch.nn layers)"
                    self.uses.append(Use("layer", short_op(main.rsplit(".", 1)[-1]), label, bool(heavy), key, node, path))
        if any(u.node is not None and u.kind == "layer" for u in self.uses):
            self._dedupe_layers()
        holders = set(self.holders) | {n for n, f in self.holder_calls.items() if f in self.loader_functions}
        if any(k.needs_ext is not None and k.needs_ext[0] not in holders for k in self.kernels):
            for source in self.ctx.cpp_sources:
                self.ext_functions.update(fn.name for fn in self._functions(source) if not fn.is_kernel)
        ext_ok = self.has_cuda_kernel or self.has_own_loops or not self.cpp_seen
        kept: list[Kernel] = []
        for k in self.kernels:
            if k.needs_def is not None:
                if k.needs_def in self.kernel_defs:
                    kept.append(k)
            elif k.needs_ext is not None:
                key, attr = k.needs_ext
                if (key in holders or key.removeprefix("call:") in self.loader_functions or attr in self.ext_functions) and ext_ok:
                    kept.append(k)
            else:
                kept.append(k)
        self.kernels = [k for k in kept if self.in_forward(k.function)]
        for k in self.kernels:  # parents are complete now; only the kept ones need a path
            k.path = self._path(k.node)
        # a method named like an extension function, on a receiver that is the extension
        self.uses = [u for u in self.uses if not (u.kind == "method" and u.receiver is not None
                                                   and (u.receiver in holders or u.receiver.removeprefix("call:") in self.loader_functions))]
        self.uses = [u for u in self.uses if u.cpp is not None or self.in_forward(u.function)
                     or (u.deferred and self._deferred(u.function))]
        find_fallbacks(self)

    def _functions(self, source: CppSource) -> list[CppFunction]:
        """C++ function definitions of a source, computed once per file."""
        found = self._function_cache.get(id(source))
        if found is None:
            found = self._function_cache[id(source)] = functions(source.tokens)
        return found

    def _dedupe_layers(self) -> None:
        seen: set[int] = set()
        out = []
        for use in self.uses:
            if use.kind == "layer" and use.node is not None:
                if id(use.node) in seen:
                    continue
                seen.add(id(use.node))
            out.append(use)
        self.uses = out

    def _deferred(self, key: str) -> bool:
        """A lambda written in __init__ or at module level runs later (stored, compiled,
        called from forward); only harness glue such as get_inputs is exempt."""
        return key.rsplit(".", 1)[-1] not in self.ops.exempt_functions

    def in_forward(self, key: str) -> bool:
        """Runs when the model is called: not construction or import time, not harness
        glue (get_inputs), not backward, not a copy of the reference `Model`."""
        last = key.rsplit(".", 1)[-1]
        if last in self.ops.exempt_functions:
            return False
        if key.startswith("Model.") and "ModelNew.forward" in self.ctx.defined:
            return False
        return not self.ctx.is_init_only(key)

    @property
    def own_kernel(self) -> Optional[Kernel]:
        return self.kernels[0] if self.kernels else None


def _extension_module(qual: str) -> bool:
    """`qual` is a function of an imported module that is neither torch, the standard
    library, nor a known numeric/utility package: a prebuilt extension of the submission."""
    if qual.startswith("."):
        return True  # from .kernels import fused: the submission's own package
    root = qual.split(".", 1)[0]
    return root not in sys.stdlib_module_names and root not in _NOT_EXTENSIONS and root != "builtins"


def _is_self_attr(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _receiver_key(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if _is_self_attr(expr):
        return f"self.{expr.attr.value}"  # type: ignore[union-attr]
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
        return f"call:{expr.func.value}"
    return None


def _is_container(value: Optional[cst.BaseExpression]) -> bool:
    if value is None:
        return False
    if isinstance(value, (cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp,
                          cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in _CONTAINER_CALLS


def _tensor_params(params: cst.Parameters) -> set[str]:
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
    if isinstance(params.star_arg, cst.Param):
        names.add(params.star_arg.name.value)
    return names


def _looks_like_code(ctx: FileContext, source: CppSource) -> bool:
    """A string literal that was not handed to a loader counts as C++ only if it has a body
    and is not a docstring (a docstring that mentions torch::mean is not code)."""
    if "{" not in source.text:
        return False
    for segment in source.segments:
        if segment.node is not None and isinstance(ctx.parent(segment.node), cst.Expr):
            return False
    return True
