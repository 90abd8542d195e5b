"""ATen / libtorch compute calls and vendor-library calls in a C++/CUDA token stream.

Not a rule file: it defines no rule with a `code`. Works on `source.tokens` (comments and
string literals already dropped), so `// at::matmul` or `"torch::mean"` never match.

- `at::matmul(`, `torch::mean(`, `at::native::...(`, `torch::nn::functional::linear(`:
  a lower-case function reached through an ATen namespace that is not allocation,
  metadata or a CUDA utility (torch_ops.toml, [cpp]);
- `x.matmul(y)`, `x.sum()` in host code: a tensor compute method;
- `cublasSgemm(`, `cublasLtMatmul(`, `cudnnConvolutionForward(`: a vendor library doing the
  work (handle, descriptor and setup calls are fine).

Device code (`__global__` / `__device__` bodies, not `__host__ __device__` ones, and the
device arm of a `__CUDA_ARCH__` conditional: cpp_device_code.py) is skipped for method calls:
cooperative groups' `tile.any(...)` is not a tensor method.
"""

from __future__ import annotations

import re

from itertools import chain as chained
from typing import Callable, Optional

from gatekeeper.analyses.cpp_aten_reach import is_reference
from gatekeeper.analyses.cpp_device_code import DeviceCode
from gatekeeper.analyses.cpp_device_libraries import CUB_ROOTS, THRUST_ALGOS, device_library_op, thrust_policy_first
from gatekeeper.analyses.cpp_dispatcher_reach import dispatcher_reach
from gatekeeper.analyses.cpp_libtorch_objects import (
    generated_node, member_pointer_op, own_members, registry_operations, unspelled_reach,
)
from gatekeeper.analyses.cpp_python_reach import interop_reach
from gatekeeper.analyses.cpp_tensor_operators import operator_reach
from gatekeeper.static.cpp_names import Names, expand_macros, is_global, name_chain, resolve_bindings
from gatekeeper.analyses.torch_op_table import TorchOps
from gatekeeper.static.cpp_functions import CppFunction
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token, split_args

Found = tuple[str, str, int, str]  # (kind: cpp | vendor, what was called, offset, op)


# Words after which `name(` is a call, not a declarator (`Tensor sgemm(Tensor a)` declares).
_BEFORE_A_CALL = frozenset({"return", "co_return", "co_await", "else", "do", "case", "throw", "not", "and", "or"})


def _skip_template(tokens: list[Token], j: int) -> int:
    """Index after `<...>` at j (template arguments), or j when there are none."""
    if j >= len(tokens) or tokens[j].text != "<":
        return j
    depth = 0
    for k in range(j, min(len(tokens), j + 64)):
        text = tokens[k].text
        if text == "<":
            depth += 1
        elif text == ">":
            depth -= 1
        elif text == ">>":
            depth -= 2
        elif text in (";", "{", "}"):
            return j
        if depth == 0:
            return k + 1
        if depth < 0:
            return j  # `>>` closed an outer template too: static_cast<at::acc_type<...>>(v)
    return j


# torch::nn names that are not layers computing anything: the base classes an own module
# derives from, containers, and option structs.
_NOT_LAYERS = frozenset({"Module", "ModuleHolder", "Cloneable", "ModuleList", "ModuleDict", "Sequential",
                         "AnyModule", "ParameterList", "ParameterDict", "Functional", "Identity", "Flatten",
                         "Unflatten", "Dropout", "init", "functional", "utils", "parallel"})


def _is_layer(name: str) -> bool:
    # `LinearImpl` is the module `Linear` holds (`ConvNdImpl`, `BatchNormImplBase` its bases): the same layer
    name = _layer_name(name)
    return name[:1].isupper() and name not in _NOT_LAYERS and not name.endswith(("Options", "FuncOptions"))


def _layer_name(name: str) -> str:
    return re.sub(r"Impl(?:Base|T)?$", "", name) or name


