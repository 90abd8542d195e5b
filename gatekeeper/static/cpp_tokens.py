"""A small C++/CUDA tokenizer: identifiers, numbers, punctuation and preprocessor lines.

Comments and string/char literals are dropped, so `// at::matmul` or `"torch::mean"` inside
the C++ source never match a rule. It is a scanner, not a parser: rules work on the token
stream (for example `at` `::` `matmul` `(`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
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


# Comments, whitespace and string/char literals: dropped. A newline followed by `[ \t]*#`
# is not skipped here, so that the directive alternative below can see the line start.
_SKIP = r"""(?:[ \t\r\f\v]|\\?\n(?![ \t]*\#)|//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?)"""

# One match per token: the token followed by everything dropped after it, so the finditer
# loop sees only tokens (whitespace used to be a match of its own, about 40% of all
# matches). The alternatives are tried in order at each position and each is entered (they
# start with a group, which re cannot skip by its first character), so the common ones come
# first: identifiers, numbers, single-character punctuation. The kind is the number of the
# group that matched last (m.lastindex): 1 ident, 2 number, 3 and 7 punct, 4 directive,
# 5 raw string's delimiter, 6 a lone `R` (an identifier that failed to start a raw string);
# a match of dropped text alone has none.
_LEXER = re.compile(
    r"""(?:
      ((?!R")[A-Za-z_]\w*)
    | (\.?\d(?:[eEpP][+-]|[\w.'])*)
    | ([(),;\[\]{}?~])
    | ((?:\A|\\?\n)[ \t]*\#[ \t]*[A-Za-z_]\w*)
    | _SKIP++
    | \\?\n[ \t]*
    | R"([^()\s\\]{0,16})\(.*?\)\5"
    | (R)
    | (<<<|>>>|<<=|>>=|\.\.\.|->\*|::|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||\+=|-=|\*=|/=|%=|&=|\|=|\^=|\#\#|.)
    ) _SKIP*+""".replace("_SKIP", _SKIP),
    re.X | re.S,
)


_new_tuple = tuple.__new__

TokenIndex = dict[str, dict[str, list[int]]]  # kind -> text -> indices of those tokens, in order


_SPLICE = re.compile(r"\\\r?\n")


def tokenize(src: str) -> list[Token]:
    """The tokens of `src` after translation phase 2: a backslash-newline joins its lines
    everywhere, inside a name too (`at::mat\\` + newline + `mul` is `at::matmul`: red team
    round 9). Offsets stay those of the text as written."""
    if "\\\n" not in src and "\\\r\n" not in src:
        return _tokenize(src)
    cuts: list[int] = []  # spliced offsets where text was removed, and how much before them
    removed: list[int] = []
    parts: list[str] = []
    last = total = 0
    for match in _SPLICE.finditer(src):
        parts.append(src[last:match.start()])
        total += match.end() - match.start()
        cuts.append(match.start() - (total - (match.end() - match.start())))
        removed.append(total)
        last = match.end()
    parts.append(src[last:])
    out: list[Token] = []
    for tok in _tokenize("".join(parts)):
        k = bisect_right(cuts, tok.offset) - 1
        out.append(tok if k < 0 else _new_tuple(Token, (tok.kind, tok.text, tok.offset + removed[k])))
    return out


def _tokenize(src: str) -> list[Token]:
    # The hot loop of the C++ checks. Tokens are built with tuple.__new__ (Token(...) goes
    # through a Python-level __new__, about a third of the loop); a token starts where its
    # match starts, since what is dropped trails it.
    out: list[Token] = []
    append = out.append
    for match in _LEXER.finditer(src):
        kind = match.lastindex
        if kind == 1:
            append(_new_tuple(Token, ("ident", match[1], match.start())))
        elif kind == 3 or kind == 7:
            append(_new_tuple(Token, ("punct", match[kind], match.start())))
        elif kind == 2:
            append(_new_tuple(Token, ("number", match[2], match.start())))
        elif kind == 6:
            append(_new_tuple(Token, ("ident", "R", match.start())))
        elif kind == 4:
            text = match[4]
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


def split_args(tokens: Sequence[Token], open_: int, close: Optional[int] = None) -> list[list[str]]:
    """The texts of each comma-separated argument between the bracket at `open_` and its
    `close` (found when not given); commas inside nested brackets do not split."""
    if close is None:
        close = match_close(tokens, open_)
    args: list[list[str]] = [[]]
    depth = 0
    for tok in tokens[open_ + 1:close]:
        if tok.text in ("(", "[", "{"):
            depth += 1
        elif tok.text in (")", "]", "}"):
            depth -= 1
        if tok.text == "," and depth == 0:
            args.append([])
        else:
            args[-1].append(tok.text)
    return args


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


_NAME_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+((?:::)?[A-Za-z_]\w*(?:[ \t]*::[ \t]*[A-Za-z_]\w*)*)"
                          r"[ \t]*(?://[^\n]*|/\*[^\n]*\*/[ \t]*)?$", re.M)
_ATEN_ROOTS = frozenset({"at", "torch", "c10", "aten", ""})
_QUALIFIED = re.compile(r"^[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*$")


def name_aliases(text: str, defines: dict[str, str]) -> dict[str, list[str]]:
    """Object-like macros whose body is a name, possibly qualified (`sgemm_`, `at::matmul`):
    NAME -> the body's texts. From the source's `#define`s and the build's `-D` flags."""
    bodies: dict[str, str] = {}
    if "define" in text:
        # A `#define` of an ATen name is left to analyses.cpp_aten_reach, which reads the macro
        # itself (function-like ones too) and says "through the macro NAME" where it is used.
        bodies.update((m.group(1), body) for m in _NAME_DEFINE.finditer(text)
                      if "::" not in (body := m.group(2).replace(" ", "").replace("\t", ""))
                      or body.split("::")[0] not in _ATEN_ROOTS)  # `#define NS at` renames the namespace: expanded
    for name, value in defines.items():
        bodies.setdefault(name, value.strip())
    out: dict[str, list[str]] = {}
    for name, body in bodies.items():
        if _QUALIFIED.match(body) and body.count("::") <= 3 and name not in body.split("::"):
            parts = body.split("::")
            out[name] = [t for part in parts for t in (part, "::")][:-1]
    return out


def expand_aliases(tokens: list[Token], aliases: dict[str, list[str]]) -> list[Token]:
    """`tokens` with each use of an alias replaced by its body, at the use's offset; the
    `#define` line's own name is left as written."""
    out: list[Token] = []
    for i, tok in enumerate(tokens):
        body = aliases.get(tok.text) if tok.kind == "ident" else None
        if body is None or (i > 0 and tokens[i - 1].kind == "directive" and tokens[i - 1].text == "define"):
            out.append(tok)
            continue
        out.extend(Token("punct" if text == "::" else "ident", text, tok.offset) for text in body)
    return out
