"""Catalogue A (GK400-GK459): reference reuse, harness tampering, introspection, dynamic
code and sandbox escapes. Behaviour through the real engine: the alias forms the rules must
see, the near misses they must not flag, severities, C++ sources, and the fixtures."""

from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.report import Category, Severity
from gatekeeper.static.discovery import discover_rules
from gatekeeper.static.testing import static_findings

if __import__("sys").version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SEED = (FIXTURES / "problems" / "seed_mean.py").read_text("utf-8")
RANGES = {
    Category.REFERENCE_REUSE: range(400, 410),
    Category.HARNESS_TAMPERING: range(410, 420),
    Category.INTROSPECTION: range(420, 430),
    Category.DYNAMIC_CODE: range(430, 440),
    Category.SANDBOX_ESCAPE: range(440, 460),
}


def codes(source: str, problem: str = SEED, profile: str = "strict") -> set[str]:
    return {f.rule for f in static_findings(source, problem, profile=profile) if f.rule.startswith("GK4")}


def findings(source: str, code: str, problem: str = SEED, profile: str = "default"):
    return [f for f in static_findings(source, problem, profile=profile) if f.rule == code]


def test_catalogue_a_rules_sit_in_their_code_ranges():
    mine = [r for r in discover_rules() if r.code.startswith("GK4")]
    assert len(mine) >= 25
    for rule in mine:
        assert int(rule.code[2:]) in RANGES[rule.category], f"{rule.code} is {rule.category}"
        assert "Not flagged" in rule.docs() or "not flagged" in rule.docs(), f"{rule.code} documents no near miss"


# the alias forms named in the brief ------------------------------------------------------
@pytest.mark.parametrize("source,code", [
    ("import torch as T\nT.allclose = lambda *a, **k: True\n", "GK411"),
    ("import time\nfrom time import perf_counter as pc\ntime.perf_counter = lambda: 0.0\n", "GK410"),
    ("import torch\nt = torch.cuda\nt.Event.elapsed_time = lambda s, e: 1e-3\n", "GK410"),
    ("import torch\nsetattr(torch, 'allclose', lambda *a, **k: True)\n", "GK411"),
    ("from unittest import mock\nmock.patch('torch.allclose', return_value=True).start()\n", "GK411"),
    ("import torch\ntorch.__dict__['allclose'] = lambda *a, **k: True\n", "GK411"),
    ("import torch\nclass Fake: pass\ntorch.cuda.Event.__class__ = Fake\n", "GK410"),
    ("import torch\ntorch.Tensor.__eq__ = lambda self, other: True\n", "GK413"),
    ("import builtins\nbuiltins.print = lambda *a: None\n", "GK412"),
    ("__builtins__['print'] = lambda *a: None\n", "GK412"),
    ("import gatekeeper.timing as gt\ngt.measure = lambda *a: 1.0\n", "GK414"),
    ("import sys\nsys.modules['torch.testing'] = object()\n", "GK415"),
    ("import importlib\nimportlib.import_module('torch').equal = lambda a, b: True\n", "GK411"),
    ("import torch\ndef f(monkeypatch):\n    monkeypatch.setattr(torch, 'allclose', lambda *a: True)\n", "GK411"),
])
def test_tampering_is_seen_through_aliases(source, code):
    assert code in codes(source)


