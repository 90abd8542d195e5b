"""ATen reached from C++ by spellings other than a direct `at::f(` call. Not a rule file.

`scan_cpp` (cpp_torch_calls.py) finds `at::matmul(`; this finds the other ways C++ makes
torch do the work, each an invariant rather than a list of hacks:

- a reference to an ATen compute function that is not called where it is named: its address
  (`&at::addmm`), or its name as a whole value (`auto f = at::relu_;`,
  `std::function<...> g = at::mm;`, `apply(at::mm, a, b)`): a function pointer to ATen is
  ATen doing the work when it is called;
- a macro whose expansion names an ATen compute function (`#define ATEN(n) at::n` then
  `ATEN(addmm)(...)`, `#define MM at::mm` then `MM(a, b)`): the expansion is checked at each
  use, with the tokens around the use;
- an operator looked up through the dispatcher by name (`c10::Dispatcher::singleton().
  findSchemaOrThrow("aten::mean", "dim")`, `findSchema`, `findOp`, `c10::OperatorName{"aten::mm",
  ""}` next to a lookup): the string literal names the op. A lookup of an op in a namespace the
  source registers itself (`TORCH_LIBRARY(myext, m)`) is the submission's own op;
- TorchScript run from C++ (`torch::jit::compile`, `torch::jit::load`): the denied list of
  torch_ops.toml makes these compute calls.

The tokenizer drops string literals, so op names are read back from `source.text`.
"""

from __future__ import annotations

import re
from typing import Optional

from gatekeeper.analyses.torch_op_table import TorchOps
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token, line_end, match_close, split_args

Reach = tuple[str, str, int, str]  # (kind "cpp", what, offset, op)

# Tokens after a name that end it as a value: `= at::mm;`, `f(at::mm, x)`, `{at::mm}`.
_VALUE_END = frozenset({";", ",", ")", "}", "]", ":", "?"})
# Tokens before a name that start a value: assignment, argument, initialiser, return.
_VALUE_START = frozenset({"=", "(", ",", "{", "return", "?", ":", "["})
# Dispatcher lookups whose argument names the operator.
_LOOKUPS = frozenset({"findSchemaOrThrow", "findSchema", "findOp", "findOperatorByName", "getOperatorForLiteral"})
_DISPATCH_NAMES = _LOOKUPS | {"OperatorName", "OperatorHandle", "callBoxed", "Dispatcher"}
_OP_LITERAL = re.compile(r'"(\w+)::(\w+)(?:\.(\w+))?"')
_LIBRARY = re.compile(r"\bTORCH_LIBRARY(?:_FRAGMENT|_IMPL)?\s*\(\s*(\w+)")
_ATEN_NAMESPACES = frozenset({"aten", "prim", "quantized", "torchvision", "_quantized"})


def name_chain(tokens: list[Token], i: int) -> tuple[list[str], int]:
    """`a :: b :: c` starting at token i: the names and the index after the last."""
    names = [tokens[i].text]
    j = i + 1
    while j + 1 < len(tokens) and tokens[j].text == "::" and tokens[j + 1].kind == "ident":
        names.append(tokens[j + 1].text)
        j += 2
    return names, j


def _what(chain: list[str]) -> tuple[str, str]:
    if len(chain) > 2 and chain[1] == "_ops":
        return "::".join(chain[:3]), chain[2]
    return "::".join(chain), chain[-1]


def is_reference(before: list[str], after: str) -> bool:
    """A name between the token texts `before` (nearest last) and `after` is used as a value:
    its address is taken, or it stands alone as an initialiser, argument or return value."""
    prev = before[-1] if before else ""
    if prev == "&":
        # unary `&`: not `a & at::x`, `T& at::x` (a declaration), `)&`
        prior = before[-2] if len(before) > 1 else ""
        return not (prior[:1].isalnum() or prior in (")", "]", "_")) or prior in ("return", "=")
    if after not in _VALUE_END or prev not in _VALUE_START:
        return False
    if prev == "=" and len(before) >= 3 and before[-3] in ("namespace", "using"):
        return False  # `namespace F = torch::nn::functional;`, `using T = at::acc_type;`
    if prev == "(" and len(before) >= 2 and before[-2] in ("decltype", "sizeof", "alignof", "typeid"):
        return False
    return True


