"""GK403's fingerprints taken from the file's CPython ast tree equal those from generating
each function's code and parsing it alone (the path they replace), on every fixture."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from gatekeeper.analyses import body_fingerprint as bf

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _functions(module: cst.Module) -> list[cst.FunctionDef]:
    found: list[cst.FunctionDef] = []

    class Collect(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            found.append(node)

    module.visit(Collect())
    return found


@pytest.mark.parametrize("path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_ast_path_fingerprint_equals_codegen_path(path: Path) -> None:
    text = path.read_text(errors="replace")
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        pytest.skip("not valid Python")
    imports = bf.import_map(module)
    bf.index_module(module, text, shared=False)
    for function in _functions(module):
        fast = bf._fingerprint(function, imports)
        bf._AST.pop(id(function), None)  # force the codegen path
        assert fast == bf._fingerprint(function, imports), function.name.value


def test_index_pairs_methods_and_nested_functions() -> None:
    text = "class A:\n    @staticmethod\n    def f(x): return x\n    def g(self):\n        def h(y):\n            return y\n        return h\na = 1; b = 2\nasync def k(): pass\n"
    module = cst.parse_module(text)
    bf.index_module(module, text, shared=False)
    names = {f.name.value for f in _functions(module) if id(f) in bf._AST}
    assert names == {"f", "g", "h", "k"}
