"""Symbol bindings: a name the source declares that the linker resolves to another symbol.

Why (red team round 12): `static int panel_product(...) __attribute__((weakref("cublasSgemm_v2")));`
makes every call of `panel_product` a call of cuBLAS's SGEMM, whatever the name says. The
same binding is spelled `__attribute__((alias("X")))`, `[[gnu::weakref("X")]]`, an assembler
label on a declaration (`void mix(...) __asm__("sgemm_")`), `#pragma redefine_extname mix X`
and `#pragma weak mix = X`. Each makes the declared name *be* X for the checks that read
names (static/cpp_names.py feeds the rewritten tokens to the ATen and vendor checks).

A target that is an Itanium-mangled name in a namespace (`_ZN2at6matmulERKNS_6TensorES2_`)
is read back as its qualified name (`at::matmul`), so a binding to ATen reads as ATen.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

from gatekeeper.static.cpp_tokens import Token

_STRINGS = r'((?:"[^"\n]*"\s*)+)'
# `__attribute__((weakref("X")))`, `((weak, alias("X")))`, `[[gnu::alias("X")]]`, `__weakref__`
_ATTRIBUTE = re.compile(r"(?:__attribute__\s*\(\s*\(|\[\[)[^;{}]*?\b(?:gnu\s*::\s*)?_*(?:weakref|alias)_*\s*\(\s*" + _STRINGS + r"\)")
# `void mix(...) __asm__("sgemm_")`: a declaration's parameter list (no nested parentheses), then the label
_ASM_LABEL = re.compile(r"\b[A-Za-z_]\w*\s*\([^;{}()]*\)\s*(?:__asm__|asm)\s*\(\s*" + _STRINGS + r"\)")
# the target named by a macro: `#define TARGET "cublasSgemm_v2"` then `weakref(TARGET)`, or a binding
# macro that stringizes its argument: `#define BIND(x) __attribute__((weakref(#x)))` then `BIND(cublasSgemm_v2)`
_ATTRIBUTE_MACRO = re.compile(r"(?:__attribute__\s*\(\s*\(|\[\[)[^;{}]*?\b(?:gnu\s*::\s*)?_*(?:weakref|alias)_*\s*\(\s*([A-Za-z_]\w*)\s*\)")
_STRING_MACRO = re.compile(r'^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+"([^"\n]*)"', re.M)
_BINDING_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(\s*(\w+)\s*\)[^\n]*\b(?:weakref|alias|__asm__|asm)\s*\(\s*#\s*\2\s*\)", re.M)
_REDEFINE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+redefine_extname[ \t]+(\w+)[ \t]+(\w+)", re.M)
_WEAK = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+weak[ \t]+(\w+)[ \t]*=[ \t]*(\w+)", re.M)
_IDENT = re.compile(r"[A-Za-z_]\w*")
_SYMBOL = re.compile(r"[A-Za-z_][\w$.@]*")  # a linker symbol, not inline assembly's text
_NOT_NAMES = frozenset({"__attribute__", "asm", "__asm__", "alignas", "decltype", "__declspec", "const", "noexcept"})
# statements that are no declaration: `if (x) asm("trap;");` binds nothing
_KEYWORDS = frozenset({"if", "while", "for", "switch", "return", "do", "else", "case", "sizeof", "throw", "volatile"})


class Binding(NamedTuple):
    name: str       # the name the source declares
    target: str     # the symbol it resolves to, as written
    chain: tuple[str, ...]  # the target as a qualified name (`("at", "matmul")`, `("cublasSgemm_v2",)`)
    start: int      # the declaration's extent in the text (its own tokens are not rewritten)
    end: int


def demangle(symbol: str) -> tuple[str, ...]:
    """`_ZN2at6matmulE...` -> ("at", "matmul"); `_Z6matmulv` -> ("matmul",); others as written."""
    m = re.match(r"_Z(N?)", symbol)
    if m is None:
        return (symbol,)
    i, parts = m.end(), []
    while i < len(symbol) and symbol[i].isdigit():
        digits = re.match(r"\d+", symbol[i:])
        assert digits is not None
        size = int(digits.group())
        i += len(digits.group())
        parts.append(symbol[i:i + size])
        i += size
        if not m.group(1):
            break  # a plain `_Z<len><name>`: one name
    return tuple(parts) or (symbol,)


def _declared_name(text: str, start: int, end: int) -> Optional[str]:
    """The name a declaration between `start` and `end` declares: the identifier before its
    first `(` (a function) or its last identifier before `=`/`;` (a variable)."""
    body = _ATTRIBUTE.sub(" ", text[start:end])
    body = re.sub(r"(?:__asm__|asm)\s*\([^)]*\)", " ", body)
    body = re.sub(r'extern\s*"[^"]*"', " ", body)
    paren = body.find("(")
    head = body[:paren] if paren >= 0 else body.split("=")[0]
    names = [n for n in _IDENT.findall(head) if n not in _NOT_NAMES]
    if not names or _KEYWORDS & set(names):
        return None
    return names[-1]


def _statement(text: str, at: int) -> tuple[int, int]:
    """The extent of the declaration around `at`: from after the previous `;`, `{` or `}`
    (or a preprocessor line) to its `;`."""
    start = max(text.rfind(c, 0, at) for c in ";{}\n#") + 1
    while True:  # a declaration may span lines: step back over lines that do not end one
        prev_nl = text.rfind("\n", 0, start - 1)
        line = text[prev_nl + 1:start].strip()
        if start <= 1 or not line or line.endswith((";", "{", "}")) or line.startswith("#"):
            break
        start = prev_nl + 1
    end = text.find(";", at)
    return start, (end if end >= 0 else len(text))


def symbol_bindings(text: str) -> list[Binding]:
    if "alias" not in text and "weakref" not in text and "asm" not in text and "pragma" not in text:  # the usual case
        return []
    out: list[Binding] = []
    for pattern in (_ATTRIBUTE, _ASM_LABEL):
        for m in pattern.finditer(text):
            target = "".join(re.findall(r'"([^"\n]*)"', m.group(m.lastindex or 1)))
            start, end = _statement(text, m.start())
            name = _declared_name(text, start, end)
            if name and _SYMBOL.fullmatch(target) and name != target:
                out.append(Binding(name, target, demangle(target), start, end))
    strings = dict(_STRING_MACRO.findall(text))
    for m in _ATTRIBUTE_MACRO.finditer(text):
        target = strings.get(m.group(1), "")
        start, end = _statement(text, m.start())
        name = _declared_name(text, start, end)
        if name and _SYMBOL.fullmatch(target) and name != target:
            out.append(Binding(name, target, demangle(target), start, end))
    for macro, _param in _BINDING_MACRO.findall(text):
        for m in re.finditer(r"\b" + re.escape(macro) + r"\s*\(\s*(\w+)\s*\)", text):
            if text[max(0, m.start() - 20):m.start()].rstrip().endswith("define"):
                continue
            start, end = _statement(text, m.start())
            name = _declared_name(text.replace(m.group(0), " " * len(m.group(0))), start, end)
            if name and name != m.group(1):
                out.append(Binding(name, m.group(1), demangle(m.group(1)), start, end))
    for pattern in (_REDEFINE, _WEAK):
        for m in pattern.finditer(text):
            name, target = m.group(1), m.group(2)
            out.append(Binding(name, target, demangle(target), m.start(), m.end()))
    return out


def bind_symbols(tokens: list[Token], text: str) -> tuple[list[Token], dict[int, str]]:
    """`tokens` with each use of a bound name replaced by its target's qualified name (at the
    use's offset), and for each rewritten index the name as the source spells it. Names inside
    their own declaration are kept (the declaration calls nothing)."""
    bindings = symbol_bindings(text)
    if not bindings:
        return tokens, {}
    by_name = {b.name: b for b in bindings}
    spans = [(b.start, b.end) for b in bindings]
    out: list[Token] = []
    bound: dict[int, str] = {}
    for tok in tokens:
        b = by_name.get(tok.text) if tok.kind == "ident" else None
        if b is None or any(s <= tok.offset <= e for s, e in spans):
            out.append(tok)
            continue
        for k, part in enumerate(b.chain):
            if k:
                bound[len(out)] = tok.text
                out.append(Token("punct", "::", tok.offset))
            bound[len(out)] = tok.text
            out.append(Token("ident", part, tok.offset))
    return out, bound
