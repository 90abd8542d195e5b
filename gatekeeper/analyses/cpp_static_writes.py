"""Writes of C++ static tensors and getters of them, for GK105. Not a rule file.

- `written_before`: does a function body write a static (a call argument, a pointer taken, an
  in-place method) before a point, outside its fill guard;
- `in_fill_guard`: is a use under `if (...)` that tests the static (filled on a miss: the memo);
- `internal_getter`: a getter of a static whose every caller only uses the result;
- `caller_writes`: a caller binds a getter's result and writes it before returning it.
"""

from __future__ import annotations

from typing import Sequence

from gatekeeper.static.cpp_sources import CppSource

POINTERS = frozenset({"data_ptr", "mutable_data_ptr", "data", "packed_accessor32", "packed_accessor64", "accessor"})



def written_before(tokens, name: str, start: int, stop: int) -> bool:
    """Does the body hand `name` to a call or write it in place before `stop`: an argument
    (`k(x, out)`), a pointer taken (`out.data_ptr<float>()`), an in-place method (`out.zero_()`)."""
    for i in range(start + 1, stop):
        if tokens[i].text != name or in_fill_guard(tokens, name, i, start):
            continue
        before = tokens[i - 1].text
        after = tokens[i + 1].text if i + 1 < stop else ""
        if before in ("(", ",") and after in (")", ","):
            return True
        if after in (".", "->") and i + 2 < stop:
            method = tokens[i + 2].text
            if method in POINTERS or (method.endswith("_") and not method.startswith("_")):
                return True
    return False


def in_fill_guard(tokens, name: str, i: int, start: int) -> bool:
    """Is token `i` under `if (...name...)`, braced or not: the static filled on a miss
    (`if (!out.defined()) { out = ...; k(x, out); }`), which is the memo, not a recompute."""
    depth, j, opener = 0, i - 1, None
    while j > start:  # the innermost `{` around i
        text = tokens[j].text
        if text == "}":
            depth += 1
        elif text == "{":
            if depth == 0:
                opener = j
                break
            depth -= 1
        j -= 1
    heads = [i] + ([opener] if opener is not None else [])
    for end in heads:
        k = end - 1
        while k > start and tokens[k].text not in (";", "{", "}"):
            k -= 1
        head = [t.text for t in tokens[k + 1:end]]
        if "if" in head and name in head[head.index("if"):]:
            return True
    return False


def internal_getter(source: CppSource, fn, others: Sequence[CppSource] = ()) -> bool:
    """`fn` returns its static and is called in the sources (this one, or another of the file
    that includes it), and every call only uses the result (`counters().data_ptr()`, an
    argument): never returned, never kept in a variable."""
    calls = [(s, i) for s in (source, *[o for o in others if o is not source])
             for i in s.by_text["ident"].get(fn.name, ())
             if not (s is source and s.tokens[i].offset == fn.offset) and i + 1 < len(s.tokens)
             and s.tokens[i + 1].text == "(" and not _declaration(s.tokens, i)]
    if not calls:
        return False  # called from Python (exported), or unknown
    for s, i in calls:
        k = _before_qualification(s.tokens, i)
        if k >= 0 and s.tokens[k].text in ("return", "=", "{"):
            return False
    return True


def _declaration(tokens, i: int) -> bool:  # type: ignore[no-untyped-def]
    """`torch::Tensor forward(torch::Tensor x);`, `Tensor& c();`: the name declared, not called."""
    k = _before_qualification(tokens, i)
    if k < 0:
        return False
    prev = tokens[k]
    return prev.text in ("&", "*", ">") or (prev.kind == "ident" and prev.text not in ("return", "throw", "case", "co_return"))


def _before_qualification(tokens, i: int) -> int:  # type: ignore[no-untyped-def]
    """The index before `ns::`/`::` in front of token i (`rs::workspace(x)`)."""
    k = i - 1
    while k >= 1 and tokens[k].text == "::":
        k -= 2 if tokens[k - 1].kind == "ident" else 1
    return k


def caller_writes(sources: Sequence[CppSource], getter) -> bool:
    """A caller, in any source of the file, binds the getter's result (`auto& y =
    rs::workspace(x);`) and writes it before returning it: output storage reused with fresh
    values, as a static written in place is."""
    for source in sources:
        tokens = source.tokens
        for i in source.by_text["ident"].get(getter.name, ()):
            if i + 1 >= len(tokens) or tokens[i + 1].text != "(":
                continue
            k = _before_qualification(tokens, i)
            if k < 1 or tokens[k].text != "=" or tokens[k - 1].kind != "ident":
                continue
            caller = next((f for f in source.functions if f.body_start < i < f.body_end), None)
            if caller is not None and written_before(tokens, tokens[k - 1].text, k, caller.body_end):
                return True
    return False
