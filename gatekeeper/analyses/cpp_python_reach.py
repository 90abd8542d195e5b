"""Torch reached through Python from C++: pybind11 or the raw CPython API. Not a rule file.

`py::cast(x).attr("softmax")(1)`, `py::module_::import("torch").attr("matmul")(a, b)`,
`py::getattr(x, "sum")`, and the same through CPython (red team round 12):
`PyObject_CallMethod(obj, "softmax", "i", -1)`, `PyObject_GetAttrString(obj, "matmul")`,
`PyObject_GetAttr(obj, PyUnicode_FromString("sum"))`, `PyObject_CallMethodObjArgs`,
`PyObject_VectorcallMethod`, `_PyObject_CallMethodId(obj, &PyId_softmax, ...)`, a module's dict
read by key (`PyDict_GetItemString(PyModule_GetDict(torch), "mm")`), and a lookup that names the
attribute in its call (`o.attr("__getattribute__")("matmul")`). The invariant:
a string naming a torch compute op or method, handed as the attribute name to any attribute
or method-call API, is torch computing from C++. The string may be a literal or a named
constant (`constexpr const char* kEntry = "matmul"; ... .attr(kEntry)`): cpp_string_names.py.

Not flagged: attributes of a module other than torch imported in the same expression or
into the receiver variable (`PyImport_ImportModule("math")`, `import("numpy")`), and names
that are no compute op (`PyObject_GetAttrString(mod, "__name__")`, `.attr("shape")`).
"""

from __future__ import annotations

import re

from gatekeeper.analyses.cpp_string_names import argument_strings
from gatekeeper.analyses.torch_op_table import TorchOps
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import match_close

Reach = tuple[str, str, int, str]  # (kind "cpp", what, offset, op)

_PYBIND = ("attr", "getattr")
# CPython's attribute reads and method calls (`PyObject_CallMethod`, `PyObject_GetAttrString`,
# `_PyObject_CallMethodId`, `PyObject_VectorcallMethod`...); setting or deleting is not a call.
_CPYTHON = re.compile(r"_?PyObject_\w*(?:Method|GetAttr|LookupAttr|GetOptionalAttr)\w*")
# Module dicts read by key (`PyDict_GetItemString(PyModule_GetDict(torch), "matmul")`): counted
# when the source takes a module's dict, not for an own kwargs dict.
_DICT_READS = frozenset({"PyDict_GetItemString", "PyDict_GetItem", "PyDict_GetItemWithError", "PyMapping_GetItemString",
                         "PyObject_GetItem"})
# Attribute lookups whose *call* names the attribute: `o.attr("__getattribute__")("matmul")`.
_INDIRECT = frozenset({"__getattribute__", "__getattr__", "getattr", "attrgetter", "methodcaller"})
_IMPORT_INLINE = re.compile(r'[Ii]mport\w*\s*\(\s*"([\w.]+)"\s*\)\s*\.\s*$')
_IMPORT_INTO = r'\b{name}\s*=\s*[\w:]*[Ii]mport\w*\s*\(\s*"([\w.]+)"'


def _foreign_module(text: str, offset: int, receiver: str) -> bool:
    """The receiver is a module other than torch: imported in the same expression
    (`import("math").attr(...)`) or into the receiver variable (`m = PyImport_ImportModule("math")`)."""
    inline = _IMPORT_INLINE.search(text, max(0, offset - 120), offset)
    if inline is not None:
        return inline.group(1).split(".")[0] != "torch"
    if receiver:
        into = re.search(_IMPORT_INTO.format(name=re.escape(receiver)), text)
        if into is not None:
            return into.group(1).split(".")[0] != "torch"
    return False


def interop_reach(source: CppSource, ops: TorchOps) -> list[Reach]:
    idents = source.by_text["ident"]
    calls = [(name, i) for name in _PYBIND for i in idents.get(name, ())]
    calls += [(name, i) for name, where in idents.items() if name.startswith(("PyObject_", "_PyObject_"))
              and _CPYTHON.fullmatch(name) for i in where]
    if "PyModule_GetDict" in idents or "__dict__" in source.text:
        calls += [(name, i) for name in _DICT_READS for i in idents.get(name, ())]
    if not calls:
        return []
    tokens, text = source.tokens, source.text
    found: list[Reach] = []
    for name, i in sorted(calls, key=lambda c: c[1]):
        if i + 1 >= len(tokens) or tokens[i + 1].text != "(":
            continue
        prev = tokens[i - 1].text if i else ""
        pybind = name in _PYBIND
        if pybind and prev not in (".", "->", "::"):
            continue
        if pybind and prev in (".", "->"):
            receiver = tokens[i - 2].text if i > 1 and tokens[i - 2].kind == "ident" else ""
        else:  # `py::getattr(x, ...)`, `PyObject_GetAttrString(x, ...)`: the first argument
            receiver = tokens[i + 2].text if i + 2 < len(tokens) and tokens[i + 2].kind == "ident" else ""
        if _foreign_module(text, tokens[i].offset, receiver):
            continue
        strings = argument_strings(source, i + 1)
        after = match_close(tokens, i + 1) + 1
        if after < len(tokens) and tokens[after].text == "(" and _INDIRECT & set(strings):
            strings += argument_strings(source, after)  # `.attr("__getattribute__")("matmul")`
        for literal in strings:
            if re.fullmatch(r"[A-Za-z_][\w.]*", literal) and (ops.method_is_compute(literal) or ops.is_heavy(literal)):
                label = f'{name}("{literal}")' if pybind else f'{name}(..., "{literal}")'
                found.append(("cpp", f"{label} (torch through Python)", tokens[i].offset, literal))
                break
    return found
