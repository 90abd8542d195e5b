"""GK205 and a problem that fixes a dimension in every declared shape: a set of widths a kernel
supports that holds the fixed one is the kernel's range, not the benchmark's nominal shape
(honest red team round 6: g06, g07, g08)."""

from __future__ import annotations

from pathlib import Path

import gatekeeper

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_a_set_of_supported_widths_that_holds_the_fixed_one_is_not_shape_dispatch(tmp_path):
    # honest red team round 6 (g06, g08): `D in (64, 128)` and a C++ switch with cases 64 and 128,
    # where the problem fixes HEAD_DIM = 128: the widths the kernel supports, not the nominal shape.
    problem = FIXTURES / "problems" / "kbhard_head_rmsnorm"
    sub = tmp_path / "solution.py"
    guard = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
             "        if x.shape[-1] not in (64, 128, 256):\n            raise ValueError('head width')\n"
             "        out = torch.empty_like(x)\n        _ext.rms(x, out)\n        return out\n")
    sub.write_text(guard, "utf-8")
    assert not [f for f in gatekeeper.check(sub, problem, stages="static").findings if f.rule == "GK205"]
    switch = ("import torch\nsrc = '''\n#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) {\n"
              "  switch (x.size(3)) {\n    case 64: return run<64>(x);\n    case 128: return run<128>(x);\n"
              "    default: TORCH_CHECK(false, \"width\");\n  }\n}\n'''\n" + guard.split("\n", 1)[1])
    sub.write_text(switch, "utf-8")
    assert not [f for f in gatekeeper.check(sub, problem, stages="static").findings if f.rule == "GK205"]
    # a set of free sizes (no fixed width among them) is still a finding
    sub.write_text(guard.replace("(64, 128, 256)", "(4, 64)").replace("x.shape[-1]", "x.shape[1]"), "utf-8")
    assert [f for f in gatekeeper.check(sub, problem, stages="static").findings if f.rule == "GK205"]
