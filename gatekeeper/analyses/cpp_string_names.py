"""Named string constants of a C++ source, and the strings an argument list spells. Not a rule file.

Why (red team round 12): the checks that read an op's name from a string (pybind11's
`.attr("matmul")`, CPython's `PyObject_CallMethod(obj, "softmax", ...)`, a dispatcher lookup)
were dodged by naming the string once: `static const char* const kEntry = "matmul";` then
`.attr(kEntry)`, or `static const Stage kContraction{"mm", ""};` then `kContraction.name`.
A name bound once to literal text is that text wherever it is used, so an argument list
counts the strings of the constants it names as its own.

Read from the text with the tokenizer's view of strings (the tokens drop them): forms are
`T NAME = "x";`, `T NAME[] = "x";`, `T NAME = wrap("x");` (`std::string`, `py::str`,
`PyUnicode_FromString`), `T NAME{"x", ...};` / `NAME("x")`, `#define NAME "x"`,
`_Py_IDENTIFIER(x)` (`PyId_x`) and `_Py_static_string(NAME, "x")`.
"""

from __future__ import annotations

import re

from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import match_close

_LIT = r'"([^"\\\n]*)"'
_ASSIGNED = re.compile(r"\b([A-Za-z_]\w*)\s*(?:\[\s*\w*\s*\]\s*)?=\s*(?:[\w:]+\s*[({]\s*)?" + _LIT)
_BRACED = re.compile(r"\b([A-Za-z_]\w*)\s*[({]\s*((?:" + _LIT + r"\s*,?\s*)+)[)}]")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+" + _LIT, re.M)
_PY_ID = re.compile(r"\b_Py_IDENTIFIER\s*\(\s*(\w+)\s*\)")
_PY_STATIC = re.compile(r"\b_Py_static_string\s*\(\s*(\w+)\s*,\s*" + _LIT)
_STRING = re.compile(_LIT)


def string_constants(source: CppSource) -> dict[str, list[str]]:
    """NAME -> the literal strings it is bound to (computed once per source)."""
    cached = getattr(source, "_gk_string_constants", None)
    if cached is not None:
        return cached
    text = source.text
    out: dict[str, list[str]] = {}
    if '"' in text:
        for m in _ASSIGNED.finditer(text):
            out.setdefault(m.group(1), []).append(m.group(2))
        for m in _BRACED.finditer(text):
            out.setdefault(m.group(1), []).extend(_STRING.findall(m.group(2)))
        for m in _DEFINE.finditer(text):
            out.setdefault(m.group(1), []).append(m.group(2))
        for m in _PY_STATIC.finditer(text):
            out.setdefault(m.group(1), []).append(m.group(2))
    for m in _PY_ID.finditer(text):
        out.setdefault(f"PyId_{m.group(1)}", []).append(m.group(1))
    source._gk_string_constants = out  # type: ignore[attr-defined]
    return out


def argument_strings(source: CppSource, open_: int) -> list[str]:
    """The strings the argument list whose `(` is token `open_` spells: its literals, and the
    values of the named constants it mentions (`kEntry`, `kContraction.name`)."""
    tokens = source.tokens
    close = match_close(tokens, open_)
    start = tokens[open_].offset
    end = tokens[close].offset + 1 if close < len(tokens) else len(source.text)
    found = _STRING.findall(source.text[start:end])
    constants = string_constants(source)
    if constants:
        for k in range(open_ + 1, close):
            tok = tokens[k]
            # a value, not a function or member spelled like one: `py::str(kName)` reads kName, not `str`
            if tok.kind == "ident" and tok.text in constants and tokens[k + 1].text != "(" \
                    and tokens[k - 1].text not in ("::", ".", "->"):
                found.extend(constants[tok.text])
    return found
