"""Integer constant expressions in C++ tokens (`#define N (4 * 768)`, `constexpr int K = N / 2;`):
literals, names, parentheses, casts, unary signs and * / % + - << >>. Names are looked up
through a callback, so the evaluator knows nothing of where constants come from (cpp_constants)."""

from __future__ import annotations

from typing import Callable, Optional

from gatekeeper.static.cpp_tokens import Token, text_at

# (name, depth, nesting) -> the name's constant value, or None when it is not a constant.
ValueOf = Callable[[str, int, int], Optional[int]]

INT_TYPES = frozenset({
    "int", "unsigned", "long", "short", "size_t", "int64_t", "int32_t", "uint32_t", "uint64_t",
    "auto", "index_t", "int16_t", "uint16_t", "signed",
})
MAX_NESTING = 48


class ConstEvaluator:
    """Integer constant expressions: literals, names, parentheses, unary -, * / % + - << >>."""

    def __init__(self, value_of: ValueOf, toks: list[Token], depth: int, nesting: int = 0) -> None:
        self.value_of, self.toks, self.pos, self.depth = value_of, toks, 0, depth
        # parentheses and unary signs open, through the macros being expanded: deep ones
        # answer "not constant" instead of exhausting Python's stack
        self.nesting = nesting

    def run(self) -> Optional[int]:
        try:
            value = self.additive()
        except (ValueError, ZeroDivisionError, IndexError):
            return None
        return value if self.pos == len(self.toks) else None

    def peek(self) -> str:
        return self.toks[self.pos].text if self.pos < len(self.toks) else ""

    def additive(self) -> int:
        value = self.term()
        while self.peek() in ("+", "-", "<<", ">>"):
            op = self.toks[self.pos].text
            self.pos += 1
            right = self.term()
            if op in ("<<", ">>") and not 0 <= right < 64:
                raise ValueError("shift out of range")
            value = {"+": value + right, "-": value - right}.get(op) if op in "+-" else (
                value << right if op == "<<" else value >> right)
            if abs(value) > 1 << 62:
                raise ValueError("not a size")
        return value

    def term(self) -> int:
        value = self.unary()
        while self.peek() in ("*", "/", "%"):
            op = self.toks[self.pos].text
            self.pos += 1
            right = self.unary()
            value = value * right if op == "*" else (int(value / right) if op == "/" else value % right)
        return value

    def unary(self) -> int:
        self.nesting += 1
        try:
            return self._unary()
        finally:
            self.nesting -= 1

    def _unary(self) -> int:
        if self.nesting > MAX_NESTING:
            raise ValueError("nested too deeply to be a size")  # never a RecursionError
        tok = self.toks[self.pos]
        self.pos += 1
        if tok.text == "-":
            return -self.unary()
        if tok.text == "+":
            return self.unary()
        if tok.text == "(":
            if self.peek() in INT_TYPES and text_at(self.toks, self.pos + 1) == ")":
                self.pos += 2  # (int) cast
                return self.unary()
            value = self.additive()
            if self.peek() != ")":
                raise ValueError("unbalanced")
            self.pos += 1
            return value
        if tok.kind == "number":
            value = tok.int_value
            if value is None:
                raise ValueError("not an integer")
            return value
        if tok.kind == "ident":
            value = self.value_of(tok.text, self.depth, self.nesting)
            if value is None:
                raise ValueError("not constant")
            return value
        raise ValueError("unexpected token")
