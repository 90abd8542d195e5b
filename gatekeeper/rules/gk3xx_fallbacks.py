"""Which torch uses sit on a fallback path: the other branch of an if/else or try/except
whose main branch launches the submission's own kernel.

Not a rule file: it defines no rule with a `code`. Covered shapes:

    try: return ext.f(x)            if x.is_cuda: return ext.f(x)     if ok: y = k[grid](x)
    except Exception:               return x.mean(0)                  else:  y = x.mean(0)
        return x.mean(0)

The branch with torch compute is the fallback when a sibling branch of the same statement
calls an own kernel, or, for an `if`/`try` without `else` whose body returns, when the
kernel and the torch code sit on the two sides of that early return.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Optional

import libcst as cst

from gatekeeper.static.walk import walk

if TYPE_CHECKING:
    from gatekeeper.rules.gk3xx_torch_usage import Kernel, TorchUsage, Use

_INPUT_MARKERS = frozenset({
    "shape", "size", "numel", "dim", "ndim", "ndimension", "nelement", "stride", "dtype",
    "is_contiguous", "len", "data_ptr", "element_size", "storage_offset",
})
_DEVICE_MARKERS = frozenset({"is_cuda", "device", "is_available", "is_cpu", "device_count", "is_xpu", "is_mps"})


@dataclass
class Fallback:
    kind: str  # try | if
    node: cst.CSTNode  # the Try / If / IfExp statement
    condition: str  # exception | input | device | flag | dead
    kernel: str  # the own kernel on the other path


def _slot(child: cst.CSTNode, parent: cst.CSTNode) -> Optional[str]:
    if isinstance(parent, (cst.If, cst.IfExp)):
        if child is parent.body:
            return "body"
        if child is parent.orelse:
            return "orelse"
        return None  # the test
    if isinstance(parent, cst.Try):
        if child is parent.body:
            return "body"
        if any(child is h for h in parent.handlers):
            return "handler"
    return None


def _slots(path: Iterable[cst.CSTNode]) -> list[tuple[cst.CSTNode, str]]:
    """(statement, slot) for each if/try the node sits in, innermost first."""
    out = []
    items = list(path)
    for child, parent in zip(items, items[1:]):
        slot = _slot(child, parent)
        if slot is not None:
            out.append((parent, slot))
    return out


def _returns(block: cst.BaseSuite) -> bool:
    body = getattr(block, "body", ())
    if not body:
        return False
    last = body[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)
    return False


def condition_of(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Try):
        return "exception"
    test = getattr(node, "test", None)
    if test is None:
        return "flag"
    words: set[str] = set()
    for entering, sub in walk(test):
        if not entering:
            continue
        if isinstance(sub, cst.Name):
            words.add(sub.value)
        elif isinstance(sub, cst.Attribute):
            words.add(sub.attr.value)
    if words & _INPUT_MARKERS:
        return "input"
    if words & _DEVICE_MARKERS:
        return "device"
    return "flag"


def _following(usage: "TorchUsage", stmt: cst.CSTNode) -> set[int]:
    block = usage.ctx.parent(stmt)
    body = getattr(block, "body", None)
    if not isinstance(body, (list, tuple)):
        return set()
    for index, item in enumerate(body):
        if item is stmt:
            return {id(s) for s in body[index + 1 :]}
    return set()


def find_fallbacks(usage: "TorchUsage") -> None:
    """Mark `use.fallback` on every Python use that sits on a fallback path."""
    kernels: dict[int, list[tuple[str, "Kernel"]]] = {}
    for kernel in usage.kernels:
        for stmt, slot in _slots(kernel.path):
            kernels.setdefault(id(stmt), []).append((slot, kernel))
    uses = [u for u in usage.uses if u.node is not None]
    for use in uses:
        for stmt, slot in _slots(use.path):
            others = [k for s, k in kernels.get(id(stmt), []) if s != slot and not (s == "handler" and slot == "body")]
            if others and (isinstance(stmt, (cst.If, cst.IfExp)) or slot == "handler"):
                if not any(s == slot for s, _ in kernels.get(id(stmt), [])):
                    use.fallback = _make(usage, stmt, others[0], kernel_in_body=slot != "body")
                    break
    _early_returns(usage, uses)


def _make(usage: "TorchUsage", stmt: cst.CSTNode, kernel: "Kernel", *, kernel_in_body: bool) -> Fallback:
    condition = condition_of(stmt)
    test = getattr(stmt, "test", None)
    truth = _constant_truth(usage, test, 0) if test is not None else None
    if truth is not None and truth != kernel_in_body:
        condition = "dead"  # the condition is fixed and selects the torch path: the kernel never runs
    return Fallback("try" if isinstance(stmt, cst.Try) else "if", stmt, condition, kernel.what)


def _constant_truth(usage: "TorchUsage", expr: cst.BaseExpression, depth: int) -> Optional[bool]:
    """The truth of a condition fixed when the file is written: literals, `not`, `and`/`or`,
    and module constants assigned once (`USE_KERNEL = False`)."""
    if depth > 8:
        return None
    if isinstance(expr, cst.Name):
        if expr.value in ("True", "False", "None"):
            return expr.value == "True"
        values = usage.ctx.constants.get(expr.value, [])
        return _constant_truth(usage, values[0], depth + 1) if len(values) == 1 else None
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.value.replace("_", "")) != 0
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = _constant_truth(usage, expr.expression, depth + 1)
        return None if inner is None else not inner
    if isinstance(expr, cst.BooleanOperation):
        left = _constant_truth(usage, expr.left, depth + 1)
        right = _constant_truth(usage, expr.right, depth + 1)
        if isinstance(expr.operator, cst.And):
            return False if False in (left, right) else (True if left and right else None)
        return True if True in (left, right) else (False if left is False and right is False else None)
    return None


def _early_returns(usage: "TorchUsage", uses: list["Use"]) -> None:
    """`if/try` without else whose body returns: the code after it is the other branch."""
    candidates: dict[int, cst.CSTNode] = {}
    for item in [*usage.kernels, *uses]:
        for stmt, slot in _slots(item.path):
            if slot == "body" and isinstance(stmt, (cst.If, cst.Try)) and _returns(stmt.body):
                if isinstance(stmt, cst.If) and stmt.orelse is not None:
                    continue
                candidates[id(stmt)] = stmt
    for stmt in candidates.values():
        after = _following(usage, stmt)
        if not after:
            continue
        inside_k = [k for k in usage.kernels if any(p is stmt.body for p in k.path)]
        after_k = [k for k in usage.kernels if any(id(p) in after for p in k.path)]
        for use in uses:
            if use.fallback is not None:
                continue
            in_body = any(p is stmt.body for p in use.path)
            is_after = any(id(p) in after for p in use.path)
            if is_after and inside_k and not after_k:
                use.fallback = _make(usage, stmt, inside_k[0], kernel_in_body=True)
            elif in_body and after_k and isinstance(stmt, cst.If) and not inside_k:
                use.fallback = _make(usage, stmt, after_k[0], kernel_in_body=False)
