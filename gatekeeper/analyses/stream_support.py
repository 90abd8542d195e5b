"""Shared helpers for the GK5xx rules (stream escape, thread injection, lazy outputs,
precision downgrade). Not a rule file: it defines no rule with a `code`.

- the problem's dtype, with the float32 assumption made explicit when no problem is given;
- C++ token helpers: matching brackets, a call's arguments, the call a token sits in, the
  function a token sits in, the start of the statement a token is part of;
- the text of inline `asm(...)` statements, which the tokenizer drops with the other string
  literals (PTX is not C++, so it is read from `source.text`).
"""

from __future__ import annotations

import re
from typing import Iterator, Optional, Sequence

import libcst as cst

from gatekeeper.static.context import FileContext
from gatekeeper.static.cpp_functions import CppFunction
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import CLOSERS, Token, match_close  # match_close is re-exported to the C++ stream rules

_CLOSERS = CLOSERS
_OPENERS = {v: k for k, v in _CLOSERS.items()}
ASSUMED_FLOAT32 = " (No problem file was given, so the problem is assumed to be float32.)"


# problem dtype --------------------------------------------------------------------------
def problem_dtype(ctx: FileContext) -> tuple[str, bool]:
    """The problem's dtype and whether it was assumed (no problem file)."""
    if ctx.problem is None:
        return "float32", True
    return ctx.problem.dtype, False


def assumed_note(ctx: FileContext) -> str:
    return ASSUMED_FLOAT32 if ctx.problem is None else ""


# Python helpers ----------------------------------------------------------------------------
def is_false(expr: Optional[cst.BaseExpression]) -> bool:
    return type(expr) is cst.Name and expr.value in ("False", "None") or (
        type(expr) is cst.Integer and expr.value == "0"
    )


def is_true(expr: Optional[cst.BaseExpression]) -> bool:
    return type(expr) is cst.Name and expr.value == "True" or (
        type(expr) is cst.Integer and expr.value != "0"
    )


# C++ token helpers -----------------------------------------------------------------------
def split_args(tokens: Sequence[Token], open_index: int, close_index: int) -> list[list[Token]]:
    """Top-level comma-separated arguments between two matching brackets."""
    args: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens[open_index + 1 : close_index]:
        text = tok.text
        if text in _CLOSERS:
            depth += 1
        elif text in _OPENERS:
            depth -= 1
        if text == "," and depth == 0:
            args.append([])
        else:
            args[-1].append(tok)
    return [a for a in args if a] if any(args) else []


def launch_config(tokens: Sequence[Token], open_index: int, close_index: int) -> list[list[Token]]:
    """The arguments of `<<<grid, block, smem, stream>>>`. A configuration has at most four;
    more means a template's commas split it (`Tile<BM, BN>::THREADS`), so it is split again
    with `name<...>` nested as a bracket."""
    args = split_args(tokens, open_index, close_index)
    if len(args) <= 4:
        return args
    out: list[list[Token]] = [[]]
    depth = angle = 0
    for k in range(open_index + 1, close_index):
        text = tokens[k].text
        if text in _CLOSERS:
            depth += 1
        elif text in _OPENERS:
            depth -= 1
        elif text == "<" and tokens[k - 1].kind == "ident":
            angle += 1
        elif text == ">" and angle:
            angle -= 1
        if text == "," and depth == 0 and angle == 0:
            out.append([])
        else:
            out[-1].append(tokens[k])
    return out if len(out) <= 4 else args


def call_args(tokens: Sequence[Token], name_index: int) -> tuple[list[list[Token]], int]:
    """Arguments of `name(...)` at `name_index` and the index of its `)`; ([], index) when
    the name is not called."""
    if name_index + 1 >= len(tokens) or tokens[name_index + 1].text != "(":
        return [], name_index
    close = match_close(tokens, name_index + 1)
    return split_args(tokens, name_index + 1, close), close


def enclosing_call(tokens: Sequence[Token], index: int) -> Optional[str]:
    """The identifier before the innermost `(` that encloses token `index`."""
    depth = 0
    for i in range(index - 1, -1, -1):
        text = tokens[i].text
        if text in (")", "]"):
            depth += 1
        elif text in ("(", "["):
            if depth == 0:
                if text == "(" and i > 0 and tokens[i - 1].kind == "ident":
                    return tokens[i - 1].text
                return None
            depth -= 1
        elif text in (";", "{", "}") and depth == 0:
            return None
    return None


def statement_start(tokens: Sequence[Token], index: int) -> int:
    """Index of the first token of the statement that token `index` is part of."""
    depth = 0
    for i in range(index - 1, -1, -1):
        text = tokens[i].text
        if text in (")", "]"):
            depth += 1
        elif text in ("(", "["):
            if depth == 0:
                continue  # inside a call's arguments: keep walking out
            depth -= 1
        elif text in (";", "{", "}") and depth == 0:
            return i + 1
    return 0


