"""Which declaration a C++ name refers to, as the compiler decides it, for the torch checks.

Why: the ATen/vendor checks (analyses/cpp_torch_calls.py) match names such as `at::mm`.
C++ has many spellings of one name, and a red team (round 10) hid ATen calls behind each:
a leading `::` (`::at::matmul`), a namespace alias (`namespace A = ::at; A::mm`), an alias
of an alias, `using namespace at;` at namespace, function or block scope, a namespace that
nominates `at` (`namespace blk { using namespace at; } blk::mm`), `using at::mm;`,
argument-dependent lookup (`mm(a, b)` with `at::Tensor` arguments finds `at::mm`), and
macros that build the name (`#define SCOPE(ns) ns` then `SCOPE(at)::cuda::sum`). This module
gives each name its fully qualified form from the token stream, so the checks ask one
question ("is `at::mm` compute?") whatever the spelling.

It is a scanner, not a compiler: scopes are brace pairs, a `using` applies from where it is
written to the end of its braces, macros are expanded at the token level (`#if` is not
evaluated, every `#define` counts), and the caller decides what a resolved name means.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from gatekeeper.static.cpp_symbols import bind_symbols
from gatekeeper.static.cpp_tokens import Token, line_end, match_close, split_args

Chain = tuple[str, ...]

# Tokens before a name that make `T name(` / `T name =` a declaration rather than a use.
_NOT_TYPES = frozenset({"return", "co_return", "co_yield", "else", "case", "goto", "throw", "new", "delete",
                        "using", "namespace", "typename", "template", "sizeof", "decltype", "do", "operator"})
_DECL_AFTER = frozenset({"(", "=", "{", ";", "[", ","})
# ATen's inner namespaces: `cuda::mm` after `using namespace at` is `at::cuda::mm`. Any other
# first name is taken as a namespace of its own (`cute::gemm`, `cutlass::`, `std::`).
ATEN_INNER = frozenset({"cpublas", "blas", "cpu", "cuda", "_ops", "mkldnn", "mkl", "native", "redispatch",
                        "nn", "functional", "linalg", "special", "fft", "jit", "compositeexplicitautograd",
                        "compositeimplicitautograd", "compositeexplicitautogradnonfunctional", "meta", "mps"})
_TENSOR_TYPES = frozenset({"Tensor", "TensorBase"})
_MAX_DEPTH = 8
_MAX_GROWTH = 20_000  # expanded tokens beyond the source's own: past this, expansion stops


def _function_like(chain: Sequence[str]) -> bool:
    """An alias worth following: a function or op struct (`at::_ops::mm`, lower case), or a
    device-wide CUB algorithm's class (`using R = cub::DeviceReduce;`); not a type such as
    `at::vec::Vectorized<float>`."""
    return chain[-1][:1].islower() or (chain[0] in ("cub", "hipcub") and chain[-1].startswith("Device"))


def expand_macros(tokens: list[Token], text: str) -> tuple[list[Token], dict[int, str], list[tuple[int, int]]]:
    """`tokens` with each use of a `#define`d macro (object-like or function-like, `#` and
    `##` included) replaced by its expansion, rescanned as the preprocessor does (a macro is
    not expanded inside its own expansion), at the use's offset. Returns the stream, the
    macro each expanded token came from (by index), and the index ranges of the `#define`
    lines of macros that were used (their bodies are read at the uses instead)."""
    macros: dict[str, tuple[Optional[list[str]], list[Token]]] = {}
    lines: dict[str, tuple[int, int]] = {}
    skip: set[int] = set()
    for idx, tok in enumerate(tokens):
        if tok.kind != "directive" or tok.text != "define" or idx + 1 >= len(tokens) or tokens[idx + 1].kind != "ident":
            continue
        name, end, j = tokens[idx + 1], line_end(text, tokens[idx + 1].offset), idx + 2
        params: Optional[list[str]] = None
        if j < len(tokens) and tokens[j].text == "(" and tokens[j].offset == name.offset + len(name.text):
            close = match_close(tokens, j)
            params = [t.text for t in tokens[j + 1:close] if t.kind == "ident" or t.text == "..."]
            j = close + 1
        k = j
        while k < len(tokens) and tokens[k].offset < end and tokens[k].kind != "directive":
            k += 1
        macros[name.text] = (params, tokens[j:k])
        lines[name.text] = (idx, k)
        skip.update(range(idx, k))
    if not macros:
        return tokens, {}, []
    out: list[Token] = []
    origin: dict[int, str] = {}
    used: set[str] = set()
    budget = [len(tokens) + _MAX_GROWTH]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if i in skip or tok.kind != "ident" or tok.text not in macros or len(out) > budget[0]:
            out.append(tok)
            i += 1
            continue
        expansion, i = _expand_at(tokens, i, macros, frozenset(), 0)
        if expansion is None:
            out.append(tok)
            i += 1
            continue
        used.add(tok.text)
        for piece in expansion:
            origin[len(out)] = tok.text
            out.append(Token(piece.kind, piece.text, tok.offset))
    # the define lines of used macros, as index ranges of `out` (they are never expanded)
    directive_at = {t.offset: k for k, t in enumerate(out) if t.kind == "directive"}
    spans = [(directive_at[tokens[start].offset], directive_at[tokens[start].offset] + stop - start)
             for start, stop in sorted(lines[name] for name in used)]
    return out, origin, spans


def _expand_at(tokens: Sequence[Token], i: int, macros: dict[str, tuple[Optional[list[str]], list[Token]]],
               hidden: frozenset[str], depth: int) -> tuple[Optional[list[Token]], int]:
    """The expansion of the macro named at `tokens[i]` and the index after its use."""
    name = tokens[i].text
    params, body = macros[name]
    end = i + 1
    bind: dict[str, list[Token]] = {}
    if params is not None:
        if end >= len(tokens) or tokens[end].text != "(":
            return None, i  # a function-like macro's name without arguments is no use of it
        close = match_close(tokens, end)
        args = _arg_tokens(tokens, end, close)
        bind = dict(zip(params, args))
        if params and params[-1] == "...":
            rest = args[len(params) - 1:]
            bind["__VA_ARGS__"] = [t for a in rest for t in a + [Token("punct", ",", 0)]][:-1]
        end = close + 1
    pieces: list[Token] = []
    paste = stringize = False
    for tok in body:
        if tok.text == "##":
            paste = True
            continue
        if tok.text == "#" and params is not None:
            stringize = True
            continue
        if stringize:  # `#x`: a string literal, which the tokens leave out
            stringize = False
            continue
        got = bind.get(tok.text, [tok]) if tok.kind == "ident" else [tok]
        if paste and pieces and got:
            pieces[-1] = Token("ident", pieces[-1].text + got[0].text, pieces[-1].offset)
            got = got[1:]
        paste = False
        pieces.extend(got)
    if depth >= _MAX_DEPTH:
        return pieces, end
    inner = hidden | {name}
    out: list[Token] = []
    k = 0
    while k < len(pieces):  # rescan: macros named by the expansion expand, except those hidden
        piece = pieces[k]
        if piece.kind == "ident" and piece.text in macros and piece.text not in inner:
            more, k2 = _expand_at(pieces, k, macros, inner, depth + 1)
            if more is not None:
                out.extend(more)
                k = k2
                continue
        out.append(piece)
        k += 1
    return out, end


def _arg_tokens(tokens: Sequence[Token], open_: int, close: int) -> list[list[Token]]:
    args: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens[open_ + 1:close]:
        if tok.text in ("(", "[", "{"):
            depth += 1
        elif tok.text in (")", "]", "}"):
            depth -= 1
        if tok.text == "," and depth == 0:
            args.append([])
        else:
            args[-1].append(tok)
    return args


def name_chain(tokens: Sequence[Token], i: int) -> tuple[list[str], int]:
    """`a :: b :: c` starting at token i: the names and the index after the last."""
    names = [tokens[i].text]
    j = i + 1
    while j + 1 < len(tokens) and tokens[j].text == "::" and tokens[j + 1].kind == "ident":
        names.append(tokens[j + 1].text)
        j += 2
    return names, j


def is_global(tokens: Sequence[Token], colon: int) -> bool:
    """The `::` at index `colon` starts a name (`::at::mm`), rather than joining two."""
    prev = tokens[colon - 1] if colon > 0 else None
    return prev is None or (prev.kind != "ident" and prev.text not in (">", ")", "]")) or prev.text in _NOT_TYPES


@dataclass
class Names:
    """The names a source declares and the `using`s and aliases that bring others in."""

    tokens: list[Token]
    aliases: dict[str, Chain] = field(default_factory=dict)  # namespace A = ::at;
    directives: list[tuple[int, int, Chain]] = field(default_factory=list)  # (from, to, nominated)
    declarations: list[tuple[int, int, str, Chain]] = field(default_factory=list)  # using at::mm;
    members: dict[str, list[Chain]] = field(default_factory=dict)  # namespace blk { using namespace at; }
    member_names: dict[str, dict[str, Chain]] = field(default_factory=dict)  # namespace blk { using at::mm; }
    own: set[str] = field(default_factory=set)  # names the source declares (functions, variables, namespaces)

    @classmethod
    def of(cls, tokens: list[Token]) -> "Names":
        names = cls(tokens)
        n = len(tokens)
        stack: list[tuple[int, str]] = []  # open braces: (index, namespace name or "")
        closes: dict[int, int] = {}
        pending_ns: Optional[str] = None
        for i, tok in enumerate(tokens):
            text = tok.text
            if text == "{":
                stack.append((i, pending_ns or ""))
                pending_ns = None
            elif text == "}":
                if stack:
                    closes[stack.pop()[0]] = i
            elif text == "namespace" and tok.kind == "ident":
                nxt = tokens[i + 1].text if i + 1 < n else ""
                if i + 2 < n and tokens[i + 2].text == "=":  # namespace A = ::at::cuda;
                    start = i + 3 + (tokens[i + 3].text == "::" if i + 3 < n else 0)
                    if start < n and tokens[start].kind == "ident":
                        names.aliases[nxt] = tuple(name_chain(tokens, start)[0])
                elif tokens[i - 1].text != "using" if i else True:
                    chain, j = name_chain(tokens, i + 1) if i + 1 < n and tokens[i + 1].kind == "ident" else ([""], i + 1)
                    pending_ns = chain[-1] if j < n and tokens[j].text == "{" else None
                    names.own.add(chain[-1])
            elif text == "using" and tok.kind == "ident" and i + 1 < n:
                directive = tokens[i + 1].text == "namespace"
                start = i + 2 if directive else i + 1
                start += start < n and tokens[start].text == "::"
                if not directive and i + 3 < n and tokens[i + 2].text == "=" and tokens[i + 1].kind == "ident":
                    # `using mm_op = at::_ops::mm;`: a name for an ATen function or op struct (not a
                    # type alias: `using Vec = at::vec::Vectorized<float>;` is upper case, or templated)
                    k = i + 3 + (tokens[i + 3].text == "::")
                    if k < n and tokens[k].kind == "ident":
                        chain, j = name_chain(tokens, k)
                        if _function_like(chain) and j < n and tokens[j].text == ";":
                            names.aliases[tokens[i + 1].text] = tuple(chain)
                    continue
                if start >= n or tokens[start].kind != "ident":
                    continue
                chain, _ = name_chain(tokens, start)
                scope = stack[-1] if stack else (-1, "")
                if directive:
                    names.directives.append((i, scope[0], tuple(chain)))
                    if scope[1]:
                        names.members.setdefault(scope[1], []).append(tuple(chain))
                elif len(chain) > 1:
                    names.declarations.append((i, scope[0], chain[-1], tuple(chain)))
                    if scope[1]:
                        names.member_names.setdefault(scope[1], {})[chain[-1]] = tuple(chain)
            elif text == "typedef" and i + 1 < n and tokens[i + 1].kind == "ident":
                chain, j = name_chain(tokens, i + 1)  # `typedef at::_ops::mm mm_op;`
                if _function_like(chain) and j + 1 < n and tokens[j].kind == "ident" and tokens[j + 1].text == ";":
                    names.aliases[tokens[j].text] = tuple(chain)
            elif tok.kind == "ident" and i > 0 and i + 1 < n and tokens[i + 1].text in _DECL_AFTER:
                prev = tokens[i - 1]
                if (prev.kind == "ident" and prev.text not in _NOT_TYPES) or prev.text in (">", "*", "&", "&&", "~"):
                    names.own.add(text)  # `Tensor mm(`, `auto mm =`, `T* mm(`: the source's own
        # a directive's reach: to the close of its braces (file scope: to the end)
        names.directives = [(at, closes.get(o, n) if o >= 0 else n, c) for at, o, c in names.directives]
        names.declarations = [(at, closes.get(o, n) if o >= 0 else n, nm, c) for at, o, nm, c in names.declarations]
        return names

    def qualify(self, chain: Sequence[str]) -> Chain:
        """`A::mm` with `namespace A = ::at;` (aliases of aliases too) and `blk::mm` with
        `namespace blk { using namespace at; }` as `at::mm`; any other chain as written."""
        out: Chain = tuple(chain)
        for _ in range(_MAX_DEPTH):
            if out[0] in self.aliases and self.aliases[out[0]] != out[:1]:
                out = self.aliases[out[0]] + out[1:]
                continue
            if len(out) >= 2 and out[-2] in self.member_names and out[-1] in self.member_names[out[-2]]:
                out = self.member_names[out[-2]][out[-1]]
                continue
            if len(out) >= 2 and out[-2] in self.members and out[-1] not in self.own:
                out = self.qualify(self.members[out[-2]][0]) + out[-1:]  # qualified lookup in blk finds at's
                continue
            break
        return out

    def visible(self, i: int, name: str) -> list[Chain]:
        """What an unqualified `name` at token i may be, from `using` declarations and
        directives in force there (nominated namespaces are followed through their own
        directives: `using namespace blk;` where blk uses `at`)."""
        found = [self.qualify(c) for at, to, nm, c in self.declarations if nm == name and at < i < to]
        for at, to, target in self.directives:
            if at < i < to:
                for ns in self._nominated(self.qualify(target)):
                    found.append(ns + (name,))
        return found

    def _nominated(self, ns: Chain, depth: int = 0) -> list[Chain]:
        out = [ns]
        if depth < _MAX_DEPTH:
            for more in self.members.get(ns[-1], ()):
                out += self._nominated(self.qualify(more), depth + 1)
        return out

    def opened_inner(self, i: int, chain: Sequence[str]) -> Optional[Chain]:
        """`cuda::mm` / `native::cpublas::gemm` under `using namespace at[::...]`: ATen's
        inner namespace reached by its tail (only ATen's: `cute::gemm` is CuTe's)."""
        if chain[0] not in ATEN_INNER or chain[0] in self.own:
            return None
        for at, to, target in self.directives:
            if at < i < to:
                for ns in self._nominated(self.qualify(target)):
                    if ns[0] in ("at", "torch"):
                        return ns + tuple(chain)
        return None

    def tensor_argument(self, open_: int, returns_tensor: Callable[[str], bool]) -> bool:
        """Some argument of the call whose `(` is at `open_` is plausibly an `at::Tensor`: a
        name declared `Tensor`/`at::Tensor`/`torch::Tensor` (a parameter or a local of the
        enclosing function) or `auto x = at::...`/`torch::...`, passed as is or through a
        view or cast method (`a.t()`, `b.contiguous()`)."""
        tensors = self._tensor_names(open_, returns_tensor)
        for arg in split_args(self.tokens, open_):
            if arg and arg[0] in tensors and (len(arg) == 1 or (len(arg) > 2 and arg[1] == "." and returns_tensor(arg[2]))):
                return True
        return False

    def _tensor_names(self, before: int, returns_tensor: Callable[[str], bool]) -> set[str]:
        toks = self.tokens
        start = max(0, before - 4000)  # the enclosing function, roughly: a bounded look back
        names: set[str] = set()
        for k in range(start, before):
            text = toks[k].text
            if text in _TENSOR_TYPES and (k == 0 or toks[k - 1].text != "."):
                j = k + 1
                while j < before and toks[j].text in ("const", "&", "&&"):
                    j += 1
                if j < before and toks[j].kind == "ident":
                    names.add(toks[j].text)
            elif text == "auto" and k + 3 < before and toks[k + 2].text == "=":
                nxt = toks[k + 3].text
                after = [t.text for t in toks[k + 4:k + 6]]
                if nxt in names:  # `auto y = x;`, `auto y = x.t();`, not `auto n = x.size(0);`
                    if after[:1] == [";"] or (after[:1] == ["."] and len(after) > 1 and returns_tensor(after[1])):
                        names.add(toks[k + 1].text)
                elif (nxt in ("at", "torch") or (nxt == "::" and toks[k + 4].text in ("at", "torch"))) \
                        and "cuda" not in after:  # `at::cuda::getCurrentCUDAStream()` is a stream
                    names.add(toks[k + 1].text)
        return names


def resolve_bindings(tokens: list[Token], text: str) -> tuple[list[Token], dict[int, str]]:
    """Names bound to another symbol (`__attribute__((weakref("cublasSgemm_v2")))`, `alias`,
    an `asm` label, `#pragma redefine_extname`) replaced by their target, as the linker
    resolves them (static/cpp_symbols.py); the second value maps each rewritten token's
    offset to the name the source wrote."""
    out, bound = bind_symbols(tokens, text)
    return out, ({out[i].offset: name for i, name in bound.items()} if bound else {})
