"""How a number is used in C++/CUDA source, for the hardcoded-shape rules. Defines no rule.

A literal is a hardcoded shape only where it stands for a size: the bound a loop or a
guard compares against (`k < 8192`, `if (i >= N) return;`), an offset or a row stride in
an index (`x[768 + i]`, `x + 1536 + off`, `in[row * 8192 + k]`), or a size given to an
allocation or a view (`torch::empty({16, 48})`). Everywhere else (a cap in
`std::min(blocks, 4096)`, a bit pattern, a `__shared__` extent, a register array, a float
constant's neighbour) the same number is a coincidence.

- `CppRoles.of(source)`: per source, cached; `role(i)` gives "bound", "offset", "stride",
  "alloc" or None for the token at index i.
- `reads_sizes_at(i)`: whether the function around token i learns its sizes at run time (an
  integer parameter, or a `size()` / `numel()` call in its body). A literal in a size role
  there is a suspect (the real size is also read); in a function that reads none, likely.
"""

from __future__ import annotations

import weakref

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Optional

from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token, text_at

_COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!="})
# a type word right before a name declares it (`int KV_TILE>` in a template parameter list)
_DECLARING_TYPES = frozenset({"int", "unsigned", "long", "short", "size_t", "int64_t", "int32_t", "uint32_t",
                              "uint64_t", "bool", "char", "typename", "class", "auto"})
_ADDITIVE = frozenset({"+", "-"})
_INT_TYPES = frozenset({
    "int", "unsigned", "long", "short", "size_t", "int64_t", "int32_t", "uint32_t", "uint64_t",
    "index_t", "int16_t", "uint16_t", "signed",
})
_SCALAR_TYPES = _INT_TYPES | {"float", "double", "half", "__half", "bool", "char", "auto", "void", "cudaStream_t",
                               "__nv_bfloat16", "bfloat16", "dim3", "Tensor"}
_SIZE_CALLS = frozenset({"size", "sizes", "numel", "stride", "strides", "shape"})
ALLOC_CALLS = frozenset({
    "empty", "zeros", "ones", "full", "randn", "rand", "empty_strided", "view", "reshape", "expand",
    "new_empty", "new_zeros", "new_full",
})
# A chain of + - * / tokens ends at these (at depth 0).
_CHAIN_ENDS = frozenset({",", ";", "=", "+=", "-=", "*=", "/=", "{", "}", "?", ":", "return", "&&", "||"}) | _COMPARISONS
_DECL_BEFORE_NAME = frozenset({"*", "&"}) | _INT_TYPES | {"float", "double", "half", "__half", "bool", "char", "auto"}


@dataclass
class _Function:
    start: int  # token index of the body's "{"
    end: int
    pointers: set[str] = field(default_factory=set)
    reads_sizes: bool = False


