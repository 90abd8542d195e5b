"""What an assignment binds, recorded for TorchUsage: names and attributes that hold a
loaded extension (`self.ext = load_inline(...)`, a class attribute), nn layers and tensors
kept on `self`, callables taken from an extension (`self.op = _ext.fn`) or handed in by the
caller, and the tensor and container names of the current function. A mixin of TorchUsage;
not a rule file."""

from __future__ import annotations

import libcst as cst

from gatekeeper.analyses.own_callables import native_loader
from gatekeeper.analyses.scipy_compute import note_unpacked
from gatekeeper.analyses.torch_usage_model import is_container, receiver_key


class RecordsBindings:
    """Needs from the host: ctx, frames, holders, holder_calls, class_attrs, self_* tables,
    tensorish(), method_as_value(), _is_loader_call(), _nn_classes_in(), _foreign_object()."""

    def assign(self, targets: list[cst.BaseExpression], value: cst.BaseExpression) -> None:
        # a native library of its own (ctypes.CDLL) holds the submission's compiled code too
        loader = self._is_loader_call(value) or (type(value) is cst.Call and native_loader(self.ctx.qualname(value.func), value))
        if any(type(t) in (cst.Attribute, cst.Subscript) for t in targets):
            self.method_as_value(value, value, stored=True)  # self.k = a.mm; self.k(b)
        for target in targets:
            note_unpacked(self.ctx, target, value)  # gemm, = get_blas_funcs(("gemm",), ...)
        for target in targets:
            if loader and type(target) is cst.Attribute:
                key = receiver_key(target)
                if key is not None and not key.startswith("self."):
                    self.holders.add(key)  # Fn.ext = load_inline(...): a class attribute holds it
            if type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == "self":
                attr = target.attr.value
                if loader:
                    self.holders.add(f"self.{attr}")
                layers = self._nn_classes_in(value, 0)
                if is_container(value) or self._foreign_object(value):
                    self.self_foreign.add(attr)
                if layers:
                    self.self_layers[attr] = layers
                elif type(value) is cst.Call and (self.ctx.qualname(value.func) or "").startswith("torch."):
                    self.self_tensors.add(attr)
                if type(value) is cst.Call and type(value.func) is cst.Name:
                    self.holder_calls[f"self.{attr}"] = value.func.value
                if type(value) is cst.Attribute:  # self.op = _ext.fused_cuda: calling self.op launches it
                    receiver = receiver_key(value.value)
                    if receiver is not None:
                        self.self_ext[attr] = (receiver, value.attr.value, self.ctx.qualname(value))
                elif type(value) is cst.Name and self.ctx.functions and value.value in _param_names(self.ctx.functions[-1]):
                    self.self_passed.add(attr)  # self.op = op: a callable handed in by the caller
            elif type(target) is cst.Name:
                name = target.value
                if self.ctx.classes and not self.frames:
                    qual = self.ctx.qualname(value)
                    if qual is not None:
                        self.class_attrs[name] = qual
                if loader:
                    self.holders.add(name)
                elif type(value) is cst.Call and type(value.func) is cst.Name:
                    self.holder_calls[name] = value.func.value
                if self.frames:
                    frame = self.frames[-1]
                    if self.tensorish(value):
                        frame.tensor_names.add(name)
                    else:
                        frame.tensor_names.discard(name)
                    if is_container(value):
                        frame.containers.add(name)


def _param_names(function: cst.FunctionDef) -> set[str]:
    params = function.params
    return {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
