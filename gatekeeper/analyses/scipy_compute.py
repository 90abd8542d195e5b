"""SciPy's routines that compute, as numpy's matmul does: the BLAS and LAPACK wrappers
(`scipy.linalg.blas.sgemm` runs OpenBLAS's GEMM), what `get_blas_funcs` / `get_lapack_funcs`
hand back, scipy.linalg's functions, and the transforms, filters and special functions of
the array modules (red team round 13). Not a rule file; read by torch_call_kinds.py."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.context import FileContext
from gatekeeper.static.names import string_value

# scipy.linalg names that build a matrix from parameters, pick a routine, or ask about one:
# no arithmetic on the operands
_LINALG_NOT_COMPUTE = frozenset({
    "find_best_blas_type", "get_blas_funcs", "get_lapack_funcs", "ilaver", "HAS_ILP64", "block_diag",
    "circulant", "companion", "convolution_matrix", "dft", "fiedler", "fiedler_companion", "hadamard", "hankel",
    "helmert", "hilbert", "invhilbert", "invpascal", "leslie", "pascal", "toeplitz", "issymmetric",
    "ishermitian", "bandwidth", "cython_blas", "cython_lapack", "test",
})
_GETTERS = frozenset({"get_blas_funcs", "get_lapack_funcs"})
# scipy modules whose functions compute on the arrays handed to them
ARRAY_MODULES = frozenset({"fft", "fftpack", "signal", "special", "ndimage", "sparse", "spatial"})
_ARRAY_NOT_COMPUTE = frozenset({"get_window", "next_fast_len", "prev_fast_len", "set_workers", "get_workers",
                                "set_backend", "csr_matrix", "csc_matrix", "coo_matrix", "issparse", "isspmatrix"})


def routine_op(name: str) -> str:
    """`sgemm` -> `gemm`, `dgesv` -> `gesv`: a BLAS / LAPACK routine without its type letter."""
    return name[1:] if len(name) > 3 and name[0] in "sdcz" else name


def scipy_op(qual: str) -> Optional[tuple[str, bool]]:
    """(op, unconditional) for a SciPy function that computes: unconditional for scipy.linalg
    (its routines take matrices, never sizes), else only when handed array data."""
    parts = qual.split(".")
    if parts[0] != "scipy" or len(parts) < 3:
        return None
    last = parts[-1]
    if last.startswith("_") or last[:1].isupper():
        return None  # private helpers, classes and errors (LinAlgError)
    if parts[1] == "linalg":
        rest = parts[2:]
        if any(p in _LINALG_NOT_COMPUTE for p in rest) or last.endswith("_lwork"):
            return None  # `*_lwork` asks for a workspace size
        if len(rest) == 2 and rest[0] in ("blas", "lapack"):
            return routine_op(last), True
        return (last, True) if len(rest) == 1 else None
    if parts[1] in ARRAY_MODULES and last not in _ARRAY_NOT_COMPUTE:
        return last, False
    return None


def computes_anyway(qual: str) -> bool:
    """A SciPy routine that computes whatever it is handed (scipy.linalg, BLAS, LAPACK)."""
    found = scipy_op(qual) if qual.startswith("scipy.") else None
    return found is not None and found[1]


def routine_value(ctx: FileContext, expr: Optional[cst.BaseExpression], depth: int = 0) -> Optional[str]:
    """The op of a BLAS / LAPACK routine an expression holds: `get_blas_funcs("gemm", (a, b))`,
    an entry of its result, or a local name bound to either."""
    if expr is None or depth > 4:
        return None
    kind = type(expr)
    if kind is cst.Subscript:
        return routine_value(ctx, expr.value, depth + 1)
    if kind is cst.Name:
        binding = ctx.resolver.lookup(expr.value)
        if binding is not None and binding.kind == "local":
            if binding.value is None:  # `gemm, = get_blas_funcs(("gemm",), ...)`
                return ctx.__dict__.get(_UNPACKED, {}).get(expr.value)
            return routine_value(ctx, binding.value, depth + 1)
        return None
    if kind is not cst.Call:
        return None
    qual = ctx.qualname(expr.func) or ""
    if not qual.startswith("scipy.linalg.") or qual.rsplit(".", 1)[-1] not in _GETTERS:
        return None
    names = expr.args[0].value if expr.args else None
    if type(names) in (cst.Tuple, cst.List) and names.elements:
        names = names.elements[0].value
    return (string_value(names) if names is not None else None) or "blas"


_UNPACKED = "_gk_unpacked_routines"


def note_unpacked(ctx: FileContext, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
    """`gemm, dot = get_blas_funcs(("gemm", "dot"), ...)`: each name a routine of the tuple
    (the resolver binds an unpacked name to no value)."""
    if type(target) not in (cst.Tuple, cst.List) or routine_value(ctx, value) is None:
        return
    names = value.args[0].value if type(value) is cst.Call and value.args else None
    ops = [string_value(e.value) for e in names.elements] if type(names) in (cst.Tuple, cst.List) else []
    for k, element in enumerate(target.elements):
        if type(element.value) is cst.Name:
            op = ops[k] if k < len(ops) and ops[k] else "blas"
            ctx.__dict__.setdefault(_UNPACKED, {})[element.value.value] = op