def _op_name(name: str) -> str:
    """`addmm_out`, `mm_outf`, `sum_out` do the op itself (into a given tensor)."""
    for suffix in ("_outf", "_out"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


# Unqualified names that are also the C/C++ library's and CUDA's own scalar and algorithm
# functions: after `using namespace at;` they count only with a tensor argument (`max(x, y)` on
# floats is CUDA's `::max`).
_SCALAR_NAMES = frozenset({"abs", "max", "min", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "sqrt",
                           "rsqrt", "floor", "ceil", "round", "trunc", "sin", "cos", "tan", "sinh", "cosh", "tanh",
                           "asin", "acos", "atan", "atan2", "erf", "erfc", "fmod", "fmax", "fmin", "hypot", "lgamma",
                           "remainder", "sort", "unique", "all", "any", "fill", "copy", "reverse", "sign", "clamp",
                           "lerp", "div", "mul", "add", "sub", "where", "mode", "inner", "floor_divide"})
# TorchScript's run-time types: a source that builds one compiles and runs torch code from C++.
_SCRIPT_TYPES = frozenset({"CompilationUnit", "GraphExecutor", "InterpreterState", "Code"})


def _by_text(tokens: list[Token]) -> dict[str, dict[str, list[int]]]:
    index: dict[str, dict[str, list[int]]] = {"ident": {}, "number": {}, "punct": {}, "directive": {}}
    for i, tok in enumerate(tokens):
        index[tok.kind].setdefault(tok.text, []).append(i)
    return index


def scan_cpp(source: CppSource, ops: TorchOps,
             functions_of: Callable[[CppSource], list[CppFunction]]) -> tuple[bool, list[Found]]:
    """Names are read as the compiler reads them (static/cpp_names.py): macros expanded,
    aliases, `using`s and a leading `::` resolved, argument-dependent lookup followed."""
    raw = source.tokens
    has_kernel = "__global__" in source.by_text["ident"]
    origin: dict[int, str] = {}
    skipped: list[tuple[int, int]] = []
    # symbol bindings first (`weakref("cublasSgemm_v2")`), so a macro naming a bound name reads its target
    bound_tokens, bound = resolve_bindings(raw, source.text)
    tokens, index = bound_tokens, (_by_text(bound_tokens) if bound else source.by_text)
    if "define" in index["directive"]:
        tokens, origin, skipped = expand_macros(bound_tokens, source.text)
        if origin:
            index = _by_text(tokens)
        else:
            tokens = bound_tokens
    n = len(tokens)
    idents = index["ident"]
    device: Optional[DeviceCode] = None

    def in_device(i: int) -> bool:
        return in_device_at(tokens[i].offset)

    def in_device_at(offset: int) -> bool:
        nonlocal device
        if device is None:  # computed only when a method call needs it (cpp_device_code.py)
            device = DeviceCode(source, functions_of(source))
        return device.in_device(offset)

    scoped = any(word in idents for word in ("using", "namespace", "typedef"))
    table: Optional[Names] = None

    def names() -> Names:
        nonlocal table
        if table is None:
            table = Names.of(tokens)
        return table

    defined: Optional[set[str]] = None

    def defines(name: str) -> bool:  # a function the source defines (with a body)
        nonlocal defined
        if defined is None:
            defined = {fn.name for fn in functions_of(source)}
        return name in defined

    def own(name: str) -> bool:  # or declares: a function, variable or namespace of its own
        return defines(name) or name in names().own

    members: Optional[set[str]] = None

    def own_member(name: str) -> bool:  # a member function of the source's own classes
        nonlocal members
        if members is None:
            members = own_members(tokens)
        return name in members

    def what_of(i: int, what: str) -> str:
        if tokens[i].offset in bound and i not in origin:  # `panel_product` declared weakref("cublasSgemm_v2")
            return f"{bound[tokens[i].offset]} (bound to {what})"
        return f"{what} (through the macro {origin[i]})" if i in origin else what

    found: list[Found] = []
    resume = 0  # the end of the last qualified name: its parts are not visited again
    puncts = index["punct"]
    skip = {k for a, b in skipped for k in range(a, b)}
    visit = chained(puncts.get("(", ()), puncts.get("::", ()), puncts.get("<", ()) if scoped else ())
    # every case below is an identifier followed by `::`, `(` or `<`: only those are visited
    for i in sorted({k - 1 for k in visit}):
        if i < resume or i in skip or i < 0:
            continue
        tok = tokens[i]
        if tok.kind != "ident":
            continue
        prev = tokens[i - 1].text if i else ""
        if i + 1 < n and tokens[i + 1].text == "::" and is_global(tokens, i + 1):
            continue  # `return ::at::mm(`: the keyword is no part of the name
        glob = prev == "::" and is_global(tokens, i - 1)
        # qualified call: at::matmul(  ::at::mm(  torch::nn::functional::linear(  at::_ops::mm::call(
        if (prev != "::" or glob) and i + 1 < n and tokens[i + 1].text == "::":
            raw_chain, j = name_chain(tokens, i)
            chain = list(names().qualify(raw_chain)) if scoped else raw_chain
            if scoped and not glob and chain == raw_chain:
                # using namespace at::native; cpublas::gemm(...) (a namespace of the source's own is its own)
                chain = list(names().opened_inner(i, chain) or chain)
            if len(chain) == 3 and chain[:2] == ["torch", "nn"] and _is_layer(chain[2]):
                # `torch::nn::Linear lin(...)`, `torch::nn::Conv2d{...}`: a libtorch layer, whose
                # forward is ATen's (`lin->forward(x)` is a method call on a module object)
                found.append(("cpp", what_of(i, "::".join(chain)), tok.offset, _layer_name(chain[2]).lower()))
                resume = j
                continue
            generated = generated_node(chain)  # torch::autograd::generated::MmBackward0: ATen's formula
            if generated:
                found.append(("cpp", what_of(i, "::".join(chain)), tok.offset, generated))
                resume = j
                continue
            pointed = member_pointer_op(chain, [t.text for t in tokens[max(0, i - 2):i]], ops, own_member)
            if pointed:  # std::invoke(&T::mm, a, b): a member pointer to a Tensor compute method
                found.append(("cpp", what_of(i, "&" + "::".join(chain)), tok.offset, pointed))
                resume = j
                continue
            if chain[:2] == ["torch", "jit"] and chain[-1] in _SCRIPT_TYPES:
                found.append(("cpp", what_of(i, "::".join(chain)), tok.offset, "torchscript"))
                resume = j
                continue
            after = _skip_template(tokens, j)  # at::cuda::blas::gemm<float>(...)
            called = after < n and tokens[after].text == "("
            lib_op = device_library_op(chain)
            if lib_op is None and scoped and not glob and chain[0].startswith("Device"):
                for seen in names().visible(i, chain[0]):  # using namespace cub; DeviceReduce::Sum(...)
                    if seen[0] in CUB_ROOTS:
                        chain = list(seen) + chain[1:]
                        lib_op = device_library_op(chain)
                        break
            if lib_op is not None:
                # a device-wide CUB/Thrust algorithm launched from host code (cpp_device_libraries.py)
                args = split_args(tokens, after) if called else []
                # `Sum(nullptr, bytes, ...)` only asks for the scratch size; the second call computes
                query = chain[0] in CUB_ROOTS and bool(args) and args[0] in (["nullptr"], ["NULL"], ["0"])
                if called and not query and not in_device(i) and thrust_policy_first(args) is not False:
                    found.append(("vendor", what_of(i, "::".join(chain)), tok.offset, lib_op))
                resume = j
                continue
            before = [t.text for t in tokens[max(0, i - (4 if glob else 3)):i - (1 if glob else 0)]]
            nxt = tokens[j].text if j < n else ""
            # `&at::addmm`, `auto f = at::relu_;`, `contract<at::_ops::mm>(...)`: a pointer to ATen, or
            # ATen's op as a template argument, is ATen doing the work
            if (called or is_reference(before, nxt) or _template_argument(before, nxt)) and ops.cpp_is_compute(chain):
                what, op = "::".join(chain), _op_name(chain[-1])
                if len(chain) > 2 and chain[1] == "_ops":
                    what, op = "::".join(chain[:3]), chain[2]
                elif chain[:2] == ["torch", "jit"]:
                    op = "torchscript"  # the script's ops, which the source does not spell
                what = what if called else f"&{what}" if before[-1:] == ["&"] else what
                found.append(("cpp", what_of(i, what), tok.offset, op))
            elif called and ops.vendor_call(chain[-1]) and not defines(chain[-1]) and not in_device(i):
                # `fbgemm::cblas_sgemm_ref(...)`: a vendor routine is the vendor's whatever namespace
                # qualifies it, unless the source defines it (red team round 14)
                found.append(("vendor", what_of(i, "::".join(chain)), tok.offset, chain[-1]))
            resume = j
            continue
        if prev in ("::", ".", "->") and not (prev in (".", "->") and i + 1 < n and tokens[i + 1].text == "("):
            continue
        after = _skip_template(tokens, i + 1) if scoped else i + 1
        nxt = tokens[after].text if after < n else ""
        if nxt == "(" and prev not in (".", "->") and tok.text in THRUST_ALGOS and not own(tok.text) \
                and _thrust_unqualified(names, tokens, i, after, scoped) and not in_device(i):
            found.append(("vendor", what_of(i, f"thrust::{tok.text}"), tok.offset, THRUST_ALGOS[tok.text]))
            continue
        if nxt == "(" and prev not in (".", "->") and ops.vendor_call(tok.text):
            if tokens[i - 1].kind == "ident" and prev not in _BEFORE_A_CALL:
                continue  # `torch::Tensor sgemm(torch::Tensor a, ...)`: a declarator, not a call
            if ops.vendor_by_name(tok.text) and defines(tok.text) and tok.offset not in bound:
                continue  # `sgemm_`: a BLAS routine unless the source defines one
            found.append(("vendor", what_of(i, tok.text), tok.offset, tok.text))
        elif nxt == "(" and prev in (".", "->") and ops.method_is_compute(tok.text) and not in_device(i):
            found.append(("cpp", what_of(i, f"Tensor::{tok.text}"), tok.offset, tok.text))
        elif nxt == "(" and prev not in (".", "->") and (prev == "return" or tokens[i - 1].kind != "ident"):
            hit = _unqualified(names, i, after, ops, own) if (scoped or ops.method_is_compute(tok.text)
                                                              or ops.is_heavy(tok.text)) else None
            if hit is not None and not in_device(i):
                found.append(("cpp", what_of(i, "::".join(hit)), tok.offset, _op_name(hit[-1])))
    found += _vendor_pointers(tokens, idents, ops) + dispatcher_reach(source, ops) + interop_reach(source, ops)
    found += registry_operations(source, source.tokens, own_member)
    found += unspelled_reach(source, source.tokens, ops, own, own_member)
    found += operator_reach(source, functions_of(source), ops.method_returns_tensor, lambda k: in_device_at(k))
    return has_kernel, found


def _thrust_unqualified(names: Callable[[], Names], tokens: list[Token], i: int, open_: int, scoped: bool) -> bool:
    """`reduce(thrust::device, ...)` (argument-dependent lookup on the policy) or `reduce(...)`
    under `using namespace thrust;`, not run by one thread (`thrust::seq`)."""
    policy = thrust_policy_first(split_args(tokens, open_))
    if policy is not None:
        return policy
    return scoped and any(chain[0] == "thrust" for chain in names().visible(i, tokens[i].text))


def _template_argument(before: list[str], after: str) -> bool:
    """`contract<at::_ops::mm>(a, b)`: a name as a template's argument."""
    return len(before) > 1 and before[-1] == "<" and after in (">", ">>", ",") and \
        (before[-2][:1].isalnum() or before[-2][:1] == "_")


def _unqualified(names: Callable[[], Names], i: int, open_: int, ops: TorchOps,
                 own: Callable[[str], bool]) -> Optional[tuple[str, ...]]:
    """What an unqualified call `name(...)` at token i resolves to when that is ATen's: a
    `using` declaration or directive in force there, or argument-dependent lookup (an ATen
    compute op, called with a tensor argument, that the source does not declare itself)."""
    table = names()
    name = table.tokens[i].text
    if own(name):
        return None
    tensor: Optional[bool] = None
    visible = table.visible(i, name)
    if not ops.method_is_compute(name) and any(chain[0] not in ops.cpp_roots and chain[0] != "std"
                                               and chain[-2] not in table.own for chain in visible):
        return None  # `using namespace cute;` too, and `gemm` is no ATen op: CuTe's, as far as can be told
    for chain in visible:
        if not ops.cpp_is_compute(list(chain)):
            continue
        if len(chain) == 2 and chain[0] in ops.cpp_roots:
            # the whole namespace: `using namespace at;` is common for its types and allocators
            if not (ops.method_is_compute(name) or ops.is_heavy(name)):
                continue
            if name in _SCALAR_NAMES:
                tensor = table.tensor_argument(open_, ops.method_returns_tensor) if tensor is None else tensor
                if not tensor:
                    continue
        return chain
    if (ops.method_is_compute(name) or ops.is_heavy(name)) and table.tensor_argument(open_, ops.method_returns_tensor):
        return ("at", name)  # found by argument-dependent lookup in namespace at
    return None


_VENDOR_ROUTINE = re.compile(r"(?:cublasLt|cublas|cudnn|cufft|cusparse|cusolver(?:Dn|Sp)?|curand|cutensor|nccl)[A-Z]")


def _vendor_pointers(tokens: list[Token], idents: dict[str, list[int]], ops: TorchOps) -> list[Found]:
    """`&cublasSgemm_v2`, `auto g = cublasSgemm_v2;`: a vendor routine reached through a pointer."""
    out: list[Found] = []
    for name, where in idents.items():
        if not name.startswith(ops.vendor_prefixes) or not ops.vendor_call(name) or not _VENDOR_ROUTINE.match(name):
            continue  # `cublasCreate(&cublas_handle)`: a variable named after the library, not a routine
        for i in where:
            after = tokens[i + 1].text if i + 1 < len(tokens) else ""
            before = [t.text for t in tokens[max(0, i - 3):i]]
            if after != "(" and before[-1:] not in (["::"], ["."], ["->"]) and is_reference(before, after):
                out.append(("vendor", f"&{name}" if before[-1:] == ["&"] else name, tokens[i].offset, name))
    return out
