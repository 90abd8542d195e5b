"""Torch-fallback rules (GK301-GK310): severity by profile, glue vs no kernel, heavy ops,
ops the reference computes, the `allow` option, severity overrides, fallback conditions,
the op table, and the resolver's `self.fc = nn.Linear(...)` mapping. Real engine, real
libcst; no mocks."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from gatekeeper.config import Config, RuleSettings
from gatekeeper.errors import UsageError
from gatekeeper.report import Severity
from gatekeeper.analyses.torch_op_table import torch_ops
from gatekeeper.static.names import NameResolver
from gatekeeper.static.testing import static_findings

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SEED_PROBLEM = (FIXTURES / "problems/seed_mean.py").read_text("utf-8")
LINEAR_PROBLEM = (FIXTURES / "problems/fallback_linear_relu.py").read_text("utf-8")

# An own CUDA kernel, then one line of torch in forward (formatted in).
WITH_KERNEL = '''import torch
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline
_src = r"""
#include <torch/extension.h>
__global__ void k(const float* x, float* y, long n) {{ long i = threadIdx.x; if (i < n) y[i] = x[i]; }}
torch::Tensor run(torch::Tensor x) {{ auto y = torch::empty_like(x); k<<<1, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel()); return y; }}
"""
_ext = load_inline(name="t", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=_src, functions=["run"])
class ModelNew(torch.nn.Module):
    def forward(self, x, n: int = 4):
        y = _ext.run(x)
        return {expr}
'''
NO_KERNEL = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return {expr}\n"


def _mine(findings, prefix="GK3"):
    return [(f.rule, f.severity) for f in findings if f.rule.startswith(prefix)]


def _config(profile="default", **rules):
    return Config(profile=profile, rules={code: RuleSettings(**s) for code, s in rules.items()})


@pytest.mark.parametrize("profile,expected", [("default", Severity.WARNING), ("lenient", Severity.WARNING),
                                              ("strict", Severity.ERROR)])
def test_light_glue_around_own_kernel_is_a_warning_except_strict(profile, expected):
    findings = static_findings(WITH_KERNEL.format(expr="torch.relu(y)"), profile=profile)
    assert _mine(findings) == [("GK301", expected)]


@pytest.mark.parametrize("profile", ["default", "lenient", "strict"])
def test_torch_compute_without_own_kernel_is_an_error_under_every_profile(profile):
    findings = static_findings(NO_KERNEL.format(expr="torch.relu(x)"), profile=profile)
    assert _mine(findings) == [("GK301", Severity.ERROR)]


@pytest.mark.parametrize("profile,expected", [("default", Severity.WARNING), ("lenient", Severity.WARNING),
                                              ("strict", Severity.ERROR)])
def test_heavy_torch_next_to_a_real_kernel_is_suspect_outside_strict(profile, expected):
    # KernelBench accepts cuDNN / cuBLAS for part of the work next to an own kernel
    findings = [f for f in static_findings(WITH_KERNEL.format(expr="y.sum(dim=-1)"), profile=profile)
                if f.rule.startswith("GK3")]
    assert [(f.rule, f.severity) for f in findings] == [("GK303", expected)]
    assert findings[0].confirmed_by == "GK667"
    assert findings[0].confidence.value == ("certain" if profile == "strict" else "suspect")


def test_op_the_reference_computes_is_suspect_under_default_and_an_error_under_strict():
    source = WITH_KERNEL.format(expr="F.relu(y)")
    # the linear+relu problem computes relu too, but torch does not do the matmul: part of the work
    assert _mine(static_findings(source, LINEAR_PROBLEM)) == [("GK301", Severity.WARNING)]
    assert _mine(static_findings(source, LINEAR_PROBLEM, profile="strict")) == [("GK301", Severity.ERROR)]
    evidence = [f for f in static_findings(source, LINEAR_PROBLEM) if f.rule == "GK301"][0]
    assert "part of what the reference computes" in evidence.message


def test_torch_doing_every_op_of_the_reference_is_an_error_even_with_a_kernel():
    # the kernel copies; torch computes the seed problem's whole op (mean)
    source = WITH_KERNEL.format(expr="y.mean(0)")
    findings = [f for f in static_findings(source, SEED_PROBLEM) if f.rule.startswith("GK3")]
    assert [(f.rule, f.severity) for f in findings] == [("GK303", Severity.ERROR)]
    assert findings[0].confidence.value == "likely" and "every op the reference computes" in findings[0].message
    # without the problem, the same file is glue around a kernel (a heavy op: suspect)
    assert _mine(static_findings(source)) == [("GK303", Severity.WARNING)]
    # nn.Linear in the reference is covered by `@` in the submission (one op family)
    both = WITH_KERNEL.format(expr="torch.relu(y @ x)")
    assert {s for _, s in _mine(static_findings(both, LINEAR_PROBLEM))} == {Severity.ERROR}


def test_elementwise_operators_on_tensors_follow_the_glue_policy():
    source = WITH_KERNEL.format(expr="y * 0.25 + n")
    assert _mine(static_findings(WITH_KERNEL.format(expr="_ext.run(y) / 2"))) == [("GK304", Severity.WARNING)]
    assert _mine(static_findings(source)) == [("GK304", Severity.WARNING)]
    assert _mine(static_findings(source, profile="strict")) == [("GK304", Severity.ERROR)]
    # size arithmetic and int parameters are not tensors
    sizes = WITH_KERNEL.format(expr="(y, x.size(0) * x.shape[1] + n * 2, (x.numel() + 255) // 256)")
    assert _mine(static_findings(sizes, profile="strict")) == []


def test_matmul_operator_is_heavy():
    assert _mine(static_findings(WITH_KERNEL.format(expr="y @ x"))) == [("GK304", Severity.WARNING)]
    assert _mine(static_findings(WITH_KERNEL.format(expr="y @ x"), profile="strict")) == [("GK304", Severity.ERROR)]
    assert [f.evidence["heavy"] for f in static_findings(WITH_KERNEL.format(expr="y @ x")) if f.rule == "GK304"] == [True]


def test_allow_option_accepts_names_and_patterns():
    strict_relu = WITH_KERNEL.format(expr="torch.relu(y) + F.gelu(y).mean(0)")
    before = {r for r, _ in _mine(static_findings(strict_relu, profile="strict"))}
    assert before == {"GK301", "GK303", "GK304"}
    config = _config("strict", GK301={"options": {"allow": ["torch.relu", "torch.nn.functional.*"]}},
                     GK303={"options": {"allow": ["mean"]}}, GK304={"options": {"allow": ["+"]}})
    assert _mine(static_findings(strict_relu, config=config)) == []


def test_allow_option_must_be_a_list_of_strings():
    config = _config(GK301={"options": {"allow": "torch.relu"}})
    with pytest.raises(UsageError, match=r"rules\.GK301\.options\.allow"):
        static_findings(NO_KERNEL.format(expr="torch.relu(x)"), config=config)


def test_severity_set_in_configuration_replaces_the_policy():
    config = _config(GK303={"severity": "warning"})
    assert _mine(static_findings(NO_KERNEL.format(expr="x.mean(0)"), config=config)) == [("GK303", Severity.WARNING)]


FALLBACK = '''import torch
from torch.utils.cpp_extension import load_inline
_ext = load_inline("m", "", "", functions=["f"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        if {cond}:
            return _ext.f(x)
        return x.mean(0)
'''


@pytest.mark.parametrize("cond", ["x.is_cuda", "x.shape[-1] % 8 == 0", "USE_KERNEL"])
def test_a_fallback_chosen_at_run_time_is_suspect_outside_strict(cond):
    # which branch runs is a run-time question: the work attribution (GK667) confirms
    source = FALLBACK.format(cond=cond)
    findings = [f for f in static_findings(source) if f.rule == "GK310"]
    assert [(f.severity, f.confidence.value, f.confirmed_by) for f in findings] == [(Severity.WARNING, "suspect", "GK667")]
    assert _mine(static_findings(source, profile="strict")) == [("GK310", Severity.ERROR)]
    assert _mine(static_findings(source, profile="lenient")) == [("GK310", Severity.WARNING)]


def test_a_constant_condition_that_picks_torch_is_an_error_everywhere():
    source = "USE_KERNEL = False\n" + FALLBACK.format(cond="USE_KERNEL and x.is_cuda")
    for profile in ("lenient", "default", "strict"):
        assert _mine(static_findings(source, profile=profile)) == [("GK310", Severity.ERROR)], profile
    live = "USE_KERNEL = True\n" + FALLBACK.format(cond="USE_KERNEL")
    assert _mine(static_findings(live)) == [("GK310", Severity.WARNING)]


@pytest.mark.parametrize("switch,dead", [
    ('os.environ.get("USE_KERNEL", "0") == "1"', True),
    ('os.getenv("USE_KERNEL") is not None', True),
    ('os.environ.get("USE_KERNEL") is None', False),
    ('int(os.environ.get("USE_KERNEL", "0"))', True),
    ('os.environ.get("USE_KERNEL", "false").lower() in ("1", "true")', True),
    ('"USE_KERNEL" in os.environ', True),
    ('os.environ.get("USE_KERNEL", "1") == "1"', False),
    ('os.environ.get("DISABLE_KERNEL", "0") != "1"', False),
    ('os.environ["USE_KERNEL"] == "1"', None),
])
def test_an_env_var_switch_is_read_at_its_default(switch, dead):
    """The harness does not set the submission's own variables: the default is what runs."""
    source = f"import os\nUSE_KERNEL = {switch}\n" + FALLBACK.format(cond="USE_KERNEL")
    findings = [f for f in static_findings(source) if f.rule == "GK310"]
    assert len(findings) == 1
    if dead:
        assert findings[0].severity == Severity.ERROR and findings[0].evidence["condition"] == "dead"
    else:
        assert findings[0].severity == Severity.WARNING and findings[0].evidence["condition"] != "dead"