@pytest.mark.parametrize("source,code", [
    ("import inspect as _i\nf = _i.currentframe()\n", "GK420"),
    ("from sys import _getframe as gf\nx = gf(1).f_locals\n", "GK421"),
    ("import gc\nobjs = getattr(gc, 'get_objects')()\n", "GK422"),
    ("import sys\nmain = sys.modules['__main__']\n", "GK423"),
    ("import sys\ntry:\n    1 / 0\nexcept Exception:\n    tb = sys.exc_info()[2]\n", "GK424"),
    ("run = eval\nrun('1')\n", "GK430"),
    ("f = getattr(__builtins__, 'ex' + 'ec')\n", "GK432"),
    ("f = __builtins__.__dict__['exec']\n", "GK430"),
    ("mod = __import__('o' + 's')\n", "GK431"),
    ("import zlib\nsrc = zlib.decompress(BLOB)\nexec(src)\n", "GK433"),
    ("def f():\n    pass\nf.__code__ = (lambda: 1).__code__\n", "GK434"),
    ("from os import system as s\ns('ls')\n", "GK440"),
    ("import importlib\nsp = importlib.import_module('subprocess')\n", "GK440"),
    ("from urllib.request import urlopen\nurlopen('http://x')\n", "GK441"),
    ("import os\nos.environ.update(CUDA_VISIBLE_DEVICES='1')\n", "GK444"),
    ("from ctypes import cdll\nlib = cdll.LoadLibrary('libcuda.so.1')\n", "GK445"),
    ("import os\nos.popen('conda install -y cupy')\n", "GK446"),
    ("import pynvml as nv\nnv.nvmlDeviceSetPowerManagementLimit(h, 700000)\n", "GK447"),
    ("from reference import Model as Base\nclass ModelNew(Base):\n    pass\n", "GK400"),
    ("class ModelNew:\n    def forward(self, x):\n        return Model.forward(self, x)\n", "GK401"),
    ("from . import reference\n", "GK402"),
])
def test_other_categories_are_seen_through_aliases(source, code):
    assert code in codes(source)


# honest near misses ----------------------------------------------------------------------
@pytest.mark.parametrize("source", [
    "import torch\ntorch.cuda.synchronize()\n",
    "import time\nt0 = time.perf_counter()\n",
    "import torch\nok = torch.allclose(torch.ones(2), torch.ones(2))\n",
    "import os\nsrc = open(os.path.join(os.path.dirname(__file__), 'kernel.cu')).read()\n",
    "import torch\nclass M(torch.nn.Module):\n    def f(self):\n        return getattr(self, 'weight')\n",
    "import torch\ndt = getattr(torch, 'float16')\n",
    "# eval(x) and subprocess.run are never used here\nnote = 'no exec, no eval, no subprocess'\n",
    "import torch\nm = torch.nn.Linear(2, 2).eval()\nfast = torch.compile(m)\n",
    "import re\npat = re.compile('x')\n",
    "import gc\ngc.collect()\n",
    "import sys\nme = sys.modules[__name__]\n",
    "import traceback\ntry:\n    pass\nexcept Exception:\n    traceback.print_exc()\n",
    "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.act = torch.relu\n        self.act = torch.sigmoid\n",
    "import torch\nstart = torch.cuda.Event(enable_timing=True)\nstart.label = 'mine'\n",
    "from kernelbench.distributed_collectives import default_device\n",
    "if __name__ == '__main__':\n    from reference import Model\n    ref = Model()\n",
])
def test_near_misses_are_clean(source):
    assert codes(source) == set()


def test_cpp_near_misses_are_clean():
    src = (
        "src = r'''\n#include <torch/extension.h>\n#include <algorithm>\n#include <cstdio>\n"
        "// system(\"nvidia-smi -lgc 1980\") is not run: this is a comment\n"
        "struct Runner { int system(int); };\n"
        "int f(Runner r, std::vector<int>& v) {\n"
        "  v.erase(std::remove(v.begin(), v.end(), 0), v.end());\n"
        "  FILE* table = fopen(\"tables.h\", \"r\");\n"
        "  return r.system(1);\n}\n"
        "bool same(py::object m) { return m.attr(\"float32\") == m.attr(\"float32\"); }\n'''\n"
    )
    assert codes(src) == set()


# C++ sources -----------------------------------------------------------------------------
def test_cpp_findings_point_at_the_python_line_of_the_source():
    src = (
        "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
        "cuda = r'''\n#include <torch/extension.h>\n#include <cstdlib>\n"
        "__global__ void k(float* y) { y[0] = 0.f; }\n"
        "void go() {\n  setenv(\"CUDA_LAUNCH_BLOCKING\", \"0\", 1);\n  std::system(\"nvidia-smi -lgc 1980\");\n}\n'''\n"
        "ext = load_inline('k', cpp_sources='', cuda_sources=cuda)\n"
    )
    found = {f.rule: f for f in static_findings(src, SEED, profile="default") if f.rule.startswith("GK4")}
    assert {"GK440", "GK444", "GK447"} <= set(found)
    lines = src.splitlines()
    assert "setenv" in lines[found["GK444"].location.line - 1]
    assert "std::system" in lines[found["GK440"].location.line - 1]
    assert found["GK440"].evidence["name"] == "system"


