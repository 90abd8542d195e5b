"""Output values that round-trip through C++ storage that outlives the call (GK109).

Not a rule file: it defines no rule with a `code`. Works on a source's token stream.

- Persistent names: variables declared `static` or `thread_local` anywhere, and variables
  declared at namespace scope (the file's top level, or inside `namespace { ... }`).
- A function's outputs: the names it returns (`return y;`) and the pointers it takes from
  them (`float* dst = y.data_ptr<float>();`).
- A *store* copies output values into persistent storage (`prev.assign(dst, dst + n)`,
  `memcpy(keep, dst, ...)`, `std::copy(dst, dst + n, keep)`, `keep[i] = dst[i]`,
  `last.copy_(y)`); a *replay* copies persistent storage into an output (`memcpy(dst,
  prev.data(), ...)`, `std::copy(prev.begin(), prev.end(), dst)`, `dst[i] = prev[i]`,
  `y.copy_(last)`). A name that is both stored and replayed carries an earlier call's
  output into a later one.
- A copy may be spelled as a call of a helper of the source that copies one parameter into
  another (`blend(dst, src, n)`): it is read as the copy it makes (copy_helpers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token, split_args

_DECL_SKIP = frozenset({"using", "typedef", "namespace", "template", "struct", "class", "union", "enum", "return",
                        "extern", "#", "friend", "static_assert"})
_MEMCPY = frozenset({"memcpy", "memmove", "__builtin_memcpy", "cudaMemcpy", "cudaMemcpyAsync", "wmemcpy"})
_COPY = frozenset({"copy", "copy_n", "copy_backward"})  # std::copy(first, last, dest): dest is the last argument
_FILL_METHODS = frozenset({"assign", "insert", "push_back", "emplace_back", "append"})
_DATA = frozenset({"data_ptr", "data", "mutable_data_ptr", "const_data_ptr"})


@dataclass
class Flow:
    name: str  # the persistent variable
    kind: str  # store | replay
    offset: int  # where the statement starts


def persistent_names(source: CppSource) -> dict[str, int]:
    """Persistent variable name -> offset of its declaration. Visits only the braces and
    semicolons (statement boundaries), then the statements that may declare one."""
    tokens = source.tokens
    puncts = source.by_text["punct"]
    bounds = sorted([*puncts.get("{", ()), *puncts.get("}", ()), *puncts.get(";", ())])
    marked = {*source.by_text["ident"].get("static", ()), *source.by_text["ident"].get("thread_local", ())}
    out: dict[str, int] = {}
    scopes: list[bool] = []  # per open brace: whether it opened a namespace
    start = 0
    for i in bounds:
        text = tokens[i].text
        if text == "{":
            scopes.append(_opens_namespace(tokens, i))
        elif text == "}":
            if scopes:
                scopes.pop()
        elif all(scopes) or any(start <= m < i for m in marked):
            statement = tokens[start:i + 1]
            for name in _declared(statement) if statement else ():
                out.setdefault(name, tokens[i].offset)
        start = i + 1
    return out


def _opens_namespace(tokens: list[Token], brace: int) -> bool:
    for k in range(brace - 1, max(-1, brace - 4), -1):
        if tokens[k].text == "namespace":
            return True
        if tokens[k].kind != "ident":
            return False
    return False


def _declared(statement: list[Token]) -> list[str]:
    """The names a declaration statement declares (`std::vector<float> prev;`, `static int a = 1, b;`)."""
    while statement and statement[0].kind == "directive":  # `#include`s before the first statement
        statement = statement[1:]
    if not statement or statement[0].text in _DECL_SKIP:
        return []
    names: list[str] = []
    depth = 0
    typed = False  # a type has been seen: the next bare identifier is a name
    for k, tok in enumerate(statement):
        text = tok.text
        if text in ("(", "[", "<", "{"):
            if text == "(" and depth == 0 and not names:
                return []  # `int f(...)`: a function declaration or a call, not a variable
            depth += 1
            continue
        if text in (")", "]", ">", "}"):
            depth -= 1
            continue
        if text == ">>":
            depth -= 2
            continue
        if depth > 0 or tok.kind != "ident":
            continue
        nxt = statement[k + 1].text if k + 1 < len(statement) else ";"
        if typed and nxt in (";", "=", ",", "{", "["):
            names.append(text)
        typed = True
    return names


def outputs_of(source: CppSource, start: int, end: int) -> set[str]:
    """The names a function body returns and the data pointers it takes from them."""
    tokens = source.tokens
    returned = {tokens[k + 1].text for k in source.by_text["ident"].get("return", ())
                if start < k < end and k + 2 < len(tokens) and tokens[k + 1].kind == "ident"
                and tokens[k + 2].text == ";"}
    if not returned:
        return set()
    out = set(returned)
    for k in source.by_text["punct"].get("=", ()):
        # float* dst = y.data_ptr<float>();   auto* dst = (float*)y.data_ptr();
        if not start < k < end or tokens[k - 1].kind != "ident":
            continue
        j = k + 1
        while j < end and j < k + 8 and tokens[j].text != ";":
            if tokens[j].text in returned and j + 2 < end and tokens[j + 1].text in (".", "->") \
                    and tokens[j + 2].text in _DATA:
                out.add(tokens[k - 1].text)
                break
            j += 1
    return out


def copy_helpers(source: CppSource) -> dict[str, tuple[int, int]]:
    """Functions of the source that copy one parameter into another: name -> (index of the
    destination, index of the source). `blend(dst, src, n)` whose body is `memcpy(dst, src, ...)`,
    `std::copy(src, src + n, dst)` or `dst[i] = src[i]` copies as memcpy does where it is called."""
    tokens = source.tokens
    out: dict[str, tuple[int, int]] = {}
    for fn in source.functions:
        params = {name: i for i, name in enumerate(fn.params) if name}
        if len(params) < 2:
            continue
        start = fn.body_start + 1
        while start < fn.body_end:
            end = start
            while end < fn.body_end and tokens[end].text not in (";", "{", "}"):
                end += 1
            flows = _statement_flows(tokens[start:end], tokens, start, {n: 0 for n in params}, set(params),
                                     pairs=True) if end > start else []
            for dest, src in flows:  # type: ignore[misc]
                out.setdefault(fn.name, (params[dest], params[src]))
            start = end + 1
    return out


def _statement_flows(st: list[Token], tokens: list[Token], base: int, keep: dict[str, int],
                     outs: set[str], pairs: bool = False, helpers: Optional[dict[str, tuple[int, int]]] = None) -> list:
    """The store and replay flows of one statement; with `pairs`, the (destination, source)
    names of each copy between two of `keep` instead (copy_helpers)."""
    texts = [t.text for t in st]
    found: list = []
    here = st[0].offset
    pair = _param_pair if pairs else _pair
    for k, text in enumerate(texts):
        if k + 1 >= len(texts) or texts[k + 1] != "(":
            continue
        if helpers and text in helpers and (k == 0 or texts[k - 1] not in (".", "->", "::")):
            args = split_args(tokens, base + k + 1)
            dest_at, src_at = helpers[text]
            if max(dest_at, src_at) < len(args):
                found += pair(args[dest_at], args[src_at], keep, outs, here)
        elif text in _MEMCPY or text in _COPY:
            args = split_args(tokens, base + k + 1)
            if len(args) < 3:
                continue
            dest, src = (args[0], args[1]) if text in _MEMCPY else (args[-1], args[0])
            found += pair(dest, src, keep, outs, here)
        elif text in _FILL_METHODS and k >= 2 and texts[k - 1] in (".", "->") and texts[k - 2] in keep and not pairs:
            if any(a in outs for arg in split_args(tokens, base + k + 1) for a in arg):
                found.append(Flow(texts[k - 2], "store", here))
        elif text == "copy_" and k >= 2 and texts[k - 1] in (".", "->"):
            args = split_args(tokens, base + k + 1)
            found += pair([texts[k - 2]], args[0] if args else [], keep, outs, here)
    # `keep[i] = dst[i];`, `dst[i] = keep[i];`, `last = y.clone();`
    if "=" in texts and not found:
        eq = texts.index("=")
        base = _lvalue_base(texts, eq)
        if base is not None:
            found += pair([base], texts[eq + 1:], keep, outs, here)
    return found


def _param_pair(dest: list[str], src: list[str], keep: dict[str, int], outs: set[str], at: int) -> list[tuple[str, str]]:
    target = next((t for t in dest if t.isidentifier()), None)
    origin = next((t for t in src if t in keep and t != target), None)
    return [(target, origin)] if target in keep and origin is not None else []


def _lvalue_base(texts: list[str], eq: int) -> str | None:
    """The variable an assignment writes: `keep` in `keep[i] = ...`, `for (...) out[i] = ...`,
    `*p = ...`; None for a declaration (`float v = ...`, `auto& r = ...`)."""
    j = eq - 1
    while j >= 0 and texts[j] == "]":  # step over subscripts
        depth = 0
        while j >= 0:
            depth += texts[j] == "]"
            depth -= texts[j] == "["
            j -= 1
            if depth == 0:
                break
    if j < 0 or not texts[j].isidentifier():
        return None
    before = texts[j - 1] if j > 0 else ""
    if before.isidentifier() or before in (">", "&", "::"):  # `float v =`, `std::vector<float> v =`, `auto& r =`
        return None
    return texts[j]


def _pair(dest: list[str], src: list[str], keep: dict[str, int], outs: set[str], at: int) -> list[Flow]:
    target = next((t for t in dest if t.isidentifier()), None)
    if target in keep and any(s in outs for s in src):
        return [Flow(target, "store", at)]
    if target in outs and any(s in keep for s in src):
        return [Flow(next(s for s in src if s in keep), "replay", at)]
    return []


def output_memos(source: CppSource) -> list[tuple[Flow, Flow]]:
    """(store, replay) for each persistent name that carries an output into a later one.
    Only the statements that name a persistent variable are read."""
    tokens = source.tokens
    keep = persistent_names(source)
    if not keep:
        return []
    idents = source.by_text["ident"]
    uses = sorted(i for name in keep for i in idents.get(name, ()))
    stores: dict[str, Flow] = {}
    replays: dict[str, Flow] = {}
    helpers = copy_helpers(source)
    for fn in source.functions:
        inside = [i for i in uses if fn.body_start < i < fn.body_end]
        if not inside:
            continue
        outs = outputs_of(source, fn.body_start, fn.body_end) - set(fn.params)
        outs -= keep.keys()  # a persistent output is GK105's
        if not outs:
            continue
        done: set[int] = set()
        for i in inside:
            start = i
            while start > fn.body_start + 1 and tokens[start - 1].text not in (";", "{", "}"):
                start -= 1
            if start in done:
                continue
            done.add(start)
            end = i
            while end < fn.body_end and tokens[end].text not in (";", "{", "}"):
                end += 1
            for flow in _statement_flows(tokens[start:end], tokens, start, keep, outs, helpers=helpers):
                (stores if flow.kind == "store" else replays).setdefault(flow.name, flow)
    return [(stores[n], replays[n]) for n in stores if n in replays]
