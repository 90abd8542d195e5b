"""Round 9 (2026-12-07): honest GPU code written from scratch by helpers that never read the
rules, and what it showed the static stage had wrong. Each test pairs the honest spelling with
the closest hacked one."""

from __future__ import annotations

from pathlib import Path

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures/problems/seed_mean.py"

HEADER = '''
import torch
from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="m", cpp_sources="", cuda_sources="__global__ void k(float* y) {}", functions=["run"])
class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._stream = None
        self._graph = None
'''


def _rules(body: str, select: str) -> list[tuple[str, str]]:
    report = gatekeeper.check_static(HEADER + body, PROBLEM)
    return [(f.severity.value, f.message) for f in report.findings if f.rule == select]


# A capture stream made to wait for the caller's stream before the capture, and joined after it:
# capture runs nothing, the wait puts no work on it, and the graph replays on the current stream.
CAPTURE_AFTER_WAIT = '''
    def forward(self, x):
        if self._graph is None:
            if self._stream is None or self._stream.device != x.device:
                self._stream = torch.cuda.Stream(device=x.device)
            graph = torch.cuda.CUDAGraph()
            self._stream.wait_stream(torch.cuda.current_stream(x.device))
            with torch.cuda.graph(graph, stream=self._stream):
                self._y = _ext.run(x)
            torch.cuda.current_stream(x.device).wait_stream(self._stream)
            self._graph = graph
        self._graph.replay()
        return self._y.clone()
'''


def test_a_capture_stream_that_only_waits_carries_no_work():
    assert _rules(CAPTURE_AFTER_WAIT, "GK500") == []
    # nor when the join after the capture is left out: nothing ran on the stream to join
    unjoined = CAPTURE_AFTER_WAIT.replace("            torch.cuda.current_stream(x.device).wait_stream(self._stream)\n", "")
    assert _rules(unjoined, "GK500") == []


def test_the_same_stream_running_the_replay_unjoined_is_a_side_stream():
    replayed_there = CAPTURE_AFTER_WAIT.replace(
        "        self._graph.replay()\n",
        "        with torch.cuda.stream(self._stream):\n            self._graph.replay()\n").replace(
        "            torch.cuda.current_stream(x.device).wait_stream(self._stream)\n", "")
    found = _rules(replayed_there, "GK500")
    assert any(severity == "error" for severity, _ in found), found


ATEN_MEAN = r'''
import torch
from torch.utils.cpp_extension import load_inline
CPP = """
#include <torch/extension.h>
{defines}
__global__ void touch(float* y) {{ }}
torch::Tensor mean0(torch::Tensor x) {{
    auto xc = x.contiguous();
    return {call}(xc, 0);
}}
"""
_ext = load_inline(name="m", cpp_sources="", cuda_sources=CPP, functions=["mean0"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.mean0(x)
'''


def _aten_findings(defines: str, call: str) -> set[str]:
    report = gatekeeper.check_static(ATEN_MEAN.format(defines=defines, call=call), PROBLEM)
    return {f.rule for f in report.findings if f.severity.value != "info"}


def test_aten_spelled_across_a_line_splice_or_a_namespace_macro_is_still_aten():
    assert "GK306" in _aten_findings("", "at::mean")  # the plain spelling
    assert "GK306" in _aten_findings("", "at::me\\\\\nan")  # `\` + newline joins the name (phase 2)
    assert "GK306" in _aten_findings("#define ATEN_NS at", "ATEN_NS::mean")
    # near misses: a splice inside the submission's own name, a macro naming its own namespace
    assert "GK306" not in _aten_findings("namespace mine { at::Tensor mean(at::Tensor x, int d) { return x; } }",
                                         "mine::me\\\\\nan")
    assert "GK306" not in _aten_findings("namespace mine { at::Tensor mean(at::Tensor x, int d) { return x; } }\n"
                                         "#define NS mine", "NS::mean")


def test_a_splice_keeps_offsets_of_the_text_as_written():
    from gatekeeper.static.cpp_tokens import tokenize

    src = "auto c = at::mat\\\nmul(a, b);\n#define X \\\r\n  768\nint y = X;"
    tokens = tokenize(src)
    assert [t.text for t in tokens][:7] == ["auto", "c", "=", "at", "::", "matmul", "("]
    for tok in tokens:
        written = src[tok.offset:].replace("\\\r\n", "").replace("\\\n", "")
        assert written.startswith(tok.text.split()[0] if tok.kind == "directive" else tok.text) or tok.kind == "directive"
    assert next(t for t in tokens if t.text == "768").offset == src.index("768")


def _rule_confidences(source: str, rule: str, problem: Path = PROBLEM) -> set[str]:
    report = gatekeeper.check_static(source, problem)
    return {f"{f.severity.value}/{f.confidence.value}" for f in report.findings if f.rule == rule}


GETATTR_MEAN = '''
import torch
_OP = {op!r}
_CFG = {{"reduce": {op!r}}}
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return getattr(x, {spelling})(dim=0)
'''


def test_getattr_with_a_name_bound_to_a_string_is_that_attribute():
    for spelling in ("'mean'", "_OP", "_CFG['reduce']"):
        found = _rule_confidences(GETATTR_MEAN.format(op="mean", spelling=spelling), "GK303")
        assert found, spelling
    # near miss: the bound name picks a layout method, not compute
    assert not _rule_confidences(GETATTR_MEAN.format(op="contiguous", spelling="_OP"), "GK303")


