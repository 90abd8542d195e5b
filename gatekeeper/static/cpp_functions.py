"""Function definitions in a C++ token stream: names, parameter names, and which
parameters a function returns (`return y;` where `y` is a parameter)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from gatekeeper.static.cpp_tokens import Token, match_close

_NOT_FUNCTIONS = frozenset({"if", "for", "while", "switch", "return", "sizeof", "catch", "defined"})


@dataclass
class CppFunction:
    name: str
    params: list[str]
    body_start: int  # token index of "{"
    body_end: int  # token index of matching "}"
    returns_params: set[int] = field(default_factory=set)
    offset: int = 0
    is_kernel: bool = False


def functions(tokens: list[Token], opens: Optional[list[int]] = None) -> list[CppFunction]:
    """`opens`: the indices of the `(` tokens when the caller has them (CppSource.by_text):
    a definition is `name(`, so only the tokens before a `(` are visited."""
    out: list[CppFunction] = []
    n = len(tokens)
    if opens is None:
        opens = [k for k, t in enumerate(tokens) if t.text == "("]
    after = 0  # the end of the last definition found: nothing inside it is visited
    for paren in opens:
        i = paren - 1
        if i < after:
            continue
        tok = tokens[i]
        if tok.kind == "ident" and tok.text not in _NOT_FUNCTIONS:
            close = match_close(tokens, paren)
            j = close + 1
            # skip qualifiers between ) and { (const, noexcept, -> type)
            while j < n and tokens[j].kind == "ident" and tokens[j].text in ("const", "noexcept", "override"):
                j += 1
            if j < n and tokens[j].text == "{" and i > 0 and tokens[i - 1].kind in ("ident", "punct") and tokens[i - 1].text not in ("=", "(", ",", "return", "."):
                end = match_close(tokens, j)
                params = _param_names(tokens[i + 2 : close])
                fn = CppFunction(tok.text, params, j, end, offset=tok.offset,
                                 is_kernel=any(t.text == "__global__" for t in tokens[max(0, i - 6) : i]))
                for k in range(j, end):
                    if tokens[k].text == "return" and k + 2 <= end and tokens[k + 2].text == ";" and tokens[k + 1].text in params:
                        fn.returns_params.add(params.index(tokens[k + 1].text))
                out.append(fn)
                after = end + 1
    return out


def _param_names(tokens: list[Token]) -> list[str]:
    names: list[str] = []
    depth = 0
    current: list[Token] = []
    for tok in [*tokens, Token("punct", ",", -1)]:
        if tok.text in "(<[":
            depth += 1
        elif tok.text in ")>]":
            depth -= 1
        if tok.text == "," and depth == 0:
            idents = [t.text for t in current if t.kind == "ident"]
            if "=" in [t.text for t in current]:
                idents = [t.text for t in current[: [t.text for t in current].index("=")] if t.kind == "ident"]
            names.append(idents[-1] if idents else "")
            current = []
        else:
            current.append(tok)
    return [n for n in names] if any(names) else []