def _macros(source: CppSource) -> dict[str, tuple[Optional[list[str]], list[Token], int, int]]:
    """`#define` lines: name -> (parameters or None, body tokens, first and last token index)."""
    tokens, text = source.tokens, source.text
    out: dict[str, tuple[Optional[list[str]], list[Token], int, int]] = {}
    for idx in source.by_text["directive"].get("define", ()):
        if idx + 1 >= len(tokens) or tokens[idx + 1].kind != "ident":
            continue
        name = tokens[idx + 1]
        end = line_end(text, name.offset)
        j = idx + 2
        params: Optional[list[str]] = None
        if j < len(tokens) and tokens[j].text == "(" and tokens[j].offset == name.offset + len(name.text):
            close = match_close(tokens, j)
            params = [t.text for t in tokens[j + 1:close] if t.kind == "ident" or t.text == "..."]
            j = close + 1
        k = j
        while k < len(tokens) and tokens[k].offset < end and tokens[k].kind != "directive":
            k += 1
        out[name.text] = (params, tokens[j:k], idx, k - 1)
    return out


def _expand(body: list[Token], params: Optional[list[str]], args: list[list[str]]) -> list[str]:
    """Token texts of a macro's expansion, with `##` pasting (one level, no rescanning)."""
    bind = {p: a for p, a in zip(params or [], args)}
    if params and params[-1] == "...":
        bind["__VA_ARGS__"] = [t for a in args[len(params) - 1:] for t in a + [","]][:-1]
    out: list[str] = []
    paste = False
    for tok in body:
        if tok.text == "##":
            paste = True
            continue
        pieces = bind.get(tok.text, [tok.text]) if tok.kind == "ident" else [tok.text]
        if paste and out and pieces:
            out[-1] += pieces[0]
            pieces = pieces[1:]
        paste = False
        out.extend(pieces)
    return out


def _chains_in(texts: list[str], ops: TorchOps) -> list[tuple[int, int, list[str]]]:
    """(start, end, chain) of `root :: name ...` runs in a list of token texts."""
    out = []
    i = 0
    while i < len(texts):
        if texts[i] in ops.cpp_roots and i + 2 < len(texts) and texts[i + 1] == "::" and (i == 0 or texts[i - 1] != "::"):
            chain = [texts[i]]
            j = i + 1
            while j + 1 < len(texts) and texts[j] == "::" and (texts[j + 1][:1].isalpha() or texts[j + 1][:1] == "_"):
                chain.append(texts[j + 1])
                j += 2
            out.append((i, j, chain))
            i = j
        else:
            i += 1
    return out


def macro_reach(source: CppSource, ops: TorchOps) -> list[Reach]:
    """Uses of macros whose expansion calls or references an ATen compute function."""
    if "define" not in source.by_text["directive"]:
        return []
    tokens = source.tokens
    macros = {name: m for name, m in _macros(source).items()
              if any(t.text in ops.cpp_roots for t in m[1])}
    if not macros:
        return []
    found: list[Reach] = []
    idents = source.by_text["ident"]
    for name, (params, body, first, last) in macros.items():
        for i in idents.get(name, ()):
            if first <= i <= last:
                continue  # the definition itself
            end = i
            args: list[list[str]] = []
            if params is not None:
                if i + 1 >= len(tokens) or tokens[i + 1].text != "(":
                    continue
                end = match_close(tokens, i + 1)
                args = split_args(tokens, i + 1, end)
            before = [t.text for t in tokens[max(0, i - 3):i]]
            after = tokens[end + 1].text if end + 1 < len(tokens) else ""
            texts = before + _expand(body, params, args) + [after]
            for start, stop, chain in _chains_in(texts, ops):
                if start < len(before) or not ops.cpp_is_compute(chain):
                    continue
                nxt = texts[stop] if stop < len(texts) else ""
                if nxt == "(" or is_reference(texts[:start], nxt):
                    what, op = _what(chain)
                    found.append(("cpp", f"{what} (through the macro {name})", tokens[i].offset, op))
                    break
    return found


def dispatcher_reach(source: CppSource) -> list[Reach]:
    """Operators looked up by name through the dispatcher (`findSchemaOrThrow("aten::mean", "dim")`)."""
    idents = source.by_text["ident"]
    if not any(name in idents for name in _DISPATCH_NAMES):
        return []
    text = source.text
    own = set(_LIBRARY.findall(text))
    found: list[Reach] = []
    lookups = sorted(i for name in _LOOKUPS for i in idents.get(name, ()))
    tokens = source.tokens
    named = False
    for m in _OP_LITERAL.finditer(text):
        namespace, op = m.group(1), m.group(2)
        if namespace in own or namespace not in _ATEN_NAMESPACES:
            continue
        named = True
        found.append(("cpp", f"c10::Dispatcher op \"{namespace}::{op}\"", m.start(), op))
    if not named and not own:
        for i in lookups:  # a name built at run time: some op, not the source's own
            if i + 1 < len(tokens) and tokens[i + 1].text == "(" and (i == 0 or tokens[i - 1].text in (".", "->", "::")):
                found.append(("cpp", f"c10::Dispatcher::{tokens[i].text}", tokens[i].offset, "dispatcher_op"))
    return found if (lookups or "callBoxed" in idents or "OperatorName" in idents) else []
