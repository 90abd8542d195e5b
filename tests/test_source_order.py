"""source_order.visit must see nodes in the order libcst's own CSTVisitor does (analyses
that accumulate state depend on it), and honour a handler's False like libcst does."""

from pathlib import Path

import libcst as cst

from gatekeeper.static.source_order import visit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# Every node type whose dataclass field order differs from its source order.
_SNIPPET = '''
from .. import a as b
@deco(k=1)
def f(x, /, y: int = g(1), *args, z=2, **kw) -> ret(3):
    v = q if test(4) else r
    try:
        pass
    except Err as e:
        h(e)
    s = x[lo(5):hi(6):st(7)]
    call(key=val(8), other=val(9))
    match v:
        case [p] if guard(p):
            body(p)
@dc
class C(Base(10), metaclass=Meta):
    attr = self.other
'''


class _Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.seen: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.seen.append(node)
        return True


class _Mine:
    def __init__(self) -> None:
        self.seen: list[cst.CSTNode] = []

    def __getattr__(self, name: str):
        raise AttributeError(name)


for _kind in ("Name", "Attribute", "Call", "Assign", "Arg", "Integer", "Decorator", "Param", "Annotation",
              "IfExp", "ExceptHandler", "AsName", "Slice", "ImportFrom", "ImportAlias", "ClassDef",
              "FunctionDef", "MatchCase", "Subscript"):
    setattr(_Mine, "visit_" + _kind, lambda self, node: self.seen.append(node))


def _same_order(source: str) -> None:
    module = cst.parse_module(source)
    theirs, mine = _Recorder(), _Mine()
    module.visit(theirs)
    visit(module, mine)
    assert mine.seen, "the walk saw nothing"
    wanted = {id(n) for n in mine.seen}
    assert [id(n) for n in theirs.seen if id(n) in wanted] == [id(n) for n in mine.seen]


def test_order_matches_libcst_on_reordered_node_types():
    _same_order(_SNIPPET)


def test_order_matches_libcst_on_every_fixture_submission():
    files = sorted((FIXTURES / "submissions").glob("*.py"))
    assert files
    for path in files:
        _same_order(path.read_text("utf-8"))


def test_false_skips_children_like_libcst():
    class SkipSelf:
        def __init__(self) -> None:
            self.names: list[str] = []

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            return not (isinstance(node.value, cst.Name) and node.value.value == "self")

        def visit_Name(self, node: cst.Name) -> None:
            self.names.append(node.value)

    walker = SkipSelf()
    visit(cst.parse_module("y = self.a + other.b\n"), walker)
    assert walker.names == ["y", "other", "b"]
