"""CUDA kernels that read an output element before writing it and branch on the value, launched
on a buffer the source allocates uninitialised (`torch::empty`, `at::empty_like`...), for
GK427. Not a rule file.

Per kernel: a pointer parameter is *sniffed* when a read of it (`out[i]` not being assigned)
comes before its first write in the kernel (or it is never written there: a probe kernel)
and reaches the condition of a choice that computes (cpp_choices). Per launch `kernel<<<...>>>(args)` in the source: the
argument at a sniffed position is `X.data_ptr<T>()` (or a pointer local set from it) where `X`
was allocated with an `empty` call and not filled (`zero_`, `fill_`, `copy_`, `cudaMemset`)
before the launch. A buffer set with `torch::zeros` / `torch::full`, or handed in by the
caller (an in-place input), holds values the kernel may read.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Optional, Sequence

from gatekeeper.analyses.cpp_choices import LOG_CALLS, SignalChoice, signal_choices, statement_end
from gatekeeper.static.cpp_functions import CppFunction
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token, match_close

_EMPTY = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})
_FILLS = frozenset({"zero_", "fill_", "copy_", "cudaMemset", "cudaMemsetAsync", "normal_", "uniform_", "random_"})
_WRITE_OPS = frozenset({"=", "+=", "-=", "*=", "/=", "|=", "&=", "^="})
_DATA = frozenset({"data_ptr", "data", "mutable_data_ptr", "const_data_ptr"})


@dataclass
class Sniff:
    kernel: str
    param: str
    choice: SignalChoice
    buffer: str  # the allocation's name at the launch
    alloc: str  # the allocating call


def _subscript_end(tokens: Sequence[Token], i: int) -> Optional[int]:
    """For `P[...]` (or `cast<...>(P)[...]`) at token i, the index of the closing `]`."""
    j = i + 1
    if j < len(tokens) and tokens[j].text == ")":
        j += 1
    if j < len(tokens) and tokens[j].text == "[":
        return match_close(tokens, j)
    return None


def _sniffed(tokens: Sequence[Token], fn: CppFunction, index: int,
             by_ident: dict[str, list[int]]) -> Optional[SignalChoice]:
    """The choice a read-before-write of parameter `index` reaches, if any."""
    param = fn.params[index] if index < len(fn.params) else None
    if not param:
        return None
    reads: list[int] = []
    lo = bisect_right(by_ident.get(param, ()), fn.body_start - 1)
    for i in by_ident.get(param, ())[lo:]:  # the parameter's own tokens only, in order
        if i >= fn.body_end:
            break
        if tokens[i - 1].text in (".", "->"):
            continue
        end = _subscript_end(tokens, i)
        if end is None:
            continue
        if end + 1 < len(tokens) and tokens[end + 1].text in _WRITE_OPS:
            break  # the first write: reads after it see what the kernel wrote
        reads.append(i)
    if not reads:
        return None  # (never written here: every read is of what the launcher left in it)
    early = set(reads)

    def seed(j: int) -> Optional[str]:
        return f"`{param}[...]`" if j in early else None

    found = signal_choices(tokens, fn.body_start, fn.body_end, seed)
    return found[0] if found else None


def _buffer_of(tokens: Sequence[Token], arg: list[int], host: CppFunction) -> Optional[tuple[str, int]]:
    """The tensor whose data an argument passes (`out.data_ptr<float>()`, or a pointer local
    assigned from one in the launching function), with the token index to search before."""
    for k in arg:
        if tokens[k].kind == "ident" and k + 2 < len(tokens) and tokens[k + 1].text in (".", "->") \
                and tokens[k + 2].text in _DATA:
            return tokens[k].text, k
    names = [k for k in arg if tokens[k].kind == "ident"]
    if len(names) == 1:  # a pointer local: `float* o = out.data_ptr<float>();`
        name = tokens[names[0]].text
        for i in range(host.body_start, names[0]):
            if tokens[i].text == name and tokens[i + 1].text == "=":
                end = statement_end(tokens, i + 1)
                found = _buffer_of(tokens, list(range(i + 2, end)), host)
                if found is not None:
                    return found
    return None


def _fresh(tokens: Sequence[Token], host: CppFunction, name: str, before: int) -> Optional[str]:
    """The `empty` call `name` was allocated with in `host` and not filled before `before`."""
    alloc = None
    aliases = {name}
    for i in range(host.body_start, before):
        tok = tokens[i]
        if tok.text == name and tokens[i - 1].text not in (".", "->") and (
                tokens[i + 1].text == "=" or tokens[i + 1].text in ("(", "{") and tokens[i - 1].text != ","):
            end = statement_end(tokens, i + 1)
            stop = next((j for j in range(i + 2, end) if tokens[j].text == "," and _depth(tokens, i + 1, j) == 0), end)
            alloc = next((tokens[j].text for j in range(i + 1, stop) if tokens[j].text in _EMPTY
                          and tokens[j + 1].text in ("(", "<")), None)
        elif tok.text == name and alloc is not None and i + 2 < len(tokens) and tokens[i + 1].text in (".", "->") \
                and tokens[i + 2].text in _FILLS:
            alloc = None
        elif alloc is not None and tokens[i + 1].text in ("(", "<<<") and (tok.kind == "ident" or tok.text == ">>>") \
                and tok.text not in LOG_CALLS and tok.text not in _DATA:
            # handed to a call or another launch first (`init<<<...>>>(out.data_ptr<float>())`,
            # `cudaMemsetAsync(o, 0, bytes)`, `fill(out)`): written before this kernel reads it
            opener = i + 1 if tokens[i + 1].text == "(" else match_close(tokens, i + 1) + 1
            if opener < len(tokens) and tokens[opener].text == "(":
                close = match_close(tokens, opener)
                if any(tokens[j].text in aliases for j in range(opener + 1, close)):
                    alloc = None
        if alloc is not None and tok.kind == "ident" and tokens[i + 1].text == "=" and i + 2 < before:
            end = statement_end(tokens, i + 1)  # `float* o = out.data_ptr<float>()`: o is out's data
            if any(tokens[j].text == name for j in range(i + 2, end)):
                aliases.add(tok.text)
    return alloc


def _depth(tokens: Sequence[Token], a: int, b: int) -> int:
    depth = 0
    for j in range(a, b):
        depth += tokens[j].text in ("(", "[", "{")
        depth -= tokens[j].text in (")", "]", "}")
    return depth


def output_sniffs(source: CppSource) -> list[Sniff]:
    # Launch first, kernel second: a parameter's reads are traced (the costly part) only where
    # some launch passes an unfilled `empty` buffer at its position, which few sources do.
    tokens = source.tokens
    kernels = {fn.name: fn for fn in source.functions if fn.is_kernel}
    if not kernels or not any(name in source.by_text["ident"] for name in _EMPTY):
        return []
    by_ident = source.by_text["ident"]
    memo: dict[tuple[str, int], Optional[SignalChoice]] = {}
    out: list[Sniff] = []
    for name, kernel in kernels.items():
        for i in by_ident.get(name, ()):
            host = next((f for f in source.functions if f.body_start < i < f.body_end and not f.is_kernel), None)
            if host is None:
                continue
            j = i + 1
            if j < len(tokens) and tokens[j].text == "<":  # template arguments
                depth = 0
                while j < len(tokens):
                    depth += tokens[j].text == "<"
                    depth -= tokens[j].text == ">"
                    j += 1
                    if depth == 0:
                        break
            if j >= len(tokens) or tokens[j].text != "<<<":
                continue
            paren = match_close(tokens, j) + 1
            if paren >= len(tokens) or tokens[paren].text != "(":
                continue
            for index, arg in enumerate(_arg_spans(tokens, paren)[:len(kernel.params)]):
                found = _buffer_of(tokens, arg, host)
                if found is None:
                    continue
                alloc = _fresh(tokens, host, found[0], i)
                if alloc is None:
                    continue
                if (name, index) not in memo:
                    memo[name, index] = _sniffed(tokens, kernel, index, by_ident)
                choice = memo[name, index]
                if choice is not None:
                    out.append(Sniff(name, kernel.params[index], choice, found[0], alloc))
    return out


def _arg_spans(tokens: Sequence[Token], open_: int) -> list[list[int]]:
    close = match_close(tokens, open_)
    spans: list[list[int]] = [[]]
    depth = 0
    for k in range(open_ + 1, close):
        text = tokens[k].text
        depth += text in ("(", "[", "{")
        depth -= text in (")", "]", "}")
        if text == "," and depth == 0:
            spans.append([])
        else:
            spans[-1].append(k)
    return spans
