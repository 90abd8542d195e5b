"""C++/CUDA source helpers for the GK4xx rules. Not a rule file.

Calls found by identifier on `source.tokens` (free-function calls only: not member calls,
not declarations), and the string literals in a call's argument list or statement (the
tokenizer drops literals, so they are read back from `source.text`).
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator

from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token, match_close

_BEFORE_CALL = frozenset({"return", "else", "do", "throw", "case", "co_return", "co_await", "sizeof"})
_CPP_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def _ident_index(source: CppSource) -> dict[str, list[int]]:
    """Token indices of every identifier, built once per source and shared by the rules."""
    return source.by_text["ident"]


def cpp_idents(source: CppSource, names: frozenset[str]) -> Iterator[tuple[int, Token]]:
    index = _ident_index(source)
    present = index.keys() & names  # usually none: the check leaves without a Python loop
    if not present:
        return
    hits = sorted(i for name in present for i in index[name])
    tokens = source.tokens
    for i in hits:
        yield i, tokens[i]


def cpp_calls(source: CppSource, names: frozenset[str]) -> Iterator[tuple[int, Token]]:
    """Free-function calls `name(` (also `std::name(`, `::name(`), not member calls."""
    tokens = source.tokens
    for i, tok in cpp_idents(source, names):
        if i + 1 >= len(tokens) or tokens[i + 1].text != "(":
            continue
        if i > 0:
            before = tokens[i - 1]
            if before.text in (".", "->"):
                continue  # a member call
            if before.kind == "ident" and before.text not in _BEFORE_CALL:
                continue  # `int system(int);`: a declaration, not a call
        yield i, tok


def cpp_ident_names(source: CppSource) -> Iterable[str]:
    return _ident_index(source).keys()


def cpp_call_span(source: CppSource, open_index: int) -> tuple[int, int]:
    """Token indices of the matching parentheses of the call whose `(` is at open_index."""
    return open_index, match_close(source.tokens, open_index)


def cpp_call_strings(source: CppSource, name_index: int) -> tuple[list[str], list[Token]]:
    """The string literals and the tokens inside the argument list of the call at name_index."""
    start, end = cpp_call_span(source, name_index + 1)
    tokens = source.tokens
    text = source.text[tokens[start].offset: tokens[end].offset]
    return [m.group(1) for m in _CPP_STRING.finditer(text)], tokens[start + 1: end]


def cpp_statement_strings(source: CppSource, offset: int) -> list[str]:
    """String literals from `offset` to the end of its statement (`std::ofstream f("x");`)."""
    end = source.text.find(";", offset)
    return _CPP_STRING.findall(source.text[offset: end if end >= 0 else None])


_PY_IMPORT = re.compile(
    r'(\w+)\s*=\s*(?:(?:py|pybind11)::module_?::import|PyImport_ImportModule)\(\s*"([\w.]+)"\s*\)')
_PY_ATTR_ALIAS = re.compile(r'(\w+)\s*=\s*(\w+)\s*\.\s*attr\(\s*"(\w+)"\s*\)\s*;')
_PY_SETATTR = re.compile(r'(?:(?:py|pybind11)::setattr|PyObject_SetAttrString)\(\s*(\w+)\s*,\s*"(\w+)"')
_PY_ATTR_WRITE = re.compile(
    r'(?:(?:(?:py|pybind11)::module_?::import\(\s*"([\w.]+)"\s*\))|(\w+))((?:\s*\.\s*attr\(\s*"\w+"\s*\))+)\s*=(?!=)')
_PY_ATTR_NAME = re.compile(r'attr\(\s*"(\w+)"\s*\)')


def cpp_python_writes(source: CppSource) -> list[tuple[int, str]]:
    """Attribute writes into Python modules from C++ (pybind11 or the C API), as
    (offset, qualified name): `py::module_::import("torch").attr("allclose") = f`,
    `py::setattr(torch, "allclose", f)` with `auto torch = py::module_::import("torch")`."""
    cached = source.__dict__.get("_gk4_python_writes")
    if cached is not None:
        return cached
    out: list[tuple[int, str]] = []
    source.__dict__["_gk4_python_writes"] = out
    text = source.text
    if ".attr(" not in text and "setattr" not in text and "SetAttr" not in text:
        return out
    modules = {m.group(1): m.group(2) for m in _PY_IMPORT.finditer(text)}
    for m in _PY_ATTR_ALIAS.finditer(text):  # auto event = cuda.attr("Event");
        if m.group(2) in modules:
            modules[m.group(1)] = f"{modules[m.group(2)]}.{m.group(3)}"
    for m in _PY_SETATTR.finditer(text):
        owner = modules.get(m.group(1))
        if owner:
            out.append((m.start(), f"{owner}.{m.group(2)}"))
    for m in _PY_ATTR_WRITE.finditer(text):
        owner = m.group(1) or modules.get(m.group(2) or "")
        if owner:
            names = _PY_ATTR_NAME.findall(m.group(3))
            out.append((m.start(), ".".join([owner, *names])))
    return out