@dataclass
class CppRoles:
    tokens: list[Token]
    functions: list[_Function] = field(default_factory=list)
    _starts: list[int] = field(default_factory=list)
    _arrays: Optional[set[str]] = None

    @classmethod
    def of(cls, source: CppSource) -> "CppRoles":
        cached = getattr(source, "_gk2_roles", None)
        if cached is not None:
            return cached
        roles = cls(source.tokens)
        # Functions are indexed on first use (most sources never ask). A weak reference: the
        # source holds its roles, and a cycle would keep every token alive until a collection.
        roles._source = weakref.ref(source)
        source._gk2_roles = roles  # type: ignore[attr-defined]
        return roles

    def _ensure(self) -> None:
        ref = self.__dict__.pop("_source", None)
        source = ref() if ref is not None else None
        if source is not None:
            self._collect(source)

    def _collect(self, source: CppSource) -> None:
        toks = self.tokens
        by_offset = {t.offset: k for k, t in enumerate(toks)}
        for fn in source.functions:
            name = by_offset.get(fn.offset)
            if name is None or name + 1 >= len(toks) or toks[name + 1].text != "(":
                continue
            info = _Function(fn.body_start, fn.body_end)
            structs: set[str] = set()
            for group in _groups(toks, name + 2, fn.body_start):
                texts = [t.text for t in group]
                idents = [t.text for t in group if t.kind == "ident"]
                if not idents:
                    continue
                if "*" in texts:
                    info.pointers.add(idents[-1])
                elif set(texts) & _INT_TYPES and "&" not in texts:
                    info.reads_sizes = True  # an integer argument: the size, most likely
                elif "Tensor" in texts:
                    info.pointers.add(idents[-1])
                elif len(idents) >= 2 and not set(idents) & _SCALAR_TYPES:
                    structs.add(idents[-1])  # `const Params& p`: sizes may come as its members
            if not info.reads_sizes and structs:
                body = toks[fn.body_start : fn.body_end]
                # `p.dim`, `args->n`: a parameter struct carries the sizes (CUTLASS-style Params)
                info.reads_sizes = any(t.text in structs and k + 1 < len(body) and body[k + 1].text in (".", "->")
                                       for k, t in enumerate(body))
            if not info.reads_sizes:
                body = toks[fn.body_start : fn.body_end]
                info.reads_sizes = any(t.text in _SIZE_CALLS and k + 1 < len(body) and body[k + 1].text == "("
                                       for k, t in enumerate(body))
            self.functions.append(info)
        self.functions.sort(key=lambda f: f.start)
        self._starts = [f.start for f in self.functions]

    @property
    def local_arrays(self) -> set[str]:
        """Names declared as arrays in this source (`__shared__ float s[256]`, `float acc[8]`)."""
        if self._arrays is None:
            toks = self.tokens
            self._arrays = {toks[k - 1].text for k, t in enumerate(toks)
                            if t.text == "[" and k > 0 and toks[k - 1].kind == "ident" and not _is_index(toks, k)}
        return self._arrays

    def function_at(self, i: int) -> Optional[_Function]:
        self._ensure()
        k = bisect_right(self._starts, i) - 1
        while k >= 0:
            fn = self.functions[k]
            if fn.start <= i <= fn.end:
                return fn
            k -= 1
        return None

    def reads_sizes_at(self, i: int) -> bool:
        fn = self.function_at(i)
        return fn.reads_sizes if fn is not None else False

    def indexes_global(self, i: int) -> bool:
        """The offset or stride at i indexes a pointer parameter (`x[row * 1024 + k]`,
        `x + 1024 + off`): global memory laid out by the input's shape, not a shared tile."""
        fn = self.function_at(i)
        if fn is None or not fn.pointers:
            return False
        opener = _opener(self.tokens, i)
        if opener is not None and self.tokens[opener].text == "[":
            return self._pointer(fn, opener - 1)
        return any(self._pointer(fn, k) for k in _chain(self.tokens, i)) or self._local_indexes(fn, i)

    def _local_indexes(self, fn: _Function, i: int, depth: int = 0) -> bool:
        """The number at i is part of the value a local is initialised with (`const int64_t dst =
        ((b * 4096 + slot) * heads + h) * 128;`), and that local indexes one of fn's pointer
        parameters later (`k_cache + dst + c`, `out[dst]`), directly or through one more local:
        the same offset as if it were written in the index."""
        toks = self.tokens
        name = _initialised_local(toks, i)
        if name is None or depth > 1:
            return False
        end = _statement_end(toks, i)
        for k in range(end + 1, fn.end):
            if toks[k].text != name or text_at(toks, k - 1) in (".", "->", "::"):
                continue
            opener = _opener(toks, k)
            if opener is not None and toks[opener].text == "[" and _is_index(toks, opener):
                if self._pointer(fn, opener - 1):
                    return True
                continue
            prev, nxt = text_at(toks, k - 1), text_at(toks, k + 1)
            # pointer arithmetic needs a + or - beside the local (`p + dst`); a launch's shared
            # memory size or a count handed to a call is no index
            if (prev in _ADDITIVE or nxt in _ADDITIVE) and any(self._pointer(fn, j) for j in _chain(toks, k)):
                return True
            if (prev in _ADDITIVE or nxt in _ADDITIVE or prev == "*" or nxt == "*") \
                    and self._local_indexes(fn, k, depth + 1):
                return True
        return False

    def _pointer(self, fn: _Function, k: int) -> bool:
        """Token k names one of fn's pointer parameters (not `threadIdx.x` when x is one)."""
        return self.tokens[k].text in fn.pointers and text_at(self.tokens, k - 1) not in (".", "->", "::")

    # roles ---------------------------------------------------------------------------
    def role(self, i: int) -> Optional[str]:
        toks = self.tokens
        prev, nxt = text_at(toks, i - 1), text_at(toks, i + 1)
        if prev in ("<", ">") and nxt in (">", ","):
            return None  # a template argument: foo<256>(...)
        if prev in _DECLARING_TYPES:
            return None  # `template <int BM, int TILE>`: a name being declared, not a use (`>` closes the list)
        if prev == "%" and nxt in ("==", "!=") and text_at(toks, i + 2) == "0":
            return None  # `off % 32 == 0`: a divisibility or alignment test bounds nothing
        if prev in _COMPARISONS or nxt in _COMPARISONS:
            if toks[i].text == "32" and _thread_index_compared(toks, i):
                return None  # `threadIdx.x < 32`, `lane < 32`: the first warp, the warp width
            return None if in_static_assert(toks, i) else "bound"
        opener = _opener(toks, i)
        if opener is not None and toks[opener].text == "[" and _is_index(toks, opener):
            if text_at(toks, opener - 1) in self.local_arrays:
                return None  # s[t0 + 48] into a __shared__ or register array: tile geometry
            if prev in _ADDITIVE or nxt in _ADDITIVE or (prev == "[" and nxt == "]"):
                return "offset"
            if prev == "*" or nxt == "*":
                return "stride"
            return None
        if opener is not None and toks[opener].text in ("{", "(") and _alloc_call(toks, opener):
            return "alloc"
        if prev in _ADDITIVE or nxt in _ADDITIVE:
            fn = self.function_at(i)
            if fn is not None and fn.pointers and any(self._pointer(fn, k) for k in _chain(toks, i)):
                return "offset"  # pointer arithmetic: x + 768 + off
        if prev in _ADDITIVE or nxt in _ADDITIVE or prev == "*" or nxt == "*":
            fn = self.function_at(i)
            if fn is not None and fn.pointers and self._local_indexes(fn, i):
                # an index computed into a local first: `dst = (b * 4096 + slot) * 128; p + dst`
                return "offset" if prev in _ADDITIVE or nxt in _ADDITIVE else "stride"
        return None


