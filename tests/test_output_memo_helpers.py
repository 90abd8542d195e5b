"""GK109 through a helper of the source that does the copying (red team round 5, h14): a store
and a replay spelled as calls of `blend(dst, src, n)` are the same round trip as memcpy."""

from __future__ import annotations

from gatekeeper.static.testing import static_findings

_FILE = '''import torch
from torch.utils.cpp_extension import load_inline
_src = r"""
#include <torch/extension.h>
#include <vector>
static std::vector<float> acc;
static void blend(float* dst, const float* src, int64_t n) {{ for (int64_t i = 0; i < n; ++i) dst[i] = src[i]; }}
torch::Tensor f(torch::Tensor x, bool again) {{
  auto y = torch::empty_like(x);
  float* dst = y.data_ptr<float>();
{body}
  return y;
}}
"""
_ext = load_inline(name="m", cpp_sources=_src, functions=["f"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.f(x, False)
'''


def _gk109(body: str) -> list:
    return [f for f in static_findings(_FILE.format(body=body)) if f.rule == "GK109"]


def test_a_round_trip_through_a_copying_helper_is_the_memo():
    body = ("  if (again && (int64_t)acc.size() == x.numel()) { blend(dst, acc.data(), x.numel()); return y; }\n"
            "  kernel(x.data_ptr<float>(), dst, x.numel());\n"
            "  acc.resize(x.numel()); blend(acc.data(), dst, x.numel());")
    found = _gk109(body)
    assert [f.confidence.value for f in found] == ["certain"] and "`acc`" in found[0].message


def test_a_scratch_filled_from_the_input_and_copied_out_by_the_helper_is_no_memo():
    body = ("  acc.resize(x.numel()); blend(acc.data(), x.data_ptr<float>(), x.numel());\n"
            "  scale(acc.data(), x.numel());\n"
            "  blend(dst, acc.data(), x.numel());")
    assert _gk109(body) == []
