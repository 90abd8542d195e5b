"""Which names of one host C++ function hold a tensor. Not a rule file.

A name holds a tensor when it is declared `Tensor` / `at::Tensor` / `TensorBase` (or a
container of them: `std::vector<at::Tensor> v`, whose `v[i]` is one), or is an `auto` / Python
object (`py::object`, `py::handle`, `PyObject*`) that is
- assigned a tensor value: a tensor name (bare, indexed, or through a tensor-returning method
  `x.t()`), an `at::` / `torch::` call, `py::cast(tensor)`, `THPVariable_Wrap(...)`, or an
  operator on a tensor;
- cast to one (`o.cast<torch::Tensor>()`, `THPVariable_Unpack(o)`);
- assigned the result of an operator whose result holds a tensor (`scaled = acc * s` with
  `scaled.cast<torch::Tensor>()`: `acc` was one, or `s`: either way the operator is torch's).
Names declared with any other type (`float* acc`, `const int64_t n`) never hold one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional

from gatekeeper.static.cpp_functions import CppFunction
from gatekeeper.static.cpp_tokens import Token, match_close

_TENSOR_TYPES = frozenset({"Tensor", "TensorBase", "TensorList", "variable_list", "tensor_list"})
_PY_TYPES = frozenset({"object", "handle", "PyObject"})
# calls whose result is their argument's value (so a tensor argument makes a tensor)
_PASS_THROUGH = frozenset({"cast", "move", "forward", "reinterpret_steal", "reinterpret_borrow", "THPVariable_Wrap",
                           "THPVariable_Unpack", "Py_NewRef", "Py_XNewRef"})
_OPERATORS = frozenset({"+", "-", "*", "/"})
_ITERATORS = frozenset({"begin", "end", "cbegin", "cend", "rbegin", "rend"})
_NUMBER_READS = ("PyLong_As", "PyFloat_As", "PyNumber_Index", "PyNumber_Long", "PyNumber_Float", "PyBool_Check",
                 "PyLong_Check", "PyFloat_Check")
_NUMBER_MAKERS = ("PyLong_From", "PyFloat_From", "PyBool_From", "Py_BuildValue", "PyUnicode_From")
_PY_NUMBERS = frozenset({"int_", "float_", "bool_", "str", "none"})
_STARTS = frozenset({"=", "(", ",", "return", "+", "-", "*", "/", "?", ":", "{"})


@dataclass
class TensorNames:
    tokens: list[Token]
    returns_tensor: Callable[[str], bool]
    kinds: dict[str, str] = field(default_factory=dict)  # name -> tensor | py | auto | other
    tensors: set[str] = field(default_factory=set)
    numbers: set[str] = field(default_factory=set)  # Python objects shown to hold no tensor

    @classmethod
    def of(cls, tokens: list[Token], fn: CppFunction, returns_tensor: Callable[[str], bool]) -> "TensorNames":
        self = cls(tokens, returns_tensor)
        start = _params_open(tokens, fn.body_start)
        assigns: list[tuple[str, int, int]] = []  # (name, first, last) of `name = expr`
        pending: dict[int, str] = {}  # `auto a = x.t(), b = y.t();`: b is declared as a was
        for k in range(start, fn.body_end):
            tok = tokens[k]
            if tok.kind != "ident" or k + 1 >= len(tokens):
                continue
            nxt = tokens[k + 1].text
            kind = None
            if nxt in ("=", ";", ",", ")", "{", "[") and tokens[k - 1].text not in (".", "->", "::"):
                kind = pending.get(k) or self._declared(k)
                if kind is not None and tok.text not in self.kinds:
                    self.kinds[tok.text] = kind
                elif kind == "other":  # a lambda's `float* output` shadows the tensor `output`: not known to hold one
                    self.kinds[tok.text] = kind
            if nxt == "=" and tokens[k - 1].text not in (".", "->", "::"):
                last = _expr_end(tokens, k + 2, fn.body_end)
                assigns.append((tok.text, k + 2, last))
                if kind is not None and last + 2 < fn.body_end and tokens[last + 1].text == ",":
                    j = last + 2
                    while j < fn.body_end and tokens[j].text in ("*", "&"):
                        j += 1
                    pending[j] = kind
            if nxt == "." and k + 2 < len(tokens) and tokens[k + 2].text == "cast" and tokens[k + 3].text == "<":
                (self.tensors if self._casts_to_tensor(k + 3) else self.numbers).add(tok.text)
            if tok.text == "THPVariable_Unpack" and nxt == "(" and tokens[k + 2].kind == "ident":
                self.tensors.add(tokens[k + 2].text)
            if tok.text.startswith(_NUMBER_READS) and nxt == "(" and tokens[k + 2].kind == "ident":
                self.numbers.add(tokens[k + 2].text)  # `PyLong_AsLong(count)`: a Python number
        for name, first, _ in assigns:  # `n = PyLong_FromLong(4)`, `s = py::float_(2.0)`: Python numbers
            texts = [t.text for t in tokens[first:first + 3]]
            if texts[0].startswith(_NUMBER_MAKERS) or (texts[1:2] == ["::"] and texts[2:3] and texts[2] in _PY_NUMBERS):
                self.numbers.add(name)
        self.tensors |= {n for n, kind in self.kinds.items() if kind == "tensor"}
        self.tensors = {n for n in self.tensors if self.kinds.get(n) in ("tensor", "py", "auto")}
        for _ in range(4):  # to a fixed point (a few steps are enough for straight-line code)
            before = len(self.tensors)
            for name, first, last in assigns:
                if self.kinds.get(name) not in ("py", "auto"):
                    continue
                if name not in self.tensors and self._tensor_expr(first, last):
                    self.tensors.add(name)
                elif name in self.tensors and self.kinds.get(name) == "py":
                    self._back(first, last)
            if len(self.tensors) == before:
                break
        return self

    def holds_tensor(self, name: str) -> bool:
        return name in self.tensors

    def _declared(self, k: int) -> Optional[str]:
        toks = self.tokens
        j = k - 1
        while j > 0 and toks[j].text in ("const", "&", "&&", "*", "volatile"):
            j -= 1
        prev = toks[j].text
        pointer = any(t.text == "*" for t in toks[j + 1:k])
        if prev in _TENSOR_TYPES and toks[j - 1].text != ".":
            return "other" if pointer else "tensor"  # `at::Tensor* out` is a pointer: `out + 1` is no op
        if prev in _PY_TYPES or (prev == "*" and toks[j - 1].text == "PyObject"):
            return "py"
        if prev == "auto":
            return "auto"
        if prev == ">":  # std::vector<at::Tensor> v; py::list? (a container of tensors indexes to one)
            k2 = j
            while k2 > 0 and k2 > j - 12 and toks[k2].text != "<":
                k2 -= 1
            return "tensor" if any(t.text in _TENSOR_TYPES for t in toks[k2:j]) else "other"
        if toks[j].kind == "ident" and prev not in ("return", "else", "case", "throw", "delete", "new"):
            return "other"
        return None

    def _casts_to_tensor(self, k: int) -> bool:
        """`.cast<torch::Tensor>()` with the `<` at k."""
        toks = self.tokens
        if k >= len(toks) or toks[k].text != "<":
            return False
        return any(t.text in _TENSOR_TYPES for t in toks[k:k + 6] if t.text not in (">",)) and \
            any(t.text == ">" for t in toks[k:k + 7])

    def _tensor_expr(self, first: int, last: int) -> bool:
        toks = self.tokens
        for k in self._operands(first, last):
            text = toks[k].text
            if text in self.tensors and self._tensor_valued(k, last) is not None:
                return True
            if text in ("at", "torch") and k == first and _tensor_call(toks, k, last):
                return True
            if text == "THPVariable_Wrap":
                return True
        return False

    def _operands(self, first: int, last: int) -> Iterator[int]:
        """Identifiers that are operands of the expression first..last (at top level, or an
        argument of a call that hands its argument's value back): not `rows(x)` of an own
        helper. One pass (a long initialiser must not cost its square)."""
        toks = self.tokens
        stack: list[bool] = []
        blocked = 0
        for k in range(first, last + 1):
            tok = toks[k]
            if tok.text == "(":
                name = toks[k - 1].text if toks[k - 1].kind == "ident" else ""
                passes = name == "" or name in _PASS_THROUGH or name.startswith("PyNumber_")
                stack.append(passes)
                blocked += not passes
            elif tok.text == ")" and stack:
                blocked -= not stack.pop()
            elif tok.kind == "ident" and not blocked and (k == first or toks[k - 1].text in _STARTS):
                yield k

    def _tensor_valued(self, k: int, last: int) -> Optional[int]:
        """The end of the postfix chain at k when it keeps a tensor (`x`, `x[r]`, `x.t()`)."""
        toks = self.tokens
        j = k + 1
        while j <= last:
            text = toks[j].text
            if text == "[":
                j = match_close(toks, j) + 1
            elif text in (".", "->") and j + 1 <= last:
                method = toks[j + 1].text
                if not (self.returns_tensor(method) or (method == "cast" and self._casts_to_tensor(j + 2))):
                    return None
                j += 2
                if j <= last and toks[j].text == "<":
                    while j <= last and toks[j].text != ">":
                        j += 1
                    j += 1
                if j <= last and toks[j].text == "(":
                    j = match_close(toks, j) + 1
            else:
                break
        return j - 1

    def _back(self, first: int, last: int) -> None:
        """`scaled = acc * s` where `scaled` holds a tensor: the Python objects operated on do."""
        toks = self.tokens
        for k in self._operands(first, last):
            tok = toks[k]
            if self.kinds.get(tok.text) == "py":
                after = toks[k + 1].text if k + 1 <= last else ";"
                before = toks[k - 1].text if k > first else "="
                if after in _OPERATORS or before in _OPERATORS or after == "[" or (k == first and after in (";", ",")):
                    self.tensors.add(tok.text)

    def tensor_argument(self, open_: int) -> bool:
        """Some argument of the call whose `(` is at open_ starts with a tensor name (`parts.begin()`,
        `x`) or is an `at::` / `torch::` call (`torch::zeros_like(x)`)."""
        toks = self.tokens
        close = match_close(toks, open_)
        for j in range(open_ + 1, close):
            if toks[j - 1].text not in ("(", ","):
                continue
            if toks[j].text in ("at", "torch") and _tensor_call(toks, j, close - 1):
                return True
            if toks[j].text not in self.tensors:
                continue
            if toks[j + 1].text in (".", "->") and toks[j + 2].text in _ITERATORS:
                return True  # `parts.begin()`: a container of tensors
            end = self._tensor_valued(j, close - 1)
            if end is not None and toks[end + 1].text in (",", ")"):
                return True  # `x`, `x.t()`; not `x.data_ptr<float>()`
        return False

    def functor_on_tensors(self, k: int) -> bool:
        """`std::plus<at::Tensor>` (a tensor template argument), or `std::plus<>{}(a, b)` /
        `std::plus<>()(a, b)` called on a tensor."""
        toks = self.tokens
        j = k + 1
        if j < len(toks) and toks[j].text == "<":
            end = j
            while end < len(toks) and toks[end].text not in (">", ">>", ";"):
                end += 1
            if any(t.text in _TENSOR_TYPES for t in toks[j:end]):
                return True
            j = end + 1
        if j + 2 < len(toks) and toks[j].text in ("(", "{") and toks[j + 1].text in (")", "}") \
                and toks[j + 2].text == "(":
            return self.tensor_argument(j + 2)
        return False

    def operand_before(self, k: int) -> Optional[str]:
        """The name whose value is the left operand of the operator at k (`x`, `x[r]`)."""
        toks = self.tokens
        j = k - 1
        if toks[j].text == "]":
            depth = 0
            while j > 0:
                if toks[j].text == "]":
                    depth += 1
                elif toks[j].text == "[":
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            j -= 1
        if j < 1 or toks[j].kind != "ident" or toks[j - 1].text in (".", "->", "::"):
            return None
        return toks[j].text

    def operand_after(self, k: int) -> Optional[str]:
        """The name whose value is the right operand of the operator at k, when it holds a
        tensor (`x`, `x[r]`, `x.t()`) or is a Python object (`o`, `o[i]`)."""
        toks = self.tokens
        if k + 2 >= len(toks) or toks[k + 1].kind != "ident" or toks[k + 2].text in ("::", "("):
            return None
        name = toks[k + 1].text
        if name in self.tensors and self._tensor_valued(k + 1, len(toks) - 1) is not None:
            return name
        return name if self.kinds.get(name) == "py" and toks[k + 2].text not in (".", "->") else None

    def number_protocol_on_tensor(self, k: int) -> bool:
        """`PyNumber_X(a.ptr(), b)` at k: an operand or the result holds a tensor, or an operand
        is a Python object from the caller that nothing shows to be a number (in a benchmark of
        tensor ops, the caller's objects are tensors until shown otherwise)."""
        toks = self.tokens
        close = match_close(toks, k + 1)
        operands = [toks[j].text for j in range(k + 2, close)
                    if toks[j].kind == "ident" and toks[j - 1].text in ("(", ",")]
        return self.python_operands_may_be_tensors(k, operands)

    def python_operands_may_be_tensors(self, k: int, operands: list[str]) -> bool:
        result = self._assigned_at(k)
        if any(o in self.tensors for o in operands) or result in self.tensors:
            return True
        if result in self.numbers or any(o in self.numbers for o in operands):
            return False  # `count = PyNumber_FloorDivide(rows, panel)` read back as an int
        return any(self.kinds.get(o) == "py" for o in operands)

    def _assigned_at(self, k: int) -> str:
        """The name the statement holding token k assigns (`r = ...` / `py::object r = ...`), or ''."""
        toks = self.tokens
        j = k
        while j > 0 and toks[j].text not in (";", "{", "}"):
            j -= 1
        eq = [i for i in range(j + 1, k) if toks[i].text == "="]
        return toks[eq[0] - 1].text if eq and toks[eq[0] - 1].kind == "ident" else ""


# libtorch functions that return no tensor (sizes, options, streams, helpers)
_NOT_TENSOR_CALLS = ("get", "is", "check", "set", "ceil_div", "divup", "round_up", "device", "dtype", "numel",
                     "elementSize", "toString", "globalContext", "cuda", "autocast", "parallel", "make_")


# namespaces of libtorch whose functions return streams, SIMD vectors or helpers, not tensors
_NOT_TENSOR_NAMESPACES = frozenset({"cuda", "vec", "indexing", "detail", "utils", "cpublas", "hip", "mps"})


def _tensor_call(toks: list[Token], k: int, last: int) -> bool:
    """`at::zeros_like(x)`, `torch::mm(a, b)`: a libtorch call at k that returns a tensor."""
    j, name = k, ""
    while j + 2 <= last and toks[j + 1].text == "::" and toks[j + 2].kind == "ident":
        j += 2
        name = toks[j].text
        if name in _NOT_TENSOR_NAMESPACES:
            return False
    return bool(name) and name[:1].islower() and not name.startswith(_NOT_TENSOR_CALLS) and \
        j + 1 <= last and toks[j + 1].text in ("(", "<")


def _params_open(tokens: list[Token], body_start: int) -> int:
    """Index of the `(` that opens the parameter list of the function whose body opens at body_start."""
    j = body_start - 1
    while j > 0 and tokens[j].text != ")":
        j -= 1
    depth = 0
    while j > 0:
        if tokens[j].text == ")":
            depth += 1
        elif tokens[j].text == "(":
            depth -= 1
            if depth == 0:
                return j
        j -= 1
    return body_start


def _expr_end(tokens: list[Token], first: int, limit: int) -> int:
    """Last token of the expression starting at first (to a top-level `,` or `;`)."""
    depth = 0
    for j in range(first, limit):
        text = tokens[j].text
        if text in ("(", "[", "{"):
            depth += 1
        elif text in (")", "]", "}"):
            if depth == 0:
                return j - 1
            depth -= 1
        elif text in (",", ";") and depth == 0:
            return j - 1
    return limit - 1
