"""ATen reached from C++ by spellings other than a direct `at::f(` call. Not a rule file.

`scan_cpp` (cpp_torch_calls.py) finds `at::matmul(`; this finds the other ways C++ makes
torch do the work, each an invariant rather than a list of hacks:

- a reference to an ATen compute function that is not called where it is named: its address
  (`&at::addmm`), or its name as a whole value (`auto f = at::relu_;`,
  `std::function<...> g = at::mm;`, `apply(at::mm, a, b)`): a function pointer to ATen is
  ATen doing the work when it is called;
- (macros that build an ATen name, `#define ATEN(n) at::n` then `ATEN(addmm)(...)`, are
  expanded before the scan: static/cpp_names.py;)
- (an operator looked up through the dispatcher by name is cpp_dispatcher_reach.py;)
- TorchScript run from C++ (`torch::jit::compile`, `torch::jit::load`): the denied list of
  torch_ops.toml makes these compute calls;
- (torch reached through Python from C++, pybind11 or the CPython API, is cpp_python_reach.py.)

The tokenizer drops string literals, so op names are read back from `source.text`.
"""

from __future__ import annotations

Reach = tuple[str, str, int, str]  # (kind "cpp", what, offset, op)

# Tokens after a name that end it as a value: `= at::mm;`, `f(at::mm, x)`, `{at::mm}`.
_VALUE_END = frozenset({";", ",", ")", "}", "]", ":", "?"})
# Tokens before a name that start a value: assignment, argument, initialiser, return.
_VALUE_START = frozenset({"=", "(", ",", "{", "return", "?", ":", "["})


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
