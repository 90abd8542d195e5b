"""CPython's `ast` tree of the file being checked, parsed at most once per file.

Two parts of the static stage want it (the nesting screen before libcst runs, and the
line numbers that positions start from); parsing twice cost about 2 ms a file.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional, Union

_last: tuple[Optional[str], Union[ast.Module, BaseException, None]] = (None, None)


def parse_python(text: str) -> ast.Module:
    """`ast.parse(text)`, remembered for the most recent text; raises what ast.parse raises."""
    global _last
    seen, result = _last
    if seen is not None and (seen is text or seen == text):
        if isinstance(result, BaseException):
            raise result
        return result  # type: ignore[return-value]
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        _last = (text, exc)
        raise
    _last = (text, tree)
    return tree


_FORGET_HOOKS: list[Callable[[], None]] = []


def on_forget(hook: Callable[[], None]) -> None:
    """Have `forget` also call `hook`: for other per-file caches that hold this file's nodes."""
    _FORGET_HOOKS.append(hook)


def forget() -> None:
    """Drop the remembered tree (and, through the hooks, every per-file cache) once a file
    is done. Kept, it would survive into the next garbage collection: thousands of nodes
    traversed and promoted for nothing, every file."""
    global _last
    _last = (None, None)
    for hook in _FORGET_HOOKS:
        hook()
