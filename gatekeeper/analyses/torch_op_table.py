"""The table of what counts as torch compute (torch_ops.toml), read once and cached.

Not a rule file: it defines no rule with a `code`. Shared by the GK3xx torch-fallback rules.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path
from typing import Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TABLE = Path(__file__).resolve().with_name("torch_ops.toml")

# Allowed torch functions whose result is not a tensor (so arithmetic on it is not compute).
_NOT_TENSORS = frozenset({
    "numel", "finfo", "iinfo", "result_type", "promote_types", "can_cast", "typename",
    "broadcast_shapes", "manual_seed", "seed", "initial_seed", "no_grad", "enable_grad",
    "inference_mode", "set_grad_enabled", "autocast", "device", "dtype", "Size", "Generator",
    "Stream", "Event", "layout", "memory_format", "use_deterministic_algorithms",
})


def short_op(name: str) -> str:
    """`relu_` -> `relu`, `LayerNorm` -> `layernorm`: the form ops are compared in."""
    return name.lower().rstrip("_")


_DUNDER = {"truediv": "div", "floordiv": "floor_divide", "mod": "remainder", "and": "logical_and",
           "or": "logical_or", "xor": "logical_xor", "invert": "bitwise_not"}


def _undunder(name: str) -> str:
    """`x.__matmul__(w)`, `x.__rmul__(2)`, `x.__iadd__(y)` are the operators by another name."""
    if len(name) > 4 and name.startswith("__") and name.endswith("__"):
        core = name[2:-2]
        if core[:1] in ("r", "i") and core[1:] in _DUNDER_CORES:
            core = core[1:]
        return _DUNDER.get(core, core)
    return short_op(name)


_DUNDER_CORES = frozenset({"add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor"})


def squashed(name: str) -> str:
    """`layer_norm` and `LayerNorm` both become `layernorm`."""
    return short_op(name).replace("_", "")


_MEMO: dict[tuple[str, int], bool] = {}


def _any(name: str, patterns: tuple[str, ...]) -> bool:
    """fnmatch against a pattern list, memoised (the same names recur in every file)."""
    key = (name, id(patterns))
    hit = _MEMO.get(key)
    if hit is None:
        if len(_MEMO) > 50_000:
            _MEMO.clear()
        hit = _MEMO[key] = any(fnmatchcase(name, p) for p in patterns)
    return hit


@dataclass(frozen=True)
class TorchOps:
    allowed: tuple[str, ...]
    denied: tuple[str, ...]
    op_namespaces: frozenset[str]
    decorator_roots: frozenset[str]
    decorator_names: frozenset[str]
    exempt_functions: frozenset[str]
    compute_methods: frozenset[str]
    allowed_methods: frozenset[str]
    metadata_methods: frozenset[str]
    heavy_ops: tuple[str, ...]
    heavy_namespaces: tuple[str, ...]
    cpp_roots: frozenset[str]
    cpp_allowed: tuple[str, ...]
    cpp_denied: tuple[str, ...]
    cpp_backends: frozenset[str]
    cpp_backend_utilities: tuple[str, ...]
    vendor_prefixes: tuple[str, ...]
    vendor_setup: tuple[str, ...]
    vendor_names: re.Pattern[str]

    # python ---------------------------------------------------------------------
    def function_is_compute(self, qual: str) -> bool:
        """`qual` is a torch function (no class in its path). Deny by default."""
        if _any(qual, self.denied):
            return True
        return not _any(qual, self.allowed)

    def returns_tensor(self, qual: str) -> bool:
        """A torch function whose result is a tensor (compute, creation, or a view)."""
        last = qual.rsplit(".", 1)[-1]
        if last in _NOT_TENSORS or last.startswith(("is_", "get_", "set_")):
            return False
        if self.function_is_compute(qual):
            return True
        return qual.count(".") == 1  # torch.empty, torch.reshape...; not torch.cuda.*

    def method_is_compute(self, name: str) -> bool:
        return _undunder(name) in self.compute_methods

    def method_returns_tensor(self, name: str) -> bool:
        op = _undunder(name)
        return op not in self.metadata_methods and (op in self.compute_methods or name in self.allowed_methods)

    def known_tensor_method(self, name: str) -> bool:
        """A torch.Tensor method name (so `obj.name(...)` is not an extension call)."""
        return name in self.allowed_methods or name in self.metadata_methods or self.method_is_compute(name)

    def is_heavy(self, op: str, qual: str = "") -> bool:
        if qual and _any(qual, self.heavy_namespaces):
            return True
        low = short_op(op)
        return _any(low, self.heavy_ops) or _any(squashed(op), self.heavy_ops)

    def torch_op_namespace(self, qual: str) -> Optional[tuple[str, str]]:
        """For `torch.ops.<ns>.<op>[.overload]`: (ns, op)."""
        parts = qual.split(".")
        if len(parts) < 4 or parts[:2] != ["torch", "ops"]:
            return None
        return parts[2], parts[3]

    def is_kernel_decorator(self, qual: str) -> bool:
        """Only decorators imported from a kernel DSL count: a `jit` the submission defines
        itself could wrap anything, so it does not hide torch code."""
        parts = qual.split(".")
        return parts[0] in self.decorator_roots and (len(parts) == 1 or parts[-1] in self.decorator_names
                                                     or parts[0] in ("triton", "tilelang", "helion"))

    # C++ ------------------------------------------------------------------------
    def cpp_is_compute(self, chain: list[str]) -> bool:
        if chain[0] not in self.cpp_roots:
            return False
        full = "::".join(chain)
        last = chain[-1]
        if not last or last[0].isupper() or (len(last) > 1 and last[0] == "k" and last[1].isupper()):
            return False  # types and constants: at::Tensor, at::kFloat, torch::jit::script::Module
        if _any(full, self.cpp_denied):
            return True
        if len(chain) == 3 and chain[0] == "at" and chain[1] in self.cpp_backends and last == last.lower():
            return not _any(last, self.cpp_backend_utilities)  # `at::cuda::mm`: the backend's own kernel
        return not _any(full, self.cpp_allowed)

    def vendor_call(self, ident: str) -> bool:
        """A vendor library routine that computes (not setup). A Fortran BLAS name is one only
        where the source does not define it: the caller checks that (`vendor_by_name`)."""
        if ident.startswith(self.vendor_prefixes):
            return not _any(ident, self.vendor_setup)
        return self.vendor_by_name(ident)

    def vendor_by_name(self, ident: str) -> bool:
        return self.vendor_names.fullmatch(ident) is not None


@lru_cache(maxsize=1)
def torch_ops() -> TorchOps:
    data = tomllib.loads(TABLE.read_text("utf-8"))
    py, methods, heavy, cpp = data["python"], data["methods"], data["heavy"], data["cpp"]
    return TorchOps(
        allowed=tuple(py["allowed"]),
        denied=tuple(py["denied"]),
        op_namespaces=frozenset(py["torch_op_namespaces"]),
        decorator_roots=frozenset(py["kernel_decorator_roots"]),
        decorator_names=frozenset(py["kernel_decorator_names"]),
        exempt_functions=frozenset(py["exempt_functions"]),
        compute_methods=frozenset(short_op(m) for m in methods["compute"]),
        allowed_methods=frozenset(methods["allowed"]),
        metadata_methods=frozenset(methods["metadata"]),
        heavy_ops=tuple(heavy["ops"]),
        heavy_namespaces=tuple(heavy["namespaces"]),
        cpp_roots=frozenset(cpp["compute_roots"]),
        cpp_allowed=tuple(cpp["allowed"]),
        cpp_denied=tuple(cpp["denied"]),
        cpp_backends=frozenset(cpp["backend_namespaces"]),
        cpp_backend_utilities=tuple(cpp["backend_utilities"]),
        vendor_prefixes=tuple(cpp["vendor_prefixes"]),
        vendor_setup=tuple(cpp["vendor_setup"]),
        vendor_names=re.compile(cpp["vendor_names"], re.IGNORECASE),  # Fortran names are case-insensitive (`SGEMM`, `Sgemm_`)
    )
