"""A helper that only a fallback path calls is fallback code (torch_fallback_paths), and a copy of
the reference's forward reached only behind a guard is held for the run-time check (GK403):
red team round 8's honest fp8 GEMM with a guarded reference path was a certain reject."""

from __future__ import annotations

from pathlib import Path

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures/problems/seed_mean.py"

HEADER = '''
import torch
from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="m", cpp_sources="", cuda_sources="__global__ void k(float* y) {}", functions=["mean0"])
class ModelNew(torch.nn.Module):
'''


def _findings(body: str, profile: str = "default") -> dict[str, set[str]]:
    report = gatekeeper.check_static(HEADER + body, PROBLEM, profile=profile)
    out: dict[str, set[str]] = {}
    for f in report.findings:
        out.setdefault(f.rule, set()).add(f"{f.severity.value}/{f.confidence.value}")
    return out


GUARDED = '''
    def _reference(self, x):
        return x.mean(dim=0)
    def forward(self, x):
        if x.shape[2] % 8 or not x.is_cuda:
            return self._reference(x)
        return _ext.mean0(x)
'''


def test_torch_in_a_helper_only_a_fallback_calls_is_a_fallback():
    found = _findings(GUARDED)
    assert "GK310" in found, found
    assert "GK303" not in found, found  # not "torch computes every op the reference does"
    assert not any(s.startswith("error") for s in found.get("GK403", set())), found


def test_the_same_helper_called_unguarded_is_torch_doing_the_work():
    found = _findings(GUARDED.replace("        if x.shape[2] % 8 or not x.is_cuda:\n            return self._reference(x)\n",
                                      "        y = self._reference(x)\n"))
    assert "error/certain" in found.get("GK403", set()), found


def test_a_helper_also_reached_another_way_keeps_its_uses():
    # stored as a callable too: a call that is not guarded may exist where the source does not show it
    found = _findings(GUARDED.replace("    def forward(self, x):\n", "    def forward(self, x):\n        self.f = self._reference\n"))
    assert "error/certain" in found.get("GK403", set()), found