def _initialised_local(toks: list[Token], i: int) -> Optional[str]:
    """The local whose initialiser or assignment holds the number at i (`int64_t dst = (b *
    4096 + s) * 128;`, `dst = ...;`), through grouping parentheses only: a number inside a
    call's arguments (`int n = min(4096, x)`) is the callee's, not the local's value."""
    k, depth = i - 1, 0
    while k >= 0 and i - k < 120:
        text = toks[k].text
        if text in (")", "]"):
            depth += 1
        elif text in ("(", "["):
            if depth == 0:
                if text == "[" or (k > 0 and (toks[k - 1].kind == "ident" or toks[k - 1].text in (")", "]", ">"))):
                    return None  # an index or a call's argument list (a cast `(int64_t)` stays)
            else:
                depth -= 1
        elif text in (";", "{", "}", ",", "?", ":", "return"):
            return None
        elif text == "=" and depth == 0:
            if k > 0 and toks[k - 1].kind == "ident":
                return toks[k - 1].text
            return None
        k -= 1
    return None


def _statement_end(toks: list[Token], i: int) -> int:
    k = i
    while k < len(toks) and toks[k].text != ";":
        k += 1
    return k


def _groups(toks: list[Token], start: int, end: int) -> list[list[Token]]:
    """Parameter declarations between `(` (exclusive, at start - 1) and its `)`."""
    out: list[list[Token]] = [[]]
    depth = 0
    for k in range(start, min(end, len(toks))):
        text = toks[k].text
        if text in ("(", "<", "["):
            depth += 1
        elif text in (")", ">", "]"):
            if depth == 0:
                break
            depth -= 1
        if text == "," and depth == 0:
            out.append([])
        else:
            out[-1].append(toks[k])
    return [g for g in out if g]


