"""A small, safe evaluator for `shapes.py`: the module's names, computed without running it.

Problem authors spell their shapes many ways: literals, names bound to constants
(`E = 256`, then `{"E": E}`), arithmetic (`4 * 1024`, `H // 2`, `2 ** 12`), dict merges
(`{**BASE, "T": 512}`), comprehensions over literal ranges, `itertools.product`, loops that
append. This reads those statically, with CPython's `ast`; nothing in the file is executed.

What it cannot know (a call of a helper function, an imported value, a loop over unknown
data) becomes an `Opaque` value carrying the reason and the line. A caller then knows
exactly which part is unknown: a shape whose size is opaque names an unknown dimension,
and a `SHAPES` that is opaque as a whole must be read by running the file (in the
sandboxed problem worker). Work is bounded (steps, sizes, exponents), so a hostile file
costs milliseconds and is reported as opaque, never hangs the checker.
"""

from __future__ import annotations

import ast
from typing import Any, Iterable, Optional

from gatekeeper.problem.shapes_expr import BINOPS, MAX_ITEMS, MODULES, Expressions, KnownModule, Opaque, OverBudget

__all__ = ["Evaluator", "Opaque", "evaluate_module"]


class Evaluator(Expressions):
    """Runs one module's top-level statements into `names` (see the module docstring);
    expressions are `Expressions`'. `depth` > 0: the body of a FileFunction being called."""

    depth = 0
    poisoned: Optional[str] = None  # why the first statement not followed was not

    def run(self, body: Iterable[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            value = self.value(stmt.value)
            for target in stmt.targets:
                self.bind(target, value, stmt)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.bind(stmt.target, self.value(stmt.value), stmt)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            current = self.names.get(stmt.target.id, Opaque(f"`{stmt.target.id}` is not bound", stmt.lineno))
            self.names[stmt.target.id] = self.apply(BINOPS.get(type(stmt.op)), current, self.value(stmt.value), stmt)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.imports(stmt)
        elif isinstance(stmt, ast.Expr):
            self.expression_statement(stmt)
        elif isinstance(stmt, ast.For) and not stmt.orelse:
            self.loop(stmt)
        elif isinstance(stmt, ast.If):
            test = self.value(stmt.test)
            if isinstance(test, Opaque):
                self.poison(stmt, test.reason)
            else:
                self.run(stmt.body if test else stmt.orelse)
        elif isinstance(stmt, (ast.Pass, ast.Assert)):
            pass
        elif isinstance(stmt, ast.FunctionDef) and FileFunction.followable(stmt):
            self.names[stmt.name] = FileFunction(stmt, self)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.names[stmt.name] = Opaque(f"`{stmt.name}`, a function of the file", stmt.lineno)
        elif isinstance(stmt, ast.Return) and self.depth > 0:
            raise _Return(self.value(stmt.value) if stmt.value is not None else None)
        else:
            self.poison(stmt, f"a `{type(stmt).__name__.lower()}` statement")

    def bind(self, target: ast.expr, value: Any, stmt: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            parts = list(value) if isinstance(value, (tuple, list)) and len(value) == len(target.elts) else None
            for index, element in enumerate(target.elts):
                self.bind(element, parts[index] if parts is not None else
                          (value if isinstance(value, Opaque) else Opaque("an unpacking", stmt.lineno)), stmt)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            container, key = self.names.get(target.value.id), self.value(target.slice)
            if isinstance(container, (dict, list)) and not isinstance(key, Opaque) and not isinstance(value, Opaque):
                try:
                    container[key] = value
                    return
                except (IndexError, TypeError):
                    pass
            self.poison(stmt, "an item assignment")
        else:
            self.poison(stmt, "an assignment to an attribute")

    def imports(self, stmt: ast.Import | ast.ImportFrom) -> None:
        for alias in stmt.names:
            bound = alias.asname or alias.name.split(".")[0]
            if isinstance(stmt, ast.Import) and alias.name in MODULES:
                self.names[bound] = KnownModule(alias.name)
            elif isinstance(stmt, ast.ImportFrom) and stmt.module in MODULES and alias.name in MODULES[stmt.module]:
                self.names[bound] = MODULES[stmt.module][alias.name]
            else:
                module = stmt.module if isinstance(stmt, ast.ImportFrom) else alias.name
                self.names[bound] = Opaque(f"`{bound}` from `{module}`", stmt.lineno)

    def expression_statement(self, stmt: ast.Expr) -> None:
        call = stmt.value
        if isinstance(call, ast.Constant):
            return  # a docstring
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                and call.func.attr in ("append", "extend", "update", "insert") and not call.keywords):
            container = self.names.get(call.func.value.id)
            args = [self.value(a) for a in call.args]
            if isinstance(container, (list, dict)) and not any(isinstance(a, Opaque) for a in args):
                try:
                    getattr(container, call.func.attr)(*args)
                    self.check_size(container)
                    return
                except (TypeError, ValueError):
                    pass
            if isinstance(container, (list, dict)):  # an element is unknown: keep it, as opaque
                if call.func.attr == "append" and len(args) == 1 and isinstance(container, list):
                    container.append(args[0])
                    return
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print":
            return
        self.poison(stmt, "a call whose effect is unknown")

    def loop(self, stmt: ast.For) -> None:
        iterable = self.value(stmt.iter)
        if isinstance(iterable, Opaque):
            self.poison(stmt, iterable.reason)
            return
        for count, item in enumerate(self.items(iterable, stmt)):
            if count >= MAX_ITEMS:
                raise OverBudget
            self.bind(stmt.target, item, stmt)
            self.run(stmt.body)

    def poison(self, stmt: ast.stmt, why: str) -> None:
        """Every name the statement could bind or change is unknown from here on."""
        opaque = Opaque(why, stmt.lineno)
        self.poisoned = self.poisoned or why
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and (isinstance(node.ctx, ast.Store) or node.id in self.names):
                if not isinstance(self.names.get(node.id), (KnownModule, type(len))):
                    self.names[node.id] = opaque
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                self.names[node.name] = opaque


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


MAX_DEPTH = 4  # calls of the file's functions inside each other


class FileFunction:
    """A function of the shapes file (`def build(): out = []; for ...: out.append({...});
    return out`), called by the file itself: its body is read by the same evaluator in a scope
    of its own over the module's names, so what it returns is known exactly when every
    statement of it is. A function that writes globals (`global`), takes `*args`/`**kw` or
    keyword-only parameters stays opaque, as before."""

    def __init__(self, node: ast.FunctionDef, module: "Evaluator") -> None:
        self.node, self.module = node, module
        self.defaults = [module.value(d) for d in node.args.defaults]

    @staticmethod
    def followable(node: ast.FunctionDef) -> bool:
        a = node.args
        return not (a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or node.decorator_list) and not any(
            isinstance(n, (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom)) for n in ast.walk(node))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        node, module = self.node, self.module
        params = [a.arg for a in node.args.args]
        if module.depth >= MAX_DEPTH or len(args) > len(params) or set(kwargs) - set(params):
            return Opaque(f"a call of `{node.name}` that is not followed", node.lineno)
        bound = dict(zip(params[len(params) - len(self.defaults):], self.defaults))
        bound.update(zip(params, args))
        bound.update(kwargs)
        if set(params) - set(bound):
            return Opaque(f"a call of `{node.name}` with a missing argument", node.lineno)
        inner = Evaluator()
        inner.names = {**module.names, **bound}
        inner.depth, inner.steps = module.depth + 1, module.steps
        try:
            inner.run(node.body)
            # fell off the end: a body that returns nothing builds no shapes (a `raise` it
            # could not follow ends here too)
            result: Any = Opaque(f"a call of `{node.name}` that returns no value read statically", node.lineno)
        except _Return as done:
            result = done.value
        finally:
            module.steps = inner.steps
        if inner.poisoned is not None:  # a statement it could not follow ran before the return
            return Opaque(f"a call of `{node.name}`: {inner.poisoned}", node.lineno)
        return result


def evaluate_module(tree: ast.Module) -> dict[str, Any]:
    """The module's top-level names after its statements, each a plain value or `Opaque`.
    A file that asks for more work than the budget gives every name as opaque."""
    evaluator = Evaluator()
    try:
        evaluator.run(tree.body)
    except (OverBudget, RecursionError, MemoryError):
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        return {name: Opaque("more computation than a static read allows") for name in names}
    return evaluator.names