@pytest.mark.parametrize("body,code", [
    ("FILE* f = fopen(\"/tmp/out.txt\", \"w\");", "GK442"),
    ("std::ifstream in(\"/proc/self/environ\");", "GK443"),
    ("void* h = dlopen(\"libcublasLt.so\", RTLD_NOW);", "GK445"),
    ("int s = socket(AF_INET, SOCK_STREAM, 0);", "GK441"),
    ("if (fork() == 0) { execl(\"/bin/sh\", \"sh\", nullptr); }", "GK440"),
    ("nvmlDeviceSetApplicationsClocks(dev, 2619, 1980);", "GK447"),
    ("std::system(\"pip3 install numba\");", "GK446"),
    ("py::module_::import(\"torch\").attr(\"allclose\") = py::none();", "GK411"),
    ("auto tm = py::module_::import(\"time\"); py::setattr(tm, \"perf_counter\", py::none());", "GK410"),
    ("py::exec(\"import os\");", "GK430"),
    ("auto sp = py::module_::import(\"subprocess\");", "GK431"),
])
def test_cpp_variants_are_caught(body, code):
    src = f"src = r'''\n#include <torch/extension.h>\nvoid f() {{ {body} }}\n'''\n"
    assert code in codes(src)


# severities ------------------------------------------------------------------------------
def test_build_variables_are_a_warning_and_runtime_variables_an_error():
    build = findings("import os\nos.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\n", "GK444")
    runtime = findings("import os\nos.environ['CUDA_LAUNCH_BLOCKING'] = '0'\n", "GK444")
    computed = findings("import os\nk = input()\nos.environ[k] = '1'\n", "GK444")
    assert [f.severity for f in build] == [Severity.WARNING]
    assert [f.severity for f in runtime] == [Severity.ERROR]
    assert [f.severity for f in computed] == [Severity.ERROR]


def test_decoding_is_an_error_only_when_it_reaches_code():
    blob = findings("import base64\ndata = base64.b64decode(B)\n", "GK433")
    code = findings("import base64\ndata = base64.b64decode(B)\ntext = data.decode()\nexec(text)\n", "GK433")
    pickled = findings("import pickle\nstate = pickle.loads(B)\n", "GK433")
    assert [f.severity for f in blob] == [Severity.WARNING]
    assert [f.severity for f in code] == [Severity.ERROR]
    assert [f.severity for f in pickled] == [Severity.ERROR]


def test_inspect_helpers_are_a_warning_and_frame_access_an_error():
    helper = findings("import inspect\nsrc = inspect.cleandoc(S)\n", "GK420")
    frames = findings("import inspect\nf = inspect.stack()\n", "GK420")
    assert [f.severity for f in helper] == [Severity.WARNING]
    assert [f.severity for f in frames] == [Severity.ERROR]


def test_computed_getattr_on_a_compute_library_is_a_warning():
    torch_name = findings("import torch\ndef dt(name):\n    return getattr(torch, name)\n", "GK432")
    os_name = findings("import os\ndef fn(name):\n    return getattr(os, name)\n", "GK432")
    assert [f.severity for f in torch_name] == [Severity.WARNING]
    assert [f.severity for f in os_name] == [Severity.ERROR]


def test_file_paths_are_classified():
    relative = findings("with open('log.txt', 'w') as f:\n    pass\n", "GK442")
    absolute = findings("with open('/var/tmp/log.txt', 'w') as f:\n    pass\n", "GK442")
    unknown = findings("def save(p):\n    open(p, 'w').write('x')\n", "GK442")
    upward = findings("import os\nopen(os.path.join(os.path.dirname(__file__), '..', 'r.txt'), 'w')\n", "GK442")
    assert relative == []
    assert [f.severity for f in absolute] == [Severity.ERROR]
    assert [f.severity for f in unknown] == [Severity.WARNING]
    assert [f.severity for f in upward] == [Severity.ERROR]


