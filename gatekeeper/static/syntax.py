"""Small questions about Python syntax that rules and analyses share: which argument of a call,
which storage an assignment target names, whether code sits under the `__main__` guard.

One definition each, so two rules never disagree on what `f(x, y=2)`'s second argument is.
"""

from __future__ import annotations

from typing import Iterable, Optional, Protocol

import libcst as cst

from gatekeeper.static.names import string_value


class _Parents(Protocol):
    # The part of FileContext in_main_guard needs; a Protocol keeps this module below context.py.
    def ancestors(self, node: cst.CSTNode) -> Iterable[cst.CSTNode]: ...


def argument(call: cst.Call, position: Optional[int], keyword: Optional[str] = None) -> Optional[cst.BaseExpression]:
    """The argument passed at `position` (0-based, positional only) or as `keyword=`, else None.
    A `*args` at or before the position hides which value lands there, so that gives None too."""
    index = 0
    for arg in call.args:
        if arg.keyword is not None:
            if keyword is not None and arg.keyword.value == keyword:
                return arg.value
            continue
        if arg.star == "**":
            continue
        if arg.star:
            if position is not None and index <= position:
                position = None  # unknowable from here on; a keyword may still match
            continue
        if position is not None and index == position:
            return arg.value
        index += 1
    return None


def is_self_attr(expr: cst.BaseExpression) -> bool:
    """`self.x`."""
    return type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self"


def self_attr(expr: cst.BaseExpression) -> Optional[str]:
    """"self.x" for the expression `self.x`, else None: the key analyses store an instance
    attribute's contents under."""
    return f"self.{expr.attr.value}" if is_self_attr(expr) else None  # type: ignore[attr-defined]


def class_attr_root(expr: cst.BaseExpression) -> bool:
    """`type(self)` or `self.__class__`: the instance's class, shared by every instance."""
    if type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value == "type" and len(expr.args) == 1:
        arg = expr.args[0].value
        return type(arg) is cst.Name and arg.value == "self"
    return is_self_attr(expr) and expr.attr.value == "__class__"  # type: ignore[attr-defined]


def class_attr(expr: cst.BaseExpression) -> Optional[str]:
    """"type(self).x" for `type(self).x` / `self.__class__.x`, "K.x" for `K.x` with K a bare
    name: the key a class's (or a function's) attribute is stored under."""
    if type(expr) is not cst.Attribute:
        return None
    if class_attr_root(expr.value):
        return f"type(self).{expr.attr.value}"
    if type(expr.value) is cst.Name and expr.value.value != "self":
        return f"{expr.value.value}.{expr.attr.value}"
    return None


def store_key(target: cst.BaseExpression) -> Optional[str]:
    """The storage a plain assignment target names: `x` -> "x", `self.x` -> "self.x",
    `K.x` -> "K.x" (a class's or function's attribute), `type(self).x` -> "type(self).x"."""
    if type(target) is cst.Name:
        return target.value
    return self_attr(target) or class_attr(target)


def in_main_guard(ctx: _Parents, node: cst.CSTNode) -> bool:
    """Inside `if __name__ == "__main__":`, a self-test the harness never runs. Walks the
    parents, so call it only for a node about to be reported."""
    for parent in ctx.ancestors(node):
        if type(parent) is cst.If and type(parent.test) is cst.Comparison:
            test = parent.test
            if (type(test.left) is cst.Name and test.left.value == "__name__"
                    and len(test.comparisons) == 1
                    and string_value(test.comparisons[0].comparator) == "__main__"):  # type: ignore[arg-type]
                return True
    return False
