"""GK533 on a problem whose own inputs are fp8 (a scaled fp8 GEMM): computing on the e4m3
operands is what the problem asks, not a precision downgrade; on a bfloat16 problem it is."""

from __future__ import annotations

from gatekeeper.static.testing import static_findings

PROBLEM = '''
import torch
import torch.nn as nn
M = N = K = 1024
class Model(nn.Module):
    def forward(self, a, b, a_scale, b_scale):
        return ((a.float() * a_scale[:, None]) @ (b.float() * b_scale[:, None]).t()).to(torch.bfloat16)
def get_inputs():
    return [torch.randn(M, K).to(torch.float8_e4m3fn), torch.randn(N, K).to(torch.float8_e4m3fn),
            torch.rand(M), torch.rand(N)]
def get_init_inputs():
    return []
'''

SUBMISSION = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
cuda = r"""
#include <cuda_fp8.h>
__global__ void k(const __nv_fp8_e4m3* a, float* d, unsigned a0, unsigned b0) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%5,%5}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a0), "r"(b0));
}
torch::Tensor f(torch::Tensor a) {
  TORCH_CHECK(a.scalar_type() == at::kFloat8_e4m3fn, "e4m3 input");
  return a;
}
"""
_m = load_inline(name="fp8k", cpp_sources="torch::Tensor f(torch::Tensor a);", cuda_sources=cuda, functions=["f"])
class ModelNew(nn.Module):
    def forward(self, a, b, a_scale, b_scale):
        return _m.f(a)
'''


def _gk533(problem: str) -> list:
    return [f for f in static_findings(SUBMISSION, problem) if f.rule == "GK533"]


def test_fp8_operands_of_an_fp8_problem_are_not_a_downgrade():
    assert _gk533(PROBLEM) == []


def test_the_same_kernel_on_a_bfloat16_problem_is():
    bf16 = PROBLEM.replace(".to(torch.float8_e4m3fn)", ".to(torch.bfloat16)")
    found = _gk533(bf16)
    assert found and all("fp8" in f.message or "e4m3" in f.message for f in found)