_NOT_TYPES = frozenset({"return", "else", "do", "throw", "case", "co_return", "goto"})


def assigned_name(tokens: Sequence[Token], index: int) -> Optional[str]:
    """For `T name = ... tok ...;`, `T name(... tok ...);` or `name[i] = ... tok ...;`, the
    variable that the statement containing token `index` declares or assigns."""
    start = statement_start(tokens, index)
    depth = 0
    for i in range(start, index):
        text = tokens[i].text
        if text == "=" and depth == 0:
            j = i - 1
            if tokens[j].text == "]":
                while j > start and tokens[j].text != "[":
                    j -= 1
                j -= 1
            return tokens[j].text if j >= start and tokens[j].kind == "ident" else None
        if text in ("(", "[", "{"):
            if (text in ("(", "{") and depth == 0 and i - 2 >= start and tokens[i - 1].kind == "ident"
                    and (tokens[i - 2].kind == "ident" or tokens[i - 2].text in (">", "&", "*"))
                    and tokens[i - 2].text not in _NOT_TYPES):
                return tokens[i - 1].text  # `T name(init)`: direct initialisation
            depth += 1
        elif text in (")", "]", "}"):
            depth -= 1
    return None


def function_at(funcs: Sequence[CppFunction], index: int) -> Optional[CppFunction]:
    for fn in funcs:
        if fn.body_start <= index <= fn.body_end:
            return fn
    return None


def idents(source: CppSource) -> frozenset[str]:
    """The identifiers of a source, computed once and shared by the GK5xx rules, so a rule
    can leave a source that cannot concern it without walking its tokens."""
    cached = source.__dict__.get("_gk5_idents")
    if cached is None:
        cached = frozenset(source.by_text["ident"])
        source.__dict__["_gk5_idents"] = cached
    return cached


# inline assembly ---------------------------------------------------------------------------
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def asm_strings(source: CppSource) -> Iterator[tuple[int, str]]:
    """(offset, text) of each string literal inside an `asm(...)` / `__asm__(...)` statement."""
    if "asm" not in source.text:
        return
    tokens = source.tokens
    for i, tok in enumerate(tokens):
        if tok.kind != "ident" or tok.text not in ("asm", "__asm__", "__asm"):
            continue
        j = i + 1
        while j < len(tokens) and tokens[j].text in ("volatile", "__volatile__"):
            j += 1
        if j >= len(tokens) or tokens[j].text != "(":
            continue
        close = match_close(tokens, j)
        end = tokens[close].offset if close < len(tokens) else len(source.text)
        segment = source.text[tokens[j].offset : end]
        for match in _STRING.finditer(segment):
            yield tokens[j].offset + match.start(), match.group(1)


def ptx_words(text: str) -> set[str]:
    """The dot-separated words of PTX instructions (`mma.sync.aligned.f16` -> {mma, sync, ...})."""
    return set(re.split(r"[^A-Za-z0-9_]+", text))


def capture_spans(tokens: Sequence[Token], identities: set[str]) -> dict[str, list[tuple[int, int]]]:
    """For each stream variable, the token spans from `cudaStreamBeginCapture(s, ...)` to the
    end of the matching `cudaStreamEndCapture(s, ...)` call."""
    spans: dict[str, list[tuple[int, int]]] = {}
    open_at: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        if tok.kind != "ident" or tok.text not in ("cudaStreamBeginCapture", "cudaStreamEndCapture"):
            continue
        args, close = call_args(tokens, i)
        first = [t.text for t in args[0] if t.kind == "ident"] if args else []
        name = first[0] if len(first) == 1 and first[0] in identities else None
        if name is None:
            continue
        if tok.text == "cudaStreamBeginCapture":
            open_at[name] = i
        elif name in open_at:
            spans.setdefault(name, []).append((open_at.pop(name), close))
    return spans


def derived_from(tokens: Sequence[Token], fn: CppFunction, names: set[str], sources: set[str]) -> bool:
    """Some `name = ...;` / `T name(...)` in the source reads one of `sources` (the launching
    function's parameters, or the current stream)."""
    for k, tok in enumerate(tokens):
        if tok.text not in names or k + 1 >= len(tokens):
            continue
        nxt = tokens[k + 1].text
        if nxt not in ("=", "(", "{"):
            continue
        end = k + 2
        while end < len(tokens) and tokens[end].text != ";":
            end += 1
        if any(t.text in sources for t in tokens[k + 2 : end]):
            return True
    return False
