"""Choices in C++/CUDA code made on a signal: an `if` / `switch` / `?:` whose condition reads
a value derived from a *seed* (a clock read, a persistent device counter, an output element
read before it was written), where a side computes something (a launch, a call, a write).
Not a rule file; GK112, GK113 and GK427 read it.

Token level, per function. A name is *tainted* when it is assigned from an expression that
reads a seed or a tainted name, when a seed call writes it through `&name` (`clock_gettime(
CLOCK_MONOTONIC, &ts)`), or when it is assigned inside a side of a tainted choice
(`if (dt < gap) mode = 1;`: the flag carries the clock). A side that only logs
(`printf`, `TORCH_WARN`, `std::cerr << ...`) or only updates tainted names computes nothing:
`if (dt > budget) fprintf(stderr, "slow")` is no choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

from gatekeeper.static.cpp_tokens import Token, match_close

# calls that report, check or fail, and compute nothing the result depends on
LOG_CALLS = frozenset({
    "printf", "fprintf", "puts", "fputs", "fflush", "snprintf", "sprintf", "perror", "cout", "cerr", "clog",
    "TORCH_WARN", "TORCH_WARN_ONCE", "TORCH_CHECK", "AT_ASSERT", "assert", "LOG", "VLOG", "abort", "exit",
})
_KEYWORDS = frozenset({"if", "for", "while", "switch", "return", "sizeof", "static_cast", "reinterpret_cast",
                       "const_cast", "dynamic_cast", "decltype", "else", "do", "case", "default", "break", "continue"})
_ASSIGN = frozenset({"=", "+=", "-=", "*=", "/=", "|=", "&=", "^=", "%=", "<<=", ">>="})
_EXPR_STOP_BACK = frozenset({"=", ",", ";", "{", "}", "return", "?", ":", "(", "&&", "||"})

Seed = Callable[[int], Optional[str]]  # token index -> what it reads (a label), or None


@dataclass
class Choice:
    at: int  # token index of the `if` / `switch` / `?`
    cond: tuple[int, int]  # token range of the condition
    sides: list[tuple[int, int]]  # token ranges of the sides (an absent `else` is no side)


@dataclass
class SignalChoice:
    choice: Choice
    label: str  # what the condition reads, in words
    offset: int  # source offset to report at


def statement_end(tokens: Sequence[Token], start: int) -> int:
    """Index of the last token of the statement at `start` (a block, a nested if/for, or to `;`)."""
    if start >= len(tokens):
        return len(tokens) - 1
    text = tokens[start].text
    if text == "{":
        return match_close(tokens, start)
    if text in ("if", "for", "while", "switch") and start + 1 < len(tokens) and tokens[start + 1].text == "(":
        end = statement_end(tokens, match_close(tokens, start + 1) + 1)
        if text == "if" and end + 1 < len(tokens) and tokens[end + 1].text == "else":
            end = statement_end(tokens, end + 2)
        return end
    depth, i = 0, start
    while i < len(tokens):
        t = tokens[i].text
        depth += t in ("(", "[", "{")
        depth -= t in (")", "]", "}")
        if (t == ";" and depth <= 0) or depth < 0:
            return i
        i += 1
    return len(tokens) - 1


def _ternary(tokens: Sequence[Token], q: int, lo: int, hi: int) -> Optional[Choice]:
    depth, start = 0, q - 1
    while start > lo:
        t = tokens[start].text
        if t in (")", "]"):
            depth += 1
        elif t in ("(", "["):
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and t in _EXPR_STOP_BACK:
            break
        start -= 1
    depth, nested, colon, end = 0, 0, None, q + 1
    while end < hi:
        t = tokens[end].text
        if t in ("(", "[", "{"):
            depth += 1
        elif t in (")", "]", "}"):
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and t == "?":
            nested += 1
        elif depth == 0 and t == ":":
            if nested == 0 and colon is None:
                colon = end
            else:
                nested -= 1
        elif depth == 0 and t in (";", ",") and colon is not None:
            break
        end += 1
    if colon is None:
        return None
    return Choice(q, (start + 1, q), [(q + 1, colon), (colon + 1, end)])


def choices(tokens: Sequence[Token], lo: int, hi: int) -> Iterator[Choice]:
    """Every `if` / `switch` / `?:` in tokens[lo:hi]."""
    for i in range(lo, hi):
        t = tokens[i].text
        if t in ("if", "switch") and i + 1 < hi and tokens[i + 1].text == "(":
            close = match_close(tokens, i + 1)
            then_end = statement_end(tokens, close + 1)
            sides = [(close + 1, then_end + 1)]
            if then_end + 1 < hi and tokens[then_end + 1].text == "else":
                sides.append((then_end + 2, statement_end(tokens, then_end + 2) + 1))
            yield Choice(i, (i + 2, close), sides)
        elif t == "?":
            found = _ternary(tokens, i, lo, hi)
            if found is not None:
                yield found


def assigned_name(tokens: Sequence[Token], i: int) -> Optional[str]:
    """The name `NAME = ...` / `NAME{...}` / `NAME(...)` declares or assigns at token i (`=`, `{`, `(`)."""
    if i == 0 or tokens[i - 1].kind != "ident":
        return None
    if tokens[i].text in _ASSIGN:
        return tokens[i - 1].text
    # `const auto t0(std::chrono::steady_clock::now())`: a declaration (a type word before the name)
    if tokens[i].text in ("{", "(") and i >= 2 and (tokens[i - 2].kind == "ident" or tokens[i - 2].text in ("*", "&")):
        return tokens[i - 1].text if tokens[i - 2].text not in _KEYWORDS else None
    return None


def side_computes(tokens: Sequence[Token], start: int, end: int, quiet: set[str]) -> bool:
    """A side launches, calls something other than a log, or writes a name that is not a signal."""
    if start >= end:
        return False
    skip_to = start
    for j in range(start, min(end, len(tokens))):
        if j < skip_to:
            continue  # inside a log call's arguments (`fprintf(stderr, "%lld", d.count())`)
        tok = tokens[j]
        if tok.kind == "ident" and tok.text in LOG_CALLS and j + 1 < end and tokens[j + 1].text == "(":
            skip_to = match_close(tokens, j + 1) + 1
            continue
        if tok.text == "<<<":
            return True
        if tok.kind == "ident" and j + 1 < end and tokens[j + 1].text == "(" and tok.text not in _KEYWORDS \
                and tok.text not in LOG_CALLS and tok.text not in quiet \
                and not (j >= 2 and tokens[j - 1].text == "::" and tokens[j - 2].text == "std"
                         and tok.text in ("cout", "cerr")):
            return True
        if tok.text in _ASSIGN and j > start and tokens[j - 1].kind == "ident" and tokens[j - 1].text not in quiet:
            return True
        if tok.text in _ASSIGN and j > start and tokens[j - 1].text == "]":
            return True
    # an expression side (`?:` arm) that yields a value at all is a choice between values
    return any(tokens[j].kind in ("ident", "number") and tokens[j].text not in LOG_CALLS
               for j in range(start, min(end, len(tokens)))) and tokens[start - 1].text in ("?", ":")


def signal_choices(tokens: Sequence[Token], lo: int, hi: int, seed: Seed,
                   tainted: Optional[dict[str, str]] = None,
                   taint_out: Optional[dict[str, str]] = None) -> list[SignalChoice]:
    """The choices in tokens[lo:hi] whose condition reads a seed or a name tainted by one, and
    where some side computes. `tainted` (name -> label) starts the taint (globals, statics);
    `taint_out`, when given, receives every name found tainted."""
    names: dict[str, str] = dict(tainted or {})
    implicit: set[str] = set()  # assigned under a tainted choice: they carry it, but writing them computes

    def reads(a: int, b: int) -> Optional[str]:
        for j in range(a, b):
            label = seed(j)
            if label is not None:
                return label
            tok = tokens[j]
            if tok.kind == "ident" and tok.text in names and not (j and tokens[j - 1].text in (".", "->")):
                return names[tok.text]
        return None

    for _ in range(4):  # a fixpoint: names taint names, choices taint what they assign
        before = len(names)
        for i in range(lo, hi):
            tok = tokens[i]
            if tok.text in _ASSIGN or tok.text in ("{", "("):
                name = assigned_name(tokens, i)
                if name is None or name in names:
                    continue
                close = match_close(tokens, i) if tok.text in ("{", "(") else statement_end(tokens, i + 1)
                label = reads(i + 1, close)
                if label is not None:
                    names[name] = label
            elif tok.kind == "ident" and i + 1 < hi and tokens[i + 1].text == "(":
                label = seed(i)
                if label is not None:  # `clock_gettime(CLOCK_MONOTONIC, &ts)`: ts holds the reading
                    close = match_close(tokens, i + 1)
                    for j in range(i + 2, close):
                        if tokens[j].text == "&" and tokens[j + 1].kind == "ident":
                            names.setdefault(tokens[j + 1].text, label)
        for choice in choices(tokens, lo, hi):
            label = reads(*choice.cond)
            if label is None:
                continue
            for a, b in choice.sides:
                for j in range(a, b):
                    if tokens[j].text in _ASSIGN and tokens[j - 1].kind == "ident" and tokens[j - 1].text not in names:
                        names[tokens[j - 1].text] = label
                        implicit.add(tokens[j - 1].text)
        if len(names) == before:
            break
    if taint_out is not None:
        taint_out.update(names)
    out: list[SignalChoice] = []
    quiet = set(names) - implicit
    for choice in choices(tokens, lo, hi):
        label = reads(*choice.cond)
        if label is not None and any(side_computes(tokens, a, b, quiet) for a, b in choice.sides):
            out.append(SignalChoice(choice, label, tokens[choice.at].offset))
    return out
