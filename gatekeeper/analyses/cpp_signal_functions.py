"""Signals that cross function boundaries in a C++/CUDA source, for the rules built on
cpp_choices: a function that returns a signal (`static bool back_to_back() { ... return gap <
400us; }`) makes its calls seeds, and a file-scope variable a function fills from a signal
(`last_launch = now;`) carries it into every function. Not a rule file."""

from __future__ import annotations

from typing import Optional

from gatekeeper.analyses.cpp_choices import Seed, statement_end
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import match_close


def file_scope_names(source: CppSource) -> set[str]:
    """Identifiers that occur outside every function body (file-scope declarations among them)."""
    tokens = source.tokens
    inside = bytearray(len(tokens))
    for fn in source.functions:
        inside[fn.body_start:fn.body_end + 1] = b"\x01" * (fn.body_end + 1 - fn.body_start)
    return {t.text for i, t in enumerate(tokens) if t.kind == "ident" and not inside[i]}


def _reads(source: CppSource, seed: Seed, names: dict[str, str], a: int, b: int) -> Optional[str]:
    tokens = source.tokens
    for j in range(a, b):
        label = seed(j)
        if label is not None:
            return label
        if tokens[j].kind == "ident" and tokens[j].text in names and not (j and tokens[j - 1].text in (".", "->")):
            return names[tokens[j].text]
    return None


def widen(source: CppSource, seed: Seed) -> tuple[Seed, dict[str, str]]:
    """A seed that also fires on calls of functions returning a signal, and the file-scope
    names some function assigns from a signal (name -> label)."""
    tokens = source.tokens
    returning: dict[str, str] = {}
    globals_: dict[str, str] = {}
    scope = file_scope_names(source)

    def wide(i: int) -> Optional[str]:
        label = seed(i)
        if label is not None:
            return label
        tok = tokens[i]
        if tok.kind == "ident" and tok.text in returning and i + 1 < len(tokens) and tokens[i + 1].text == "(" \
                and not (i and tokens[i - 1].text in (".", "->")):
            return returning[tok.text]
        return None

    for _ in range(3):
        before = len(returning) + len(globals_)
        for fn in source.functions:
            local: dict[str, str] = dict(globals_)
            for i in range(fn.body_start, fn.body_end):
                text = tokens[i].text
                if text == "=" and i and tokens[i - 1].kind == "ident":
                    label = _reads(source, wide, local, i + 1, statement_end(tokens, i + 1))
                    if label is not None:
                        local.setdefault(tokens[i - 1].text, label)
                        if tokens[i - 1].text in scope:
                            globals_.setdefault(tokens[i - 1].text, label)
                elif tokens[i].kind == "ident" and i + 1 < fn.body_end and tokens[i + 1].text == "(" \
                        and wide(i) is not None:  # `clock_gettime(CLOCK_MONOTONIC, &ts)`: ts holds the reading
                    close = match_close(tokens, i + 1)
                    for j in range(i + 2, close):
                        if tokens[j].text == "&" and tokens[j + 1].kind == "ident":
                            local.setdefault(tokens[j + 1].text, wide(i) or "")
                elif text == "return" and fn.name not in returning:
                    label = _reads(source, wide, local, i + 1, statement_end(tokens, i + 1))
                    if label is not None:
                        returning[fn.name] = label
        if len(returning) + len(globals_) == before:
            break
    return wide, globals_
