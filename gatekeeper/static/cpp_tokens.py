"""A small C++/CUDA tokenizer: identifiers, numbers, punctuation and preprocessor lines.

Comments and string/char literals are dropped, so `// at::matmul` or `"torch::mean"` inside
the C++ source never match a rule. It is a scanner, not a parser: rules work on the token
stream (for example `at` `::` `matmul` `(`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

_PUNCT = (
    "<<<", ">>>", "<<=", ">>=", "...", "->*", "::", "->", "++", "--", "<<", ">>", "<=", ">=",
    "==", "!=", "&&", "||", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##",
)


@dataclass(frozen=True)
class Token:
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


def _is_ident_start(ch: str) -> bool:
    return ch.isalpha() or ch == "_"


def tokenize(src: str) -> list[Token]:
    return list(_scan(src))


def _scan(src: str) -> Iterator[Token]:
    i, n = 0, len(src)
    line_start = True
    while i < n:
        ch = src[i]
        if ch == "\n":
            line_start = True
            i += 1
            continue
        if ch.isspace():
            i += 1
            continue
        if src.startswith("//", i):
            end = src.find("\n", i)
            i = n if end < 0 else end
            continue
        if src.startswith("/*", i):
            end = src.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if ch == "#" and line_start:
            # A directive runs to the end of the line, with backslash continuations.
            j = i + 1
            while j < n and src[j] in " \t":
                j += 1
            k = j
            while k < n and (src[k].isalnum() or src[k] == "_"):
                k += 1
            yield Token("directive", src[j:k], i)
            i = k
            line_start = False
            continue
        line_start = False
        if ch in "\"'":
            i = _skip_literal(src, i)
            continue
        if ch == "R" and src.startswith('R"', i):
            close = src.find("(", i + 2)
            if close > 0:
                delim = ")" + src[i + 2 : close] + '"'
                end = src.find(delim, close)
                i = n if end < 0 else end + len(delim)
                continue
        if _is_ident_start(ch):
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            yield Token("ident", src[i:j], i)
            i = j
            continue
        if ch.isdigit() or (ch == "." and i + 1 < n and src[i + 1].isdigit()):
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] in "._'" or (
                src[j] in "+-" and src[j - 1] in "eEpP" and not src[i:j].lower().startswith("0x")
            )):
                j += 1
            yield Token("number", src[i:j], i)
            i = j
            continue
        if ch == "\\" and i + 1 < n and src[i + 1] == "\n":
            i += 2
            continue
        for punct in _PUNCT:
            if src.startswith(punct, i):
                yield Token("punct", punct, i)
                i += len(punct)
                break
        else:
            yield Token("punct", ch, i)
            i += 1


def _skip_literal(src: str, i: int) -> int:
    quote = src[i]
    j = i + 1
    while j < len(src):
        if src[j] == "\\":
            j += 2
            continue
        if src[j] == quote or src[j] == "\n":
            return j + 1
        j += 1
    return j


def directive_lines(src: str, tokens: list[Token]) -> dict[str, list[Token]]:
    """`#define NAME tokens...` as {NAME: [tokens]} (object-like macros only)."""
    macros: dict[str, list[Token]] = {}
    for idx, tok in enumerate(tokens):
        if tok.kind != "directive" or tok.text != "define" or idx + 1 >= len(tokens):
            continue
        name = tokens[idx + 1]
        if name.kind != "ident":
            continue
        line_end = _line_end(src, name.offset)
        body: list[Token] = []
        for nxt in tokens[idx + 2 :]:
            if nxt.offset >= line_end or nxt.kind == "directive":
                break
            body.append(nxt)
        # function-like macro: NAME( immediately
        if body and body[0].text == "(" and body[0].offset == name.offset + len(name.text):
            continue
        macros[name.text] = body
    return macros


def _line_end(src: str, offset: int) -> int:
    i = offset
    while True:
        end = src.find("\n", i)
        if end < 0:
            return len(src)
        if end > 0 and src[end - 1] == "\\":
            i = end + 1
            continue
        return end
