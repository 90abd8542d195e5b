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


ROWS_PROBLEM = '''
import torch
BATCH = 32
VOCAB = 1000
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
def get_inputs():
    return [torch.randn(BATCH, VOCAB)]
def get_init_inputs():
    return []
'''

ROW_KERNEL = r"""
import torch
from torch.utils.cpp_extension import load_inline
SRC = '''
#include <torch/extension.h>
constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
struct alignas(16) Smem { float a[64]; float b[64]; };
static_assert(sizeof(Smem) % 32 == 0 && offsetof(Smem, b) % 32 == 0, "aligned tiles");
__global__ void row_softmax(const float* x, float* y, int cols) {
    __shared__ float red[kWarps];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float* row = x + (long)blockIdx.x * cols;
    float m = -1e30f;
    for (int c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, row[c]);
    if (lane == 0) red[warp] = m;
    __syncthreads();
    if (warp == 0) { m = lane < kWarps ? red[lane] : -1e30f; }
    if (cols % 32 == 0) { y[blockIdx.x * cols] = m; }
}
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x);
    row_softmax<<<x.size(0), kThreads>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1));
    return y;
}
'''
_ext = load_inline(name="rows", cpp_sources="", cuda_sources=SRC, functions=["run"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.run(x)
"""


def _gk203(source: str, tmp_path: Path) -> list[str]:
    problem = tmp_path / "rows.py"
    problem.write_text(ROWS_PROBLEM)
    report = gatekeeper.check_static(source, problem)
    return [f"{f.severity.value}/{f.confidence.value}: {f.message}" for f in report.findings if f.rule == "GK203"]


def test_warps_per_block_alignment_and_divisibility_are_not_problem_sizes(tmp_path):
    # 1024 / 32 = 32 warps, a 32-byte alignment in a static_assert and `cols % 32 == 0` all equal
    # the nominal BATCH = 32 by coincidence: launch geometry, a compile-time check, a divisibility test
    assert _gk203(ROW_KERNEL, tmp_path) == []


def test_the_batch_as_a_named_bound_is_still_a_hardcoded_shape(tmp_path):
    # near miss: a constant 32 that bounds the rows a kernel told no size walks over
    hacked = ROW_KERNEL.replace("constexpr int kWarps = kThreads / 32;", "constexpr int kWarps = 32;\nconstexpr int kRows = 32;") \
        .replace("torch::Tensor run(", "__global__ void first_col(const float* x, float* y) {\n"
                 "    for (int r = 0; r < kRows; ++r) y[r] = x[r];\n}\ntorch::Tensor run(")
    assert _gk203(hacked, tmp_path), "kRows = 32 bounding the rows is BATCH baked in"