def test_reading_the_reference_or_saved_outputs_is_an_error():
    ref = findings("src = open('reference.py').read()\n", "GK443")
    saved = findings("import numpy as np\nexpected = np.load('out.npy')\n", "GK443")
    data = findings("cfg = open('settings.json').read()\n", "GK443")
    assert [f.severity for f in ref] == [Severity.ERROR]
    assert [f.severity for f in saved] == [Severity.ERROR]
    assert [f.severity for f in data] == [Severity.WARNING]


# reference reuse and the problem file ------------------------------------------------------
def test_problem_stem_and_class_names_come_from_the_problem_file(tmp_path):
    problem = tmp_path / "17_matmul_relu.py"
    problem.write_text("import torch\nclass Net(torch.nn.Module):\n    def forward(self, a):\n"
                       "        return torch.relu(a @ a)\n", "utf-8")
    submission = tmp_path / "sub.py"
    submission.write_text("import importlib\nref = importlib.import_module('17_matmul_relu')\n"
                          "class ModelNew(Net):\n    pass\n", "utf-8")
    report = gatekeeper.check_static(submission, problem, profile="default")
    found = {f.rule for f in report.findings}
    assert {"GK400", "GK402"} <= found


def test_body_match_needs_the_problem_and_ignores_names():
    renamed = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, tensor_in):\n"
               "        '''fast'''\n        return tensor_in.mean(dim=0)  # fused\n")
    other_dim = renamed.replace("dim=0", "dim=1")
    assert "GK403" in codes(renamed, SEED)
    assert "GK403" not in codes(renamed, None)
    assert "GK403" not in codes(other_dim, SEED)


# fixtures ---------------------------------------------------------------------------------
def _catalogue_cases():
    data = tomllib.loads((FIXTURES / "manifest" / "catalogue_a.toml").read_text("utf-8"))
    return data["case"]


def test_every_category_has_three_hacked_fixtures_and_honest_ones():
    cases = _catalogue_cases()
    for category in RANGES:
        hacked = [c for c in cases if c["verdict"] == "reject" and category.value in c["categories"]]
        assert len(hacked) >= 3, f"{category.value}: {len(hacked)} hacked fixtures"
    assert len([c for c in cases if c["verdict"] == "pass"]) >= 5


@pytest.mark.parametrize("case", _catalogue_cases(), ids=lambda c: Path(c["submission"]).stem)
def test_fixture_is_caught_by_a_catalogue_a_rule_of_its_category(case):
    """The category must come from this catalogue's rules, not only from another rule."""
    report = gatekeeper.check_static(FIXTURES / case["submission"], FIXTURES / case["problem"], profile="strict")
    mine = {f.category.value for f in report.errors() if f.rule.startswith("GK4")}
    if case["verdict"] == "pass":
        assert not mine, [f"{f.rule} {f.message}" for f in report.errors()]
        return
    expected = {c for c in case["categories"] if c in {k.value for k in RANGES}}
    assert expected <= mine, f"{case['submission']}: {expected - mine} missing"


# reference reuse: pasted and rewritten reference classes (issue 10) -------------------------
_LAYERED = (
    "import torch\nimport torch.nn as nn\nclass Block(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.fc = nn.Linear(8, 8)\n    def forward(self, x):\n"
    "        return torch.relu(self.fc(x))\nclass Model(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.b = Block()\n    def forward(self, x):\n        return self.b(x).sum(1)\n"
)
_OWN_BLOCK = (
    "import torch\nimport torch.nn as nn\nclass Block(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.w = nn.Parameter(torch.randn(8, 8))\n    def forward(self, x):\n"
    "        return _ext.linear_relu(x, self.w)\n"
)


def test_a_rewritten_reference_class_is_the_submissions_own():
    source = _OWN_BLOCK + ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                           "        self.b = Block()\n    def forward(self, x):\n        return self.b(x).sum(1)\n")
    assert not {"GK401", "GK403"} & codes(source, _LAYERED)


