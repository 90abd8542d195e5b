"""ATen / libtorch compute calls and vendor-library calls in a C++/CUDA token stream.

Not a rule file: it defines no rule with a `code`. Works on `source.tokens` (comments and
string literals already dropped), so `// at::matmul` or `"torch::mean"` never match.

- `at::matmul(`, `torch::mean(`, `at::native::...(`, `torch::nn::functional::linear(`:
  a lower-case function reached through an ATen namespace that is not allocation,
  metadata or a CUDA utility (torch_ops.toml, [cpp]);
- `x.matmul(y)`, `x.sum()` in host code: a tensor compute method;
- `cublasSgemm(`, `cublasLtMatmul(`, `cudnnConvolutionForward(`: a vendor library doing the
  work (handle, descriptor and setup calls are fine).

Device code (`__global__` / `__device__` bodies) is skipped for method calls: cooperative
groups' `tile.any(...)` is not a tensor method.
"""

from __future__ import annotations

import re

from itertools import chain as chained
from typing import Callable, Optional

from gatekeeper.analyses.cpp_aten_reach import dispatcher_reach, is_reference, macro_reach, name_chain
from gatekeeper.analyses.torch_op_table import TorchOps
from gatekeeper.static.cpp_functions import CppFunction
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token

Found = tuple[str, str, int, str]  # (kind: cpp | vendor, what was called, offset, op)


def _device_ranges(tokens: list[Token], fns: list[CppFunction]) -> list[tuple[int, int]]:
    ranges = []
    for fn in fns:
        # the name token sits just before the parameter list, which ends before the body
        at = fn.body_start
        while at > 0 and tokens[at].offset != fn.offset:
            at -= 1
        before = {t.text for t in tokens[max(0, at - 8) : at]}
        if "__global__" in before or "__device__" in before:
            ranges.append((fn.body_start, fn.body_end))
    return ranges


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


def _namespaces(tokens: list[Token], ops: TorchOps) -> tuple[dict[str, list[str]], set[str], list[list[str]]]:
    """`namespace F = torch::nn::functional;` aliases (and `using f = at::_ops::mm;`, `typedef`
    ones of an ATen function or op struct), the names made visible unqualified by
    `using namespace at;` / `using at::matmul;` ("*" for a whole namespace), and every ATen
    namespace opened by `using namespace` (its nested names are then reached by their tail:
    `cpublas::gemm` after `using namespace at::native`)."""
    aliases: dict[str, list[str]] = {}
    unqualified: set[str] = set()
    opened: list[list[str]] = []
    n = len(tokens)
    for i, tok in enumerate(tokens):
        if tok.text == "namespace" and i + 3 < n and tokens[i + 2].text == "=" and tokens[i + 3].kind == "ident":
            chain, _ = name_chain(tokens, i + 3)
            if chain[0] in ops.cpp_roots:
                aliases[tokens[i + 1].text] = chain
        elif tok.text == "using" and i + 3 < n and tokens[i + 2].text == "=" and tokens[i + 3].kind == "ident":
            # `using mm_op = at::_ops::mm;`: a name for an ATen function or op struct (a type alias,
            # `using Vec = at::vec::Vectorized<float>;`, is no such name: upper case, or templated)
            chain, j = name_chain(tokens, i + 3)
            if chain[0] in ops.cpp_roots and chain[-1][:1].islower() and j < n and tokens[j].text == ";":
                aliases[tokens[i + 1].text] = chain
        elif tok.text == "typedef" and i + 1 < n and tokens[i + 1].kind == "ident":
            chain, j = name_chain(tokens, i + 1)  # `typedef at::_ops::mm mm_op;`
            if chain[0] in ops.cpp_roots and chain[-1][:1].islower() and j + 1 < n \
                    and tokens[j].kind == "ident" and tokens[j + 1].text == ";":
                aliases[tokens[j].text] = chain
        elif tok.text == "using" and i + 1 < n:
            start = i + 2 if tokens[i + 1].text == "namespace" else i + 1
            if start < n and tokens[start].kind == "ident":
                chain, _ = name_chain(tokens, start)
                if chain[0] not in ops.cpp_roots:
                    continue
                if tokens[i + 1].text == "namespace":
                    opened.append(chain)
                    if chain in (["at"], ["torch"], ["at", "native"], ["torch", "nn", "functional"]):
                        unqualified.add("*")
                elif len(chain) > 1:
                    unqualified.add(chain[-1])
    return aliases, unqualified, opened


# ATen's inner namespaces of compute entry points below the dispatcher, reached by their
# tail once an enclosing namespace is opened (`std::max` after `using namespace at` is std's).
_ATEN_INNER = frozenset({"cpublas", "blas", "cpu", "_ops", "mkldnn", "mkl", "native"})


# torch::nn names that are not layers computing anything: the base classes an own module
# derives from, containers, and option structs.
_NOT_LAYERS = frozenset({"Module", "ModuleHolder", "Cloneable", "ModuleList", "ModuleDict", "Sequential",
                         "AnyModule", "ParameterList", "ParameterDict", "Functional", "Identity", "Flatten",
                         "Unflatten", "Dropout", "init", "functional", "utils", "parallel"})


def _is_layer(name: str) -> bool:
    return name[:1].isupper() and name not in _NOT_LAYERS and not name.endswith(("Options", "Impl", "FuncOptions"))


_ASM_LABEL = re.compile(r"(\w+)\s*\([^;{}()]*\)\s*(?:__asm__|asm)\s*\(\s*((?:\"[^\"\n]*\"\s*)+)\)")


