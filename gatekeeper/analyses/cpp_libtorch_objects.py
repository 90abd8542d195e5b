"""libtorch compute reached through objects rather than a spelled op call. Not a rule file.

Red team round 13. The invariants:
- *A member pointer to a Tensor compute method is a call of it* (`std::invoke(&T::mm, a, b)`,
  `std::mem_fn(&Tn::sum)`): whatever names the class (a template parameter, a `decltype`
  alias), `&X::mm` where the source defines no `mm` of its own can only point at
  `at::Tensor::mm` (or another library's method of that name, which computes just as well).
- *A generated autograd node is ATen's formula* (`torch::autograd::generated::MmBackward0`,
  `generated::details::mm_mat1_backward`): libtorch's derivatives are ATen ops; a source
  that builds or calls one has torch compute for it.
- *An operator fetched from the JIT registry runs ATen's kernel* (`node->getOperation()`,
  `getOperator()`, `Operator::getOperation`): the op is the interned symbol the source spells
  (`c10::aten::mm`, `Symbol::aten("mm")`), or the script's ops when none is spelled.
"""

from __future__ import annotations

import re

from typing import Callable

from gatekeeper.analyses.torch_op_table import TorchOps
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token, match_close

Found = tuple[str, str, int, str]

# roots whose members are never at::Tensor's (`&std::vector<T>::size` is no tensor method)
_FOREIGN_ROOTS = frozenset({"std", "cub", "thrust", "cute", "cutlass", "Eigen", "boost", "absl"})
_REGISTRY = frozenset({"getOperation", "getOperator", "maybeOperator", "getOperationForDispatchKey",
                       "runNodeIfInputsAreConstant"})  # constant folding runs the node's registered op
_BACKWARD = re.compile(r"([A-Z][A-Za-z0-9]*?)Backward\d*$")
_ATEN_SYMBOL = re.compile(r"\baten\s*::\s*([a-z_][a-z0-9_]*)"  # c10::aten::mm
                          r"|Symbol\s*::\s*aten\s*\(\s*\"([a-z_]\w*)\""  # Symbol::aten("mm")
                          r"|\"aten::([a-z_]\w*)")  # fromQualString("aten::mm")


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


def _generated_op(name: str) -> str:
    """`MmBackward0` -> `mm`, `mm_mat1_backward` -> `mm`, `AddmmBackward0` -> `addmm`."""
    hit = _BACKWARD.match(name)
    if hit:
        return _snake(hit.group(1))
    return re.split(r"_(?:mat\d|self|other|backward)", name)[0] or name


def own_members(tokens: list[Token]) -> set[str]:
    """Names of the member functions the source's own classes declare (`struct Tile { Tile mm(...); }`):
    a free function `mm` of the source cannot be what `&T::mm` points at, a member can."""
    out: set[str] = set()
    n = len(tokens)
    for i, tok in enumerate(tokens):
        if tok.text not in ("struct", "class") or i + 1 >= n or tokens[i + 1].kind != "ident":
            continue
        j = i + 2
        while j < n and tokens[j].text not in ("{", ";", "(", ")", "="):
            j += 1
        if j >= n or tokens[j].text != "{":
            continue
        close, depth = match_close(tokens, j), 0
        for k in range(j + 1, close):
            text = tokens[k].text
            depth += (text in ("{", "(", "[")) - (text in ("}", ")", "]"))
            if depth == 0 and tokens[k].kind == "ident" and k + 1 < close and tokens[k + 1].text == "(":
                out.add(text)
    return out


def member_pointer_op(chain: list[str], before: list[str], ops: TorchOps, own: Callable[[str], bool]) -> str:
    """The Tensor method a `&X::name` (address of a member) points at, or ''. `own(name)`: the
    source's own classes have a member of that name."""
    if before[-1:] != ["&"] or len(chain) < 2 or chain[0] in _FOREIGN_ROOTS:
        return ""
    prior = before[-2] if len(before) > 1 else ""
    if prior[:1].isalnum() and prior not in ("return", "co_return") or prior in (")", "]"):
        return ""  # `a & X::mm`, `T& X::mm`: no address taken
    name = chain[-1]
    if not name[:1].islower() or not ops.method_is_compute(name) or own(name):
        return ""
    return name


def generated_node(chain: list[str]) -> str:
    """The op of a `torch::autograd::generated::*` name, or ''."""
    if len(chain) > 3 and chain[:3] == ["torch", "autograd", "generated"]:
        return _generated_op(chain[-1])
    return ""


def unspelled_reach(source: CppSource, tokens: list[Token], ops: TorchOps, own: Callable[[str], bool],
                    own_member: Callable[[str], bool]) -> list[Found]:
    """What scan_cpp's qualified-name walk cannot see: `&decltype(a)::mm` (the class is an
    expression's type), and `MmBackward0` named after `using namespace ...::generated;`."""
    out: list[Found] = []
    idents = source.by_text["ident"]
    for i in idents.get("decltype", ()):
        if i == 0 or tokens[i - 1].text != "&" or i + 1 >= len(tokens) or tokens[i + 1].text != "(":
            continue
        j = match_close(tokens, i + 1)
        if j + 2 < len(tokens) and tokens[j + 1].text == "::" and tokens[j + 2].kind == "ident":
            name = tokens[j + 2].text
            if ops.method_is_compute(name) and not own_member(name):
                out.append(("cpp", f"&decltype(...)::{name}", tokens[i].offset, name))
    if "generated" in idents:
        for name, where in idents.items():
            if _BACKWARD.fullmatch(name) and name[-1].isdigit() and not own(name):
                k = where[0]
                if k and tokens[k - 1].text not in ("::", "struct", "class"):  # an own node class is its own
                    out.append(("cpp", f"{name} (torch::autograd::generated)", tokens[k].offset, _generated_op(name)))
    return out


def registry_operations(source: CppSource, tokens: list[Token], own: Callable[[str], bool]) -> list[Found]:
    """`node->getOperation()` and the like: the op is the aten symbol the source interns. A
    method of that name on the source's own class is its own."""
    where = [i for name in _REGISTRY if not own(name) for i in source.by_text["ident"].get(name, ())]
    out: list[Found] = []
    if not where:
        return out
    symbols = [next(g for g in m.groups() if g) for m in _ATEN_SYMBOL.finditer(source.text)]
    op = symbols[0] if symbols else "torchscript"
    for i in sorted(where):
        prev = tokens[i - 1].text if i else ""
        if prev in (".", "->", "::") and i + 1 < len(tokens) and tokens[i + 1].text == "(":
            out.append(("cpp", f"{tokens[i].text}() of a JIT node (aten::{op} through the operator registry)",
                        tokens[i].offset, op))
    return out