PARTIAL_SETATTR = '''
import functools
import torch
_set = functools.partial(setattr, {owner})
_set("elapsed_time", lambda self, end: 0.0)
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''


def test_a_partial_of_setattr_on_the_timer_patches_the_timer():
    assert "error/certain" in _rule_confidences(PARTIAL_SETATTR.format(owner="torch.cuda.Event"), "GK410")
    # near miss: the same partial on the submission's own class
    own = "class _Tuning:\n    pass\n" + PARTIAL_SETATTR.format(owner="_Tuning")
    assert not _rule_confidences(own, "GK410")


TRITON_DOT = '''
import torch
import triton
import triton.language as tl
_PRECISION = {module!r}
@triton.jit
def mm(a, b, c, BLOCK: tl.constexpr, DOT_PRECISION: tl.constexpr = {default!r}):
    acc = tl.dot(tl.load(a), tl.load(b), input_precision={use})
    tl.store(c, acc)
class ModelNew(torch.nn.Module):
    def forward(self, A, B):
        C = torch.empty(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)
        mm[(1,)](A, B, C, BLOCK=64)
        return C
'''


def test_tf32_reached_through_a_parameter_default_or_a_constant_is_tf32():
    problem = ROOT / "fixtures/problems/kb_l1_8_Matmul_with_irregular_shapes_.py"
    for module, default, use in (("ieee", "tf32", "DOT_PRECISION"), ("tf32", "ieee", "_PRECISION")):
        assert _rule_confidences(TRITON_DOT.format(module=module, default=default, use=use), "GK532", problem), use
    # near misses: both spellings holding "ieee"
    for use in ("DOT_PRECISION", "_PRECISION"):
        assert not _rule_confidences(TRITON_DOT.format(module="ieee", default="ieee", use=use), "GK532", problem), use


FALLBACK = '''
    def _kernel_ok(self, x):
        return x.is_cuda and x.dtype == torch.float32 and x.shape[-1] % 8 == 0
    def forward(self, x):
        {setup}
        if not {test}:
            return x.mean(dim=0)
        return _ext.run(x)
'''


def _gk310_messages(setup: str, test: str) -> list[str]:
    report = gatekeeper.check_static(HEADER + FALLBACK.format(setup=setup, test=test), PROBLEM)
    return [f.message for f in report.findings if f.rule == "GK310"]


def test_a_guard_through_a_local_or_a_predicate_reads_the_inputs():
    for setup, test in (("ok = x.is_cuda and x.dtype == torch.float32", "ok"), ("pass", "self._kernel_ok(x)")):
        messages = _gk310_messages(setup, test)
        assert messages and all("reads the input's shape" in m for m in messages), (test, messages)
    # near miss: a flag that reads no input stays a flag
    messages = _gk310_messages("ok = self._graph is None", "ok")
    assert messages and all("is a flag" in m for m in messages), messages


CLASS_STORE = '''
class _Box:
    out = None
class ModelNew(torch.nn.Module):
    def forward(self, x):
        {body}
'''


def _gk101(body: str) -> set[str]:
    source = HEADER.split("class ModelNew")[0] + CLASS_STORE.format(body=body)
    report = gatekeeper.check_static(source, PROBLEM)
    return {f"{f.severity.value}/{f.confidence.value}" for f in report.findings if f.rule == "GK101"}


def test_class_and_function_attributes_are_storage_that_outlives_the_call():
    fill_once = "if {s} is None:\n            {s} = _ext.run(x)\n        return {s}"
    assert _gk101(fill_once.format(s="_Box.out")) == {"error/certain"}
    assert _gk101(fill_once.format(s="type(self).out")) == {"error/certain"}
    assert _gk101(fill_once.format(s="self.__class__.out")) == {"error/certain"}
    # near misses: rebound to a fresh result on every call, or only a copy kept
    assert _gk101("_Box.out = _ext.run(x)\n        return _Box.out") == set()
    assert _gk101("y = _ext.run(x)\n        type(self).last = y\n        return y") == set()


def test_reading_an_uninitialised_allocation_is_a_checker_probe():
    probe = "import torch\ndef checked(x):\n    {body}\n"
    assert _rule_confidences(probe.format(body="return torch.empty(1, dtype=torch.int32).item() == 2**31 - 1"),
                             "GK426") == {"error/certain"}
    assert _rule_confidences(probe.format(body="p = x.new_empty(4)\n    return bool(p[0] != p[0])"), "GK426")
    # near misses: written before it is read; a set value; a read of metadata
    assert not _rule_confidences(probe.format(body="b = torch.empty(1)\n    _ext.count(x, b)\n    return b.item()"),
                                 "GK426")
    assert not _rule_confidences(probe.format(body="return torch.zeros(1).item() == 0"), "GK426")
    assert not _rule_confidences(probe.format(body="return torch.empty(0).dtype == x.dtype"), "GK426")


def test_each_function_s_probe_is_its_own_finding_and_module_reads_are_safe():
    two = ("import torch\np = 1\nflag = p.item() if False else 0\n"
           "def a():\n    p = torch.empty(1)\n    return p.item() > 0\n"
           "def b():\n    p = torch.empty(1)\n    return p.item() < 0\n")
    report = gatekeeper.check_static(two, PROBLEM)
    assert sorted(f.location.line for f in report.findings if f.rule == "GK426") == [6, 9]
