"""The static engine's parts: name resolution, positions, C++ extraction and tokens."""

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from gatekeeper.static.context import FileContext
from gatekeeper.static.cpp_functions import functions
from gatekeeper.static.cpp_tokens import directive_lines, parse_int, tokenize
from gatekeeper.static.traversal import Traversal
from gatekeeper.static.module_constants import collect_module_constants
from gatekeeper.static.positions import positions_for
from gatekeeper.static.walk import subtree

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _resolve_calls(source: str) -> dict[str, str | None]:
    """Map the source text of every call's function to its resolved qualified name."""
    module = cst.parse_module(source)
    ctx = FileContext(path="x.py", text=source, module=module, profile="default", problem=None, folder=None)
    collect_module_constants(ctx)
    seen: dict[str, str | None] = {}

    class Probe:
        def visit_Call(self, node):
            seen[module.code_for_node(node.func)] = ctx.qualname(node.func)

    traversal = Traversal(ctx, [])
    traversal.visits["Call"].append(Probe().visit_Call)
    traversal.run(module)
    return seen


def test_aliases_and_from_imports_resolve():
    seen = _resolve_calls(
        "import torch as T\nfrom torch import mean as m\nimport torch.nn.functional as F\n"
        "mm = T.matmul\nT.mean(x)\nm(x)\nF.relu(x)\nmm(a, b)\ngetattr(T, 'sum')(x)\n"
    )
    assert seen["T.mean"] == "torch.mean"
    assert seen["m"] == "torch.mean"
    assert seen["F.relu"] == "torch.nn.functional.relu"
    assert seen["mm"] == "torch.matmul"
    assert seen["getattr(T, 'sum')"] == "torch.sum"


def test_local_variable_named_torch_is_not_torch():
    seen = _resolve_calls(
        "import torch\ndef f(torch):\n    return torch.mean(1)\ndef g():\n    torch = Fake()\n    return torch.sum(2)\n"
        "def h():\n    return torch.max(3)\n"
    )
    assert seen["torch.mean"] is None  # parameter shadows the module
    assert seen["torch.sum"] is None  # local assignment shadows it
    assert seen["torch.max"] == "torch.max"


def test_class_scope_is_not_visible_from_methods():
    seen = _resolve_calls("import torch\nclass A:\n    torch = None\n    def f(self):\n        return torch.exp(1)\n")
    assert seen["torch.exp"] == "torch.exp"


def test_import_below_use_still_resolves():
    seen = _resolve_calls("def f(x):\n    return np.sum(x)\nimport numpy as np\n")
    assert seen["np.sum"] == "numpy.sum"


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "submissions").glob("*.py")))
def test_fast_positions_match_libcst_position_provider(name):
    text = (FIXTURES / "submissions" / name).read_text()
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        pytest.skip("a fixture that is not valid Python")
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    expected = wrapper.resolve(PositionProvider)
    parents: dict = {}
    for node in subtree(module):
        from gatekeeper.static.walk import children

        for child in children(node):
            parents[child] = node
    targets = [n for n in subtree(module) if isinstance(n, (cst.Call, cst.Return, cst.SimpleString, cst.Name))]
    got = positions_for(module, targets, parents, text)
    assert len(got) == len(targets)
    for node in targets:
        assert got[id(node)] == expected[node], module.code_for_node(node)


def test_tokenizer_drops_comments_and_strings():
    src = '// at::matmul\n/* torch::mean */ auto s = "at::sum"; at::relu(x); char c = \'a\';\n#define N 768\n'
    texts = [t.text for t in tokenize(src)]
    assert "matmul" not in texts and "mean" not in texts and "sum" not in texts
    assert texts[texts.index("relu") - 2 : texts.index("relu") + 1] == ["at", "::", "relu"]
    assert directive_lines(src, tokenize(src))["N"][0].text == "768"


def test_tokenizer_survives_unterminated_input():
    for src in ['"never closed', "/* never closed", "R\"x(never closed", "#", "\\", "'"]:
        tokenize(src)  # must not raise


def test_parse_int_forms():
    assert parse_int("768") == 768 and parse_int("0x300") == 768 and parse_int("768u") == 768
    assert parse_int("1'024") == 1024 and parse_int("1.5f") is None


def test_cpp_function_returns_parameter():
    src = "torch::Tensor f(torch::Tensor x, torch::Tensor y) { k<<<1, 32>>>(x, y); return y; }\n" \
          "torch::Tensor g(torch::Tensor x) { auto y = torch::empty_like(x); return y; }\n"
    found = {fn.name: fn for fn in functions(tokenize(src))}
    assert found["f"].params == ["x", "y"] and found["f"].returns_params == {1}
    assert found["g"].returns_params == set()


def test_cpp_sources_resolved_through_constants_and_fstrings(tmp_path):
    from gatekeeper.static.testing import static_findings

    problem = "R = 4\nB = 16\nD = 48\ndef get_inputs():\n    return [torch.randn(R, B, D)]\n"
    source = (
        "from torch.utils.cpp_extension import load_inline as li\nN = 768\nhead = '#include <torch/extension.h>\\n'\n"
        "body = f'''\n__global__ void k(float* y) {{ y[threadIdx.x + {N}] = 0; }}\n'''\n"
        "ext = li(name='e', cpp_sources='', cuda_sources=head + body, functions=[])\n"
    )
    findings = [f for f in static_findings(source, problem) if f.rule == "GK203"]
    assert findings and findings[0].location.line == 5
    assert findings[0].evidence["value"] == 768


def test_side_file_sources_are_read(tmp_path):
    import gatekeeper

    (tmp_path / "kernel.cu").write_text("__global__ void k(float* x) { x[threadIdx.x + 1536] = 0; }\n")
    sub = tmp_path / "sub.py"
    sub.write_text("from torch.utils.cpp_extension import load\next = load(name='e', sources=['kernel.cu'])\n")
    problem = tmp_path / "p.py"
    problem.write_text("R = 4\nB = 16\nD = 48\n")
    report = gatekeeper.check_static(sub, problem)
    hits = [f for f in report.findings if f.rule == "GK203"]
    assert hits and hits[0].location.path.endswith("kernel.cu") and hits[0].location.line == 1


@pytest.mark.parametrize("expr", [
    "(" * 5000 + "1" + ")" * 5000, "-" * 10000 + "1", "1" + "+1" * 10000, "a." * 20000 + "b",
    "x if y else " * 3000 + "1", "lambda: " * 6000 + "1", "not " * 5000 + "1",
])
def test_hostile_nesting_is_a_finding_not_a_crash(expr):
    """libcst's native parser segfaults or goes quadratic on these; the screen must stop
    them before it (each of these crashed or hung a bare libcst.parse_module)."""
    from gatekeeper.static.testing import static_findings

    findings = static_findings("x = " + expr + "\n")
    assert findings and findings[0].rule == "GK003", findings


def test_docstring_mentioning_cpp_is_not_kernel_source():
    from gatekeeper.static.testing import static_findings

    problem = "R = 4\nB = 16\nD = 48\n"
    source = (
        'import torch\nclass ModelNew(torch.nn.Module):\n'
        '    """Allocates with torch::empty and launches <<<grid, 768>>> threads in the C++ version."""\n'
        "    def forward(self, x):\n        return run(x)\n"
    )
    assert not [f for f in static_findings(source, problem) if f.rule.startswith("GK2")]
