"""Does the submission's own kernel do real work on the forward path? Not a rule file.

Two questions the torch-fallback policy asks after the traversal:

- token launches: a kernel launched only on a constant sliver of the data (`k[(1,)](x[:1],
  y[:1], 1)`, `_ext.f(x[0])`, `_ext.warmup()`, `_ext.f(torch.empty(1))`) is decoration: the
  work being timed is torch's. A launch is real when one argument reads a forward value
  whole (a parameter, `self.weight`, a local computed from them, a size derived from them).
- torch does the whole op: with the problem at hand, torch's uses on the forward path
  cover every op family the reference computes (`nn.Linear` is `matmul`, so `x @ w.t()`
  covers it). The own kernel then computes nothing the reference asks for.
"""

from __future__ import annotations

from collections import Counter
from typing import Optional

import libcst as cst

from gatekeeper.analyses.torch_policy_table import policy
from gatekeeper.analyses.problem_ops import problem_ops
from gatekeeper.analyses.torch_usage_model import Kernel, UsageFacts, Use
from gatekeeper.static.python_ast import on_forget
from gatekeeper.static.walk import walk


_ALLOCATORS = frozenset({"empty", "zeros", "ones", "full", "tensor", "randn", "rand", "empty_strided"})


def is_token_launch(usage: UsageFacts, kernel: Kernel) -> bool:
    node = kernel.node
    if type(node) is not cst.Call:
        return False
    function = next((p for p in kernel.path if type(p) is cst.FunctionDef), None)
    return all(_sliver(usage, arg.value, function, 0) for arg in node.args)


def _sliver(usage: UsageFacts, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int) -> bool:
    """A value that does not depend on the data as a whole: a constant, a constant-index
    slice of something, a freshly allocated constant-size tensor, or a local bound only to those."""
    if depth > 4:
        return False
    if type(expr) in (cst.Integer, cst.Float, cst.SimpleString):
        return True
    if type(expr) is cst.Name:
        if expr.value in ("True", "False", "None"):
            return True
        values = _local_values(function, expr.value)
        return bool(values) and all(_sliver(usage, v, function, depth + 1) for v in values)
    if type(expr) is cst.Subscript:
        return _constant_slice(expr)
    if type(expr) is cst.Call:
        qual = usage.ctx.qualname(expr.func) or ""
        if qual.startswith("torch.") and qual.rsplit(".", 1)[-1] in _ALLOCATORS:
            return all(type(a.value) in (cst.Integer, cst.Tuple, cst.List) and _literal(a.value)
                       for a in expr.args if a.keyword is None)
        if type(expr.func) is cst.Attribute and expr.func.attr.value in ("contiguous", "cuda", "float", "to"):
            return _sliver(usage, expr.func.value, function, depth + 1)
    return False


def _literal(expr: cst.BaseExpression) -> bool:
    if type(expr) is cst.Integer:
        return True
    if type(expr) in (cst.Tuple, cst.List):
        return all(type(e.value) is cst.Integer for e in expr.elements)
    return False


_SLIVER = 16  # at most this many rows / columns: a sample, not the data


def _constant_slice(expr: cst.Subscript) -> bool:
    """`x[:1]`, `x[0:8]`, `x[..., :4]`: a slice with constant bounds at most _SLIVER wide,
    every other element `:` or `...`. A constant index (`qkv[:, 0]`, `x[0]`) is not one:
    honest code splits q/k/v or real/imaginary parts that way and hands every part over."""
    narrowed = False
    for element in expr.slice:
        index = element.slice
        if type(index) is cst.Index:
            if type(index.value) is not cst.Ellipsis:
                return False
        elif type(index) is cst.Slice:
            if index.step is not None:
                return False
            if index.lower is None and index.upper is None:
                continue
            bounds = [_int(b) for b in (index.lower, index.upper)]
            if index.upper is None or None in [b for b, e in zip(bounds, (index.lower, index.upper)) if e is not None]:
                return False
            width = (bounds[1] or 0) - (bounds[0] or 0)
            if not 0 < width <= _SLIVER:
                return False
            narrowed = True
    return narrowed


def _int(expr: Optional[cst.BaseExpression]) -> Optional[int]:
    if type(expr) is cst.Integer:
        try:
            return int(expr.value.replace("_", ""), 0)
        except ValueError:
            return None
    return None


def _local_values(function: Optional[cst.FunctionDef], name: str) -> list[cst.BaseExpression]:
    """The values assigned to local `name` in `function`, in order; [] for a parameter or a
    name also bound by unpacking, `+=` or a for loop (not followed)."""
    if function is None:
        return []
    params = function.params
    if any(p.name.value == name for p in (*params.posonly_params, *params.params, *params.kwonly_params)):
        return []  # a parameter: the caller's data
    values, unfollowed = _assignments(function)
    return [] if name in unfollowed else values.get(name, [])


