"""Python-level callables that compute when handed tensors or their data: builtins and the
operator module (`sum(x)`, `operator.matmul(a, b)`), `functools.reduce` over tensors, einops,
and array libraries (numpy, CuPy, JAX, SciPy's BLAS / LAPACK and scipy.linalg). A mixin of
TorchUsage (through TorchCalls); not a rule file."""

from __future__ import annotations

import libcst as cst

from gatekeeper.analyses.scipy_compute import scipy_op
from gatekeeper.analyses.torch_usage_model import PY_COMPUTE

# calls whose result is a size, not a tensor: operands of a scalar fold
_SIZE_CALLS = frozenset({"size", "stride", "numel", "dim", "item", "tolist", "ndimension", "nelement"})


def scalar_operand(host: "LibraryCalls", expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Surely sizes or plain numbers: `x.shape`, `x.shape[1:]`, `x.size()`, `range(n)`, an int
    literal, a display of them, or a name bound to one of these."""
    kind = type(expr)
    if kind in (cst.Integer, cst.Float):
        return True
    if kind is cst.Attribute:
        return expr.attr.value in ("shape", "ndim")
    if kind is cst.Subscript:
        return scalar_operand(host, expr.value, depth + 1)
    if kind is cst.Call:
        if type(expr.func) is cst.Attribute and expr.func.attr.value in _SIZE_CALLS:
            return True
        qual = host.ctx.qualname(expr.func) or ""
        return qual in ("builtins.range", "builtins.len", "builtins.list", "builtins.tuple") and \
            (qual in ("builtins.range", "builtins.len") or any(scalar_operand(host, a.value, depth + 1) for a in expr.args))
    if kind in (cst.List, cst.Tuple):
        return bool(expr.elements) and all(scalar_operand(host, e.value, depth + 1) for e in expr.elements
                                           if type(e) is not cst.StarredElement)
    if kind is cst.Name and depth < 3:
        binding = host.ctx.resolver.lookup(expr.value)
        return binding is not None and binding.value is not None and scalar_operand(host, binding.value, depth + 1)
    return False


def constant_operand(host: "LibraryCalls", expr: cst.BaseExpression) -> bool:
    """A number, a size or a string: `erf(0.5)`, `get_window("hann", 64)` compute on no data."""
    return type(expr) in (cst.SimpleString, cst.ConcatenatedString) or scalar_operand(host, expr) \
        or (type(expr) is cst.UnaryOperation and scalar_operand(host, expr.expression))


class LibraryCalls:
    """Needs from the host: ctx, tensorish(), _use()."""

    def _tensor_data(self, expr: cst.BaseExpression) -> bool:
        """A tensor, or its data as an array (`x.numpy()`, `x.cpu().detach().numpy()`)."""
        for _ in range(8):
            if type(expr) is cst.Call and type(expr.func) is cst.Attribute \
                    and expr.func.attr.value in ("numpy", "cpu", "detach", "contiguous", "float", "double"):
                expr = expr.func.value
            elif type(expr) is cst.Call and expr.args and (self.ctx.qualname(expr.func) or "").rsplit(".", 1)[-1] \
                    in _WRAPS and (self.ctx.qualname(expr.func) or "").split(".", 1)[0] in _ARRAY_LIBRARIES:
                expr = expr.args[0].value  # `cupy.asarray(x)`, `jax.dlpack.from_dlpack(x)`: the tensor's data
            else:
                break
        return self.tensorish(expr)

    def _python_compute(self, node: cst.Call, qual: str) -> None:
        """`sum(x)`, `abs(x)`, `max(a, b)`, `operator.matmul(a, b)`, `einops.reduce(...)`:
        Python functions that make torch compute when handed tensors."""
        root, _, last = qual.partition(".")
        if root in ("einops", "opt_einsum"):
            if last in ("reduce", "einsum", "contract", "repeat"):
                self._use("function", qual, node, op="einsum" if "einsum" in last or last == "contract" else last)
            return
        if root == "scipy":
            # SciPy's BLAS / LAPACK wrappers and scipy.linalg compute whatever they are handed;
            # its array modules (fft, signal, special...) when handed more than numbers
            found = scipy_op(qual)
            if found is not None and (found[1] or not all(constant_operand(self, a.value) for a in node.args)):
                self._use("function", qual, node, op=found[0], heavy=True if found[1] else None)
            return
        if root in _ARRAY_LIBRARIES:
            # numpy handed a tensor's data computes on the CPU, CuPy or JAX on the GPU (cuBLAS and
            # their own library kernels), instead of the submission's kernel (`np.mean(x.numpy(),
            # axis=0)`, `cupy.matmul(cupy.asarray(a), cupy.asarray(b))`); wrapping, copying,
            # asking about it, streams and the libraries' JIT kernels (the submission's own) do not
            parts = last.split(".")
            if parts[0] in _ARRAY_NOT_COMPUTE or parts[-1] in _ARRAY_NOT_COMPUTE:
                return
            # a contraction or a linalg routine has no meaning on sizes: on arrays a helper was
            # handed (`def _panel(a_np, b_np): return np.matmul(a_np, b_np)`) it computes as `@` does
            contraction = parts[-1] in _CONTRACTIONS or parts[0] == "linalg"
            if any(self._tensor_data(a.value) for a in node.args) or (
                    contraction and not all(constant_operand(self, a.value) for a in node.args)):
                self._use("function", qual, node, op=parts[-1])
            return
        if qual == "functools.reduce":
            # `reduce(operator.add, x.unbind(0))`: the operator's arithmetic on each element
            if len(node.args) >= 2 and self.tensorish(node.args[1].value):
                folded = self.ctx.qualname(node.args[0].value) or ""
                op = PY_COMPUTE.get(folded) or ("reduce" if type(node.args[0].value) is cst.Lambda else None)
                if op is not None:
                    self._use("function", f"functools.reduce({folded or 'lambda'})", node, op=op)
            return
        op = PY_COMPUTE.get(qual)
        if op is None:
            return
        if op == "matmul" or any(self.tensorish(a.value) for a in node.args):
            self._use("function", qual, node, op=op)


# array-library functions that multiply matrices or vectors: never sizes
_CONTRACTIONS = frozenset({"matmul", "dot", "vdot", "inner", "outer", "einsum", "tensordot", "kron", "multi_dot"})
_ARRAY_LIBRARIES = ("numpy", "cupy", "cupyx", "jax", "dpnp")
# functions that hand a tensor's memory to an array library as it is
_WRAPS = frozenset({"asarray", "array", "from_dlpack", "ascontiguousarray", "asanyarray", "fromDlpack"})
# numpy / CuPy / JAX functions and modules that wrap, copy, allocate or describe an array
# without computing on it, and the libraries' kernel builders and streams.
_ARRAY_NOT_COMPUTE = frozenset({
    "asarray", "array", "ascontiguousarray", "asanyarray", "copy", "frombuffer", "empty", "empty_like",
    "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "shape", "ndim", "size", "dtype",
    "result_type", "can_cast", "iinfo", "finfo", "save", "savez", "load", "isfinite", "isnan", "isinf",
    "allclose", "array_equal", "testing", "random", "reshape", "ravel", "transpose", "squeeze", "expand_dims",
    "from_dlpack", "fromDlpack", "to_dlpack", "toDlpack", "dlpack", "asnumpy", "cuda", "RawKernel", "RawModule",
    "ElementwiseKernel", "ReductionKernel", "fuse", "jit", "get_array_module", "device_put", "block_until_ready",
    "get_default_memory_pool", "memory", "_core", "view", "broadcast_to",
})
