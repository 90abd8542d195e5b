"""Tensors kept as members of a struct with static storage, for GK105. Not a rule file.

`struct Cache { at::Tensor out; }; static Cache& cache() { static Cache c; return c; }` then
`auto& c = cache(); ... return c.out;` returns the same storage on every call, as a `static
at::Tensor` does; the tensor is only one member access away (red team round 9, left open).

- *Tensor structs*: structs and classes of the source with an `at::Tensor` / `torch::Tensor`
  member (directly, or an optional / container of them).
- *Persistent structs*: variables of such a type with static storage (`static`,
  `thread_local`, namespace scope: `persistent_names`), and functions returning one by
  reference or pointer (getters: `static Cache& cache() { static Cache c; return c; }`).
- A *member return*: `return c.out;`, `return cache().out;`, `return g->out;` where `c` is a
  persistent struct, a getter's result, or a local reference bound to either.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from gatekeeper.analyses.cpp_output_memo import persistent_names
from gatekeeper.static.cpp_sources import CppSource

_TENSOR_WORDS = frozenset({"Tensor", "TensorList"})
_COPIES = frozenset({"clone", "detach", "contiguous", "to", "view", "reshape"})


class MemberReturn(NamedTuple):
    index: int  # token index of `return`
    base: str  # the persistent struct (variable or getter) it reads
    member: str  # the tensor member returned
    member_index: int  # token index of the member name
    copy: str  # "" or the copying method (`return c.out.clone();`)


def tensor_structs(source: CppSource) -> dict[str, set[str]]:
    """Struct / class name -> its tensor members."""
    tokens = source.tokens
    out: dict[str, set[str]] = {}
    for keyword in ("struct", "class"):
        for i in source.by_text["ident"].get(keyword, ()):
            if i + 2 >= len(tokens) or tokens[i + 1].kind != "ident":
                continue
            j = i + 2
            while j < len(tokens) and tokens[j].text not in ("{", ";") and j < i + 30:
                j += 1  # `struct S : Base {`, `struct alignas(16) S {`
            if j >= len(tokens) or tokens[j].text != "{":
                continue
            members = _tensor_members(tokens, j)
            if members:
                out[tokens[i + 1].text] = members
    return out


def _tensor_members(tokens, brace: int) -> set[str]:  # type: ignore[no-untyped-def]
    members: set[str] = set()
    depth, statement = 0, []
    for k in range(brace, len(tokens)):
        text = tokens[k].text
        if text == "{":
            depth += 1
            statement = []
            continue
        if text == "}":
            depth -= 1
            if depth == 0:
                break
            statement = []
            continue
        if depth != 1:
            continue
        if text == ";":
            words = [t.text for t in statement]
            if _TENSOR_WORDS & set(words) and "(" not in words:
                names = [t.text for n, t in enumerate(statement) if t.kind == "ident"
                         and (n + 1 == len(statement) or statement[n + 1].text in ("=", ",", "{", "["))]
                members.update(n for n in names if n not in _TENSOR_WORDS)
            statement = []
        else:
            statement.append(tokens[k])
    return members


def persistent_structs(source: CppSource, structs: dict[str, set[str]]) -> dict[str, str]:
    """Persistent variable or getter name -> its struct type."""
    tokens = source.tokens
    ends = {tok.offset: k for k, tok in enumerate(tokens) if tok.text == ";"}
    out: dict[str, str] = {}
    for name, offset in persistent_names(source).items():
        end = ends.get(offset)
        if end is None:
            continue
        start = end
        while start > 0 and tokens[start - 1].text not in (";", "{", "}"):
            start -= 1
        kind = next((t.text for t in tokens[start:end] if t.text in structs), None)
        if kind is not None:
            out[name] = kind
    for fn in source.functions:  # getters: `Cache& cache() { static Cache c; return c; }`
        k = fn.body_start
        while k < fn.body_end:
            if tokens[k].text == "return" and k + 2 < fn.body_end and tokens[k + 1].text in out \
                    and tokens[k + 2].text == ";" and _returns_reference(source, fn):
                out[fn.name] = out[tokens[k + 1].text]
            k += 1
    return out


def _returns_reference(source: CppSource, fn) -> bool:  # type: ignore[no-untyped-def]
    tokens = source.tokens
    at = next((k for k, t in enumerate(tokens) if t.offset == fn.offset), None)
    if at is None:
        return False
    k = at - 1
    while k >= 0 and tokens[k].text not in (";", "{", "}") and k > at - 12:
        if tokens[k].text in ("&", "*"):
            return True
        k -= 1
    return False


def member_returns(source: CppSource, fn, persistent: dict[str, str],  # type: ignore[no-untyped-def]
                   structs: dict[str, set[str]]) -> Iterator[MemberReturn]:
    """Each `return <persistent struct>.<tensor member>;` in the function's body."""
    tokens = source.tokens
    bound: dict[str, str] = {}  # local reference / pointer -> the persistent struct it names
    for k in range(fn.body_start, fn.body_end):
        text = tokens[k].text
        if text == "=" and tokens[k - 1].kind == "ident" and tokens[k - 2].text in ("&", "*"):
            rhs = [t.text for t in tokens[k + 1:k + 4]]
            source_name = rhs[1] if rhs and rhs[0] in ("&", "*") and len(rhs) > 1 else rhs[0] if rhs else ""
            if source_name in persistent:
                bound[tokens[k - 1].text] = source_name
        if text != "return":
            continue
        j = k + 1
        base = tokens[j].text if j < fn.body_end else ""
        if j + 2 < fn.body_end and tokens[j + 1].text == "(" and tokens[j + 2].text == ")":
            j += 2  # `cache().out`
        origin = bound.get(base, base if base in persistent else None)
        if origin is None or j + 3 >= fn.body_end or tokens[j + 1].text not in (".", "->"):
            continue
        member = tokens[j + 2].text
        if member not in structs.get(persistent[origin], ()):
            continue
        if tokens[j + 3].text == ";":
            yield MemberReturn(k, origin, member, j + 2, "")
        elif tokens[j + 3].text == "." and j + 4 < fn.body_end and tokens[j + 4].text in _COPIES:
            yield MemberReturn(k, origin, member, j + 2, tokens[j + 4].text)


def member_target(source: CppSource, persistent: dict[str, str], structs: dict[str, set[str]]):  # type: ignore[no-untyped-def]
    """(member name, is_target) for each tensor member of a persistent struct: `is_target(i)`
    says whether token i is that member read through the struct (`c.out`, `cache().out`,
    `g->out`), with `c` any local bound to it in the sources."""
    tokens = source.tokens
    bases = set(persistent)
    for k in source.by_text["punct"].get("=", ()):
        if 1 < k < len(tokens) - 2 and tokens[k - 1].kind == "ident" and tokens[k - 2].text in ("&", "*"):
            rhs = tokens[k + 2].text if tokens[k + 1].text in ("&", "*") else tokens[k + 1].text
            if rhs in persistent:
                bases.add(tokens[k - 1].text)
    members = {m for name in persistent for m in structs.get(persistent[name], ())}
    for member in sorted(members):
        def is_target(i: int, member: str = member) -> bool:
            if tokens[i].text != member or i < 2 or tokens[i - 1].text not in (".", "->"):
                return False
            base = tokens[i - 2].text
            return base in bases or (base == ")" and i >= 4 and tokens[i - 3].text == "(" and tokens[i - 4].text in bases)
        yield member, is_target