_ASSIGNMENTS: dict[int, tuple[cst.FunctionDef, dict[str, list[cst.BaseExpression]], set[str]]] = {}


def _assignments(function: cst.FunctionDef) -> tuple[dict[str, list[cst.BaseExpression]], set[str]]:
    """One walk of the body per function (a launch asks for each of its arguments): the
    values assigned to each plain name, and the names bound in ways not followed."""
    hit = _ASSIGNMENTS.get(id(function))
    if hit is not None and hit[0] is function:
        return hit[1], hit[2]
    values: dict[str, list[cst.BaseExpression]] = {}
    unfollowed: set[str] = set()
    for entering, node in walk(function.body):
        if not entering:
            continue
        if type(node) is cst.Assign:
            for target in node.targets:
                if type(target.target) is cst.Name:
                    values.setdefault(target.target.value, []).append(node.value)
                elif type(target.target) not in (cst.Attribute, cst.Subscript):
                    unfollowed.update(_names_in(target.target))
        elif type(node) in (cst.AugAssign, cst.For):
            unfollowed.update(_names_in(node.target))
    if len(_ASSIGNMENTS) >= 256:
        _ASSIGNMENTS.clear()
    _ASSIGNMENTS[id(function)] = (function, values, unfollowed)
    return values, unfollowed


def _names_in(target: cst.BaseExpression) -> list[str]:
    return [n.value for _, n in walk(target) if type(n) is cst.Name]


on_forget(_ASSIGNMENTS.clear)  # entries hold the file's nodes


def torch_does_whole_op(usage: UsageFacts) -> bool:
    """Torch's uses on the forward path cover every op family the reference computes, at
    least as many times as the reference writes it (a reference with two Mish calls is not
    covered by one torch Mish next to a kernel that does the other)."""
    reference = problem_ops(usage.ctx.problem).reference
    if not reference:
        return False
    table = policy()
    done: Counter[str] = Counter(table.family(u.op) for u in usage.uses
                                 if u.fallback is None and not cpp_fallback(u))
    return all(done[family] >= count for family, count in reference.items())


def cpp_fallback(use: Use) -> bool:
    """A C++ torch / vendor call on one branch of a choice made at run time, in a source
    that also launches a kernel (`<<<`): `return torch::mean(x, dim);` as the other return
    path, or `if (K <= 64) { k<<<...>>>(...); } else { cublasSgemm(...); }`. Which branch
    runs depends on the shapes, so it never counts towards "torch does every op"."""
    if use.cpp is None:
        return False
    source, offset = use.cpp
    text = source.text
    if "<<<" not in text:
        return False
    if text[max(0, offset - 200):offset].rstrip().endswith("return"):
        return True
    return _in_conditional_block(text, offset)


def _in_conditional_block(text: str, offset: int) -> bool:
    """The innermost `{ ... }` around `offset` is the body of an `if (...)` or an `else`."""
    depth = 0
    i = offset - 1
    while i >= 0:
        ch = text[i]
        if ch == "}":
            depth += 1
        elif ch == "{":
            if depth == 0:
                break
            depth -= 1
        i -= 1
    if i < 0:
        return False
    head = text[max(0, i - 300):i].rstrip()
    if head.endswith("else"):
        return True
    if not head.endswith(")"):
        return False
    parens = 0
    for j in range(len(head) - 1, -1, -1):
        if head[j] == ")":
            parens += 1
        elif head[j] == "(":
            parens -= 1
            if parens == 0:
                return head[:j].rstrip().endswith("if")
    return False


def helper_launches(usage: UsageFacts, forward: list[Kernel], dropped: list[Kernel]) -> list[Kernel]:
    """Calls of a helper of the file that launches a kernel (`self._run_kernel(x)`,
    `launch(x)`) are launches too, where they are called: fallbacks and data flow in
    forward see them."""
    helpers = {k.function.rsplit(".", 1)[-1] for k in forward if k.function != "<module>"}
    # autograd Functions whose forward launches: `Fn.apply(x)`
    functions = {k.function.rsplit(".", 2)[-2] for k in forward if k.function.endswith(".forward")}
    helpers -= {"forward", "__call__"}
    if not helpers and not functions:
        return []
    out = [Kernel(f"self.{attr}", key, (), node) for attr, node, key, _ in usage.self_calls
           if attr in helpers and usage.in_forward(key)]
    out += [Kernel(k.what, k.function, (), k.node) for k in dropped if usage.in_forward(k.function) and (
        k.needs_def in helpers or (k.needs_ext is not None and k.needs_ext[1] == "apply" and k.needs_ext[0] in functions))]
    return out

