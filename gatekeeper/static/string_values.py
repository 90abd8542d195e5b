"""String literals and the names bound to them, for the name resolver (names.py) and what
it calls (name_folds.py): one module below both, so neither imports the other back."""

from __future__ import annotations

from typing import Any, Optional, Protocol

import libcst as cst


class Resolver(Protocol):
    """What these helpers need of names.NameResolver."""

    def lookup(self, name: str) -> Any: ...

    def qualname(self, expr: Optional[cst.BaseExpression]) -> Optional[str]: ...


def string_value(expr: cst.BaseExpression) -> Optional[str]:
    """The value of a str literal (or implicit concatenation), else None. libcst's
    `evaluated_value` runs `ast.literal_eval` (a compile per call); plain literals without
    escapes are sliced directly."""
    if type(expr) is cst.SimpleString:
        raw = expr.value
        prefix = expr.prefix.lower()
        if "b" in prefix:
            return None
        body = raw[len(expr.prefix) + len(expr.quote) : -len(expr.quote)]
        if "r" in prefix or "\\" not in body:
            return body
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    if type(expr) is cst.ConcatenatedString:
        left, right = string_value(expr.left), string_value(expr.right)  # type: ignore[arg-type]
        return left + right if left is not None and right is not None else None
    return None


def bound_string(resolver: Resolver, expr: cst.BaseExpression) -> Optional[str]:
    """A str literal, or what a name bound to one holds (`_OP = "matmul"`), or an entry of a
    dict display with literal keys (`CFG["op"]`): `getattr(A, _OP)` names `A.matmul` as
    surely as `getattr(A, "matmul")` does (red team round 9)."""
    value = string_value(expr)
    if value is not None:
        return value
    if type(expr) is cst.Name:
        binding = resolver.lookup(expr.value)
        if binding is not None and binding.kind == "local" and binding.value is not None:
            return string_value(binding.value)
    if type(expr) is cst.Subscript and type(expr.value) is cst.Name and len(expr.slice) == 1 \
            and type(expr.slice[0].slice) is cst.Index:
        binding = resolver.lookup(expr.value.value)
        key = string_value(expr.slice[0].slice.value)
        if key is not None and binding is not None and binding.kind == "local" and type(binding.value) is cst.Dict:
            for element in binding.value.elements:
                if type(element) is cst.DictElement and string_value(element.key) == key:
                    return string_value(element.value)
    return None
