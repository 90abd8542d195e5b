"""Operators looked up by name through torch's dispatcher from C++. Not a rule file.

`c10::Dispatcher::singleton().findSchemaOrThrow("aten::mean", "dim")` (or `findSchema`,
`findOp`, `findOperatorByName`, `getOperatorForLiteral`, `c10::OperatorName{...}`) then
`.typed<...>().call(...)` or `callBoxed` is ATen's op run without spelling `at::mean`.

The invariant (red team round 12): a lookup is the submission's own op only when its name is
text naming a namespace the source registers itself (`TORCH_LIBRARY(myext, m)` then
`findSchemaOrThrow("myext::gemm", "")`, a literal or a named constant holding one). Any other
lookup is foreign, whether or not the source registers a library: registering `rt12_gemm` did
not make `c10::namespaces::aten.toUnqualString() + "::" + "mm"` the file's own. A name built
from `aten` (`c10::namespaces::aten`, `"aten"`, `Symbol::aten`) is ATen's for certain, and the
op is read back from the strings the lookup's argument spells (`kContraction{"mm", ""}`).
"""

from __future__ import annotations

import re
from typing import Optional

from gatekeeper.analyses.cpp_string_names import argument_strings
from gatekeeper.analyses.torch_op_table import TorchOps
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import match_close

Reach = tuple[str, str, int, str]  # (kind "cpp", what, offset, op)

_LOOKUPS = frozenset({"findSchemaOrThrow", "findSchema", "findOp", "findOperatorByName", "getOperatorForLiteral"})
_DISPATCH_NAMES = _LOOKUPS | {"OperatorName", "OperatorHandle", "callBoxed", "Dispatcher"}
_OP_LITERAL = re.compile(r'"(\w+)::(\w+)(?:\.(\w+))?"')
_QUALIFIED = re.compile(r"(\w+)::(\w+)(?:\.\w+)?")
_LIBRARY = re.compile(r"\bTORCH_LIBRARY(?:_FRAGMENT|_IMPL)?\s*\(\s*(\w+)")
_ATEN_NAMESPACES = frozenset({"aten", "prim", "quantized", "torchvision", "_quantized"})


def _strings(source: CppSource, open_: int) -> tuple[list[str], bool]:
    """The strings a lookup's argument spells (literals, named constants, and one step into
    locals it names: `auto name = std::string(ns) + "::" + "mm";`), and whether it names
    `aten` as code (`c10::namespaces::aten`, `Symbol::aten`)."""
    tokens = source.tokens
    close = match_close(tokens, open_)
    strings = argument_strings(source, open_)
    aten = any(t.text == "aten" for t in tokens[open_ + 1:close])
    text = source.text
    for tok in tokens[open_ + 1:close]:
        if tok.kind != "ident":
            continue
        assigned = list(re.finditer(r"\b" + re.escape(tok.text) + r"\s*=\s*([^;]{0,400});", text[:tok.offset]))
        m = assigned[-1] if assigned else None  # the nearest assignment before the lookup
        if m is not None:
            strings += re.findall(r'"([^"\\\n]*)"', m.group(1))
            aten |= re.search(r"\baten\b", m.group(1).replace('"aten', "")) is not None
    aten |= any(s == "aten" or s.startswith("aten::") for s in strings)
    for k in range(open_ + 1, close - 2):  # `at::_ops::mm::name`: the op struct's own name string
        if tokens[k].text == "_ops" and tokens[k + 1].text == "::" and tokens[k + 2].kind == "ident":
            strings.append(tokens[k + 2].text)
            aten = True
    return strings, aten


def _op_of(strings: list[str], ops: TorchOps) -> Optional[str]:
    for s in strings:
        name = s.rsplit("::", 1)[-1].split(".")[0]
        if name and (ops.method_is_compute(name) or ops.is_heavy(name)):
            return name
    return None


def dispatcher_reach(source: CppSource, ops: TorchOps) -> list[Reach]:
    idents = source.by_text["ident"]
    if not any(name in idents for name in _DISPATCH_NAMES):
        return []
    text = source.text
    own = set(_LIBRARY.findall(text))
    found: list[Reach] = []
    lookups = sorted(i for name in _LOOKUPS for i in idents.get(name, ()))
    if not (lookups or "callBoxed" in idents or "OperatorName" in idents):
        return []
    for m in _OP_LITERAL.finditer(text):  # `"aten::mean"` anywhere next to a lookup
        namespace, op = m.group(1), m.group(2)
        if namespace in own or namespace not in _ATEN_NAMESPACES:
            continue
        found.append(("cpp", f"c10::Dispatcher op \"{namespace}::{op}\"", m.start(), op))
    tokens = source.tokens
    for i in lookups:
        if i + 1 >= len(tokens) or tokens[i + 1].text != "(" or not (i == 0 or tokens[i - 1].text in (".", "->", "::")):
            continue
        strings, aten = _strings(source, i + 1)
        named = [q for s in strings if (q := _QUALIFIED.fullmatch(s))]
        if any(q.group(1) in own for q in named) and not aten:
            continue  # the source's own registered op
        if any(q.group(1) in _ATEN_NAMESPACES for q in named):
            continue  # its literal is reported above
        op = _op_of(strings, ops)
        if aten and op is not None:
            what = f"c10::Dispatcher::{tokens[i].text} (\"aten::{op}\" built at run time)"
        else:  # a name built at run time: some op, not the source's own
            what, op = f"c10::Dispatcher::{tokens[i].text}", op or "dispatcher_op"
        found.append(("cpp", what, tokens[i].offset, op))
    return found
