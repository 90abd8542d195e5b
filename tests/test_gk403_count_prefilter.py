"""GK403's node-count pre-filter never drops a body the fingerprint would match."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gatekeeper.analyses.body_fingerprint import fingerprint, import_map
from rules.gk403_copies_reference_forward import _node_counts

REFERENCE = """
import torch
import torch.nn.functional as F
class Model(torch.nn.Module):
    def forward(self, x, w):
        y = F.relu(torch.matmul(x, w)[:, 1:-1] * -2.0)
        z = [t.sum() for t in y.split(4)] if x.dim() > 1 else {"k": lambda v: v + 1}
        return y, z, f"{torch.numel(y)}"
"""

SAME = [
    # renamed parameters and locals, imports spelled another way, other formatting
    """
from torch import matmul as mm
from torch.nn.functional import relu
import torch
class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        '''docstring'''
        out = relu(mm(a, b)[:, 1 : -1] * (-2.0))
        agg = ([t.sum() for t in out.split(4)]
               if a.dim() > 1 else {'k': (lambda v: v + 1)})
        return out, agg, f"{torch.numel(out)}"
""",
]


def _forward(source: str) -> tuple[cst.FunctionDef, dict[str, str]]:
    module = cst.parse_module(textwrap.dedent(source))
    cls = next(s for s in module.body if type(s) is cst.ClassDef)
    fn = next(s for s in cls.body.body if type(s) is cst.FunctionDef)
    return fn, import_map(module)


@pytest.mark.parametrize("variant", SAME)
def test_bodies_with_equal_fingerprints_have_equal_counts(variant):
    ref, ref_imports = _forward(REFERENCE)
    mine, my_imports = _forward(variant)
    assert fingerprint(mine, my_imports) == fingerprint(ref, ref_imports)
    assert _node_counts(mine) == _node_counts(ref)


def test_a_body_with_one_call_more_has_other_counts():
    ref, _ = _forward(REFERENCE)
    mine, _ = _forward(REFERENCE.replace("torch.matmul(x, w)", "torch.matmul(x, w.t())"))
    assert _node_counts(mine) != _node_counts(ref)
