"""What would crash libcst's native parser, found before it runs; and `safe_parse`, the one
way gatekeeper parses a submission with libcst.

libcst's parser recurses once per nesting level *and* once per term of a boolean chain
(`a or a or ...`) or `elif`, and past a few thousand it overflows the C stack: a SIGSEGV
that no `except` catches. CPython's own parser fails cleanly on deep nesting (and bounds
parentheses at 200), so the screen parses with `ast` first and refuses trees deeper than
MAX_DEPTH or chains longer than MAX_CHAIN. Honest kernels are far below both.
"""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from gatekeeper.static.python_ast import parse_python
from gatekeeper.static.validation_pause import node_validation_paused

# A file with few of these cannot nest or chain deeply enough to matter: not screened.
_OPERATOR_BYTES = b"-+~*/%@&|^<>.([{"
_NOT_OPERATORS = bytes(b for b in range(256) if b not in _OPERATOR_BYTES)
_OPERATOR_WORDS = (b"if ", b"elif", b"lambda", b"not ", b"and", b"or", b"await ", b"yield")
_SCREEN_ABOVE = 800
MAX_DEPTH = 200
MAX_CHAIN = 500


class ParseRefused(ValueError):
    """The file is not handed to libcst: `reason` says why (a sentence)."""

    def __init__(self, reason: str, line: Optional[int] = None, column: Optional[int] = None) -> None:
        super().__init__(reason)
        self.reason, self.line, self.column = reason, line, column


def _chain_length(node: ast.AST) -> int:
    if isinstance(node, ast.BoolOp):
        return len(node.values)
    if isinstance(node, ast.Compare):
        return len(node.ops) + 1
    return 0


def nesting_problem(data: bytes, text: str) -> Optional[str]:
    """Why the file is too deeply nested or chained to hand to libcst, or None."""
    count = len(data.translate(None, _NOT_OPERATORS))
    if count < _SCREEN_ABOVE:  # the words are counted only when the operators alone fall short
        count += sum(data.count(w) for w in _OPERATOR_WORDS)
        if count < _SCREEN_ABOVE:
            return None
    try:
        tree = parse_python(text)
    except SyntaxError as exc:
        return f"Python rejects it: {exc.msg} (line {exc.lineno})."
    except (RecursionError, MemoryError):
        return "Its expressions nest too deeply for Python's own parser."
    except ValueError as exc:  # NUL bytes and the like
        return f"Python rejects it: {exc}."
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"Its code nests more than {MAX_DEPTH} levels deep (line {getattr(node, 'lineno', '?')})."
        if _chain_length(node) > MAX_CHAIN:
            return (f"It chains {_chain_length(node)} operands in one boolean or comparison expression "
                    f"(line {getattr(node, 'lineno', '?')}); the limit is {MAX_CHAIN}.")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return None


def syntax_location(text: str) -> tuple[Optional[int], Optional[int], Optional[str]]:
    """Where CPython places the syntax error (line, 1-based column, message); libcst's
    tokenizer errors say 1:1 and its parser errors point past the offending line."""
    try:
        compile(text, "<submission>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return exc.lineno, max(1, exc.offset or 1), f"{type(exc).__name__}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError):
        return None, None, None
    return None, None, None


def safe_parse(text: str, data: Optional[bytes] = None) -> cst.Module:
    """`cst.parse_module(text)` after the screen. Raises ParseRefused (screened out, or too
    deep for libcst's Python side) or cst.ParserSyntaxError."""
    reason = nesting_problem(data if data is not None else text.encode("utf-8", errors="surrogatepass"), text)
    if reason is not None:
        raise ParseRefused(reason)
    try:
        with node_validation_paused():  # the parser's own nodes: see validation_pause.py
            return cst.parse_module(text)
    except RecursionError:
        raise ParseRefused("It nests too deeply to parse.") from None
