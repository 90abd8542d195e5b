"""Spans of C++ postfix expressions (`x.abs().max().item<float>()`, `x.sizes()[1]`) in a
token stream, so that messages can quote the expression a rule matched instead of the
whole source line.

A scanner, not a parser: a postfix chain is identifiers joined by `.`, `->` or `::`, each
optionally followed by balanced `(...)`, `[...]` or a template `<...>` argument list.
"""

from __future__ import annotations

from typing import Optional, Sequence

from gatekeeper.static.cpp_tokens import Token

_JOINERS = frozenset({".", "->", "::"})
_OPEN = {")": "(", "]": "[", ">": "<"}
_CLOSE = {"(": ")", "[": "]", "<": ">"}


def _back_to_open(toks: Sequence[Token], index: int) -> int:
    """Index of the bracket that opens the one closing at `index`, or -1."""
    close, open_ = toks[index].text, _OPEN[toks[index].text]
    depth = 0
    for k in range(index, -1, -1):
        text = toks[k].text
        if text == close:
            depth += 1
        elif text == open_:
            depth -= 1
            if depth == 0:
                return k
    return -1


def _forward_to_close(toks: Sequence[Token], index: int) -> int:
    open_, close = toks[index].text, _CLOSE[toks[index].text]
    depth = 0
    for k in range(index, len(toks)):
        text = toks[k].text
        if text == open_:
            depth += 1
        elif text == close:
            depth -= 1
            if depth == 0:
                return k
        elif text in (";", "{", "}"):
            return -1
    return -1


def postfix_start(toks: Sequence[Token], end: int) -> int:
    """Index of the first token of the postfix chain that ends at token `end`."""
    k = end
    while k >= 0:
        # skip trailing call / index / template brackets
        while k >= 0 and (toks[k].text in (")", "]") or (toks[k].text == ">" and _is_template_close(toks, k))):
            opened = _back_to_open(toks, k)
            if opened < 0:
                return k + 1
            k = opened - 1
        if k < 0 or toks[k].kind != "ident":
            return k + 1
        if k >= 1 and toks[k - 1].text in _JOINERS:
            k -= 2
            continue
        return k
    return 0


def _is_template_close(toks: Sequence[Token], k: int) -> bool:
    """`>` closing `item<float>`: an identifier, `<`, a short type list and `>` just before `(`."""
    if k + 1 >= len(toks) or toks[k + 1].text != "(":
        return False
    opened = _back_to_open(toks, k)
    return opened > 0 and k - opened <= 6 and toks[opened - 1].kind == "ident"


def postfix_end(toks: Sequence[Token], start: int) -> int:
    """Index of the last token of the postfix chain that starts at token `start`."""
    k = start
    if toks[k].kind != "ident":
        return k
    while k + 1 < len(toks):
        nxt = toks[k + 1].text
        if nxt in ("(", "["):
            close = _forward_to_close(toks, k + 1)
            if close < 0:
                return k
            k = close
        elif nxt in _JOINERS and k + 2 < len(toks) and toks[k + 2].kind == "ident":
            k += 2
        else:
            return k
    return k


def chain_root(toks: Sequence[Token], end: int) -> Optional[str]:
    """The identifier a postfix chain ending at `end` starts from (`x` in `x.abs().max()`),
    or None when the chain is a namespaced call (`torch::abs(x).max()`)."""
    start = postfix_start(toks, end)
    if start > end or toks[start].kind != "ident":
        return None
    if start + 1 <= end and toks[start + 1].text in ("::", "("):
        return None
    return toks[start].text


def span_text(text: str, toks: Sequence[Token], first: int, last: int) -> str:
    """The source text from token `first` through token `last`, whitespace collapsed."""
    piece = text[toks[first].offset: toks[last].offset + len(toks[last].text)]
    return " ".join(piece.split())