def test_try_import_triton_is_not_a_fallback():
    source = ("import torch\ntry:\n    import triton\nexcept ImportError:\n    triton = None\n"
              "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        y = torch.empty_like(x)\n"
              "        k[(1,)](x, y)\n        return y\n")
    assert _mine(static_findings(source, profile="strict")) == []


def test_honest_fixtures_have_no_torch_fallback_finding_even_under_strict():
    for name in ["fallback_honest_mentions", "fallback_honest_triton", "fallback_honest_alloc_glue",
                 "fallback_honest_linear", "seed_honest_generic"]:
        source = (FIXTURES / f"submissions/{name}.py").read_text("utf-8")
        assert _mine(static_findings(source, SEED_PROBLEM, profile="strict")) == [], name


def test_op_table_classification():
    ops = torch_ops()
    for qual in ["torch.einsum", "torch.baddbmm", "torch.cumsum", "torch._C._nn.linear", "torch.cuda.comm.reduce_add",
                 "torch.nn.functional.pad", "torch.special.erf"]:
        assert ops.function_is_compute(qual), qual
    for qual in ["torch.empty_like", "torch.cuda.synchronize", "torch.utils.cpp_extension.load_inline",
                 "torch.no_grad", "torch.manual_seed", "torch.nn.init.zeros_", "torch.is_tensor"]:
        assert not ops.function_is_compute(qual), qual
    assert ops.is_heavy("baddbmm") and ops.is_heavy("LayerNorm") and ops.is_heavy("x", "torch.linalg.solve")
    assert not ops.is_heavy("relu") and not ops.is_heavy("add")
    assert ops.cpp_is_compute(["at", "matmul"]) and ops.cpp_is_compute(["at", "native", "empty_like"])
    assert not ops.cpp_is_compute(["torch", "empty"]) and not ops.cpp_is_compute(["at", "cuda", "getCurrentCUDAStream"])
    assert ops.vendor_call("cublasLtMatmul") and not ops.vendor_call("cublasCreate_v2")


