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
