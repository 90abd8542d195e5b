"""The reference is read from CPython's `ast` (its libcst tree is parsed only on demand,
issue 20 item 8): each read gives what the libcst read of the same text gives."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from gatekeeper.analyses import own_definitions, reference_top_level
from gatekeeper.analyses.body_fingerprint import fingerprint, import_map, import_map_ast, reference_fingerprint
from gatekeeper.analyses.integer_inputs import integer_input_positions, reference_integer_positions
from gatekeeper.static.problem_facts import load_problem_facts
from gatekeeper.static.walk import subtree
from rules.gk403_copies_reference_forward import _ast_node_counts, _ast_shapes, _node_counts, _shape

ROOT = Path(__file__).resolve().parent.parent

TRICKY = textwrap.dedent('''
    import torch, torch.nn.functional as F
    from .kernels import fused as fz
    from . import helpers
    import a.b
    if flag:
        A = 1
    elif other:
        B = 2
    else:
        if deeper:
            C = 3
        D, *E = 4, 5
    if w: F1 = 1
    else: G = 2
    try: H = 1
    except ValueError: I = 2
    try:
        J = 1
    except ValueError:
        K: int = 2
        L: int
    if __name__ == "__main__":
        M = 1
    class N: pass
    async def O(): pass
    P = Q = 3
    class Model(torch.nn.Module):
        """Doc."""
        def forward(self, x, idx):
            "one-line docstring"; y = x[idx, 1:-1] * -2.0
            z = [t.sum() for t in y.split(4)] if x.dim() > 1 else {"k": lambda v: v + 1j}
            del y
            async def inner():
                async with lock:
                    async for q in it:
                        await q
            return F.relu(z @ z), f"{torch.numel(x) + 1:>{w}}", True, None, ...
        def helper(self): return 1.5
    def get_inputs():
        lengths = torch.randint(1, 9, (4,))
        lengths = torch.randn(4)
        offs = torch.arange(5).float()
        if flag:
            return [torch.randn(2), lengths, torch.zeros(3, dtype=torch.int32)]
        return [torch.randn(2), lengths, offs, *[x.long() for x in xs], torch.ones(2).int()]
''')


def _sources() -> list[tuple[str, str]]:
    files = sorted((ROOT / "fixtures" / "problems").rglob("*.py"))
    return [("tricky", TRICKY)] + [(p.name, p.read_text("utf-8")) for p in files]


@pytest.mark.parametrize("name,text", _sources(), ids=[n for n, _ in _sources()])
def test_ast_reads_match_libcst_reads(name, text):
    module, tree = cst.parse_module(text), ast.parse(text)
    assert import_map_ast(tree) == import_map(module)
    assert reference_integer_positions(tree) == integer_input_positions(module)
    mine, theirs = own_definitions._top_level(module), reference_top_level.top_level(tree, text)
    assert mine.keys() == theirs.keys()
    assert all(type(mine[k]) is reference_top_level.libcst_kind(theirs[k]) for k in mine)
    cst_functions = {f.name.value: f for f in subtree(module) if type(f) is cst.FunctionDef}
    ast_functions = {f.name: f for f in ast.walk(tree) if type(f) in (ast.FunctionDef, ast.AsyncFunctionDef)}
    assert cst_functions.keys() == ast_functions.keys()
    for key, function in cst_functions.items():
        other = ast_functions[key]
        assert _shape(function) in _ast_shapes(other), key
        assert _node_counts(function) == _ast_node_counts(other), key
        assert fingerprint(function, import_map(module)) == reference_fingerprint(other, import_map_ast(tree)), key


def test_tricky_source_exercises_the_choices():
    tree = ast.parse(TRICKY)
    assert list(reference_top_level.top_level(tree, TRICKY)) == ["A", "J", "K", "N", "O", "P", "Q", "Model",
                                                                 "get_inputs"]
    # the last return: `lengths` is its first assignment (randint), `offs` is cast to float,
    # `x.long()` reads a plain name, `.int()` of a call is an integer tensor
    assert reference_integer_positions(tree) == frozenset({1, 4})


def test_problem_facts_come_from_ast_and_libcst_only_on_demand(tmp_path):
    path = tmp_path / "problem.py"
    path.write_text("import torch\nN: int = 4096\nM = 0x40\nFLAG = True\nclass Model(torch.nn.Module):\n"
                    "    def forward(self, x):\n        return x.half()\n"
                    "def get_inputs():\n    return [torch.randn(N, 96, dtype=torch.float16)]\n")
    facts = load_problem_facts(path)
    assert facts.constants == {"N": 4096, "M": 64} and facts.dims == {4096, 64, 96}
    assert facts.dtype == "float16"
    assert facts.lazy is not None and facts.lazy._module is None  # nothing parsed with libcst yet
    assert type(facts.module) is cst.Module and facts.module is facts.module


def test_mixed_dtypes_follow_the_libcst_walk(tmp_path):
    path = tmp_path / "mixed.py"
    path.write_text("import torch\nA = torch.bfloat16\nB = torch.float16\n")
    last = None
    for node in subtree(cst.parse_module(path.read_text())):
        if type(node) is cst.Attribute and node.attr.value in ("float16", "half", "bfloat16"):
            last = "bfloat16" if node.attr.value == "bfloat16" else "float16"
    assert load_problem_facts(path).dtype == last


def test_self_attributes_are_counted_alike_and_tell_extension_calls_apart():
    ref = ast.parse("class Model:\n    def forward(self, a, b):\n        return torch.matmul(a, b)\n").body[0].body[0]
    mine = cst.parse_module("class M:\n    def forward(self, a, b):\n        return self.ext.mm(a, b)\n")
    function = mine.body[0].body.body[0]
    assert _shape(function) in _ast_shapes(ref)
    assert _node_counts(function) != _ast_node_counts(ref)  # one attribute of `self` against none
    assert _node_counts(function)[:-1] == _ast_node_counts(ref)[:-1]  # the other counts agree
