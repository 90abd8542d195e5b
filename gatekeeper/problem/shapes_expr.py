"""The expression half of the shapes.py evaluator (gatekeeper.problem.shapes_eval).

`Expressions.value(node)` evaluates one `ast` expression over the names bound so far:
constants, arithmetic, comparisons, displays with `*`/`**` unpacking, subscripts and
slices, calls of a few pure builtins (`range`, `min`, `max`, `zip`, `dict`, ...) and of
`itertools`/`math` functions, and comprehensions. Anything else is an `Opaque` value that
carries why and where. Work is bounded: `OverBudget` ends the read when a file asks for more.
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable

MAX_STEPS = 200_000  # expression nodes evaluated per file
MAX_ITEMS = 100_000  # elements in one container or iteration
MAX_INT_BITS = 128  # larger integers are not sizes; stop before a power tower eats memory


@dataclass(frozen=True)
class Opaque:
    """A value the evaluator cannot know statically, and why."""

    reason: str
    line: int = 0

    def where(self) -> str:
        return f"{self.reason} (line {self.line})" if self.line else self.reason


class OverBudget(Exception):
    pass


BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Div: operator.truediv, ast.Pow: operator.pow, ast.BitOr: operator.or_,
    ast.BitAnd: operator.and_, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_PURE = (int, float, str, bool, type(None), tuple, list, dict, set, frozenset, range)


def _sorted(items: Any, reverse: bool = False) -> list:
    return sorted(items, reverse=reverse)


# Builtins and module functions that are pure and cheap on the values above.
_BUILTINS: dict[str, Callable[..., Any]] = {
    "range": range, "min": min, "max": max, "len": len, "abs": abs, "int": int, "float": float, "sum": sum,
    "list": list, "tuple": tuple, "dict": dict, "set": set, "zip": zip, "enumerate": enumerate,
    "sorted": _sorted, "reversed": reversed, "round": round, "bool": bool, "str": str, "divmod": divmod,
}
MODULES: dict[str, dict[str, Callable[..., Any]]] = {
    "itertools": {"product": itertools.product, "chain": itertools.chain},
    "math": {"prod": math.prod, "ceil": math.ceil, "floor": math.floor, "gcd": math.gcd, "log2": math.log2,
             "isqrt": math.isqrt},
}
_METHODS = {"copy", "items", "keys", "values", "get", "index", "count"}


class KnownModule:
    """A module the evaluator knows (`import itertools`)."""

    def __init__(self, name: str) -> None:
        self.name = name



class Expressions:
    """Evaluates expressions over `names`; `bind` binds a comprehension's target."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {}
        self.steps = 0

    def bind(self, target: ast.expr, value: Any, stmt: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            parts = list(value) if isinstance(value, (tuple, list)) and len(value) == len(target.elts) else None
            for index, element in enumerate(target.elts):
                self.bind(element, parts[index] if parts is not None else
                          (value if isinstance(value, Opaque) else Opaque("an unpacking", stmt.lineno)), stmt)
        else:
            self.names["<unknown target>"] = Opaque("an assignment target", stmt.lineno)

    def value(self, node: ast.expr) -> Any:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise OverBudget
        method = getattr(self, "e_" + type(node).__name__, None)
        if method is None:
            return Opaque(f"a `{type(node).__name__}` expression", getattr(node, "lineno", 0))
        return method(node)

    def e_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def e_Name(self, node: ast.Name) -> Any:
        if node.id in self.names:
            return self.names[node.id]
        if node.id in _BUILTINS:
            return _BUILTINS[node.id]
        return Opaque(f"`{node.id}`, not bound in the file", node.lineno)

    def e_BinOp(self, node: ast.BinOp) -> Any:
        return self.apply(BINOPS.get(type(node.op)), self.value(node.left), self.value(node.right), node)

    def apply(self, op: Callable[[Any, Any], Any] | None, left: Any, right: Any, node: ast.AST) -> Any:
        for side in (left, right):
            if isinstance(side, Opaque):
                return side
        line = getattr(node, "lineno", 0)
        if op is None:
            return Opaque("an operator", line)
        if op is operator.pow and isinstance(right, int) and (abs(right) > MAX_INT_BITS or
                                                              (isinstance(left, int) and abs(left) > 2 ** 16)):
            return Opaque("a power too large to be a size", line)
        if op in (operator.lshift,) and isinstance(right, int) and right > MAX_INT_BITS:
            return Opaque("a shift too large to be a size", line)
        if op is operator.mul and isinstance(left, (list, tuple, str)) != isinstance(right, (list, tuple, str)):
            count = right if isinstance(left, (list, tuple, str)) else left
            if isinstance(count, int) and count * max(1, len(left if count is right else right)) > MAX_ITEMS:
                raise OverBudget
        try:
            result = op(left, right)
        except (ArithmeticError, TypeError, ValueError):
            return Opaque("an expression that fails", line)
        self.check_size(result)
        return result

    def check_size(self, value: Any) -> None:
        if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            raise OverBudget
        if isinstance(value, (list, tuple, dict, set, str)) and len(value) > MAX_ITEMS:
            raise OverBudget

    def e_UnaryOp(self, node: ast.UnaryOp) -> Any:
        operand = self.value(node.operand)
        if isinstance(operand, Opaque):
            return operand
        ops = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
        try:
            return ops[type(node.op)](operand)
        except (KeyError, TypeError):
            return Opaque("an operator", node.lineno)

    def e_BoolOp(self, node: ast.BoolOp) -> Any:
        result: Any = None
        for element in node.values:
            result = self.value(element)
            if isinstance(result, Opaque) or (isinstance(node.op, ast.And) and not result) or \
                    (isinstance(node.op, ast.Or) and result):
                return result
        return result

    def e_Compare(self, node: ast.Compare) -> Any:
        left = self.value(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.value(right_node)
            outcome = self.apply(_COMPARE.get(type(op)), left, right, node)
            if isinstance(outcome, Opaque) or not outcome:
                return outcome
            left = right
        return True

    def e_IfExp(self, node: ast.IfExp) -> Any:
        test = self.value(node.test)
        if isinstance(test, Opaque):
            return test
        return self.value(node.body if test else node.orelse)

    def elements(self, nodes: list[ast.expr]) -> list[Any]:
        out: list[Any] = []
        for element in nodes:
            if isinstance(element, ast.Starred):
                inner = self.value(element.value)
                if isinstance(inner, Opaque):
                    out.append(inner)
                else:
                    out.extend(self.items(inner, element))
            else:
                out.append(self.value(element))
            self.check_size(out)
        return out

    def e_List(self, node: ast.List) -> Any:
        return self.elements(node.elts)

    def e_Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self.elements(node.elts))

    def e_Set(self, node: ast.Set) -> Any:
        values = self.elements(node.elts)
        opaque = next((v for v in values if isinstance(v, Opaque)), None)
        return opaque or set(values)

    def e_Dict(self, node: ast.Dict) -> Any:
        out: dict[Any, Any] = {}
        for key_node, value_node in zip(node.keys, node.values):
            value = self.value(value_node)
            if key_node is None:  # {**base, ...}
                if isinstance(value, Opaque):
                    return value
                if not isinstance(value, dict):
                    return Opaque("a `**` of a non-mapping", node.lineno)
                out.update(value)
                continue
            key = self.value(key_node)
            if isinstance(key, Opaque) or not _hashable(key):
                return key if isinstance(key, Opaque) else Opaque("an unhashable key", node.lineno)
            out[key] = value
        self.check_size(out)
        return out

    def e_Subscript(self, node: ast.Subscript) -> Any:
        container, key = self.value(node.value), self.value(node.slice)
        for part in (container, key):
            if isinstance(part, Opaque):
                return part
        if not isinstance(container, _PURE):
            return Opaque("an item of an unknown value", node.lineno)
        try:
            return container[key]
        except (IndexError, KeyError, TypeError, ValueError):
            return Opaque("an item that does not exist", node.lineno)

    def e_Slice(self, node: ast.Slice) -> Any:
        parts = [self.value(p) if p is not None else None for p in (node.lower, node.upper, node.step)]
        opaque = next((p for p in parts if isinstance(p, Opaque)), None)
        return opaque or slice(*parts)

    def e_Attribute(self, node: ast.Attribute) -> Any:
        base = self.value(node.value)
        if isinstance(base, KnownModule):
            function = MODULES[base.name].get(node.attr)
            return function or Opaque(f"`{base.name}.{node.attr}`", node.lineno)
        if isinstance(base, Opaque):
            return base
        if isinstance(base, (dict, list, tuple)) and node.attr in _METHODS:
            return getattr(base, node.attr)
        return Opaque(f"the attribute `{node.attr}`", node.lineno)

    def e_Call(self, node: ast.Call) -> Any:
        function = self.value(node.func)
        if isinstance(function, Opaque):
            return Opaque(f"a call of {function.reason}", node.lineno)  # the call's line, not the def's
        if not callable(function) or isinstance(function, KnownModule):
            return Opaque("a call of a value that is not a function", node.lineno)
        args = self.elements(node.args)
        kwargs: dict[str, Any] = {}
        for keyword in node.keywords:
            value = self.value(keyword.value)
            if keyword.arg is None:
                if not isinstance(value, dict):
                    return value if isinstance(value, Opaque) else Opaque("a `**` of a non-mapping", node.lineno)
                kwargs.update(value)
            else:
                kwargs[keyword.arg] = value
        for value in [*args, *kwargs.values()]:
            if isinstance(value, Opaque) and function is not dict and function is not list and function is not tuple:
                return value
        if function is range and any(isinstance(a, int) and abs(a) > 2 ** 62 for a in args):
            return Opaque("a range too large", node.lineno)
        for value in [*args, *kwargs.values()]:  # sum(range(10 ** 12)) must not run for hours
            if isinstance(value, (range, list, tuple, dict, set, str)) and len(value) > MAX_ITEMS:
                raise OverBudget
        try:
            result = function(*args, **kwargs)
        except (ArithmeticError, TypeError, ValueError, KeyError, IndexError):
            return Opaque("a call that fails", node.lineno)
        if isinstance(result, (zip, enumerate, reversed, itertools.product, itertools.chain, range,
                               type({}.items()), type({}.keys()), type({}.values()))):
            result = list(itertools.islice(result, MAX_ITEMS + 1))
        self.check_size(result)
        return result

    def comprehension(self, generators: list[ast.comprehension], emit: Callable[[], None]) -> None:
        def level(index: int) -> None:
            if index == len(generators):
                emit()
                return
            gen = generators[index]
            iterable = self.value(gen.iter)
            if isinstance(iterable, Opaque):
                raise _OpaqueComprehension(iterable)
            for item in self.items(iterable, gen.iter):
                self.bind(gen.target, item, ast.Pass(lineno=getattr(gen.iter, "lineno", 0)))
                tests = [self.value(t) for t in gen.ifs]
                unknown = next((t for t in tests if isinstance(t, Opaque)), None)
                if unknown is not None:
                    raise _OpaqueComprehension(unknown)
                if all(tests):
                    level(index + 1)

        saved = dict(self.names)  # comprehension variables do not leak
        try:
            level(0)
        finally:
            self.names = saved

    def _collect(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp, make: Callable[[list], Any]) -> Any:
        out: list[Any] = []

        def emit() -> None:
            out.append(self.value(node.elt))
            self.check_size(out)
        try:
            self.comprehension(node.generators, emit)
        except _OpaqueComprehension as exc:
            return exc.opaque
        return make(out)

    def e_ListComp(self, node: ast.ListComp) -> Any:
        return self._collect(node, list)

    def e_GeneratorExp(self, node: ast.GeneratorExp) -> Any:
        return self._collect(node, list)

    def e_SetComp(self, node: ast.SetComp) -> Any:
        return self._collect(node, lambda out: next((v for v in out if isinstance(v, Opaque)), None) or set(out))

    def e_DictComp(self, node: ast.DictComp) -> Any:
        out: dict[Any, Any] = {}

        def emit() -> None:
            key = self.value(node.key)
            if isinstance(key, Opaque) or not _hashable(key):
                raise _OpaqueComprehension(key if isinstance(key, Opaque) else Opaque("an unhashable key", node.lineno))
            out[key] = self.value(node.value)
            self.check_size(out)
        try:
            self.comprehension(node.generators, emit)
        except _OpaqueComprehension as exc:
            return exc.opaque
        return out

    def items(self, iterable: Any, node: ast.AST) -> list[Any]:
        if isinstance(iterable, (list, tuple, range, dict, set, frozenset, str)):
            if len(iterable) > MAX_ITEMS:
                raise OverBudget
            return list(iterable)
        return [Opaque("iterating over an unknown value", getattr(node, "lineno", 0))]



class _OpaqueComprehension(Exception):
    def __init__(self, opaque: Opaque) -> None:
        self.opaque = opaque


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


