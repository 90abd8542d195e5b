"""All-literal shapes in C++ allocations (`torch::empty({2, 64, 4, 128}, x.options())`), for
GK203. This file defines no rule.

Each number of such a shape is too small or too tile-like to be judged alone (64 and 4 next
to a `numel()` read look like tile widths), but a shape spelled entirely in literals is the
nominal output shape whatever the function reads: judged as a whole, like GK201 judges a
Python allocation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gatekeeper.analyses.cpp_number_roles import ALLOC_CALLS
from gatekeeper.analyses.shape_helpers import fixed_values, significant_match, sizes_for
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import match_close


@dataclass
class LiteralShape:
    start: int  # token index of the allocation call's name
    numbers: list[int]  # token indices of the entries
    values: list[int]
    returned: bool  # assigned to a name the enclosing function returns


def literal_shapes(source: CppSource) -> list[LiteralShape]:
    toks = source.tokens
    out: list[LiteralShape] = []
    for name in ALLOC_CALLS:
        for i in source.by_text["ident"].get(name, ()):
            if i + 2 >= len(toks) or toks[i + 1].text != "(" or toks[i + 2].text != "{":
                continue
            close = match_close(toks, i + 2)
            entries = [k for k in range(i + 3, close) if toks[k].text != ","]
            if len(entries) < 2 or any(toks[k].kind != "number" or toks[k].int_value is None for k in entries):
                continue
            if any(toks[k].text != "," for k in range(i + 4, close, 2)):
                continue  # `{2 * n, 4}`: not one literal per entry
            out.append(LiteralShape(i, entries, [toks[k].int_value for k in entries], _returned(source, i)))
    return out


def judged_shapes(source: CppSource, problem) -> list[tuple[LiteralShape, str, bool]]:
    """(shape, why, certain) for each all-literal allocation that spells out the problem's
    sizes: certain when the function returns it and every entry is a problem size or a
    fixed dimension (part of the problem)."""
    sizes = sizes_for(problem)
    fixed = fixed_values(problem)
    out: list[tuple[LiteralShape, str, bool]] = []
    for shape in literal_shapes(source):
        matched = significant_match([v for v in shape.values if v > 1 and v not in fixed], sizes)
        if matched:
            why = ", ".join(w.replace("the problem dimension ", "") for _, w in matched)
            whole = all(v <= 1 or v in fixed or sizes.shape_size(v) for v in shape.values)
            out.append((shape, why, whole and shape.returned))
    return out


def _returned(source: CppSource, i: int) -> bool:
    """`auto y = torch::empty({...})` ... `return y;` in the same function."""
    toks = source.tokens
    target: Optional[str] = None
    for k in range(i - 1, max(i - 8, -1), -1):
        if toks[k].text == "=" and k > 0 and toks[k - 1].kind == "ident":
            target = toks[k - 1].text
            break
        if toks[k].text in (";", "{", "}"):
            break
    if target is None:
        return False
    fn = next((f for f in source.functions if f.body_start < i < f.body_end), None)
    if fn is None:
        return False
    return any(toks[k].text == "return" and toks[k + 1].text == target
               for k in range(i, fn.body_end - 1))