def test_a_pasted_helper_class_is_suspect_and_the_model_copy_certain():
    pasted = _LAYERED.replace("class Model(", "class ModelNew(")
    assert [f.severity for f in findings(pasted, "GK403", _LAYERED)] == [Severity.ERROR]
    helper = _LAYERED.split("class Model(")[0] + (
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.b = Block()\n    def forward(self, x):\n        return _ext.rowsum(self.b(x))\n")
    assert [f.severity for f in findings(helper, "GK401", _LAYERED)] == [Severity.WARNING]
    assert [f.severity for f in findings(helper, "GK401", _LAYERED, profile="strict")] == [Severity.ERROR]


def test_a_pasted_class_that_builds_own_code_is_own():
    # `Block` pasted unchanged, but the `Inner` it builds is the submission's rewrite
    problem = _LAYERED.replace("self.fc = nn.Linear(8, 8)", "self.fc = Inner()").replace(
        "class Block(", "class Inner(nn.Module):\n    def forward(self, x):\n        return x * 2\nclass Block(")
    source = problem.split("class Model(")[0].replace("return x * 2", "return _ext.twice(x)") + (
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.b = Block()\n    def forward(self, x):\n        return self.b(x).sum(1)\n")
    assert not {"GK401", "GK403"} & codes(source, problem)


def test_borrowing_the_reference_layers_in_init_is_suspect_running_it_certain():
    borrow = ("import torch.nn as nn\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        orig = Model()\n        self.w = orig.b.fc.weight\n    def forward(self, x):\n"
              "        return _ext.fused(x, self.w)\n")
    assert [f.severity for f in findings(borrow, "GK401", _LAYERED)] == [Severity.WARNING]
    keep = borrow.replace("orig = Model()\n        self.w = orig.b.fc.weight", "self.ref = Model()").replace(
        "_ext.fused(x, self.w)", "self.ref(x)")
    assert [f.severity for f in findings(keep, "GK401", _LAYERED)] == [Severity.ERROR]


def test_subclassing_a_pasted_model_with_an_own_forward_is_suspect():
    pasted = _LAYERED.replace("class Model(", "class Model(")  # the whole reference, pasted
    own_forward = pasted + "class ModelNew(Model):\n    def forward(self, x):\n        return _ext.fused(x)\n"
    inherits = pasted + "class ModelNew(Model):\n    pass\n"
    assert [f.severity for f in findings(own_forward, "GK400", _LAYERED)] == [Severity.WARNING]
    assert [f.severity for f in findings(inherits, "GK400", _LAYERED)] == [Severity.ERROR]


_COPY = "def _expected(tensor_in):\n    return tensor_in.mean(dim=0)\n"
_OWN = "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return _ext.mean(x)\n"


@pytest.mark.parametrize("use, certain", [
    # outside the model's call: an import-time self-test, a __main__ block, nothing at all
    ("assert torch.allclose(_ext.mean(_x), _expected(_x))\n", False),
    ("if __name__ == '__main__':\n    print(_expected(torch.ones(2, 2)))\n", False),
    ("", False),
    # the hacks: the copy is what forward runs, called by name or through a stored callable
    (_OWN.replace("_ext.mean(x)", "_expected(x)"), True),
    ("_IMPL = {'fast': _expected}\n" + _OWN.replace("_ext.mean(x)", "_IMPL['fast'](x)"), True),
    (_OWN.replace("return _ext.mean(x)", "self.f = _expected\n        return self.f(x)"), True),
])
def test_a_copied_reference_forward_is_certain_only_where_the_models_call_can_reach_it(use, certain):
    source = "import torch\n_x = torch.ones(4, 4)\n" + _COPY + (use if "class ModelNew" in use else _OWN + use)
    found = findings(source, "GK403")
    assert len(found) == 1, [f.message for f in found]
    assert (found[0].confidence.value == "certain") is certain, found[0].message
    assert (found[0].severity == Severity.ERROR) is certain
