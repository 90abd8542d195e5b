"""Which parts of a CUDA source are device code only. Not a rule file.

The host-side checks (a tensor method such as `x.sum(-1)` is torch computing) skip device
code, where `tile.any(...)` is cooperative groups and not a tensor. Red team round 12 hid
`v.sum(-1)` in a `__host__ __device__` template under `#if !defined(__CUDA_ARCH__)`: the
scanner had skipped it as device code. The invariant:

- device code is the body of a function marked `__global__` or `__device__` and *not*
  `__host__` (also through a macro: `#define HD __host__ __device__`, `C10_HOST_DEVICE`);
  a `__host__ __device__` body is compiled for the host too, so it is host code, and so is a
  `__device__ constexpr` one (host code may call it under `--expt-relaxed-constexpr`);
- the arm of a `__CUDA_ARCH__` conditional that the host pass compiles (`#ifndef
  __CUDA_ARCH__`, `#if !defined(__CUDA_ARCH__)`, the `#else` of `#ifdef __CUDA_ARCH__`, the
  `#else` of `#if __CUDA_ARCH__ >= 800`) is host code, wherever it sits; an arm only the
  device pass compiles (`#ifdef __CUDA_ARCH__`) is device code, wherever it sits.

Conditions are evaluated with `__CUDA_ARCH__` undefined (the host pass) and every other
name both ways; an arm whose value the scan cannot settle counts as host code.
"""

from __future__ import annotations

from typing import Optional

from gatekeeper.static.cpp_functions import CppFunction
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token, line_end, parse_int

Span = tuple[int, int]  # character offsets, inclusive

_ARCH = "__CUDA_ARCH__"
_KNOWN_MARKS = {"C10_HOST_DEVICE": {"__host__", "__device__"}, "C10_DEVICE": {"__device__"},
                "C10_HOST": {"__host__"}, "__hostdev__": {"__host__", "__device__"}}
_CONDITIONALS = frozenset({"if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif"})


def _marks(tokens: list[Token], macros: dict[str, list[Token]]) -> set[str]:
    """The execution-space keywords among `tokens`, macros expanded (two levels)."""
    out: set[str] = set()
    for tok in tokens:
        out.add(tok.text)
        out |= _KNOWN_MARKS.get(tok.text, set())
        for inner in macros.get(tok.text, ()):
            out.add(inner.text)
            out |= {t.text for t in macros.get(inner.text, ())} | _KNOWN_MARKS.get(inner.text, set())
    return out


def _device_functions(source: CppSource, fns: list[CppFunction]) -> list[Span]:
    tokens, macros = source.tokens, source.macros
    spans = []
    for fn in fns:
        at = fn.body_start  # the name token sits before the parameter list, which ends before the body
        while at > 0 and tokens[at].offset != fn.offset:
            at -= 1
        marks = _marks(tokens[max(0, at - 10):at], macros)
        # `__device__ constexpr` is callable from host code under --expt-relaxed-constexpr: host code too
        if ("__global__" in marks or "__device__" in marks) and not marks & {"__host__", "constexpr"}:
            spans.append((tokens[fn.body_start].offset, tokens[fn.body_end].offset))
    return spans


def _host_value(cond: list[Token], macros: dict[str, list[Token]]) -> Optional[bool]:
    """A `#if` condition's value in the host pass (`__CUDA_ARCH__` undefined), or None when
    it depends on names the scan does not know."""
    values = set()
    for unknown in ("0", "1"):
        words: list[str] = []
        k = 0
        while k < len(cond):
            text = cond[k].text
            if text == "defined":
                named = cond[k + 2].text if k + 2 < len(cond) and cond[k + 1].text == "(" else \
                    (cond[k + 1].text if k + 1 < len(cond) else "")
                k += 4 if k + 1 < len(cond) and cond[k + 1].text == "(" else 2
                words.append("0" if named == _ARCH else ("1" if named in macros else unknown))
                continue
            if text == _ARCH:
                words.append("0")
            elif cond[k].kind == "ident":
                body = macros.get(text)
                words.append(f"({_expr(body, macros)})" if body else unknown)
            elif cond[k].kind == "number":
                number = parse_int(text)
                words.append(str(number) if number is not None else unknown)
            else:
                words.append({"&&": " and ", "||": " or ", "!": " not "}.get(text, text))
            k += 1
        expr = "".join(words).replace("/", "//")
        if "**" in expr or "<<" in expr:
            return None  # only digits and operators reach eval; no power tower or huge shift either
        try:
            values.add(bool(eval(expr, {"__builtins__": {}})))  # noqa: S307
        except Exception:
            return None
    return values.pop() if len(values) == 1 else None


def _expr(body: list[Token], macros: dict[str, list[Token]]) -> str:
    value = _host_value(body, {k: v for k, v in macros.items() if v is not body})
    return "1" if value else "0" if value is False else "1"


def _mentions_arch(cond: list[Token], macros: dict[str, list[Token]]) -> bool:
    return any(t.text == _ARCH or any(u.text == _ARCH for u in macros.get(t.text, ())) for t in cond)


def arch_arms(source: CppSource) -> tuple[list[Span], list[Span]]:
    """The (host, device) arms of `__CUDA_ARCH__` conditionals, as character spans."""
    tokens, text, macros = source.tokens, source.text, source.macros
    if _ARCH not in source.by_text["ident"]:
        return [], []
    host: list[Span] = []
    device: list[Span] = []
    # a stack of open conditionals: [arch?, start of the current arm, its host value, a prior arm true]
    stack: list[list] = []
    for i, tok in enumerate(tokens):
        if tok.kind != "directive" or tok.text not in _CONDITIONALS:
            continue
        end = line_end(text, tok.offset)
        j = i + 1
        while j < len(tokens) and tokens[j].offset < end and tokens[j].kind != "directive":
            j += 1
        cond = tokens[i + 1:j]
        if tok.text in ("elif", "elifdef", "elifndef", "else", "endif") and stack:
            frame = stack[-1]
            if frame[0]:
                (host if frame[2] is not False else device).append((frame[1], tok.offset))
            frame[3] = frame[3] or frame[2] is True
            if tok.text == "endif":
                stack.pop()
                continue
        value = _arm_value(tok.text, cond, macros)
        if tok.text in ("if", "ifdef", "ifndef"):
            stack.append([_mentions_arch(cond, macros), end, value, False])
        elif stack:
            frame = stack[-1]
            frame[0] = frame[0] or _mentions_arch(cond, macros)
            frame[1], frame[2] = end, (False if frame[3] else value)
    return host, device


def _arm_value(kind: str, cond: list[Token], macros: dict[str, list[Token]]) -> Optional[bool]:
    if kind == "else":
        return True
    name = cond[0].text if cond else ""
    if kind in ("ifdef", "elifdef"):
        return False if name == _ARCH else None
    if kind in ("ifndef", "elifndef"):
        return True if name == _ARCH else None
    return _host_value(cond, macros)


class DeviceCode:
    """`in_device(offset)`: the offset is in code only the device pass compiles."""

    def __init__(self, source: CppSource, fns: list[CppFunction]) -> None:
        host, device_arms = arch_arms(source)
        self.device = _device_functions(source, fns) + device_arms
        self.host = host

    def in_device(self, offset: int) -> bool:
        return any(a <= offset <= b for a, b in self.device) and not any(a <= offset <= b for a, b in self.host)

