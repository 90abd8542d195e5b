"""Callables that are values: a tensor's compute method taken as a value (method_values.py)
or a BLAS / LAPACK routine SciPy hands back (scipy_compute.py), recorded as the call they
become where they are called or handed on. A mixin of TorchUsage (through TorchCalls); not a
rule file."""

from __future__ import annotations

import libcst as cst

from gatekeeper.analyses.method_values import method_value
from gatekeeper.analyses.scipy_compute import computes_anyway, routine_value, scipy_op
from gatekeeper.analyses.torch_usage_model import receiver_key


class ValueCalls:
    """Needs from the host: ctx, ops, holders, tensorish(), _may_be_tensor(), _use()."""

    def method_as_value(self, node: cst.CSTNode, value: cst.BaseExpression, *, stored: bool = False) -> bool:
        """`value` is a tensor's compute method taken as a value (`p.mm`, `object.__getattribute__(
        p, "mm")`, a name or a table entry bound to one; method_values.py): a deferred call of it.
        `stored` (into an attribute or an item, `self.k = a.mm`, or handed to an extension): the
        receiver must be a tensor for sure, as `self.mode = cfg.mode` stores a setting."""
        found = method_value(self.ctx, value)
        if found is None or not self._tensor_method(*found) or (stored and not self.tensorish(found[1])):
            return False
        name, receiver = found
        self._use("method", f"Tensor.{name}", node, op=name, deferred=True, receiver=receiver_key(receiver))
        return True

    def scipy_value(self, node: cst.CSTNode, value: cst.BaseExpression) -> bool:
        """`value` is a SciPy routine that computes whatever it is handed (scipy_compute.py), by
        its path (`blas.sgemm`) or as `get_blas_funcs` gives it: a deferred call of it."""
        qual = self.ctx.qualname(value) or ""
        if computes_anyway(qual):
            self._use("function", qual, node, op=scipy_op(qual)[0], heavy=True, deferred=True)  # type: ignore[index]
            return True
        return not qual and self.scipy_routine(node, value, deferred=True)

    def scipy_routine(self, node: cst.CSTNode, value: cst.BaseExpression, *, deferred: bool = False) -> bool:
        """`value` holds a BLAS / LAPACK routine fetched by `get_blas_funcs` (scipy_compute.py)."""
        op = routine_value(self.ctx, value)
        if op is None:
            return False
        self._use("function", f"scipy.linalg.get_blas_funcs({op})", node, op=op, heavy=True, deferred=deferred)
        return True

    def _tensor_method(self, name: str, receiver: cst.BaseExpression) -> bool:
        """A compute method's name on a receiver that may be a tensor and is no extension."""
        return self.ops.method_is_compute(name) and self._may_be_tensor(receiver) \
            and receiver_key(receiver) not in self.holders

    def bound_method_call(self, node: cst.Call, value: cst.BaseExpression) -> bool:
        """A call of a name bound to a method value (`m = x.mean; m(0)`, `k = object.__getattribute__(
        x, "mm"); k(b)`). The receiver is kept: `_max = _ext.max` is the extension's (resolve)."""
        found = method_value(self.ctx, value)
        if found is None or not self.ops.method_is_compute(found[0]) or not self._may_be_tensor(found[1]):
            return False
        self._use("method", f"Tensor.{found[0]}", node, op=found[0], receiver=receiver_key(found[1]))
        return True

    def fetched_method_call(self, node: cst.Call) -> bool:
        """A call of a method fetched by a fixed name: `getattr(x, "mean")(0)`,
        `object.__getattribute__(x, _SLOT)(b)`, `type(x).__dict__["mm"](x, b)`."""
        found = method_value(self.ctx, node.func)  # also `_fetch(x)(b)`, a helper that returns one
        if found is None or not self._tensor_method(*found):
            return False
        self._use("method", f"Tensor.{found[0]}", node, op=found[0], receiver=receiver_key(found[1]))
        return True
