"""Sources and helpers shared by the torch-fallback tests (test_torch_fallback*.py)."""

from __future__ import annotations

from pathlib import Path

from gatekeeper.config import Config, RuleSettings

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


# GK309 (fig-leaf kernel) is a mechanism of its own with its own tests; these helpers look at
# the GK301-GK308/GK310 policy, which it sits beside.
_OWN_TESTS = frozenset({"GK309"})


def mine(findings, prefix="GK3"):
    return [(f.rule, f.severity) for f in findings if f.rule.startswith(prefix) and f.rule not in _OWN_TESTS]


def held(findings, prefix="GK3"):
    """(rule, what the rule said, confidence): a finding that is not certain is a warning under
    default until its run-time check confirms it; the probe link keeps the rule's own severity."""
    return [(f.rule, f.probe.static_severity if f.probe is not None and f.probe.static_severity else f.severity,
             f.confidence.value) for f in findings if f.rule.startswith(prefix) and f.rule not in _OWN_TESTS]


def config_for(profile="default", **rules):
    return Config(profile=profile, rules={code: RuleSettings(**s) for code, s in rules.items()})


# A kernel chosen by a condition, with torch on the other path ({cond} formatted in).
FALLBACK = '''import torch
from torch.utils.cpp_extension import load_inline
_ext = load_inline("m", "", "", functions=["f"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        if {cond}:
            return _ext.f(x)
        return x.mean(0)
'''

H = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
EXT = "from torch.utils.cpp_extension import load_inline\n_ext = load_inline('m', '', '', functions=['f'])\n"
