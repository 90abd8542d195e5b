"""Where a path expression points, for the file rules (GK442, GK443). Not a rule file.

The sandbox runs a submission in a private working directory next to its own sources, so
relative paths, `__file__`, `os.path.dirname(__file__)`, `Path(__file__).parent` and
`os.getcwd()` are inside; absolute paths, `~`, `..`, `/proc`, the home directory are
outside; `tempfile` is the system temporary directory; anything else is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from gatekeeper.analyses.harness_support import literal, resolve
from gatekeeper.static.context import FileContext
from gatekeeper.static.syntax import argument

INSIDE, OUTSIDE, TEMP, UNKNOWN, FD = "inside", "outside", "temp", "unknown", "fd"
SOURCE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".hxx",
                   ".inl", ".inc", ".py", ".triton", ".txt")
_KEEP = ("os.path.dirname", "os.path.abspath", "os.path.realpath", "os.path.normpath", "os.fspath",
         "builtins.str", "pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "os.path.splitext")
_INSIDE_CALLS = ("os.getcwd", "pathlib.Path.cwd", "os.curdir")
_OUTSIDE_CALLS = ("os.path.expanduser", "os.path.expandvars", "pathlib.Path.home", "os.getenv",
                  "os.environ.get", "os.path.join.__outside__")
_TEMP_CALLS = ("tempfile.gettempdir", "tempfile.mkdtemp", "tempfile.mkstemp", "tempfile.gettempdirb")


@dataclass(frozen=True)
class PathInfo:
    where: str
    text: Optional[str] = None  # the last literal piece, for its suffix and name
    # the whole path as far as it is known (`~/.cache/x`, `../results.txt`), for messages;
    # `<?>` stands for a piece the gatekeeper cannot resolve
    shown: Optional[str] = None

    @property
    def display(self) -> Optional[str]:
        return self.shown or self.text

    @property
    def is_source(self) -> bool:
        return self.text is not None and self.text.lower().endswith(SOURCE_SUFFIXES)


def literal_where(text: str) -> str:
    if text.startswith(("/", "~", "\\")) or (len(text) > 1 and text[1] == ":"):
        return OUTSIDE
    parts = text.replace("\\", "/").split("/")
    return OUTSIDE if ".." in parts else INSIDE


def classify(ctx: FileContext, expr: Optional[cst.BaseExpression], depth: int = 0) -> PathInfo:
    if expr is None or depth > 8:
        return PathInfo(UNKNOWN)
    if type(expr) is cst.Integer:
        return PathInfo(FD, expr.value)
    text = literal(ctx, expr)
    if text is not None:
        return PathInfo(literal_where(text), text, text)
    if type(expr) is cst.Name:
        if expr.value == "__file__":
            return PathInfo(INSIDE, "__file__.py")
        binding = ctx.resolver.lookup(expr.value)
        if binding is not None and binding.kind == "local" and binding.value is not None:
            return classify(ctx, binding.value, depth + 1)
        values = ctx.constants.get(expr.value, [])
        if binding is None and len(values) == 1:
            return classify(ctx, values[0], depth + 1)
        return PathInfo(UNKNOWN)
    if type(expr) is cst.Attribute:
        if expr.attr.value in ("parent", "stem", "name"):
            return PathInfo(classify(ctx, expr.value, depth + 1).where)
        qual = resolve(ctx, expr)
        if qual in ("os.curdir",):
            return PathInfo(INSIDE)
        if qual in ("os.devnull",):
            return PathInfo(OUTSIDE, "/dev/null")
        return PathInfo(UNKNOWN)
    if type(expr) is cst.BinaryOperation:
        if type(expr.operator) is cst.Divide:  # pathlib: base / "name"
            return _join(ctx, [expr.left, expr.right], depth)
        if type(expr.operator) is cst.Add:
            left = classify(ctx, expr.left, depth + 1)
            right = literal(ctx, expr.right)
            if right is not None and ".." in right.replace("\\", "/").split("/"):
                return PathInfo(OUTSIDE, right)
            shown = left.display + right if left.display is not None and right is not None else None
            return PathInfo(left.where, right if right is not None else left.text, shown)
        return PathInfo(UNKNOWN)
    if type(expr) is cst.FormattedString:
        head = expr.parts[0] if expr.parts else None
        tail = expr.parts[-1] if expr.parts else None
        suffix = tail.value if (type(tail) is cst.FormattedStringText) else None
        if type(head) is cst.FormattedStringText:
            return PathInfo(literal_where(head.value), suffix)
        if type(head) is cst.FormattedStringExpression:
            return PathInfo(classify(ctx, head.expression, depth + 1).where, suffix)
        return PathInfo(UNKNOWN)
    if type(expr) is cst.Call:
        return _call(ctx, expr, depth)
    return PathInfo(UNKNOWN)


def _call(ctx: FileContext, call: cst.Call, depth: int) -> PathInfo:
    func = resolve(ctx, call.func)
    if func is None and type(call.func) is cst.Attribute:
        method = call.func.attr.value
        if method in ("resolve", "absolute", "with_suffix", "with_name"):
            return classify(ctx, call.func.value, depth + 1)
        if method == "expanduser":
            return PathInfo(OUTSIDE, shown=classify(ctx, call.func.value, depth + 1).display)
        if method == "joinpath":
            return _join(ctx, [call.func.value, *[a.value for a in call.args]], depth)
        return PathInfo(UNKNOWN)
    if func in ("os.path.join", "posixpath.join"):
        return _join(ctx, [a.value for a in call.args], depth)
    if func in _KEEP:
        inner = argument(call, 0)
        if func == "os.path.dirname":
            here = type(inner) is cst.Name and inner.value == "__file__"
            return PathInfo(classify(ctx, inner, depth + 1).where, shown="<submission dir>" if here else None)
        return classify(ctx, inner, depth + 1) if inner is not None else PathInfo(INSIDE)
    if func in _OUTSIDE_CALLS:
        if func == "pathlib.Path.home":
            return PathInfo(OUTSIDE, shown="~")
        if func == "os.path.expanduser":
            return PathInfo(OUTSIDE, shown=classify(ctx, argument(call, 0), depth + 1).display)
        return PathInfo(OUTSIDE)
    if func in _INSIDE_CALLS:
        return PathInfo(INSIDE, shown=".")
    if func in _TEMP_CALLS:
        return PathInfo(TEMP, shown="$TMPDIR")
    return PathInfo(UNKNOWN)


def _join(ctx: FileContext, parts: list[cst.BaseExpression], depth: int) -> PathInfo:
    where = INSIDE
    last: Optional[str] = None
    pieces: list[str] = []
    for index, part in enumerate(parts):
        info = classify(ctx, part, depth + 1)
        text = info.text or ""
        piece = info.display or "<?>"
        if piece.startswith(("/", "~")):
            pieces = []  # os.path.join and `/` restart at an absolute piece
        pieces.append(piece.rstrip("/") or "/")
        if info.where == OUTSIDE and (index == 0 or text.startswith(("/", "~", "\\")) or ".." in text.split("/")):
            where = OUTSIDE
        elif index == 0:
            where = info.where
        elif info.where == UNKNOWN and where == INSIDE:
            where = UNKNOWN
        last = info.text
    shown = "/".join(pieces).replace("//", "/")
    return PathInfo(where, last, shown)


def write_mode(ctx, call: cst.Call, index: int) -> Optional[bool]:
    """True/False when the mode argument is known, None when computed."""
    mode = argument(call, index, "mode")
    if mode is None:
        return False
    text = literal(ctx, mode)
    if text is None:
        return None
    return any(c in text for c in "wax+")
