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
