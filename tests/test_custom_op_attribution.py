"""The recorder (gatekeeper.behaviour.attribution) and custom operators the submission defines:
what a custom operator's kernel dispatches is recorded too (red team h13b: a torch.library
operator whose Python kernel lets torch compute ran its ATen operators while the dispatch mode
was popped, so the recorder saw one 'own' operator). Real torch, real dispatcher; the compiled
kernel case is the fixture pair rt2_library_impl_* in fixtures/manifest/behaviour.toml.

Each case runs in a fresh interpreter, as the behaviour stage's worker does: a pytest worker
that ran hundreds of other tests first carries torch state (registered operators, dispatch
rules) that no submission's worker has, and once hung here in that state."""

from __future__ import annotations

import json
import subprocess
import sys

PRELUDE = r"""
import functools, json, operator
import torch
from gatekeeper.behaviour.attribution import Recorder, warm_up
from gatekeeper.behaviour.work import judge_call

_LIB = torch.library.Library("gk_test_rt2", "DEF")
_LIB.define("mean0(Tensor x) -> Tensor")
_LIB.define("twice(Tensor x) -> Tensor")
_LIB.impl("mean0", lambda x: operator.truediv(functools.reduce(operator.add, x.unbind(0)), x.shape[0]), "CPU")
_LIB.impl("twice", lambda x: torch.ops.gk_test_rt2.mean0(x) * 2, "CPU")  # a custom op inside a custom op


def record(fn, *args):
    warm_up("cpu")
    recorder = Recorder("cpu")
    with recorder:
        out = fn(*args)
    return out, recorder.summary(out, 0.0)
"""


def _run(body: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PRELUDE + body], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_python_kernel_of_a_custom_op_is_recorded_and_judged_as_torch_work():
    seen = _run(r"""
x = torch.randn(4, 16, 48)
out, call = record(torch.ops.gk_test_rt2.mean0, x)
verdict = judge_call(call, {})
print(json.dumps({"right": bool(torch.allclose(out, x.mean(0))), "ops": {o["name"]: o["s"] for o in call["ops"]},
                  "producer": call["producer"]["by"], "tampered": call["tampered"],
                  "verdict": verdict[0] if verdict else None, "stack": torch._C._len_torch_dispatch_stack()}))
""")
    assert seen["right"]
    assert "aten::add.Tensor" in seen["ops"] and "aten::div.Tensor" in seen["ops"]  # seen inside the body
    assert seen["ops"]["own-op:gk_test_rt2::mean0"] == 0.0  # an interpreted body is no own compute
    assert seen["producer"] == "torch-inside-own" and seen["tampered"] == []
    assert seen["verdict"] is not None and "aten::div" in seen["verdict"]
    assert seen["stack"] == 0  # the mode pushed again for the body is popped


def test_nested_custom_ops_are_recorded_once_each():
    seen = _run(r"""
x = torch.randn(4, 8, 8)
out, call = record(torch.ops.gk_test_rt2.twice, x)
print(json.dumps({"right": bool(torch.allclose(out, x.mean(0) * 2)),
                  "counts": {o["name"]: o["count"] for o in call["ops"]},
                  "judged": judge_call(call, {}) is not None}))
""")
    counts = seen["counts"]
    assert seen["right"] and seen["judged"]
    assert counts["own-op:gk_test_rt2::twice"] == 1 and counts["own-op:gk_test_rt2::mean0"] == 1
    assert counts["aten::add.Tensor"] == 3 and counts["aten::mul.Tensor"] == 1


def test_plain_torch_in_forward_is_unchanged():
    seen = _run(r"""
x = torch.randn(4, 8, 8)
_, call = record(lambda t: t.mean(0), x)
print(json.dumps({"compute": [o["name"] for o in call["ops"] if not o["glue"]], "producer": call["producer"]["by"]}))
""")
    assert seen["compute"] == ["aten::mean.dim"] and seen["producer"] == "torch"
