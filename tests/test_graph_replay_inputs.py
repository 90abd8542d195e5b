"""GK111 on the ways honest code copies a call's inputs into a CUDA graph's buffers (red team
round 5 found four it missed) and on the look-alikes that copy nothing."""

from __future__ import annotations

import pytest

from gatekeeper.static.testing import static_findings

_TOP = "import torch\nimport torch.nn as nn\n\n\ndef _signature(*tensors):\n" \
       "    return tuple((t.data_ptr(), tuple(t.shape), t.dtype) for t in tensors)\n\n\n"
_PLAN = ("        key = (tuple(x.shape), x.dtype)\n"
         "        if key not in self._g:\n"
         "            sx, out, g = torch.empty_like(x), torch.empty_like(x), torch.cuda.CUDAGraph()\n"
         "            self._g[key] = (g, sx, out)\n"
         "        g, sx, out = self._g[key]\n")


def _model(body: str, helper: str = "") -> str:
    return _TOP + "class ModelNew(nn.Module):\n" + helper + "    def forward(self, x):\n" + body + \
        "        g.replay()\n        return out.clone()\n"


def _gk111(source: str) -> list:
    return [f for f in static_findings(source) if f.rule == "GK111"]


@pytest.mark.parametrize("copy_in", [
    "        sx[...] = x\n",
    "        sx[:] = x\n",
    "        torch._foreach_copy_([sx], [x])\n",
    "        self._stage(sx, x)\n",
])
def test_a_copy_in_by_any_spelling_is_a_fresh_input(copy_in):
    helper = "    def _stage(self, dst, src):\n        dst.copy_(src, non_blocking=True)\n\n"
    assert _gk111(_model(_PLAN + copy_in, helper)) == []


def test_a_graph_keyed_by_a_helper_on_the_inputs_addresses_replays_on_them():
    body = ("        key = _signature(x)\n"
            "        g, out = self._graphs[key]\n")
    assert _gk111(_model(body)) == []


@pytest.mark.parametrize("copy_in", [
    "",  # the buffers are stored under the shape and nothing is copied
    "        sx[:0] = x[:0]\n",  # an empty slice copies nothing
    "        sx[:0].copy_(x[:0])\n",
    "        self._stage(sx, x)\n",  # the helper copies something else
])
def test_look_alikes_that_copy_nothing_are_still_certain(copy_in):
    helper = "    def _stage(self, dst, src):\n        dst.copy_(self.first[tuple(src.shape)])\n\n"
    found = _gk111(_model(_PLAN + copy_in, helper))
    assert [f.confidence.value for f in found] == ["certain"], found
