"""GK530 on a problem whose reference itself computes in a low dtype (an fp8 quantisation step)."""

from __future__ import annotations

from gatekeeper.static.testing import static_findings


def test_a_low_dtype_the_reference_computes_in_is_no_downgrade():
    # an fp8 quantise-then-GEMM problem on float32 inputs (round 7, 2026-12-06): the reference
    # casts to float8_e4m3fn itself, so the submission's cast, in torch's or Triton's spelling, is
    # the problem's own step; a cast to float16 still is a downgrade
    problem = (
        "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x, w):\n"
        "        q = (x / 448.0).to(torch.float8_e4m3fn).float()\n        return q @ w\n"
        "def get_inputs():\n    return [torch.randn(64, 128), torch.randn(128, 64)]\n"
        "def get_init_inputs():\n    return []\n")
    source = (
        "import torch\nimport triton.language as tl\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x, w):\n        q = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)\n"
        "        h = x.to(torch.float16)\n        return _ext.run(x, q, h, w, tl.float8e4nv)\n")
    found = [f for f in static_findings(source, problem) if f.rule == "GK530"]
    assert [f.location.line for f in found] == [6], [(f.location.line, f.message) for f in found]
