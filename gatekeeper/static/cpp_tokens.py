"""A small C++/CUDA tokenizer: identifiers, numbers, punctuation and preprocessor lines.

Comments and string/char literals are dropped, so `// at::matmul` or `"torch::mean"` inside
the C++ source never match a rule. It is a scanner, not a parser: rules work on the token
stream (for example `at` `::` `matmul` `(`).
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional, Sequence

class Token(NamedTuple):
    # A NamedTuple: a source yields hundreds of tokens and a frozen dataclass costs ~3x to build.
    kind: str  # ident | number | punct | directive
    text: str
    offset: int  # character offset in the source

    @property
    def int_value(self) -> Optional[int]:
        return parse_int(self.text) if self.kind == "number" else None


def parse_int(text: str) -> Optional[int]:
    """The value of an integer literal such as 768, 0x300, 768u, 1'024, else None."""
    body = text.replace("'", "").lower().rstrip("ul")
    try:
        if body.startswith("0x"):
            return int(body, 16)
        if body.startswith("0b"):
            return int(body, 2)
        if body.isdigit():
            return int(body, 8) if len(body) > 1 and body.startswith("0") else int(body)
    except ValueError:
        return None
    return None


# One alternation, tried in order at each position: the standard way to write a lexer.
# Whitespace and comments are unnamed groups (lastgroup None) so the loop skips them fast;
# whitespace stops after a newline so that `^` can see a directive's line start.
_LEXER = re.compile(
    r"""
     (?P<dir>^[ \t]*\#[ \t]*[A-Za-z_]\w*)
    |(?:[ \t\r\f\v]*\n|[ \t\r\f\v]+|\\\n)
    |(?://[^\n]*|/\*.*?(?:\*/|\Z))
    |(?P<raw>R"(?P<delim>[^()\s\\]{0,16})\(.*?\)(?P=delim)")
    |(?P<str>"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?)
    |(?P<ident>[A-Za-z_]\w*)
    |(?P<number>\.?\d(?:[eEpP][+-]|[\w.'])*)
    |(?P<punct><<<|>>>|<<=|>>=|\.\.\.|->\*|::|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||\+=|-=|\*=|/=|%=|&=|\|=|\^=|\#\#|.)
    """,
    re.X | re.S | re.M,
)
_KEEP = frozenset({"ident", "number", "punct"})


_new_tuple = tuple.__new__


def tokenize(src: str) -> list[Token]:
    # The hot loop of the C++ checks: whitespace and comments (lastgroup None) are skipped
    # first, and tokens are built with tuple.__new__ (Token(...) goes through a Python-level
    # __new__, about a third of the loop).
    out: list[Token] = []
    append = out.append
    keep = _KEEP
    for match in _LEXER.finditer(src):
        kind = match.lastgroup
        if kind is None:
            continue
        if kind in keep:
            append(_new_tuple(Token, (kind, match.group(), match.start())))
        elif kind == "dir":
            text = match.group()
            hash_at = text.index("#")
            append(Token("directive", text[hash_at + 1 :].strip(), match.start() + hash_at))
    return out


def directive_lines(src: str, tokens: list[Token]) -> dict[str, list[Token]]:
    """`#define NAME tokens...` as {NAME: [tokens]} (object-like macros only)."""
    macros: dict[str, list[Token]] = {}
    for idx, tok in enumerate(tokens):
        if tok.kind != "directive" or tok.text != "define" or idx + 1 >= len(tokens):
            continue
        name = tokens[idx + 1]
        if name.kind != "ident":
            continue
        line_end_ = line_end(src, name.offset)
        body: list[Token] = []
        for nxt in tokens[idx + 2 :]:
            if nxt.offset >= line_end_ or nxt.kind == "directive":
                break
            body.append(nxt)
        # function-like macro: NAME( immediately
        if body and body[0].text == "(" and body[0].offset == name.offset + len(name.text):
            continue
        macros[name.text] = body
    return macros


def line_end(src: str, offset: int) -> int:
    """End of the preprocessor line that contains offset, following backslash continuations."""
    i = offset
    while True:
        end = src.find("\n", i)
        if end < 0:
            return len(src)
        if end > 0 and src[end - 1] == "\\":
            i = end + 1
            continue
        return end


def text_at(tokens: Sequence[Token], i: int) -> str:
    """The text of token i, or "" outside the stream: lets a pattern look around without bounds checks."""
    return tokens[i].text if 0 <= i < len(tokens) else ""


CLOSERS = {"(": ")", "[": "]", "{": "}", "<<<": ">>>"}


def match_close(tokens: Sequence[Token], start: int) -> int:
    """Index of the token closing the bracket at `start` (`(`, `[`, `{` or `<<<`), or of the
    last token when it is never closed (a truncated source)."""
    open_ = tokens[start].text
    close = CLOSERS[open_]
    depth = 0
    for i in range(start, len(tokens)):
        text = tokens[i].text
        if text == open_:
            depth += 1
        elif text == close:
            depth -= 1
            if depth == 0:
                return i
    return len(tokens) - 1
