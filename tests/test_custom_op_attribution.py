"""The recorder (gatekeeper.behaviour.attribution) and custom operators the submission defines:
what a custom operator's kernel dispatches is recorded too (red team h13b: a torch.library
operator whose Python kernel lets torch compute ran its ATen operators while the dispatch mode
was popped, so the recorder saw one 'own' operator). Real torch, real dispatcher; the compiled
kernel case is the fixture pair rt2_library_impl_* in fixtures/manifest/behaviour.toml."""

from __future__ import annotations

import functools
import operator

import torch

from gatekeeper.behaviour.attribution import Recorder, warm_up
from gatekeeper.behaviour.work import judge_call

_LIB = torch.library.Library("gk_test_rt2", "DEF")
_LIB.define("mean0(Tensor x) -> Tensor")
_LIB.define("twice(Tensor x) -> Tensor")
_LIB.impl("mean0", lambda x: operator.truediv(functools.reduce(operator.add, x.unbind(0)), x.shape[0]), "CPU")
_LIB.impl("twice", lambda x: torch.ops.gk_test_rt2.mean0(x) * 2, "CPU")  # a custom op inside a custom op


def _record(fn, *args):
    warm_up("cpu")
    recorder = Recorder("cpu")
    with recorder:
        out = fn(*args)
    return out, recorder.summary(out, 0.0)


def test_a_python_kernel_of_a_custom_op_is_recorded_and_judged_as_torch_work():
    x = torch.randn(4, 16, 48)
    out, call = _record(torch.ops.gk_test_rt2.mean0, x)
    assert torch.allclose(out, x.mean(0))
    names = {o["name"]: o for o in call["ops"]}
    assert "aten::add.Tensor" in names and "aten::div.Tensor" in names  # seen inside the operator's body
    assert names["own-op:gk_test_rt2::mean0"]["s"] == 0.0  # an interpreted body is no own compute
    assert call["producer"]["by"] == "torch-inside-own" and call["tampered"] == []
    verdict = judge_call(call, {})
    assert verdict is not None and "aten::div" in verdict[0]
    assert torch._C._len_torch_dispatch_stack() == 0  # the mode pushed again for the body is popped


def test_nested_custom_ops_are_recorded_once_each():
    x = torch.randn(4, 8, 8)
    out, call = _record(torch.ops.gk_test_rt2.twice, x)
    assert torch.allclose(out, x.mean(0) * 2)
    counts = {o["name"]: o["count"] for o in call["ops"]}
    assert counts["own-op:gk_test_rt2::twice"] == 1 and counts["own-op:gk_test_rt2::mean0"] == 1
    assert counts["aten::add.Tensor"] == 3 and counts["aten::mul.Tensor"] == 1
    assert judge_call(call, {}) is not None


def test_plain_torch_in_forward_is_unchanged():
    x = torch.randn(4, 8, 8)
    _, call = _record(lambda t: t.mean(0), x)
    assert [o["name"] for o in call["ops"] if not o["glue"]] == ["aten::mean.dim"]
    assert call["producer"]["by"] == "torch"