def asm_labels(source: CppSource) -> dict[str, str]:
    """Names the source declares with an assembler label: `void mix_rows(...) __asm__("sgemm_")`
    calls `sgemm_` whatever the name says (string pieces are joined, as the compiler joins them)."""
    return {m.group(1): "".join(re.findall(r'"([^"\n]*)"', m.group(2))) for m in _ASM_LABEL.finditer(source.text)}


def _op_name(name: str) -> str:
    """`addmm_out`, `mm_outf`, `sum_out` do the op itself (into a given tensor)."""
    for suffix in ("_outf", "_out"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def scan_cpp(source: CppSource, ops: TorchOps,
             functions_of: Callable[[CppSource], list[CppFunction]]) -> tuple[bool, list[Found]]:
    tokens = source.tokens
    n = len(tokens)
    idents = source.by_text["ident"]
    has_kernel = "__global__" in idents
    device: Optional[list[tuple[int, int]]] = None

    def in_device(i: int) -> bool:
        nonlocal device
        if device is None:  # computed only when a method call needs it
            device = _device_ranges(tokens, functions_of(source))
        return any(start <= i <= end for start, end in device)

    aliases, unqualified, opened = _namespaces(tokens, ops) if source.has("using", "namespace", "typedef") \
        else ({}, set(), [])
    own_namespaces = {tokens[k + 1].text for k in source.by_text["ident"].get("namespace", ())
                      if k + 2 < n and tokens[k + 1].kind == "ident" and tokens[k + 2].text == "{"} if opened else set()
    defined: Optional[set[str]] = None
    labels: Optional[dict[str, str]] = None
    found: list[Found] = []
    resume = 0  # the end of the last qualified name: its parts are not visited again
    puncts = source.by_text["punct"]
    # every case below is an identifier followed by `::` or `(`: only those are visited
    for i in sorted({k - 1 for k in chained(puncts.get("(", ()), puncts.get("::", ()))}):
        if i < resume:
            continue
        tok = tokens[i]
        if tok.kind != "ident":
            continue
        prev = tokens[i - 1].text if i else ""
        # qualified call: at::matmul(  torch::nn::functional::linear(  at::_ops::mm::call(
        if prev != "::" and i + 1 < n and tokens[i + 1].text == "::":
            chain, j = name_chain(tokens, i)
            if chain[0] in aliases:  # namespace F = torch::nn::functional; F::linear(...)
                chain = aliases[chain[0]] + chain[1:]
            elif opened and chain[0] in _ATEN_INNER and chain[0] not in own_namespaces:
                # using namespace at::native; cpublas::gemm(...) (a namespace of the source's own is its own)
                chain = next((ns + chain for ns in opened if ops.cpp_is_compute(ns + chain)), chain)
            if len(chain) == 3 and chain[:2] == ["torch", "nn"] and _is_layer(chain[2]):
                # `torch::nn::Linear lin(...)`, `torch::nn::Conv2d{...}`: a libtorch layer, whose
                # forward is ATen's (`lin->forward(x)` is a method call on a module object)
                found.append(("cpp", "::".join(chain), tok.offset, chain[2].lower()))
                resume = j
                continue
            after = _skip_template(tokens, j)  # at::cuda::blas::gemm<float>(...)
            called = after < n and tokens[after].text == "("
            # `&at::addmm`, `auto f = at::relu_;`: a pointer to ATen is ATen doing the work
            if (called or is_reference([t.text for t in tokens[max(0, i - 3):i]], tokens[j].text if j < n else "")) \
                    and ops.cpp_is_compute(chain):
                what, op = "::".join(chain), _op_name(chain[-1])
                if len(chain) > 2 and chain[1] == "_ops":
                    what, op = "::".join(chain[:3]), chain[2]
                elif chain[:2] == ["torch", "jit"]:
                    op = "torchscript"  # the script's ops, which the source does not spell
                found.append(("cpp", what if called else f"&{what}" if prev == "&" else what, tok.offset, op))
            resume = j
            continue
        nxt = tokens[i + 1].text if i + 1 < n else ""
        if labels is None:
            labels = asm_labels(source) if ("asm" in idents or "__asm__" in idents) else {}
        if nxt == "(" and prev not in ("::", ".", "->") and tok.text in labels and ops.vendor_call(labels[tok.text]):
            # `void mix(...) __asm__("s" "gemm_")`: a name of the source's bound to a vendor symbol
            found.append(("vendor", f"{tok.text} (bound to {labels[tok.text]})", tok.offset, labels[tok.text]))
            continue
        if nxt == "(" and prev not in ("::", ".", "->") and ops.vendor_call(tok.text):
            if ops.vendor_by_name(tok.text):  # `sgemm_`: a BLAS routine unless the source defines one
                if defined is None:
                    defined = {fn.name for fn in functions_of(source)}
                if tok.text in defined:
                    continue
            found.append(("vendor", tok.text, tok.offset, tok.text))
        elif nxt == "(" and prev in (".", "->") and ops.method_is_compute(tok.text) and not in_device(i):
            found.append(("cpp", f"Tensor::{tok.text}", tok.offset, tok.text))
        elif unqualified and nxt == "(" and prev not in (".", "->", "::") and (prev == "return" or tokens[i - 1].kind != "ident") \
                and ("*" in unqualified or tok.text in unqualified) and ops.method_is_compute(tok.text):
            if defined is None:  # a function of the source's own with that name is not ATen's
                defined = {fn.name for fn in functions_of(source)}
            if tok.text not in defined and not in_device(i):
                found.append(("cpp", f"at::{tok.text}", tok.offset, tok.text))
    found += macro_reach(source, ops) + dispatcher_reach(source)
    return has_kernel, found
