"""Function definitions in a C++ token stream: names, parameter names, and which
parameters a function returns (`return y;` where `y` is a parameter)."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Optional

from gatekeeper.static.cpp_tokens import Token, TokenIndex, match_close

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


def functions(tokens: list[Token], by_text: Optional[TokenIndex] = None) -> list[CppFunction]:
    """`by_text`: the source's token index when the caller has it (CppSource.by_text). Then
    only the tokens before a `(` are visited (a definition is `name(`), brackets are paired
    from the bracket tokens alone, and a body is searched only at its `return` tokens."""
    out: list[CppFunction] = []
    n = len(tokens)
    if by_text is None:
        opens = [k for k, t in enumerate(tokens) if t.text == "("]
        pairs = None
        returns = None
    else:
        puncts = by_text["punct"]
        opens = puncts.get("(", [])
        pairs = _pairs(tokens, opens, puncts.get(")", []))
        pairs.update(_pairs(tokens, puncts.get("{", []), puncts.get("}", [])))
        returns = sorted(by_text["ident"].get("return", []) + by_text["directive"].get("return", []))
    after = 0  # the end of the last definition found: nothing inside it is visited
    for paren in opens:
        i = paren - 1
        if i < after:
            continue
        tok = tokens[i]
        if tok.kind == "ident" and tok.text not in _NOT_FUNCTIONS:
            close = match_close(tokens, paren) if pairs is None else pairs.get(paren, n - 1)
            j = close + 1
            # skip qualifiers between ) and { (const, noexcept, -> type)
            while j < n and tokens[j].kind == "ident" and tokens[j].text in ("const", "noexcept", "override"):
                j += 1
            if j < n and tokens[j].text == "{" and i > 0 and tokens[i - 1].kind in ("ident", "punct") and tokens[i - 1].text not in ("=", "(", ",", "return", "."):
                end = match_close(tokens, j) if pairs is None else pairs.get(j, n - 1)
                params = _param_names(tokens[i + 2 : close])
                fn = CppFunction(tok.text, params, j, end, offset=tok.offset,
                                 is_kernel=any(t.text == "__global__" for t in tokens[max(0, i - 6) : i]))
                in_body = range(j, end) if returns is None else returns[bisect_left(returns, j) : bisect_left(returns, end)]
                for k in in_body:
                    if tokens[k].text == "return" and k + 2 <= end and tokens[k + 2].text == ";" and tokens[k + 1].text in params:
                        fn.returns_params.add(params.index(tokens[k + 1].text))
                out.append(fn)
                after = end + 1
    return out


def _pairs(tokens: list[Token], opens: list[int], closes: list[int]) -> dict[int, int]:
    """{index of an opening bracket: index of its closing one}, the pairing match_close
    finds, from the indices of the two brackets (an unclosed bracket has no entry)."""
    pairs: dict[int, int] = {}
    if not opens:
        return pairs
    stack: list[int] = []
    open_text = tokens[opens[0]].text
    for k in sorted(opens + closes):
        if tokens[k].text == open_text:
            stack.append(k)
        elif stack:
            pairs[stack.pop()] = k
    return pairs


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
