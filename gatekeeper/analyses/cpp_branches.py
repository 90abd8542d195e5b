"""Which conditional regions of a C++ host function enclose a token, for the path-sensitive
join check of GK501. Not a rule file.

A region is the body of an `if` / `else` / `for` / `while` / `switch` / `catch` / lambda,
braced or a single statement. A join (`cudaStreamSynchronize(side)`) covers a use of the
side stream when it comes later in the same function, every region around the join also
encloses the use (or the join sits in both arms of one `if`/`else`), and no `return` in
between leaves on a path that skips it. Token scanning only: no C++ parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from gatekeeper.analyses.stream_support import match_close
from gatekeeper.static.cpp_functions import CppFunction
from gatekeeper.static.cpp_tokens import Token

_HEADS = frozenset({"if", "for", "while", "switch", "catch"})


@dataclass(frozen=True)
class Region:
    start: int  # first token of the body ("{" or the statement)
    end: int  # last token of the body
    kind: str  # if | else | loop | other
    partner: Optional[int] = None  # for an else: the start of its if's body

    def holds(self, index: int) -> bool:
        return self.start <= index <= self.end


def _statement_end(tokens: Sequence[Token], start: int, limit: int) -> int:
    """Last token of the single statement starting at `start` (a braceless body)."""
    if start < limit and tokens[start].text == "{":
        return match_close(tokens, start)
    if start < limit and tokens[start].text in _HEADS and start + 1 < limit and tokens[start + 1].text == "(":
        body = match_close(tokens, start + 1) + 1
        end = _statement_end(tokens, body, limit)
        if tokens[start].text == "if" and end + 1 < limit and tokens[end + 1].text == "else":
            return _statement_end(tokens, end + 2, limit)
        return end
    depth = 0
    for i in range(start, limit):
        text = tokens[i].text
        if text in ("(", "[", "{"):
            depth += 1
        elif text in (")", "]", "}"):
            depth -= 1
        elif text == ";" and depth == 0:
            return i
    return limit


def regions(tokens: Sequence[Token], fn: CppFunction) -> list[Region]:
    """Every conditional region in the function's body."""
    out: list[Region] = []
    limit = fn.body_end
    i = fn.body_start + 1
    while i < limit:
        text = tokens[i].text
        if text in _HEADS and i + 1 < limit and tokens[i + 1].text == "(":
            close = match_close(tokens, i + 1)
            body = close + 1
            end = _statement_end(tokens, body, limit)
            kind = "if" if text == "if" else ("loop" if text in ("for", "while") else "other")
            out.append(Region(body, end, kind))
            if text == "if" and end + 1 < limit and tokens[end + 1].text == "else":
                else_start = end + 2
                out.append(Region(else_start, _statement_end(tokens, else_start, limit), "else", body))
            i = close + 1
            continue
        if text == "]" and i + 1 < limit and tokens[i + 1].text == "(":
            close = match_close(tokens, i + 1)  # a lambda: its body runs when it is called
            j = close + 1
            while j < limit and tokens[j].text not in ("{", ";"):
                j += 1
            if j < limit and tokens[j].text == "{":
                out.append(Region(j, match_close(tokens, j), "other"))
            i = close + 1
            continue
        i += 1
    return out


def _around(found: list[Region], index: int) -> list[Region]:
    return [r for r in found if r.holds(index)]


def covers(tokens: Sequence[Token], fn: CppFunction, found: list[Region], use: int, join: int,
           joins: Sequence[int]) -> bool:
    """The join at `join` is on every path from the use at `use` to the function's end."""
    if join <= use:
        return False
    at_use = set(_around(found, use))
    needed = [r for r in _around(found, join) if r not in at_use]
    for region in needed:
        if not _both_arms(found, region, joins, at_use):
            return False
    for r in range(use + 1, join):
        if tokens[r].text == "return" and tokens[r].kind == "ident" and _reachable(found, r, use) \
                and not _joined_before(found, use, r, joins):
            return False
    return True


def _joined_before(found: list[Region], use: int, ret: int, joins: Sequence[int]) -> bool:
    """A join between the use and this return, on the return's own path."""
    return any(use < j < ret and all(r.holds(use) or r.holds(ret) for r in _around(found, j)) for j in joins)


def _both_arms(found: list[Region], region: Region, joins: Sequence[int], at_use: set[Region]) -> bool:
    """`region` is one arm of an if/else and the other arm joins too."""
    if region.kind == "if":
        other = next((r for r in found if r.kind == "else" and r.partner == region.start), None)
    elif region.kind == "else":
        other = next((r for r in found if r.kind == "if" and r.start == region.partner), None)
    else:
        return False
    if other is None:
        return False
    return any(other.holds(j) and not any(r.holds(j) and r not in at_use and r != other and other.holds(r.start)
                                          for r in found) for j in joins)


def _reachable(found: list[Region], ret: int, use: int) -> bool:
    """A return after the use that paths through the use can reach: not in the `else` of an
    `if` whose body holds the use (or the other way round)."""
    for region in _around(found, ret):
        if region.holds(use):
            continue
        if region.kind == "else" and any(r.kind == "if" and r.start == region.partner and r.holds(use) for r in found):
            return False
    return True
