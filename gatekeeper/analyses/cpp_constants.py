"""Constants and launch geometry in a C++/CUDA token stream, for the hardcoded-shape rules.
This file defines no rule.

- `CppFacts.of(source)`: `#define` macros, `constexpr` / `const` integer names, integer
  locals assigned exactly once, and `dim3` variables, each with its value when it is a
  compile-time constant; the `<<<grid, block>>>` launches with their values.
- `CppFacts.tile_use(i)`: whether the token at index i is used the way a tile or block
  width is used (block size of a launch whose grid is computed, divisor of a ceil-div,
  `blockIdx.x * T`, a `__shared__` array extent, a loop stride, `__launch_bounds__`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from typing import Optional

from gatekeeper.analyses.cpp_const_eval import INT_TYPES, ConstEvaluator
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token, line_end, match_close, parse_int, text_at

_QUALIFIERS = frozenset({"const", "constexpr", "static", "inline", "__device__", "__constant__", "__host__", "volatile"})
_VECTOR_TYPES = frozenset({
    "float2", "float4", "int2", "int4", "uint2", "uint4", "double2", "half2", "__half2", "nv_bfloat162",
    "__nv_bfloat162", "longlong2",
})
_MAX_DEPTH = 12
_ASSIGN_OPS = frozenset({"=", "+=", "-=", "*=", "/=", "++", "--"})
_DECL_PREV = INT_TYPES | _QUALIFIERS
_CONST = frozenset({"const", "constexpr"})
_RUNTIME_SIZE_READS = frozenset({"size", "sizes", "numel", "stride", "strides", "dim", "shape"})
_INTERESTING = _ASSIGN_OPS | _RUNTIME_SIZE_READS | _VECTOR_TYPES | {"define", "<<<", "dim3", "enum"}


@dataclass
class CppConstant:
    name: str
    kind: str  # macro | const | local | dim3
    body: list[int]  # token indices of the value
    value: Optional[int] = None
    name_index: int = -1


@dataclass
class Launch:
    index: int  # token index of <<<
    grid: list[int]
    block: list[int]
    grid_value: Optional[int] = None
    block_value: Optional[int] = None


@dataclass
class CppFacts:
    tokens: list[Token]
    constants: dict[str, CppConstant] = field(default_factory=dict)
    launches: list[Launch] = field(default_factory=list)
    vector_types: bool = False
    # size(), numel(), ... or a launch with a computed grid: the sizes are run-time values
    reads_sizes: bool = False
    launch_starts: list[int] = field(default_factory=list)
    _uses: Optional[dict[str, list[int]]] = None
    idents: dict[str, list[int]] = field(default_factory=dict)  # CppSource.by_text["ident"]

    @classmethod
    def of(cls, source: CppSource) -> "CppFacts":
        cached = getattr(source, "_gk2_facts", None)
        if cached is not None:
            return cached
        facts = cls(source.tokens, idents=source.by_text["ident"])
        facts._collect(source)
        source._gk2_facts = facts  # type: ignore[attr-defined]
        return facts

    # collection ------------------------------------------------------------------
    def _collect(self, source: CppSource) -> None:
        """Visits only the tokens that matter (a comprehension finds them); values of locals
        and the uses of names are computed only when a rule asks."""
        toks = self.tokens
        texts = list(map(itemgetter(1), toks))
        n = len(toks)
        assigned: dict[str, int] = {}
        skip_until = -1
        chain_end, chain_kind = -1, ""  # the comma after a declarator's value, and its kind
        for i in source.indices(_INTERESTING):
            if i < skip_until:
                continue
            word = texts[i]
            if word in _ASSIGN_OPS:
                if word in ("++", "--"):
                    target = i - 1 if i > 0 and toks[i - 1].kind == "ident" else i + 1
                else:
                    target = i - 1
                if 0 <= target < n and toks[target].kind == "ident":
                    assigned[texts[target]] = assigned.get(texts[target], 0) + 1
                # `constexpr int a = 64, b = 13;`: a declarator after the comma that ended the
                # last one's value is declared with the same qualifiers
                chained = i >= 2 and texts[i - 2] == "," and i - 2 == chain_end
                if word == "=" and i >= 2 and (texts[i - 2] in _DECL_PREV or chained) and toks[i - 1].kind == "ident":
                    end = i + 1
                    while end < n and texts[end] not in (";", ",", "{", "}"):
                        end += 1
                    kind = chain_kind if chained else "const" if set(texts[max(0, i - 5) : i - 1]) & _CONST else "local"
                    self._define(texts[i - 1], kind, list(range(i + 1, end)), i - 1)
                    chain_end, chain_kind = (end, kind) if end < n and texts[end] == "," else (-1, "")
            elif word == "define":
                if toks[i].kind == "directive" and i + 1 < n and toks[i + 1].kind == "ident":
                    skip_until = self._macro(source.text, toks, i + 1)
            elif word == "enum":
                skip_until = self._enum(toks, i)
            elif word == "<<<":
                self.launch_starts.append(i)
            elif word == "dim3":
                if i + 2 < n and toks[i + 1].kind == "ident" and texts[i + 2] in ("(", "{"):
                    close = match_close(toks, i + 2)
                    self._define(texts[i + 1], "dim3", list(range(i + 3, close)), i + 1)
                    assigned[texts[i + 1]] = assigned.get(texts[i + 1], 0) + 1
            elif word in _RUNTIME_SIZE_READS:
                self.reads_sizes = True
            else:
                self.vector_types = True
        for name, count in assigned.items():
            const = self.constants.get(name)
            if const is not None and const.kind != "macro" and count > 1:
                const.body = []  # reassigned: not a constant
        for const in self.constants.values():
            if const.kind in ("macro", "const"):
                const.value = self.evaluate(const.body)
        self._launches()
        # A grid computed at run time means the sizes reach the kernel, as arguments if not
        # through size() calls in this source.
        if any(launch.grid_value is None for launch in self.launches):
            self.reads_sizes = True

    def _macro(self, text: str, toks: list[Token], name_index: int) -> int:
        """`#define NAME body` (object-like): record it; return the index after the body."""
        name = toks[name_index]
        line_end_ = line_end(text, name.offset)
        j = name_index + 1
        while j < len(toks) and toks[j].offset < line_end_ and toks[j].kind != "directive":
            j += 1
        body = list(range(name_index + 1, j))
        function_like = bool(body) and toks[body[0]].text == "(" and toks[body[0]].offset == name.offset + len(name.text)
        if not function_like:
            if name.text in self.constants:
                self.constants[name.text].body = []  # redefined: ambiguous
            else:
                self.constants[name.text] = CppConstant(name.text, "macro", body, name_index=name_index)
        return j

    def _enum(self, toks: list[Token], at: int) -> int:
        """`enum [class] [Name] [: type] { A = 256, B = A * 4, C }`: each enumerator given a value
        is a constant, as `constexpr int A = 256;` is (red team round 11: a baked size written
        as an enumerator product). Returns the index after the body."""
        j = at + 1
        while j < len(toks) and j < at + 8 and toks[j].text not in ("{", ";"):
            j += 1
        if j >= len(toks) or toks[j].text != "{":
            return at + 1
        close = match_close(toks, j)
        for part in _split_commas(toks, j + 1, close):
            if len(part) > 2 and toks[part[0]].kind == "ident" and toks[part[1]].text == "=":
                self._define(toks[part[0]].text, "const", part[2:], part[0])
        return close + 1

    @property
    def uses(self) -> dict[str, list[int]]:
        if self._uses is None:
            self._uses = {}
            toks = self.tokens
            for name, const in self.constants.items():  # their identifiers, from the shared index
                for i in self.idents.get(name, ()):
                    if i != const.name_index and not (i > 0 and toks[i - 1].kind == "directive"):
                        self._uses.setdefault(name, []).append(i)  # not `#ifndef N` / `#undef N`
        return self._uses

    def _define(self, name: str, kind: str, body: list[int], name_index: int) -> None:
        if name in self.constants:
            self.constants[name].body = []  # defined twice (two functions): ambiguous
            return
        self.constants[name] = CppConstant(name, kind, body, name_index=name_index)

    def _launches(self) -> None:
        toks = self.tokens
        for i in self.launch_starts:
            end = i + 1
            while end < len(toks) and toks[end].text not in (">>>", ";"):
                end += 1
            parts = _split_commas(toks, i + 1, end)
            if len(parts) < 2:
                continue
            launch = Launch(i, parts[0], parts[1])
            launch.grid_value = self.geometry(parts[0])
            launch.block_value = self.geometry(parts[1])
            self.launches.append(launch)

    # evaluation -------------------------------------------------------------------
    def geometry(self, indices: list[int]) -> Optional[int]:
        """Number of blocks or threads an expression of a launch means (dim3 products)."""
        toks = self.tokens
        if len(indices) == 1 and toks[indices[0]].kind == "ident":
            const = self.constants.get(toks[indices[0]].text)
            if const is not None and const.kind == "dim3":
                return self.dim3_value(const)
        if len(indices) >= 3 and toks[indices[0]].text == "dim3" and toks[indices[1]].text in ("(", "{"):
            return self._product(_split_commas(toks, indices[1] + 1, indices[-1]))
        return self.evaluate(indices)

    def dim3_value(self, const: CppConstant) -> Optional[int]:
        if not const.body:
            return None
        return self._product(_split_commas(self.tokens, const.body[0], const.body[-1] + 1))

    def _product(self, parts: list[list[int]]) -> Optional[int]:
        product = 1
        for part in parts:
            value = self.evaluate(part)
            if value is None:
                return None
            product *= value
        return product if parts else None

    def evaluate(self, indices: list[int], depth: int = 0, nesting: int = 0) -> Optional[int]:
        if not indices or depth > _MAX_DEPTH:
            return None
        return ConstEvaluator(self.value_of, [self.tokens[i] for i in indices], depth, nesting).run()

    def value_of(self, name: str, depth: int, nesting: int = 0) -> Optional[int]:
        const = self.constants.get(name)
        if const is None or const.kind == "dim3" or not const.body:
            return None
        if const.value is not None:
            return const.value
        if const.kind == "local" and (const.body and self.tokens[const.body[0]].kind == "ident"
                                      and self.tokens[const.body[0]].text not in self.constants):
            return None  # `int n = x.size(0)` and the like: cheap early exit
        return self.evaluate(const.body, depth + 1, nesting)

    # how a token is used -----------------------------------------------------------
    def tile_use(self, i: int) -> bool:
        toks = self.tokens
        prev = toks[i - 1].text if i > 0 else ""
        nxt = toks[i + 1].text if i + 1 < len(toks) else ""
        for launch in self.launches:
            if i in launch.block and launch.grid_value is None:
                return True
            if i in launch.grid and launch.grid_value is None and prev == "/":
                return True
        if prev == "+=" or (prev == "+" and nxt == "-" and text_at(toks, i + 2) == "1"):
            return True
        if prev == "/" and i > 1 and toks[i - 2].text == ")" and _group_has_minus_one(toks, i - 2):
            return True
        if nxt == "/" and (value := parse_int(text_at(toks, i + 2))) is not None and value <= 64:
            return True
        if nxt == ">>" and (value := parse_int(text_at(toks, i + 2))) is not None and value <= 6:
            return True
        if prev == "*" and text_at(toks, i - 2) in ("x", "y", "z") and text_at(toks, i - 4) in ("blockIdx", "blockDim"):
            # blockIdx.x * T + threadIdx.x starts a tile; `x + blockIdx.x * COLS` or
            # `y[blockIdx.x * COLS + c]` steps over whole rows: a row stride, not a tile
            return text_at(toks, i - 4) == "blockDim" or _tile_start(toks, i)
        if nxt == "*" and text_at(toks, i + 2) in ("blockIdx", "blockDim"):
            return True
        if prev == "," and _enclosing_call(toks, i).lower().find("div") >= 0:
            return True
        return _in_launch_bounds(toks, i) or _in_shared_extent(toks, i)


def _tile_start(toks: list[Token], i: int) -> bool:
    """`blockIdx.x * T + threadIdx.x`, or `int base = blockIdx.x * T;`."""
    nxt = text_at(toks, i + 1)
    if nxt == "+":
        return any(text_at(toks, k) in ("threadIdx", "tid", "lane", "tx", "ty") for k in range(i + 2, i + 4))
    if nxt == ";":
        k = i - 5
        return text_at(toks, k) == "=" and text_at(toks, k - 2) in INT_TYPES | _QUALIFIERS
    return False


def _split_commas(toks: list[Token], start: int, end: int) -> list[list[int]]:
    parts: list[list[int]] = [[]]
    depth = 0
    for i in range(start, min(end, len(toks))):
        text = toks[i].text
        if text in ("(", "[", "{"):
            depth += 1
        elif text in (")", "]", "}"):
            depth -= 1
        if text == "," and depth == 0:
            parts.append([])
        else:
            parts[-1].append(i)
    return [p for p in parts if p]


def _open_paren(toks: list[Token], close: int) -> int:
    depth = 0
    for i in range(close, -1, -1):
        if toks[i].text == ")":
            depth += 1
        elif toks[i].text == "(":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _group_has_minus_one(toks: list[Token], close: int) -> bool:
    start = _open_paren(toks, close)
    return any(toks[k].text == "-" and text_at(toks, k + 1) == "1" for k in range(max(start, 0), close))


def _enclosing_call(toks: list[Token], i: int) -> str:
    depth = 0
    for k in range(i - 1, max(i - 40, -1), -1):
        text = toks[k].text
        if text == ")":
            depth += 1
        elif text == "(":
            if depth == 0:
                return text_at(toks, k - 1)
            depth -= 1
        elif text in (";", "{", "}"):
            return ""
    return ""


def _in_launch_bounds(toks: list[Token], i: int) -> bool:
    return _enclosing_call(toks, i) == "__launch_bounds__" or (
        text_at(toks, i - 1) == "(" and text_at(toks, i - 2) == "__launch_bounds__")


def _in_shared_extent(toks: list[Token], i: int) -> bool:
    """`__shared__ float tile[T][T + 1];`: an extent inside brackets of a __shared__ declaration."""
    inside = False
    for k in range(i - 1, max(i - 30, -1), -1):
        text = toks[k].text
        if text == "[":
            inside = True
        elif text in (";", "{", "}"):
            return False
        elif text == "__shared__":
            return inside
    return False

