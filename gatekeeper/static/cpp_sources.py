"""Extract the C++/CUDA sources a submission compiles, with positions back into Python.

Two ways in, so that a helper function or a dict between the string and `load_inline`
does not hide the source:
1. the arguments of `load_inline(cpp_sources=..., cuda_sources=...)` and `load(sources=...)`,
   resolved through module constants, concatenation, `+=`, `"".join`, f-strings with
   constant fields, `textwrap.dedent`, and files next to the submission;
2. every other string literal that looks like C/C++ (`#include`, `__global__`, `torch::`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, AbstractSet, Callable, Optional, Union

import libcst as cst

from gatekeeper.static.cpp_tokens import Token, directive_lines, expand_aliases, name_aliases, tokenize
from gatekeeper.static.beside_files import beside_file, comprehension_files
from gatekeeper.static.names import NameResolver, string_value
from gatekeeper.static.syntax import argument

if TYPE_CHECKING:
    from gatekeeper.static.cpp_functions import CppFunction

LOADERS = (
    "torch.utils.cpp_extension.load_inline",
    "torch.utils.cpp_extension.load",
)
_CPP_MARKERS = ("#include", "__global__", "torch::", "at::", "cudaStream", "__device__", "<<<")
_MAX_SIDE_FILE = 1_000_000
_MAX_DEPTH = 20


@dataclass
class Segment:
    start: int  # offset in CppSource.text
    text: str
    node: Optional[cst.CSTNode] = None  # the Python literal it came from
    file: Optional[str] = None  # or the side file it was read from


@dataclass
class CppSource:
    kind: str  # cpp | cuda
    origin: str  # e.g. "load_inline(cuda_sources)" or "string literal"
    segments: list[Segment] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)  # -DNAME=VALUE of the build's flags

    @cached_property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)

    @cached_property
    def raw_tokens(self) -> list[Token]:
        return tokenize(self.text)

    @cached_property
    def tokens(self) -> list[Token]:
        """The token stream with name aliases expanded where they are used: an object-like macro
        whose body is only a name (`#define ROW_KERNEL sgemm_`, `-DROW_OP=at::matmul` in the
        build's flags) reads as that name, so a call through it is the call it hides (red team
        round 6, h06b and h10). Macros with numbers or operators stay as written."""
        raw = self.raw_tokens
        aliases = name_aliases(self.text, self.defines)  # a regex over the text: no pass over the tokens
        return expand_aliases(raw, aliases) if aliases else raw

    @cached_property
    def by_text(self) -> dict[str, dict[str, list[int]]]:
        """Token indices by kind, then by text (`by_text["ident"]["x"] == [3, 17]`), built in
        one pass and shared by every check, so that a check finds its few tokens, or sees
        there are none, without walking the whole stream again."""
        index: dict[str, dict[str, list[int]]] = {"ident": {}, "number": {}, "punct": {}, "directive": {}}
        for i, (kind, text, _) in enumerate(self.tokens):
            by_kind = index[kind]
            found = by_kind.get(text)
            if found is None:
                by_kind[text] = [i]
            else:
                found.append(i)
        return index

    def indices(self, texts: AbstractSet[str]) -> list[int]:
        """Indices, in order, of the tokens of any kind whose text is one of `texts`."""
        out: list[int] = []
        for by_kind in self.by_text.values():
            for text in by_kind.keys() & texts:
                out += by_kind[text]
        out.sort()
        return out

    def has(self, *texts: str) -> bool:
        """Whether some token, of any kind, has one of `texts` as its text."""
        return any(text in by_kind for by_kind in self.by_text.values() for text in texts)

    @cached_property
    def functions(self) -> list["CppFunction"]:
        """Function definitions, parsed once and shared by every rule."""
        from gatekeeper.static.cpp_functions import functions

        return functions(self.tokens, self.by_text)

    @cached_property
    def macros(self) -> dict[str, list[Token]]:
        return directive_lines(self.text, self.raw_tokens)

    def segment_at(self, offset: int) -> Segment:
        for seg in reversed(self.segments):
            if seg.start <= offset:
                return seg
        return self.segments[0]

    def line_in_source(self, offset: int) -> str:
        start = self.text.rfind("\n", 0, offset) + 1
        end = self.text.find("\n", offset)
        return self.text[start : end if end >= 0 else len(self.text)].strip()


def _add(pieces: list[Segment], text: str, node: Optional[cst.CSTNode], file: Optional[str] = None) -> None:
    pieces.append(Segment(0, text, node, file))


class SourceExtractor:
    """Resolves expressions to C++ text. `constants` maps module names to their values."""

    def __init__(
        self,
        resolver: NameResolver,
        constants: dict[str, list[cst.BaseExpression]],
        folder: Union[Path, None, Callable[[], Optional[Path]]],
    ) -> None:
        self.resolver = resolver
        self.constants = constants
        # A callable is asked on the first side file only: most files name none, and
        # finding the folder costs a stat of the submission.
        self._folder = folder
        self.seen_nodes: set[int] = set()

    def from_call(self, call: cst.Call, qualname: str) -> list[CppSource]:
        out: list[CppSource] = []
        if qualname.endswith("load_inline"):
            wanted = {"cpp_sources": (1, "cpp"), "cuda_sources": (2, "cuda")}
        else:
            wanted = {"sources": (1, "file")}
        for keyword, (position, kind) in wanted.items():
            arg = argument(call, position, keyword)
            if arg is None:
                continue
            pieces: list[Segment] = []
            if kind == "file":
                self._files(arg, pieces)
            else:
                self._resolve(arg, pieces, 0)
            if pieces:
                text = "".join(p.text for p in pieces)
                real_kind = "cuda" if kind == "cuda" or "__global__" in text or "<<<" in text else "cpp"
                out.append(self._source(real_kind, f"{qualname.rsplit('.', 1)[-1]}({keyword})", pieces))
        defines = self._defines(call)
        for source in out:
            source.defines = defines
        return out

    def _defines(self, call: cst.Call) -> dict[str, str]:
        """`-DNAME=VALUE` (and `-D NAME=VALUE`) of the build's flags, where they can be read."""
        flags: list[Segment] = []
        for keyword in ("extra_cflags", "extra_cuda_cflags"):
            arg = argument(call, None, keyword)
            if arg is not None:
                self._resolve(arg, flags, 0)
                _add(flags, "\n", None)
        words = " ".join(p.text for p in flags).split()
        out: dict[str, str] = {}
        for i, word in enumerate(words):
            body = word[2:] if word.startswith("-D") else None
            if body == "" and i + 1 < len(words):
                body = words[i + 1]
            if body:
                name, _, value = body.partition("=")
                if name.isidentifier():
                    out[name] = value or "1"
        return out

    def from_literal(self, node: cst.BaseExpression) -> Optional[CppSource]:
        if id(node) in self.seen_nodes:
            return None
        value = string_value(node) if isinstance(node, cst.SimpleString) else None
        if value is None or len(value) < 20 or not any(m in value for m in _CPP_MARKERS):
            return None
        kind = "cuda" if "__global__" in value or "<<<" in value else "cpp"
        return self._source(kind, "string literal", [Segment(0, value, node)])

    def from_join(self, call: cst.Call) -> Optional[CppSource]:
        """`"\\n".join([...lines...])` of literals that looks like C++ as a whole: one source, so a
        function spread over the lines is read whole (red team round 11: a header written from a
        list of lines)."""
        pieces: list[Segment] = []
        self._call(call, pieces, 0)
        if not pieces or any(p.node is not None and id(p.node) in self.seen_nodes for p in pieces):
            return None
        value = "".join(p.text for p in pieces)
        if len(value) < 20 or not any(m in value for m in _CPP_MARKERS):
            return None
        kind = "cuda" if "__global__" in value or "<<<" in value else "cpp"
        return self._source(kind, "joined string literals", pieces)

    def _source(self, kind: str, origin: str, pieces: list[Segment]) -> CppSource:
        offset = 0
        for piece in pieces:
            piece.start = offset
            offset += len(piece.text)
            if piece.node is not None:
                self.seen_nodes.add(id(piece.node))
        return CppSource(kind, origin, pieces)

    def _resolve(self, expr: cst.BaseExpression, out: list[Segment], depth: int) -> None:
        if depth > _MAX_DEPTH:
            return
        if isinstance(expr, cst.SimpleString):
            value = string_value(expr)
            if value is not None:
                _add(out, value, expr)
        elif isinstance(expr, cst.ConcatenatedString):
            self._resolve(expr.left, out, depth + 1)
            self._resolve(expr.right, out, depth + 1)
        elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            self._resolve(expr.left, out, depth + 1)
            self._resolve(expr.right, out, depth + 1)
        elif isinstance(expr, cst.FormattedString):
            self._fstring(expr, out, depth)
        elif isinstance(expr, (cst.List, cst.Tuple)):
            for element in expr.elements:
                self._resolve(element.value, out, depth + 1)
                _add(out, "\n", None)
        elif isinstance(expr, cst.Name):
            for value in self.constants.get(expr.value, []):
                self._resolve(value, out, depth + 1)
        elif isinstance(expr, cst.Call):
            self._call(expr, out, depth)

    def _call(self, call: cst.Call, out: list[Segment], depth: int) -> None:
        func = call.func
        # "sep".join([...])
        if isinstance(func, cst.Attribute) and func.attr.value == "join" and call.args:
            sep = string_value(func.value) if isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString)) else None
            elements = call.args[0].value
            if sep is not None and isinstance(elements, (cst.List, cst.Tuple)):
                for element in elements.elements:
                    self._resolve(element.value, out, depth + 1)
                    _add(out, sep, None)
                return
        qual = self.resolver.qualname(func) or ""
        if qual in ("textwrap.dedent", "textwrap.indent", "inspect.cleandoc") and call.args:
            self._resolve(call.args[0].value, out, depth + 1)
        elif isinstance(func, cst.Attribute) and func.attr.value in ("read", "read_text"):
            self._files(func.value, out)

    def _fstring(self, expr: cst.FormattedString, out: list[Segment], depth: int) -> None:
        for part in expr.parts:
            if isinstance(part, cst.FormattedStringText):
                _add(out, part.value.replace("{{", "{").replace("}}", "}"), expr)
            elif isinstance(part, cst.FormattedStringExpression):
                value = self._constant(part.expression, depth)
                _add(out, value if value is not None else " __gk_unresolved__ ", expr)

    def _constant(self, expr: cst.BaseExpression, depth: int) -> Optional[str]:
        if isinstance(expr, cst.Integer):
            return expr.value
        if isinstance(expr, cst.Name) and depth < _MAX_DEPTH:
            values = self.constants.get(expr.value, [])
            if len(values) == 1:
                value = values[0]
                if isinstance(value, cst.Integer):
                    return value.value
                text = string_value(value)
                if text is not None:
                    return text
        return None

    def _files(self, expr: cst.BaseExpression, out: list[Segment], depth: int = 0) -> None:
        names: list[str] = []
        constants = self.constants
        if isinstance(expr, cst.Name) and len(constants.get(expr.value, [])) == 1 and depth < _MAX_DEPTH:
            self._files(constants[expr.value][0], out, depth + 1)  # SOURCES = [...]
            return
        if isinstance(expr, (cst.List, cst.Tuple)):
            names = [v for e in expr.elements
                     if (v := string_value(e.value) or beside_file(e.value, constants)) is not None]
        elif isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            names = comprehension_files(expr, constants)
        elif (beside := beside_file(expr, constants)) is not None:
            names = [beside]
        elif isinstance(expr, cst.Call) and expr.args:
            value = string_value(expr.args[0].value)
            if value is not None:
                names = [value]
        else:
            value = string_value(expr)
            if value is not None:
                names = [value]
        for name in names:
            text = self._read_side_file(name)
            if text is not None:
                _add(out, text + "\n", None, name)

    @property
    def folder(self) -> Optional[Path]:
        if callable(self._folder):
            self._folder = self._folder()
        return self._folder

    def _read_side_file(self, name: str) -> Optional[str]:
        folder = self.folder
        if folder is None:
            return None
        try:
            path = (folder / name).resolve()
            if folder.resolve() not in path.parents or not path.is_file():
                return None
            if path.stat().st_size > _MAX_SIDE_FILE:
                return None
            return path.read_text("utf-8", errors="replace")
        except OSError:
            return None
