"""Where C++/CUDA source tests an input's size against a literal (GK205's C++ half):
`x.size(1) == 4096`, `TORCH_CHECK(x.sizes()[0] == 16)`, and the case labels of
`switch (x.size(1))`. The rule judges what the literals mean; this finds them."""

from __future__ import annotations

from typing import Iterator

from gatekeeper.analyses.cpp_constants import CppFacts
from gatekeeper.analyses.cpp_postfix import postfix_end, postfix_start, span_text
from gatekeeper.analyses.size_literals import cpp_size_read
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import match_close

_ARITHMETIC = ("*", "/", "+", "-", "<<", "%")


def shape_tests(source: CppSource) -> Iterator[tuple[int, int, str]]:
    """(offset of the literal, its value, the test as written) for each size test."""
    toks = CppFacts.of(source).tokens
    hits = source.indices({"==", "!=", "switch"})
    for i in [k for k in hits if toks[k].text == "switch"]:
        yield from _switch_cases(source, toks, i)
    for i in [k for k in hits if toks[k].text != "switch"]:
        if i == 0 or i + 1 >= len(toks):
            continue
        for num, other in ((i + 1, i - 1), (i - 1, i + 1)):
            value = toks[num].int_value
            if value is None or value <= 1 or not cpp_size_read(toks, other, before=other < i):
                continue
            if num == i + 1 and i + 2 < len(toks) and toks[i + 2].text in _ARITHMETIC:
                continue
            # quote the comparison itself, not the line it sits on
            first, last = (postfix_start(toks, i - 1), i + 1) if num == i + 1 else (i - 1, postfix_end(toks, i + 1))
            yield toks[num].offset, value, span_text(source.text, toks, first, last)
            break


def _switch_cases(source: CppSource, toks, i: int) -> Iterator[tuple[int, int, str]]:  # type: ignore[no-untyped-def]
    """`switch (x.size(1)) { case 4096: ... }`: each case label of the switch itself (not of
    a nested one) is a shape literal."""
    if i + 1 >= len(toks) or toks[i + 1].text != "(":
        return
    k = match_close(toks, i + 1)
    if toks[k].text != ")" or not any(t.text in ("size", "numel", "sizes") for t in toks[i + 2 : k]):
        return
    if k + 1 >= len(toks) or toks[k + 1].text != "{":
        return
    depth = 0
    for j in range(k + 1, match_close(toks, k + 1) + 1):
        text = toks[j].text
        depth += {"{": 1, "}": -1}.get(text, 0)
        if depth == 1 and text == "case" and j + 2 < len(toks) and toks[j + 2].text == ":":
            value = toks[j + 1].int_value
            if value is not None and value > 1:
                yield toks[j + 1].offset, value, span_text(source.text, toks, i, k)
