"""Content keys: the sha256 of the bytes, and the sha256 of the normalised syntax tree.

Two submissions that differ only in comments, whitespace, docstrings or layout have the
same normalised tree, so they are checked once and share the result.
"""

from __future__ import annotations

import ast
import hashlib
from typing import Optional

# Bumped whenever the normalisation changes, so old keys never match new ones.
_NORMALISER = b"gatekeeper-ast-v1\0"
_DOC_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):  # iterative, so deep trees cannot overflow the stack here
        if isinstance(node, _DOC_OWNERS) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]


def normalised_sha(code: str) -> Optional[str]:
    """The key of the code's tree without docstrings, or None when it does not parse
    (then the caller keys by bytes: unparsable code is only ever equal to itself)."""
    try:
        tree = ast.parse(code)
        _strip_docstrings(tree)
        dump = ast.dump(tree, include_attributes=False)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None
    return hashlib.sha256(_NORMALISER + dump.encode("utf-8", "surrogatepass")).hexdigest()
