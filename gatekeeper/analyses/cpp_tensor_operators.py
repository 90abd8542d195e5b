"""Operators applied to tensors in host C++: ATen or torch through overloads. Not a rule file.

Red team round 13. The invariant: *an arithmetic operator applied to a value that holds a
tensor computes with torch*, whatever spells it:
- `acc += x[r]`, `acc *= s`, `y = a * b` on `at::Tensor` values (ATen's `add_`, `mul_`, `mul`);
- pybind11's `py::object` operators (`acc + x[i]`, `acc * py::float_(s)`) and CPython's number
  protocol (`PyNumber_MatrixMultiply(a, b)`, `PyNumber_InPlaceAdd`) on an object holding a
  tensor: `Tensor.__matmul__`, `__add__`, ...

Which names hold tensors is read per host function (cpp_tensor_names.py): declared `Tensor`,
or assigned from a tensor, or a Python object cast to/from one, or the result of an operator on
one. A Python object the caller hands in may be a tensor unless an operand or the result is shown
to be a Python number (`count = PyNumber_FloorDivide(rows, panel)` read back with
`.cast<int64_t>()`); an own float buffer (`acc[i] += src[i]`) is no tensor.
"""

from __future__ import annotations

from typing import Callable, Optional

from gatekeeper.analyses.cpp_tensor_names import TensorNames
from gatekeeper.static.cpp_functions import CppFunction
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token

Found = tuple[str, str, int, str]

_KEYWORDS = frozenset({"return", "co_return", "case", "else", "throw", "sizeof", "do", "co_yield", "delete"})
_COMPOUND = {"+=": "add", "-=": "sub", "*=": "mul", "/=": "div"}
_BINARY = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
_SPELLED = {**_COMPOUND, **_BINARY}
# the standard library's folds and functors apply a tensor's operators
_FOLDS = {"accumulate": "add", "reduce": "add", "transform_reduce": "add", "inner_product": "add",
          "partial_sum": "add", "inclusive_scan": "add", "exclusive_scan": "add", "adjacent_difference": "sub"}
_FUNCTORS = {"plus": "add", "minus": "sub", "multiplies": "mul", "divides": "div", "negate": "neg"}
# CPython's number protocol: PyNumber_<slot> and PyNumber_InPlace<slot>
_SLOTS = {"Add": "add", "Subtract": "sub", "Multiply": "mul", "MatrixMultiply": "matmul", "TrueDivide": "div",
          "FloorDivide": "floor_divide", "Remainder": "remainder", "Power": "pow", "Negative": "neg",
          "Absolute": "abs", "Divmod": "floor_divide", "And": "bitwise_and", "Or": "bitwise_or", "Xor": "bitwise_xor",
          "Lshift": "bitwise_left_shift", "Rshift": "bitwise_right_shift", "Invert": "bitwise_not"}
# every token text `_at` can match, but the PyNumber_ prefix
_TRIGGERS = frozenset({*_SPELLED, "operator", *_FOLDS, *_FUNCTORS})


def operator_reach(source: CppSource, functions: list[CppFunction], returns_tensor: Callable[[str], bool],
                   in_device: Callable[[int], bool]) -> list[Found]:
    tokens = source.tokens
    found: list[Found] = []
    for fn in functions:
        if fn.is_kernel or in_device(tokens[fn.body_start].offset):
            continue
        # most tokens can start none of the patterns: find those that can before reading names
        candidates = [k for k in range(fn.body_start + 1, fn.body_end)
                      if tokens[k].text in _TRIGGERS or tokens[k].text.startswith("PyNumber_")]
        if not candidates:
            continue
        names = TensorNames.of(tokens, fn, returns_tensor)
        if not names.tensors and "py" not in names.kinds.values():
            continue
        for k in candidates:
            hit = _at(tokens, k, names)
            if hit is not None:
                found.append(("cpp", hit[0], tokens[k].offset, hit[1]))
    return found


def _at(tokens: list[Token], k: int, names: TensorNames) -> Optional[tuple[str, str]]:
    text = tokens[k].text
    if text in _COMPOUND:
        lhs = names.operand_before(k)
        if lhs is not None and names.holds_tensor(lhs):
            return f"operator{text} on the tensor {lhs}", _COMPOUND[text]
        if lhs is not None and names.kinds.get(lhs) == "py" and names.python_operands_may_be_tensors(k, [lhs]):
            return f"operator{text} on the Python object {lhs} (a tensor's number protocol)", _COMPOUND[text]
    elif text in _BINARY and _binary(tokens, k):
        lhs, rhs = names.operand_before(k), names.operand_after(k)
        held = [n for n in (lhs, rhs) if n is not None and names.holds_tensor(n)]
        if held:
            return f"operator{text} on the tensor {held[0]}", _BINARY[text]
        python = [n for n in (lhs, rhs) if n is not None and names.kinds.get(n) == "py"]
        if python and names.python_operands_may_be_tensors(k, python):  # pybind11's operator on the caller's object
            return f"operator{text} on the Python object {python[0]} (a tensor's number protocol)", _BINARY[text]
    elif text == "operator" and k > 1 and tokens[k - 1].text in (".", "->") and k + 1 < len(tokens) \
            and tokens[k + 1].text in _SPELLED and names.holds_tensor(tokens[k - 2].text):
        # `acc.operator+=(x)`: the overload called by name
        return f"operator{tokens[k + 1].text} on the tensor {tokens[k - 2].text}", _SPELLED[tokens[k + 1].text]
    elif text in _FOLDS and k > 1 and tokens[k - 1].text == "::" and tokens[k - 2].text == "std" \
            and k + 1 < len(tokens) and tokens[k + 1].text == "(" and names.tensor_argument(k + 1):
        # `std::accumulate(parts.begin(), parts.end(), init)` over tensors: their operator+
        return f"std::{text} over tensors (their operators)", _FOLDS[text]
    elif text in _FUNCTORS and k > 1 and tokens[k - 1].text == "::" and tokens[k - 2].text == "std" \
            and names.functor_on_tensors(k):
        # `std::plus<at::Tensor>()(a, b)`, `std::multiplies<>{}(a, s)` on a tensor
        return f"std::{text} on tensors", _FUNCTORS[text]
    elif text.startswith("PyNumber_") and k + 1 < len(tokens) and tokens[k + 1].text == "(":
        slot = text[len("PyNumber_"):].removeprefix("InPlace")
        if slot in _SLOTS and names.number_protocol_on_tensor(k):
            return f"{text} on the caller's objects (a tensor's number protocol)", _SLOTS[slot]
    return None


def _binary(tokens: list[Token], k: int) -> bool:
    """`a * b`, not `*p` or `float* p` or `-1`: a value on the left, and not a declaration."""
    if k == 0:
        return False
    prev = tokens[k - 1]
    if not (prev.kind in ("ident", "number") or prev.text in (")", "]")) or prev.text in _KEYWORDS:
        return False  # `return *out`, `case -1`: unary
    if tokens[k].text == "*" and prev.kind == "ident":
        before = tokens[k - 2].text if k > 1 else ""
        if before in (";", "{", "}", "(", ",", "const", "::", "<") or before == "" or tokens[k - 2].kind == "ident":
            return False  # `float* p`, `const T* q`: a declarator
    return True

