"""How a call in the forward path is classified: a torch function, an nn layer, a tensor
compute method, a Python builtin or operator-module function on tensors, or a dict of torch
functions. A mixin of TorchUsage (torch_usage.py); not a rule file."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.analyses.torch_usage_model import (
    CONTAINER_CLASSES, PY_BUILTINS, PY_COMPUTE, is_container, receiver_key,
)
from gatekeeper.analyses.method_values import called_parameters, table_method
from gatekeeper.analyses.library_calls import LibraryCalls, scalar_operand
from gatekeeper.analyses.scipy_compute import computes_anyway
from gatekeeper.analyses.value_calls import ValueCalls
from gatekeeper.static.names import string_value
from gatekeeper.static.syntax import is_self_attr

# torch functions that return an operator's callable from its name
_OP_LOOKUPS = frozenset({"torch._C._get_operation_overload", "torch._C._jit_get_operation"})


# Callables that take a function without calling it on tensors: type checks, introspection,
# registration of fakes and hooks judged elsewhere (functools.partial: a deferred call of its own).
_NOT_CALLERS = frozenset({"builtins.isinstance", "builtins.issubclass", "builtins.callable", "builtins.id",
                          "builtins.repr", "builtins.str", "builtins.print", "builtins.hasattr", "builtins.getattr",
                          "functools.partial", "functools.wraps", "inspect.signature", "inspect.getsource"})
_NOT_FUNCTIONS = frozenset({"float", "half", "double", "bfloat16", "int", "long", "short", "bool", "cfloat",
                            "cdouble", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8"})


# keywords whose value is a callable the callee will call (`sorted(key=)`, `map_structure(fn=)`)
_CALLABLE_KEYWORDS = frozenset({"key", "fn", "func", "function", "op", "kernel", "impl", "callback", "target",
                                "reducer", "combine", "binary_op", "f"})


def _scalar_operands(host: LibraryCalls, values: list[cst.BaseExpression]) -> bool:
    return any(scalar_operand(host, v) for v in values)


class TorchCalls(LibraryCalls, ValueCalls):
    """Needs from the host: ctx, ops, frames, holders, self_layers, self_foreign, self_calls,
    _use(), _kernel()."""

    def _star_import(self, name: str) -> Optional[str]:
        """`from torch.nn.functional import *` then `linear(x, w)`."""
        if self.ctx.resolver.lookup(name) is not None or name in PY_BUILTINS:
            return None
        for key, binding in self.ctx.resolver.module_scope.names.items():
            if key.startswith("*torch") and binding.qualname:
                return f"{binding.qualname}.{name}"
        return None

    def _table_entry(self, name: str) -> Optional[str]:
        """The torch function a name may hold when it was bound to an entry of a table of torch
        functions (`op = OPS[key]`, `op = OPS.get(key)`)."""
        binding = self.ctx.resolver.lookup(name)
        value = binding.value if binding is not None else None
        if type(value) is cst.Subscript:
            base = value.value
        elif type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "get":
            base = value.func.value
        else:
            return None
        if type(base) is not cst.Name:
            return None
        holder = self.ctx.resolver.lookup(base.value)
        return self._torch_table(holder.value if holder is not None else None)

    def _functions_handed_on(self, node: cst.Call, qual: Optional[str]) -> None:
        """A torch compute function handed to another callable (`map(torch.Tensor.sum, xs)`,
        `lib.impl("op", torch.mean, "CPU")`, `pool.submit(torch.mm, a, b)`) runs when that
        callable calls it: a deferred torch call where it is handed on."""
        if qual in _NOT_CALLERS and qual != "functools.partial":
            return
        positional = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
        if qual == "functools.reduce" and len(positional) >= 2 and self.tensorish(positional[1]):
            self.method_as_value(positional[0], positional[0])  # `reduce(a.add, xs)`: a bound method folds
            return  # `reduce(operator.add, x.unbind(0))` on tensors: _python_compute's use
        if qual == "functools.partial":
            # the first argument is the partial's own deferred call (TorchUsage.call); the rest
            # are handed on to it: `partial(functools.reduce, operator.matmul)` (red team round 12)
            positional = positional[1:]
        # keywords mostly hand on dtypes and devices (`dtype=torch.float32`); a callable-taking
        # keyword (`key=`, `fn=`) hands on a callable as surely as a positional does
        named = [arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value in _CALLABLE_KEYWORDS]
        scalars = _scalar_operands(self, positional)
        if qual is not None and qual.startswith("torch.") and not self.ops.function_is_compute(qual):
            # torch's allocation and view functions take numbers, not callables: `torch.full(s,
            # cfg.max)` hands on a field named like a method, not a bound method
            self._handed_on(positional, scalars=scalars, methods=None)
            return
        helper = called_parameters(self.ctx, node.func)  # a function of the file: does it call that parameter?
        if helper is None:
            # an extension's function takes tensors and numbers (`_ext.clamp(x, cfg.max)`): there
            # only a receiver that is surely a tensor makes a bound method (`_ext.apply(a.mm, b)`)
            func = node.func
            extension = type(func) is cst.Attribute and receiver_key(func.value) in self.holders
            self._handed_on(positional + named, scalars=scalars, methods=not extension)
            return
        names, called = helper
        for k, value in enumerate(positional):
            self._handed_on([value], scalars=scalars, methods=names[k] in called if k < len(names) else "*" in called)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in _CALLABLE_KEYWORDS:
                self._handed_on([arg.value], methods=arg.keyword.value in called)

    def class_keywords(self, node: cst.ClassDef) -> None:
        """`class ModelNew(Base, contraction=torch.matmul)`: a torch compute function handed to
        the class machinery (`__init_subclass__`, a metaclass) as a class keyword is stored
        there and called later (red team round 7, h08): a deferred torch call."""
        self._handed_on([kw.value for kw in node.keywords if kw.keyword is not None and kw.keyword.value != "metaclass"])

    def _handed_on(self, values: list[cst.BaseExpression], scalars: bool = False,
                   methods: Optional[bool] = True) -> None:
        """`methods`: True, a tensor's bound method handed on is a call of it; False, only on a
        receiver that is surely a tensor; None, never."""
        for value in values:
            if type(value) in (cst.List, cst.Tuple, cst.Set):  # `reduce(apply, [p.mm], b)`: each one handed on
                for element in value.elements if methods is not None else ():
                    if type(element.value) in (cst.Attribute, cst.Call):
                        self.method_as_value(element.value, element.value, stored=not methods)
                continue
            if type(value) not in (cst.Name, cst.Attribute, cst.Subscript, cst.Call):
                continue
            target = self.ctx.qualname(value) or ""
            if not target:
                # a tensor's bound method handed on (`map(p.mm, rhs)`, `sorted(key=x.dot)`): the
                # callee calls it, as `p.mm(b)` would (red team round 13)
                if methods is not None:
                    self.method_as_value(value, value, stored=not methods) or self.scipy_value(value, value)
                continue
            if target.startswith("scipy."):  # `map(sla.blas.sgemm, ...)`
                self.scipy_value(value, value)
                continue
            if target.startswith("operator."):
                # `reduce(operator.matmul, xs)`, `map(operator.mul, a, b)`: the operator's torch
                # op on tensors; `reduce(operator.mul, x.shape, 1)` multiplies sizes (scalars)
                op = PY_COMPUTE.get(target)
                if op is not None and not scalars:
                    self._use("function", target, value, op=op, deferred=True)
                continue
            if not target.startswith("torch."):
                continue
            namespace = self.ops.torch_op_namespace(target)
            if namespace is not None:  # `g.call_function(torch.ops.aten.mm.default, ...)` (an fx graph)
                ns, aten_op = namespace
                if ns in self.ops.op_namespaces and (self.ops.method_is_compute(aten_op) or self.ops.is_heavy(aten_op)):
                    self._use("aten", target, value, op=aten_op, deferred=True)
                continue
            parts = target.split(".")
            op = parts[-1]
            # a name torch computes with (a tensor method's name, or a heavy op), never a dtype
            # or other attribute that `function_is_compute`'s deny-by-default would count
            if op in _NOT_FUNCTIONS or not (self.ops.method_is_compute(op) or self.ops.is_heavy(op, target)):
                continue
            if parts[:2] == ["torch", "Tensor"] and len(parts) == 3:
                self._use("method", target, value, op=op, deferred=True)
            elif not any(p[:1].isupper() for p in parts) and self.ops.function_is_compute(target) \
                    and self.ops.torch_op_namespace(target) is None:
                self._use("function", target, value, op=op, deferred=True)

    def _torch_table(self, value: Optional[cst.BaseExpression]) -> Optional[str]:
        """The first torch compute function held in a dict / list / tuple literal."""
        if type(value) is cst.Dict:
            items = [e.value for e in value.elements if type(e) is cst.DictElement]
        elif type(value) in (cst.List, cst.Tuple):
            items = [e.value for e in value.elements]
        else:
            return None
        for item in items:
            qual = self.ctx.qualname(item)
            if qual and qual.startswith("torch.") and self.ops.function_is_compute(qual):
                return qual
            if qual in PY_COMPUTE and qual.startswith("operator."):  # {"mm": operator.matmul}
                return qual
            if qual and computes_anyway(qual):  # {"g": blas.sgemm}
                return qual
        found = table_method(self.ctx, value)  # [p.mm]: a tensor's bound method
        if found is not None and self._tensor_method(*found):
            return f"torch.Tensor.{found[0]}"
        return None

    def _table_call(self, node: cst.Call, qual: str) -> None:
        """A call of what a table of torch (or operator) functions holds."""
        if qual.startswith(("operator.", "scipy.")):
            self._python_compute(node, qual)
        else:
            self._torch_call(node, qual)

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
        if qual in _OP_LOOKUPS and node.args:
            # `torch._C._get_operation_overload("aten::mm", "")`: the op named by the string, as
            # `torch.ops.aten.mm` is (red team round 10)
            name = string_value(node.args[0].value) or ""
            if name.count("::") == 1 and name.split("::")[0] in ops.op_namespaces:
                ns, op = name.split("::")
                self._use("aten", f"torch.ops.{ns}.{op.split('.')[0]}", node, op=op.split(".")[0])
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
                if is_self_attr(func):
                    self._self_layer_call(node, func.attr.value, cls)  # type: ignore[union-attr]
            elif rest[0] in ("forward", "__call__"):
                owner = func.value if (type(func) is cst.Attribute) else None
                if owner is not None and is_self_attr(owner):
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
        self._use("layer", main, node, op=main.rsplit(".", 1)[-1], heavy=bool(heavy), more_layers=len(compute) - 1)

    def _maybe_layer_name(self, node: cst.Call, name: str) -> None:
        frame = self.frames[-1] if self.frames else None
        if frame is not None and name in frame.layer_aliases:
            self.self_calls.append((frame.layer_aliases[name], node, self.ctx.function_key, ()))
            return
        binding = self.ctx.resolver.lookup(name)
        if binding is not None and binding.kind == "local" and binding.value is None:
            self.scipy_routine(node, node.func)  # gemm, = get_blas_funcs(("gemm",), ...): unpacked
        elif binding is not None and binding.kind == "local":
            value = binding.value
            classes = self._nn_classes_in(value, 0) if (type(value) is cst.Call) else []
            if classes:
                self._layer_use(node, classes)
                return
            if self.scipy_routine(node, value):  # gemm = get_blas_funcs("gemm", (a, b)); gemm(1.0, a, b)
                return
            self.bound_method_call(node, value)  # m = x.mean; m(0)

    def _method_call(self, node: cst.Call, func: cst.Attribute) -> None:
        ctx = self.ctx
        receiver = func.value
        name = func.attr.value
        if is_self_attr(func):
            # self.fc(x) assigned after forward in the file: decided in resolve()
            self.self_calls.append((name, node, ctx.function_key, ()))
            return
        if name == "__call__" and self.bound_method_call(node, receiver):  # a.mm.__call__(b)
            return
        key = receiver_key(receiver)
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
        if type(receiver) is cst.Name:
            if receiver.value in ("self", "cls"):
                return False
            frame = self.frames[-1] if self.frames else None
            if frame is not None and receiver.value in frame.containers:
                return False
            binding = self.ctx.resolver.lookup(receiver.value)
            if binding is not None and binding.kind == "local":
                return not (is_container(binding.value) or self._foreign_object(binding.value))
            return True
        if is_self_attr(receiver):
            return receiver.attr.value not in self.self_foreign  # type: ignore[union-attr]
        return type(receiver) not in (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString,
                                         cst.List, cst.Dict, cst.Set, cst.Tuple, cst.Integer, cst.Float)

    def _foreign_object(self, value: Optional[cst.BaseExpression]) -> bool:
        if type(value) is not cst.Call:
            return False
        qual = self.ctx.qualname(value.func)
        return qual is not None and not qual.startswith("torch.")

    def _nn_compute_class(self, qual: str) -> bool:
        if not qual.startswith("torch.nn.") or not qual.rsplit(".", 1)[-1][:1].isupper():
            return False
        return self.ops.function_is_compute(qual) and qual.rsplit(".", 1)[-1] not in CONTAINER_CLASSES

    def _nn_classes_in(self, expr: cst.BaseExpression, depth: int) -> list[str]:
        """torch.nn classes constructed in an expression (through Sequential, ModuleList,
        list literals and comprehensions)."""
        if depth > 6:
            return []
        out: list[str] = []
        if type(expr) is cst.Call:
            qual = self.ctx.qualname(expr.func) or ""
            if self._nn_compute_class(qual):
                out.append(qual)
            for arg in expr.args:
                out += self._nn_classes_in(arg.value, depth + 1)
        elif type(expr) in (cst.List, cst.Tuple, cst.Set):
            for element in expr.elements:
                out += self._nn_classes_in(element.value, depth + 1)
        elif type(expr) in (cst.ListComp, cst.GeneratorExp, cst.SetComp):
            out += self._nn_classes_in(expr.elt, depth + 1)
        elif type(expr) is cst.Dict:
            for element in expr.elements:
                if type(element) is cst.DictElement:
                    out += self._nn_classes_in(element.value, depth + 1)
        elif type(expr) is cst.BinaryOperation:  # [nn.Linear(...)] * n
            out += self._nn_classes_in(expr.left, depth + 1) + self._nn_classes_in(expr.right, depth + 1)
        return out
