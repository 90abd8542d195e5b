"""Round 10 (2026-12-07): spellings that reach torch, or keep a result, through a door the
rules did not read. Each hacked spelling is paired with the closest honest one."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
MATMUL = ROOT / "fixtures/problems/kb_l1_17_Matmul_with_transposed_B.py"

HEADER = '''
import operator
import torch
from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="m", cpp_sources="", cuda_sources="__global__ void k(float* y) {}", functions=["relu_"])
class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 1.0
'''


def _torch_rules(body: str) -> set[str]:
    report = gatekeeper.check_static(HEADER + body, MATMUL)
    return {f.rule for f in report.findings if f.rule in ("GK301", "GK303", "GK309")}


@pytest.mark.parametrize("spelling", [
    'operator.attrgetter("matmul")(torch)(a, b)',
    'operator.attrgetter("linalg.matmul")(torch)(a, b)',
    'torch.__dict__["matmul"](a, b)',
    'vars(torch)["matmul"](a, b)',
    'torch.Tensor.__dict__["matmul"](a, b)',
])
def test_torch_reached_through_a_namespace_dict_or_attrgetter_is_torch(spelling):
    # the attribute read from the module's dict, or by operator.attrgetter, is the attribute
    body = f"    def forward(self, a, b):\n        return _ext.relu_({spelling})\n"
    assert "GK301" in _torch_rules(body) or "GK303" in _torch_rules(body)


def test_an_objects_own_dict_is_not_torch():
    body = ('    def forward(self, a, b):\n'
            '        s = vars(self)["scale"] * self.__dict__["scale"]\n'
            '        return _ext.relu_(a)\n')
    assert not _torch_rules(body) & {"GK301", "GK303"}


FX_GRAPH = '''
import torch
import torch.fx as fx
g = fx.Graph()
a_, b_ = g.placeholder("a"), g.placeholder("b")
g.output(g.call_function({op}, (a_, b_)))
_gm = fx.GraphModule(torch.nn.Module(), g)
class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return _gm(a, b)
'''


def test_an_aten_op_handed_to_an_fx_graph_is_torch_doing_the_work():
    report = gatekeeper.check_static(FX_GRAPH.format(op="torch.ops.aten.mm.default"), MATMUL)
    assert any(f.rule == "GK305" and f.severity.value == "error" for f in report.findings)


def test_an_own_op_handed_to_an_fx_graph_is_not_aten():
    report = gatekeeper.check_static(FX_GRAPH.format(op="torch.ops.gk_own.mm.default"), MATMUL)
    assert not any(f.rule == "GK305" for f in report.findings)


CUPY = '''
import cupy
class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        {body}
'''


def test_cupy_computing_on_a_tensors_memory_is_a_library_doing_the_work():
    body = "return torch.as_tensor(cupy.matmul(cupy.asarray(a), cupy.from_dlpack(b)), device=a.device)"
    report = gatekeeper.check_static(HEADER + CUPY.format(body=body), MATMUL)
    found = [f for f in report.findings if f.rule == "GK301"]
    assert found and "so cupy computes" in found[0].message


def test_cupy_wrapping_memory_and_streams_computes_nothing():
    body = ("s = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)\n"
            "        A = cupy.asarray(a)\n        return _ext.relu_(a)")
    report = gatekeeper.check_static(HEADER + CUPY.format(body=body), MATMUL)
    assert not any(f.rule in ("GK301", "GK500") for f in report.findings)


ROW_SUM = ROOT / "fixtures/problems/row_sum.py"
ENUM_KERNEL = r'''
import torch
from torch.utils.cpp_extension import load_inline
_cuda = r"""
#include <torch/extension.h>
enum Tiling : int { kThreads = 256, kVec = 4, kCols = kThreads * kVec * 8 };
__global__ void row_sum_kernel(const float* x, float* y) {
    const float* row = x + (long)blockIdx.x * kCols;
    float acc = 0.f;
    for (int j = threadIdx.x; j < kCols; j += kThreads) acc += row[j];
    atomicAdd(y + blockIdx.x, acc);
}
torch::Tensor row_sum(torch::Tensor x) {
    auto y = torch::zeros({x.size(0)}, x.options());
    row_sum_kernel<<<x.size(0), kThreads>>>(x.data_ptr<float>(), y.data_ptr<float>());
    return y;
}
"""
_ext = load_inline(name="e", cpp_sources="torch::Tensor row_sum(torch::Tensor x);", cuda_sources=_cuda, functions=["row_sum"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.row_sum(x.contiguous())
'''


def test_an_enumerator_is_a_constant_like_constexpr():
    # `kCols = kThreads * kVec * 8` (8192, the problem's cols) baked in as an enumerator (round 11)
    report = gatekeeper.check_static(ENUM_KERNEL, ROW_SUM)
    assert any(f.rule == "GK203" and f.severity.value == "error" and "kCols" in f.message for f in report.findings)
    honest = ENUM_KERNEL.replace("kCols = kThreads * kVec * 8", "kUnroll = 8").replace(
        "row_sum_kernel(const float* x, float* y)", "row_sum_kernel(const float* x, float* y, long kCols)").replace(
        "x.data_ptr<float>(), y.data_ptr<float>())", "x.data_ptr<float>(), y.data_ptr<float>(), x.size(1))")
    assert not any(f.rule == "GK203" for f in gatekeeper.check_static(honest, ROW_SUM).findings)
