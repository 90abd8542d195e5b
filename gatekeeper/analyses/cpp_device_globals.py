"""Device-resident globals of a CUDA source that outlive a launch, for GK112. Not a rule file.

A `__device__` (or `__managed__`) variable at file scope keeps its value from one launch to
the next. It is a *launch counter* when device code advances or writes it (`atomicAdd(&g, 1)`,
`g++`, `g = ...`) and nothing resets it for each launch: no host `cudaMemcpyToSymbol(g, ...)`
or `cudaGetSymbolAddress(..., g)` (then a memset), no device `g = 0` / `atomicExch(&g, 0)`, no
`atomicInc(&g, gridDim.x ...)` (a ticket that wraps every launch, the "last block" pattern).
"""

from __future__ import annotations

from dataclasses import dataclass

from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import match_close, split_args

_QUALIFIERS = frozenset({"__device__", "__managed__"})
_ATOMICS = frozenset({"atomicAdd", "atomicSub", "atomicInc", "atomicDec", "atomicExch", "atomicCAS", "atomicMax",
                      "atomicMin", "atomicOr", "atomicAnd", "atomicXor", "atomicAdd_system", "atomicAdd_block"})
_HOST_RESETS = frozenset({"cudaMemcpyToSymbol", "cudaMemcpyToSymbolAsync", "cudaGetSymbolAddress"})
_WRITES = frozenset({"=", "+=", "-=", "|=", "^=", "&=", "*="})


@dataclass
class DeviceGlobal:
    name: str
    offset: int  # its declaration
    written_at: int  # a device write (token index)


def _declared(source: CppSource) -> dict[str, int]:
    """File-scope `__device__` / `__managed__` variables (not functions): name -> its token index."""
    tokens = source.tokens
    inside = bytearray(len(tokens))
    for fn in source.functions:
        inside[fn.body_start:fn.body_end + 1] = b"\x01" * (fn.body_end + 1 - fn.body_start)
    out: dict[str, int] = {}
    for qualifier in _QUALIFIERS:
        for i in source.by_text["ident"].get(qualifier, ()):
            if inside[i]:
                continue
            j = i + 1
            while j < len(tokens) and tokens[j].text not in (";", "=", "[", "{", "(", ")"):
                j += 1
            if j < len(tokens) and tokens[j].text != "(" and tokens[j - 1].kind == "ident" and j - 1 > i:
                out[tokens[j - 1].text] = j - 1  # the name's token: its initialiser is no reset
    return out


def launch_counters(source: CppSource) -> list[DeviceGlobal]:
    idents = source.by_text["ident"]
    if not idents.keys() & _QUALIFIERS:
        return []
    tokens = source.tokens
    out: list[DeviceGlobal] = []
    for name, declared in _declared(source).items():
        written, reset = None, False
        for i in idents.get(name, ()):
            if i == declared or (i and tokens[i - 1].text in (".", "->")):
                continue
            call = _enclosing_call(tokens, i)
            if call is not None:
                callee, args = call
                if callee in _HOST_RESETS:
                    reset = True
                elif callee in _ATOMICS and args and name in args[0]:
                    value = args[1] if len(args) > 1 else []
                    if callee == "atomicExch" and value in (["0"], ["0u"], ["0U"]) or \
                            callee == "atomicInc" and "gridDim" in value:
                        reset = True
                    elif written is None:
                        written = i
                continue
            nxt = tokens[i + 1].text if i + 1 < len(tokens) else ""
            if nxt == "[":
                close = match_close(tokens, i + 1)
                nxt = tokens[close + 1].text if close + 1 < len(tokens) else ""
                after = close + 2
            else:
                after = i + 2
            prev = tokens[i - 1].text if i else ""
            if nxt == "=" and after < len(tokens) and tokens[after].text in ("0", "0u", "0U", "0.f", "0.0f", "0.0"):
                reset = True
            elif nxt in _WRITES or nxt in ("++", "--") or prev in ("++", "--"):
                written = i if written is None else written
        if written is not None and not reset:
            out.append(DeviceGlobal(name, tokens[declared].offset, written))
    return out


def _enclosing_call(tokens, i: int):
    """(callee, args as token texts) when token i is inside a call's parentheses on its own statement."""
    depth, j = 0, i - 1
    while j >= 0 and i - j < 64:
        t = tokens[j].text
        if t == ")":
            depth += 1
        elif t == "(":
            if depth == 0:
                if j and tokens[j - 1].kind == "ident":
                    return tokens[j - 1].text, split_args(tokens, j)
                return None
            depth -= 1
        elif t in (";", "{", "}"):
            return None
        j -= 1
    return None
