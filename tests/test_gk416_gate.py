"""GK416 leaves its Python handlers out of a file without any of its gate words (issue 20
item 8). Rule instances and their handler plans are reused from file to file, so the test
checks files one after another, in both orders: a file that must be flagged right after
one that switched the handlers off is flagged as when it is checked alone, and a file
without the words after a flagged one gets nothing."""

from __future__ import annotations

from pathlib import Path

from gatekeeper.config import Config
from gatekeeper.static.stage import run_static

PERSISTING = '''
import torch
from cuda import cudart

class ModelNew(torch.nn.Module):
    def forward(self, x):
        attr = cudart.cudaStreamAttrValue()
        attr.accessPolicyWindow.hitProp = cudart.cudaAccessProperty.cudaAccessPropertyPersisting
        return x.clone()
'''
EVICT_LAST = '''
import torch, triton, triton.language as tl

@triton.jit
def k(x, y, n):
    tl.store(y, tl.load(x, eviction_policy="evict_last"))

class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        k[(1,)](x, y, x.numel())
        return y
'''
PLAIN = '''
import torch

class ModelNew(torch.nn.Module):
    def forward(self, x):
        persisting = x.clone()  # a Python name is no gate word: only the API's spellings are
        return persisting
'''


def _gk416(source: str, tmp_path: Path) -> list[tuple[int, str]]:
    path = tmp_path / "solution.py"
    path.write_text(source)
    found = run_static(source.encode(), str(path), Config(), None)
    return [(f.location.line, f.severity.value) for f in found if f.rule == "GK416" and f.location]


def test_flagged_files_are_flagged_in_any_order(tmp_path):
    alone = {name: _gk416(src, tmp_path) for name, src in
             (("persisting", PERSISTING), ("evict_last", EVICT_LAST), ("plain", PLAIN))}
    assert alone["persisting"] and alone["evict_last"] and not alone["plain"]
    for order in (["plain", "persisting", "plain", "evict_last", "plain"],
                  ["persisting", "evict_last", "plain", "plain", "persisting"]):
        sources = {"persisting": PERSISTING, "evict_last": EVICT_LAST, "plain": PLAIN}
        assert [_gk416(sources[n], tmp_path) for n in order] == [alone[n] for n in order]
