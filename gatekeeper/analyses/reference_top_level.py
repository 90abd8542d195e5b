"""The reference's top-level definitions for own_definitions.py, read from CPython's tree.
Not a rule file.

own_definitions.py compares the submission's top-level classes, functions and assigned
names with the reference's. The reference's libcst tree is parsed only on demand
(problem_facts.LazyTree, issue 20 item 8), so its side is read from `ast` here, with the
same choices `_take` makes on libcst's tree:

- classes and functions (async ones too) by name, the last definition winning;
- names assigned at the top (`a = ...`, `a: T = ...`, `a, *b = ...`), the first one winning;
- one level into `if` (not `if __name__ ...`), its `else:` (not an `elif`), and `try` with
  its handlers, where the body is an indented block: libcst keeps the statements of a
  one-line suite (`if x: a = 1`) as small statements, which `_take` does not look at.
"""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from gatekeeper.analyses.body_fingerprint import import_map_ast
from gatekeeper.static.problem_facts import ProblemFacts

# The libcst node type each CPython statement kept here is parsed to.
_KINDS: dict[type, type] = {ast.ClassDef: cst.ClassDef, ast.FunctionDef: cst.FunctionDef,
                            ast.AsyncFunctionDef: cst.FunctionDef, ast.Assign: cst.Assign,
                            ast.AnnAssign: cst.AnnAssign}


def libcst_kind(node: Optional[ast.AST]) -> Optional[type]:
    """The libcst type of a statement `top_level` returns (None for None)."""
    return _KINDS.get(type(node)) if node is not None else None


def top_level(tree: ast.Module, text: str) -> dict[str, ast.stmt]:
    out: dict[str, ast.stmt] = {}
    _take(tree.body, out, _Lines(text))
    return out


_ATTR = "_gk_top_level"


def reference_definitions(problem: ProblemFacts) -> tuple[dict[str, ast.stmt], dict[str, str]]:
    """The reference's `top_level` and its import map, kept on its facts (the same for every
    submission to the problem; read only)."""
    found = problem.__dict__.get(_ATTR)
    if found is None:
        found = problem.__dict__[_ATTR] = (top_level(problem.tree, problem.text), import_map_ast(problem.tree))
    return found


def methods(cls: ast.ClassDef) -> dict[str, ast.AST]:
    """A class's methods by name (a one-line class body holds none)."""
    return {s.name: s for s in cls.body if type(s) in (ast.FunctionDef, ast.AsyncFunctionDef)}


class _Lines:
    def __init__(self, text: str) -> None:
        self._lines = text.splitlines()

    def before(self, node: ast.stmt) -> bytes:
        """The text of the node's first line before it (ast columns count UTF-8 bytes)."""
        if not 0 < node.lineno <= len(self._lines):
            return b""
        return self._lines[node.lineno - 1].encode("utf-8", errors="surrogatepass")[:node.col_offset]

    def block(self, body: list[ast.stmt]) -> bool:
        """Whether a body is an indented block (its first statement starts its line)."""
        return bool(body) and not self.before(body[0]).strip()

    def is_elif(self, node: ast.stmt) -> bool:
        line = self._lines[node.lineno - 1] if 0 < node.lineno <= len(self._lines) else ""
        return line.encode("utf-8", errors="surrogatepass")[node.col_offset:].startswith(b"elif")


def _take(stmts: list[ast.stmt], out: dict[str, ast.stmt], lines: _Lines) -> None:
    for stmt in stmts:
        kind = type(stmt)
        if kind in (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef):
            out[stmt.name] = stmt  # type: ignore[attr-defined]
        elif kind is ast.Assign or (kind is ast.AnnAssign and stmt.value is not None):  # type: ignore[attr-defined]
            targets = stmt.targets if kind is ast.Assign else [stmt.target]  # type: ignore[attr-defined]
            for target in targets:
                for name in _target_names(target):
                    out.setdefault(name, stmt)
        elif kind is ast.If and not _is_main_guard(stmt):  # type: ignore[arg-type]
            if lines.block(stmt.body):  # type: ignore[attr-defined]
                _take(stmt.body, out, lines)  # type: ignore[attr-defined]
            orelse = stmt.orelse  # type: ignore[attr-defined]
            if orelse and not (len(orelse) == 1 and type(orelse[0]) is ast.If and lines.is_elif(orelse[0])) \
                    and lines.block(orelse):
                _take(orelse, out, lines)
        elif kind is ast.Try:
            for body in [stmt.body, *(h.body for h in stmt.handlers)]:  # type: ignore[attr-defined]
                if lines.block(body):
                    _take(body, out, lines)


def _is_main_guard(stmt: ast.If) -> bool:
    test = stmt.test
    return type(test) is ast.Compare and type(test.left) is ast.Name and test.left.id == "__name__"


def _target_names(target: ast.expr) -> list[str]:
    if type(target) is ast.Starred:  # libcst's StarredElement: its value is the name
        target = target.value
    if type(target) is ast.Name:
        return [target.id]
    if type(target) in (ast.Tuple, ast.List):
        return [n for e in target.elts for n in _target_names(e)]  # type: ignore[attr-defined]
    return []