def _opener(toks: list[Token], i: int) -> Optional[int]:
    """Index of the innermost unclosed bracket before i in the same statement."""
    depth = 0
    for k in range(i - 1, max(i - 80, -1), -1):
        text = toks[k].text
        if text in (")", "]", "}"):
            depth += 1
        elif text in ("(", "[", "{"):
            if depth == 0:
                return k
            depth -= 1
        elif text == ";" and depth == 0:
            return None
    return None


def _is_index(toks: list[Token], bracket: int) -> bool:
    """`x[...]` is an index; `float buf[96]` and `__shared__ float s[256]` declare arrays."""
    before = text_at(toks, bracket - 1)
    if before == "]":
        depth, k = 0, bracket - 1
        while k >= 0:  # a[i][j] indexes as a[i] does; float t[N][M] declares as t[N] does
            depth += {"]": 1, "[": -1}.get(toks[k].text, 0)
            if depth == 0:
                return _is_index(toks, k)
            k -= 1
        return True
    if before == ")":
        return True  # f(x)[i]
    if bracket < 1 or toks[bracket - 1].kind != "ident":
        return False
    two_before = toks[bracket - 2] if bracket >= 2 else None
    if two_before is None:
        return True
    return not (two_before.text in _DECL_BEFORE_NAME
                or (two_before.kind == "ident" and two_before.text not in ("return", "else", "case", "do")))


def _alloc_call(toks: list[Token], opener: int) -> bool:
    k = opener
    if toks[k].text == "{" and text_at(toks, k - 1) == "(":
        k -= 1
    return toks[k].text == "(" and text_at(toks, k - 1) in ALLOC_CALLS


def _chain(toks: list[Token], i: int) -> list[int]:
    """The tokens of the arithmetic expression around i, up to the nearest delimiter."""
    out: list[int] = []
    for step in (-1, 1):
        depth, k = 0, i + step
        while 0 <= k < len(toks):
            text = toks[k].text
            if text in ("(", "[") and step == -1 or text in (")", "]") and step == 1:
                if depth == 0:
                    break
                depth -= 1
            elif text in (")", "]") and step == -1 or text in ("(", "[") and step == 1:
                depth += 1
            elif depth == 0 and text in _CHAIN_ENDS:
                break
            out.append(k)
            k += step
    return out


def in_static_assert(toks: list[Token], i: int) -> bool:
    """Inside `static_assert(...)`: a compile-time check of constants, never a run-time size."""
    depth = 0
    for k in range(i - 1, max(i - 200, -1), -1):
        text = toks[k].text
        if text in (")", "]"):
            depth += 1
        elif text in ("(", "["):
            if depth == 0 and text == "(" and text_at(toks, k - 1) == "static_assert":
                return True
            depth = max(0, depth - 1)
        elif text in (";", "{", "}"):
            return False
    return False


def tile_bound(toks: list[Token], i: int) -> bool:
    """A bound that runs over a tile, not over the data: inside a `for (...)` header, or a
    comparison with threadIdx (`for (k = 0; k < TILE; ++k)`, `if (threadIdx.x < TILE)`)."""
    depth = 0
    for k in range(i - 1, max(i - 80, -1), -1):
        text = toks[k].text
        if text == ")":
            depth += 1
        elif text == "(":
            if depth == 0 and text_at(toks, k - 1) == "for":
                return True
            depth = max(0, depth - 1)
        elif text in ("{", "}"):
            break
    return any(toks[k].text == "threadIdx" for k in _chain(toks, i - 2 if text_at(toks, i - 1) in _COMPARISONS else i + 2))


_LANE_WORDS = frozenset({"lane", "laneid", "lane_id", "laneId", "tid", "warp_lane"})


def _thread_index_compared(toks, i: int) -> bool:  # type: ignore[no-untyped-def]
    """The other side of the comparison at i is a thread or lane index (`threadIdx.x < 32`,
    `32 > lane`): the number is the warp width, whatever size of the problem it equals."""
    op = i - 1 if text_at(toks, i - 1) in _COMPARISONS else i + 1
    if op == i - 1:
        side = [text_at(toks, k) for k in range(max(0, op - 3), op)]
    else:
        side = [text_at(toks, k) for k in range(op + 1, min(len(toks), op + 4))]
    return "threadIdx" in side or any(word in _LANE_WORDS for word in side[-1:] + side[:1])