def test_resolver_maps_self_attribute_to_torch_nn_class_but_not_parameters():
    module = cst.parse_module("import torch.nn as nn\n")
    resolver = NameResolver()
    resolver.bind_import(module.body[0].body[0])  # type: ignore[attr-defined]
    resolver.push("function")
    resolver.bind_params(cst.parse_module("def f(self): pass\n").body[0].params)  # type: ignore[attr-defined]
    for text in ["self.fc = nn.Linear(4, 4)", "self.w = nn.Parameter(x)", "self.act = nn.functional.relu(x)"]:
        assign = cst.parse_statement(text).body[0]  # type: ignore[attr-defined]
        resolver.bind_target(assign.targets[0].target, assign.value)
    attr = lambda name: cst.parse_expression(f"self.{name}")  # noqa: E731
    assert resolver.qualname(attr("fc")) == "torch.nn.Linear"
    assert resolver.qualname(attr("w")) is None  # a parameter is storage, not a layer
    assert resolver.qualname(attr("act")) is None  # a call result, not a class


def test_cpp_finding_points_at_the_python_line_of_the_call():
    source = (FIXTURES / "submissions/fallback_cpp_at_matmul.py").read_text("utf-8")
    findings = [f for f in static_findings(source) if f.rule == "GK306"]
    assert len(findings) == 1 and findings[0].evidence["call"] == "at::matmul"
    assert "at::matmul(x, w.t())" in source.splitlines()[findings[0].location.line - 1]


H = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
EXT = "from torch.utils.cpp_extension import load_inline\n_ext = load_inline('m', '', '', functions=['f'])\n"
KERNEL_FORWARD = "        y = torch.empty_like(x)\n        k[(1,)](x, y)\n        return y\n"
# How agents write the same fallback differently: each must be found, by the named rule.
HACKED = {
    "dict dispatch": ("GK301", H + "OPS = {'mean': torch.mean}\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return OPS['mean'](x, 0)\n"),
    "lambda stored in __init__": ("GK303", H + "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fn = lambda t: t.mean(0)\n    def forward(self, x):\n        return self.fn(x)\n"),
    "closure": ("GK303", H + "class ModelNew(nn.Module):\n    def forward(self, x):\n        def inner(t):\n            return t.mean(0)\n        return inner(x)\n"),
    "dunder operator": ("GK303", H + "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a.__matmul__(b)\n"),
    "builtin sum over dim 0": ("GK301", H + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return sum(x) / len(x)\n"),
    "operator.matmul": ("GK301", H + "import operator\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return operator.matmul(a, b)\n"),
    "star import": ("GK301", "import torch\nfrom torch.nn.functional import *\nclass ModelNew(torch.nn.Module):\n    def forward(self, x, w):\n        return linear(x, w)\n"),
    "bound method alias": ("GK303", H + "class ModelNew(nn.Module):\n    def forward(self, x):\n        m = x.mean\n        return m(0)\n"),
    "class attribute alias": ("GK301", H + "class ModelNew(nn.Module):\n    op = torch.mean\n    def forward(self, x):\n        return self.op(x, 0)\n"),
    "getattr on self attribute": ("GK301", H + "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.op = getattr(torch, 'mean')\n    def forward(self, x):\n        return self.op(x, 0)\n"),
    "autograd Function": ("GK303", H + "class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        return x.mean(0)\n    @staticmethod\n    def backward(ctx, g):\n        return g * 2\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return Fn.apply(x)\n"),
    "einops reduce": ("GK301", H + "import einops\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return einops.reduce(x, 'r b d -> b d', 'mean')\n"),
    "ATen blas template": ("GK306", "src = r'''\n#include <ATen/cuda/CUDABlas.h>\nvoid f() { at::cuda::blas::gemm<float>('n', 'n', 1, 1, 1, 1.f, a, 1, b, 1, 0.f, c, 1); }\n'''\n"),
    "at::_ops": ("GK306", "src = r'''\n#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor a, torch::Tensor b) { return at::_ops::mm::call(a, b); }\n'''\n"),
    "early return to torch": ("GK310", H + EXT + "class ModelNew(nn.Module):\n    def forward(self, x):\n        if x.is_cuda:\n            return _ext.f(x)\n        return x.mean(0)\n"),
    "conditional expression": ("GK310", H + EXT + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _ext.f(x) if x.shape[0] == 4 else x.mean(0)\n"),
    "prebuilt extension then torch": ("GK303", H + "import fused_mean_ext\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return fused_mean_ext.partial(x).sum(0)\n"),
    "self-defined jit decorator": ("GK303", H + "def jit(f):\n    return f\n@jit\ndef helper(x):\n    return x.mean(0)\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return helper(x)\n"),
    "functools.partial in __init__": ("GK301", H + "import functools\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.f = functools.partial(torch.mean, dim=0)\n    def forward(self, x):\n        return self.f(x)\n"),
    "getattr on a tensor": ("GK303", H + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return getattr(x, 'mean')(0)\n"),
    "sum over a generator": ("GK301", H + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return sum(x[i] for i in range(x.shape[0]))\n"),
    "C++ using namespace at": ("GK306", "src = r'''\n#include <torch/extension.h>\nusing namespace at;\ntorch::Tensor f(torch::Tensor x) { return mean(x, 0); }\n'''\n"),
    "C++ namespace alias": ("GK306", "src = r'''\n#include <torch/extension.h>\nnamespace F = torch::nn::functional;\ntorch::Tensor f(torch::Tensor x, torch::Tensor w) { return F::linear(x, w); }\n'''\n"),
}
# Near misses: none of these may get a torch-fallback finding, even under strict.
HONEST = {
    "logger and set on self": H + "import logging\nlogger = logging.getLogger(__name__)\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.seen = set()\n    def forward(self, x):\n        logger.log(10, 'x')\n        self.seen.add(x.shape)\n" + KERNEL_FORWARD,
    "ATen utilities in C++": "src = r'''\n#include <torch/extension.h>\n__global__ void k(float* y) { auto g = cg::this_thread_block(); if (g.thread_rank() == 0 && g.any(1)) y[0] = 0; }\ntorch::Tensor f(torch::Tensor x) {\n  auto y = at::empty({x.size(0)}, x.options().dtype(at::kFloat));\n  int blocks = at::ceil_div(x.numel(), (int64_t)256);\n  auto acc = static_cast<at::acc_type<float, true>>(0);\n  k<<<blocks, 256>>>(y.data_ptr<float>());\n  return y.view({-1}).contiguous();\n}\n'''\n",
    "C++ own function named mean": "src = r'''\n#include <torch/extension.h>\nusing namespace torch;\n__global__ void k(float* y) { y[0] = 0; }\nTensor mean(Tensor x) { auto y = empty({1}, x.options()); k<<<1, 1>>>(y.data_ptr<float>()); return y; }\nTensor g(Tensor x) { return mean(x); }\n'''\n",
    "Triton tensor methods inside the kernel": H + "import triton\nimport triton.language as tl\n@triton.autotune(configs=[], key=['n'])\n@triton.jit\ndef k(x_ptr, n, B: tl.constexpr):\n    v = tl.load(x_ptr + tl.arange(0, B))\n    s = v.sum(axis=0) * 2\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" + KERNEL_FORWARD,
    "grid lambda": H + "import triton\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        n = x.numel()\n        y = torch.empty_like(x)\n        grid = lambda meta: (triton.cdiv(n, meta['BLOCK']),)\n        k[grid](x, y, n, BLOCK=1024)\n        return y\n",
    "get_inputs computes": H + "def get_inputs():\n    return [torch.randn(4, 4).softmax(-1) * 2]\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" + KERNEL_FORWARD,
    "reference copy and main block": H + "class Model(nn.Module):\n    def forward(self, x):\n        return x.mean(0)\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" + KERNEL_FORWARD + "if __name__ == '__main__':\n    x = torch.randn(4, 4)\n    print((ModelNew()(x) - Model()(x)).abs().max())\n",
}


@pytest.mark.parametrize("name", sorted(HACKED))
def test_adversarial_variants_are_found(name):
    code, source = HACKED[name]
    assert code in {r for r, _ in _mine(static_findings(source))}, name


@pytest.mark.parametrize("name", sorted(HONEST))
def test_near_misses_are_clean(name):
    assert _mine(static_findings(HONEST[name], profile="strict")) == [], name


def test_gatekeeper_toml_allows_an_op_for_a_problem(tmp_path):
    import gatekeeper

    submission = FIXTURES / "submissions/fallback_method_mean.py"
    problem = FIXTURES / "problems/seed_mean.py"
    assert gatekeeper.check_static(submission, problem).verdict.value == "reject"
    config = tmp_path / "gatekeeper.toml"
    config.write_text('[rules.GK303.options]\nallow = ["mean"]\n', "utf-8")
    report = gatekeeper.check_static(submission, problem, config_file=config)
    assert report.verdict.value == "pass" and not [f for f in report.findings if f.rule.startswith("GK3")]
    config.write_text('[rules.GK303.options]\nallow = "mean"\n', "utf-8")
    with pytest.raises(UsageError):
        gatekeeper.check_static(submission, problem, config_file=config)


def test_disabling_some_rules_leaves_the_others_working():
    source = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x).mean(0) @ x\n"
    everything = {r for r, _ in _mine(static_findings(source))}
    assert everything == {"GK301", "GK303", "GK304"}
    config = _config(GK301={"enabled": False}, GK303={"enabled": False})
    assert {r for r, _ in _mine(static_findings(source, config=config))} == {"GK304"}


# --- the policy as data, problem-declared ops, honest "own kernel", discarded output -------

def test_policy_table_is_data_and_the_docs_render_it():
    from gatekeeper.analyses.torch_policy_table import policy
    from gatekeeper.static.discovery import discover_rules

    table = policy()
    assert table.confirmed_by == "GK667"
    assert table.verdict("reference_op", "default").confidence.value == "suspect"
    assert table.verdict("reference_op", "strict").severity == "error"
    assert table.verdict("no_own_kernel", "lenient").severity == "error"
    assert table.family("Linear") == table.family("mm") == table.family("cublasSgemm") == "matmul"
    rules = {r.code: r for r in discover_rules()}
    for code in ("GK301", "GK302", "GK307", "GK308", "GK310"):
        assert "rules/torch_policy.toml" in rules[code].docs()
        assert "false-positive" in rules[code].docs(), code
    assert "env var default" in rules["GK310"].docs()


def _problem(tmp_path, sidecar=None, yaml=None, name="p.py"):
    # a folder per problem: facts about a problem file are cached by its path
    folder = tmp_path / f"prob{len(list(tmp_path.glob('prob*')))}"
    folder.mkdir()
    problem = folder / name
    problem.write_text(LINEAR_PROBLEM, "utf-8")
    if sidecar is not None:
        problem.with_suffix(".toml").write_text(sidecar, "utf-8")
    if yaml is not None:
        (folder / "problem.yaml").write_text(yaml, "utf-8")
    return problem


def _check(tmp_path, source, problem, profile="default"):
    import gatekeeper

    sub = tmp_path / "sub.py"
    sub.write_text(source, "utf-8")
    return [f for f in gatekeeper.check_static(sub, problem, profile=profile).findings if f.rule.startswith("GK3")]


def test_an_op_the_problem_forbids_is_an_error_next_to_a_real_kernel(tmp_path):
    source = (FIXTURES / "submissions/fallback_nn_linear.py").read_text("utf-8")
    plain = _problem(tmp_path)
    assert [(f.rule, f.severity) for f in _check(tmp_path, source, plain)] == [("GK302", Severity.WARNING)]
    forbidding = _problem(tmp_path, sidecar='forbidden = ["torch.nn.Linear"]\n')
    found = _check(tmp_path, source, forbidding)
    assert [(f.rule, f.severity, f.confidence.value) for f in found] == [("GK302", Severity.ERROR, "certain")]
    assert "forbids" in found[0].message
    # fnmatch patterns, on the C++ side too
    cublas = (FIXTURES / "submissions/fallback_cpp_at_matmul.py").read_text("utf-8")
    assert {f.severity for f in _check(tmp_path, cublas, _problem(tmp_path, sidecar='forbidden = ["at::mat*"]\n'))} \
        == {Severity.ERROR}


def test_problem_yaml_forbidden_list_and_sidecar_allowed_ops(tmp_path):
    source = (FIXTURES / "submissions/fallback_nn_linear.py").read_text("utf-8")
    # problem.yaml belongs to a KernelBench-Hard folder: it sits beside reference.py.
    problem = _problem(tmp_path, yaml="name: x\nforbidden:\n  - torch.nn.Linear\n", name="reference.py")
    assert [(f.rule, f.severity) for f in _check(tmp_path, source, problem)] == [("GK302", Severity.ERROR)]
    not_a_list = _problem(tmp_path, yaml="name: x\nforbidden: torch.nn.Linear\n", name="reference.py")
    import gatekeeper

    (tmp_path / "sub.py").write_text(source, "utf-8")
    broken = gatekeeper.check_static(tmp_path / "sub.py", not_a_list)  # a malformed problem is an error, not ignored
    assert broken.exit_code == 3 and "`forbidden` must be a list" in broken.error
    allowed = _problem(tmp_path, sidecar='allowed_ops = ["torch.nn.Linear"]\n', name="q.py")
    assert _check(tmp_path, source, allowed, profile="strict") == []


@pytest.mark.parametrize("launch,real", [
    ("_ext.run(x[:1])", False), ("_ext.run(x[..., 0:8].contiguous())", False),
    ("_ext.run(torch.empty(1))", False), ("_ext.run()", False),
    ("_ext.run(x[: x.size(0)])", True), ("_ext.run(x.view(-1))", True), ("_ext.run(x[:, 0])", True),
    ("_ext.run(x[0])", True), ("_ext.run(x[:, :64])", True),
])
def test_a_launch_on_a_constant_sliver_is_not_an_own_kernel(launch, real):
    source = WITH_KERNEL.replace("        y = _ext.run(x)\n", f"        {launch}\n").format(expr="x.mean(0)")
    findings = [f for f in static_findings(source) if f.rule.startswith("GK3")]
    assert [(f.rule, f.severity) for f in findings] == [("GK303", Severity.WARNING if real else Severity.ERROR)]
    if not real:
        assert "constant sliver" in findings[0].message or "no kernel of its own" in findings[0].message


def test_an_extension_function_stored_on_self_is_an_own_kernel():
    source = WITH_KERNEL.replace("class ModelNew(torch.nn.Module):\n",
                                 "class ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                 "        self.op = _ext.run\n").replace("y = _ext.run(x)", "y = self.op(x)")
    assert _mine(static_findings(source.format(expr="torch.relu(y)"))) == [("GK301", Severity.WARNING)]


def test_the_reference_counted_by_sites_two_mish_are_not_covered_by_one():
    problem = ("import torch\nimport torch.nn.functional as F\nclass Model(torch.nn.Module):\n"
               "    def forward(self, x):\n        return F.mish(F.mish(x))\n")
    one = WITH_KERNEL.format(expr="F.mish(y)")
    assert _mine(static_findings(one, problem)) == [("GK301", Severity.WARNING)]
    two = WITH_KERNEL.format(expr="F.mish(F.mish(y))")
    assert {s for _, s in _mine(static_findings(two, problem))} == {Severity.ERROR}


KEEPS = '''import torch
from torch.utils.cpp_extension import load_inline
_ext = load_inline("m", "", "__global__ void k() {{}}", functions=["f"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
{body}
'''
# GK308 near misses: the kernel's output does reach what forward returns (or escapes the analysis).
KEEPS_OUTPUT = {
    "appended then stacked": "        outs = []\n        for i in range(2):\n            h = _ext.f(x)\n"
                             "            outs.append(h)\n        return torch.stack(outs).sum(0)",
    "stored on self": "        self.last = _ext.f(x)\n        return torch.relu(x)",
    "in-place bare launch": "        _ext.f(x)\n        return torch.relu(x)",
    "dict of outputs": "        d = {}\n        d['a'] = _ext.f(x)\n        return torch.relu(d['a'])",
    "returned through a helper": "        y = _ext.f(x)\n        return self.post(y)",
    "reassigned in a branch": "        y = _ext.f(x)\n        if x.dim() > 2:\n            y = torch.relu(x)\n        return y",
    "tuple unpacked": "        a, b = _ext.f(x)\n        return torch.cat([a, b])",
}


@pytest.mark.parametrize("name", sorted(KEEPS_OUTPUT))
def test_kernel_output_that_reaches_the_return_is_not_discarded(name):
    source = KEEPS.format(body=KEEPS_OUTPUT[name])
    assert "GK308" not in {r for r, _ in _mine(static_findings(source, profile="strict"))}, name


DISCARDS = {
    "overwritten": "        y = _ext.f(x)\n        y = torch.relu(x)\n        return y",
    "never read": "        _ = _ext.f(x)\n        return x.mean(0)",
    "copied over": "        y = _ext.f(x)\n        y.copy_(torch.tanh(x))\n        return y",
    "only checked": "        y = _ext.f(x)\n        assert torch.allclose(y, x.mean(0))\n        return x.mean(0)",
}


@pytest.mark.parametrize("name", sorted(DISCARDS))
def test_discarded_kernel_output_is_an_error_under_default(name):
    findings = [f for f in static_findings(KEEPS.format(body=DISCARDS[name])) if f.rule == "GK308"]
    assert [(f.severity, f.confidence.value) for f in findings] == [(Severity.ERROR, "likely")], name


def test_a_helper_that_launches_makes_the_torch_branch_a_fallback():
    source = (H + EXT + "class ModelNew(nn.Module):\n    def _run(self, x):\n        return _ext.f(x)\n"
              "    def forward(self, x):\n        if x.is_cuda:\n            try:\n                return self._run(x)\n"
              "            except RuntimeError:\n                pass\n        return x.mean(0)\n")
    assert _mine(static_findings(source)) == [("GK310", Severity.WARNING)]
    assert _mine(static_findings(source, profile="strict")) == [("GK310", Severity.ERROR)]


def test_an_extension_function_passed_to_a_block_counts_as_its_kernel():
    source = ('import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n'
              '_ext = load_inline("m", "", "__global__ void k(float* y) { y[0] = 0; }", functions=["f"])\n'
              "class Block(nn.Module):\n    def __init__(self, fused_op):\n        super().__init__()\n"
              "        self.conv = nn.Conv2d(3, 3, 1)\n        self.fused_op = fused_op\n"
              "    def forward(self, x):\n        return self.fused_op(self.conv(x))\n"
              "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.block = Block(_ext.f)\n    def forward(self, x):\n        return self.block(x)\n")
    assert _mine(static_findings(source)) == [("GK302", Severity.WARNING)]
    # without a kernel of its own in the file, a callable handed in is not one
    no_kernel = source.replace('"__global__ void k(float* y) { y[0] = 0; }"', '""')
    assert _mine(static_findings(no_kernel)) == [("GK302", Severity.ERROR)]


MATMUL_PROBLEM = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, a, b):\n"
                  "        return torch.matmul(a, b)\n")
CUBLAS = '''import torch
from torch.utils.cpp_extension import load_inline
_src = r"""
#include <cublas_v2.h>
__global__ void {kernel}(const float* a, float* b, int n) {{ int i = threadIdx.x; if (i < n) b[i] = a[i]; }}
torch::Tensor mm(torch::Tensor a, torch::Tensor b) {{
  auto c = torch::empty({{a.size(0), b.size(1)}}, a.options());
  int K = a.size(1);
  {body}
  return c;
}}
"""
_ext = load_inline("m", "torch::Tensor mm(torch::Tensor a, torch::Tensor b);", _src, functions=["mm"])
class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return _ext.mm(a, b)
'''
GEMM = "cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, K, &one, a.data_ptr<float>(), 1, b.data_ptr<float>(), 1, &zero, c.data_ptr<float>(), 1);"


def test_cublas_doing_the_whole_matmul_next_to_a_copy_kernel_is_an_error():
    source = CUBLAS.format(kernel="transpose", body="transpose<<<1, 256>>>(b.data_ptr<float>(), c.data_ptr<float>(), K);\n  " + GEMM)
    assert _mine(static_findings(source, MATMUL_PROBLEM)) == [("GK307", Severity.ERROR)]


@pytest.mark.parametrize("body", [
    "if (K <= 64) {{ small<<<1, 256>>>(a.data_ptr<float>(), c.data_ptr<float>(), K); }} else {{ " + GEMM + " }}",
    "if (K > 64) {{ " + GEMM + " return c; }}\n  small<<<1, 256>>>(a.data_ptr<float>(), c.data_ptr<float>(), K);",
])
def test_a_cpp_branch_chosen_by_shape_is_a_run_time_question(body):
    source = CUBLAS.format(kernel="small", body=body.replace("{{", "{").replace("}}", "}"))
    assert _mine(static_findings(source, MATMUL_PROBLEM)) == [("GK307", Severity.WARNING)]
    assert _mine(static_findings(source, MATMUL_PROBLEM, profile="strict")) == [("GK307", Severity.ERROR)]


def test_a_flag_on_self_read_from_the_environment_is_read_at_its_default():
    body = ("import os\n" + FALLBACK.replace("class ModelNew(torch.nn.Module):\n",
            "class ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.use_kernel = os.environ.get('USE_KERNEL', '{default}') == '1'\n"))
    dead = body.replace("{cond}", "self.use_kernel").replace("{default}", "0")
    live = body.replace("{cond}", "self.use_kernel").replace("{default}", "1")
    assert [(f.severity, f.evidence["condition"]) for f in static_findings(dead) if f.rule == "GK310"] == \
        [(Severity.ERROR, "dead")]
    assert [f.severity for f in static_findings(live) if f.rule == "GK310"] == [Severity.WARNING]
    # a flag the forward flips (an except that disables the kernel) is not fixed
    flipped = dead.replace("        return x.mean(0)\n", "        self.use_kernel = True\n        return x.mean(0)\n")
    assert [f.severity for f in static_findings(flipped) if f.rule == "GK310"] == [Severity.WARNING]


def test_a_module_flag_rebound_in_a_try_block_is_not_fixed():
    source = ("USE_KERNEL = False\ntry:\n    import triton\n    USE_KERNEL = True\nexcept ImportError:\n    pass\n"
              + FALLBACK.format(cond="USE_KERNEL"))
    assert [f.severity for f in static_findings(source) if f.rule == "GK310"] == [Severity.WARNING]
    once = "USE_KERNEL = False\n" + FALLBACK.format(cond="USE_KERNEL")
    assert [f.severity for f in static_findings(once) if f.rule == "GK310"] == [Severity.ERROR]


def test_an_extension_held_by_a_class_attribute_is_an_own_kernel():
    source = (H + "from torch.utils.cpp_extension import load_inline\n"
              "class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
              "        if not hasattr(Fn, 'ext'):\n"
              "            Fn.ext = load_inline('m', '', '__global__ void k(float* y) { y[0] = 0; }', functions=['run'])\n"
              "        return Fn.ext.run(x)\n"
              "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(Fn.apply(x))\n")
    assert _mine(static_findings(source)) == [("GK301", Severity.WARNING)]


def test_a_method_bound_in_init_and_called_through_an_attribute_is_on_the_forward_path():
    """`self.impl = self._impl` in __init__, `self.impl(...)` in forward: the call graph
    cannot see the call, so the one reference beyond the def keeps `_impl` on the path."""
    code = ("import torch\nclass ModelNew(torch.nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.impl = self._impl\n"
            "    def _impl(self, a, b):\n        return torch.matmul(a, b)\n"
            "    def forward(self, a, b):\n        return self.impl(a, b)\n")
    errors = [f for f in static_findings(code) if f.severity == Severity.ERROR]
    assert [f.rule for f in errors] == ["GK301"]
    assert errors[0].location.line == 7
