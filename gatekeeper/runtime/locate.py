"""Where a run-time finding about the output points: the `return` in the submission's
forward that handed the value back, with its source line, not the `class ModelNew` line.

The run-time checks observe the value forward returned, not the statement that computed
it, so the return is the closest place that is always known. A forward with several
returns points at the last one and lists every return's line in the evidence (the one
taken depends on the input). Read from the file once per (path, size, mtime); a file
that does not parse, or defines no forward, keeps the location it was given.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from gatekeeper.report import Location


@dataclass(frozen=True)
class ReturnSite:
    line: int
    column: int
    end_line: Optional[int]
    end_column: Optional[int]
    source_line: str
    all_lines: tuple[int, ...]


def _forward(tree: ast.Module, class_line: int) -> Optional[ast.FunctionDef]:
    """forward of the top-level class whose `class` statement is on class_line (the line the
    run-time location names: ModelNew, or Model in a KernelBench-Hard solution)."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.lineno == class_line:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "forward":
                    return item  # type: ignore[return-value]
    return None


def _own_returns(function: ast.AST) -> list[ast.Return]:
    """The returns of `function` itself, not of functions or lambdas nested in it."""
    found: list[ast.Return] = []
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return sorted(found, key=lambda r: (r.lineno, r.col_offset))


@lru_cache(maxsize=64)
def _site(path: str, class_line: int, _stamp: tuple[int, float]) -> Optional[ReturnSite]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        tree = ast.parse(data)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    forward = _forward(tree, class_line)
    returns = _own_returns(forward) if forward is not None else []
    if not returns:
        return None
    last = returns[-1]
    lines = data.decode("utf-8", errors="replace").splitlines()
    text = lines[last.lineno - 1] if last.lineno <= len(lines) else ""
    return ReturnSite(line=last.lineno, column=last.col_offset + 1, end_line=last.end_lineno,
                      end_column=(last.end_col_offset + 1) if last.end_col_offset is not None else None,
                      source_line=text, all_lines=tuple(r.lineno for r in returns))


def return_site(path: str, class_line: int) -> Optional[ReturnSite]:
    """forward's return in the class at class_line of `path` (None: unreadable, no such class or forward)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return _site(path, class_line, (stat.st_size, stat.st_mtime))


def at_return(location: Optional[Location]) -> tuple[Optional[Location], dict]:
    """`location` moved from the class to forward's return, and the evidence that shows it
    (source_line, return_lines); unchanged, with no evidence, when the return is not found."""
    if location is None:
        return None, {}
    site = return_site(location.path, location.line)
    if site is None:
        return location, {}
    moved = Location(path=location.path, line=site.line, column=site.column, end_line=site.end_line,
                     end_column=site.end_column)
    evidence: dict = {"source_line": site.source_line}
    if len(site.all_lines) > 1:
        evidence["return_lines"] = list(site.all_lines)
    return moved, evidence
