"""Round 14 (2026-12-07): false positives met by honest solutions written without reading the
rules (fixtures r14_honest_*), each fixed by an invariant; every fix has a nearby hack that is
still flagged. Real libcst, the real engine."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
GQA = FIX / "problems/r14_gqa_prefill"
MATMUL = FIX / "problems/cpu_matmul_small.py"


def _findings(source: str, problem: Path = MATMUL, profile: str = "default") -> list:
    return gatekeeper.check_static(dedent(source), problem, profile=profile).findings


def _rule(source: str, code: str, problem: Path = MATMUL, profile: str = "default") -> list:
    return [f for f in _findings(source, problem, profile) if f.rule == code]


# GK500: streams kept by a getter in a list, switched to by element, joined by a loop --------
_STREAMS = '''
import torch
class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._streams = []
    def _side(self, n, device):
        while len(self._streams) < n:
            self._streams.append(torch.cuda.Stream(device=device))
        return self._streams[:n]
    def forward(self, x):
        out = torch.empty_like(x)
        main = torch.cuda.current_stream()
        streams = self._side(4, x.device)
        for s in streams:
            s.wait_stream(main)
        for b in range(x.shape[0]):
            s = streams[b % len(streams)]
            with torch.cuda.stream(s):
                _ext.run(x[b], out[b])
{JOIN}
        return out
'''
_LOOP_JOIN = '''        for s in streams:
            main.wait_stream(s)'''


@pytest.mark.parametrize("profile", ["default", "strict"])
def test_streams_appended_by_a_getter_and_joined_by_a_loop_over_them_are_joined(profile):
    found = _rule(_STREAMS.replace("{JOIN}", _LOOP_JOIN), "GK500", profile=profile)
    assert found and all(f.severity.value == "warning" for f in found)
    assert all(f.evidence.get("joined") is True for f in found)


def test_the_getter_streams_never_joined_still_reject():
    found = _rule(_STREAMS.replace("{JOIN}", "        pass"), "GK500")
    assert any(f.severity.value == "error" and f.confidence.value == "certain" for f in found)


@pytest.mark.parametrize("join", [
    # another collection: not proven to hold the stream that did the work
    '''        others = list(streams[1:])
        for s in others:
            main.wait_stream(s)''',
    # the collection loses elements between the work and the join
    '''        streams.pop(0)
        for s in streams:
            main.wait_stream(s)''',
    # the name is rebound between the work and the join
    '''        streams = streams[1:]
        for s in streams:
            main.wait_stream(s)''',
])
def test_a_loop_join_that_may_miss_the_stream_stays_unproven(join):
    found = _rule(_STREAMS.replace("{JOIN}", join), "GK500", profile="strict")
    assert any(f.severity.value == "error" and f.evidence.get("joined") != True for f in found)


def test_the_round14_streams_fixture_is_clean_in_both_profiles():
    source = (FIX / "submissions/r14_honest_gqa_prefill_streams.py").read_text()
    for profile in ("default", "strict"):
        assert not [f for f in gatekeeper.check_static(source, GQA, profile=profile).findings
                    if f.severity.value == "error"]


# GK205: an if / else-if chain over one size, one of its literals a fixed dimension ----------
_DISPATCH = '''
import torch
from torch.utils.cpp_extension import load_inline
_SRC = r"""
#include <torch/extension.h>
torch::Tensor run(torch::Tensor q) {
  auto o = torch::empty_like(q);
  if (q.size({DIM}) == {A}) launch_a(q, o);
  else if (q.size({DIM}) == {B}) launch_b(q, o);
  else TORCH_CHECK(false, "unsupported");
  return o;
}
"""
_ext = load_inline(name="d", cpp_sources=_SRC, functions=["run"])
class Model(torch.nn.Module):
    def __init__(self, hq, hkv, d):
        super().__init__()
    def forward(self, q, k, v):
        return _ext.run(q)
'''


def _dispatch(dim: int, a: int, b: int) -> str:
    return _DISPATCH.replace("{DIM}", str(dim)).replace("{A}", str(a)).replace("{B}", str(b))


@pytest.mark.parametrize("profile", ["default", "strict"])
def test_an_else_if_chain_of_head_widths_with_the_fixed_one_is_clean(profile):
    # HEAD_DIM is 128 in every declared shape of r14_gqa_prefill; 64 is NUM_Q_HEADS in one
    assert _rule(_dispatch(3, 128, 64), "GK205", GQA, profile) == []


def test_an_else_if_chain_of_free_sizes_is_still_shape_dispatch():
    # SEQLEN 1024 is nominal and varies across the declared shapes; 4096 is another of them
    found = _rule(_dispatch(2, 1024, 4096), "GK205", GQA, "strict")
    assert found and all(f.severity.value == "error" for f in found)


def test_two_different_sizes_tested_do_not_group():
    # `q.size(3) == 128` (fixed) and `q.size(2) == 1024` (free): not one chain of widths
    source = _DISPATCH.replace("q.size({DIM}) == {A}", "q.size(3) == 128").replace(
        "q.size({DIM}) == {B}", "q.size(2) == 1024")
    assert _rule(source, "GK205", GQA, "strict")


# GK203: a template parameter's declaration is not a comparison ------------------------------
_TEMPLATE = '''
import torch
from torch.utils.cpp_extension import load_inline
_SRC = r"""
#include <torch/extension.h>
template <int HEAD_DIM, int KV_TILE>
__global__ void attn(const float* __restrict__ k, float* __restrict__ o, int seqlen) {
  __shared__ float k_s[KV_TILE][HEAD_DIM];
  for (int t0 = 0; t0 < seqlen; t0 += KV_TILE) {
    for (int i = threadIdx.x; i < KV_TILE * HEAD_DIM; i += blockDim.x) k_s[i / HEAD_DIM][i % HEAD_DIM] = k[t0 * HEAD_DIM + i];
    __syncthreads();
{GUARD}
  }
}
torch::Tensor run(torch::Tensor k) {
  constexpr int TILE = 64;
  auto o = torch::empty_like(k);
  attn<128, TILE><<<1, 128>>>(k.data_ptr<float>(), o.data_ptr<float>(), k.size(2));
  return o;
}
"""
_ext = load_inline(name="t", cpp_sources=_SRC, functions=["run"])
class Model(torch.nn.Module):
    def __init__(self, hq, hkv, d):
        super().__init__()
    def forward(self, q, k, v):
        return _ext.run(k)
'''


@pytest.mark.parametrize("profile", ["default", "strict"])
def test_a_template_parameter_list_is_not_a_bound(profile):
    assert _rule(_TEMPLATE.replace("{GUARD}", ""), "GK203", GQA, profile) == []


def test_a_constant_used_as_a_real_guard_is_still_found():
    # 1000 is SEQLEN in a declared shape: `t0 + threadIdx.x >= KEYS` bounds the data by it
    source = _TEMPLATE.replace("{GUARD}", "    if (t0 + threadIdx.x >= KEYS) return;").replace(
        "#include <torch/extension.h>", "#include <torch/extension.h>\n#define KEYS 1000")
    assert _rule(source, "GK203", GQA, "strict")


# shapes.py: a function of the file that builds the list is read statically ------------------
def test_a_shapes_function_of_the_file_is_read(tmp_path):
    from gatekeeper.problem.shapes_file import read_shapes_file
    path = tmp_path / "shapes.py"
    path.write_text(dedent('''
        HEAD_DIM = 128
        def build(models, chunks=((1, 4096), (2, 1000))):
            out = []
            for hq, hkv in models:
                for batch, seqlen in chunks:
                    out.append(dict(BATCH=batch, NUM_Q_HEADS=hq, NUM_KV_HEADS=hkv, SEQLEN=seqlen, HEAD_DIM=HEAD_DIM))
            return out
        SHAPES = build([(32, 8), (64, 8)])
    '''))
    shapes = read_shapes_file(path, {"BATCH": 2, "NUM_Q_HEADS": 32, "NUM_KV_HEADS": 8, "SEQLEN": 1024, "HEAD_DIM": 128})
    assert shapes.complete and len(shapes.shapes) == 4
    assert {s["HEAD_DIM"] for s in shapes.shapes} == {128}


@pytest.mark.parametrize("body", [
    "global G\n    G = 1\n    return [{'N': 4}]",          # writes a global: its effects are not followed
    "return [{'N': open('x').read()}]",                     # a value the reader cannot know
    "return build()",                                       # recursion past the depth limit
])
def test_a_shapes_function_that_cannot_be_followed_stays_unread(tmp_path, body):
    from gatekeeper.problem.shapes_file import read_shapes_file
    path = tmp_path / "shapes.py"
    path.write_text(f"def build():\n    {body}\nSHAPES = build()\n")
    assert not read_shapes_file(path, {"N": 4}).complete


# GK501: a launch configuration whose block is a template's member ----------------------------
_LAUNCH = '''
import torch
from torch.utils.cpp_extension import load_inline
_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
template <int BM, int BN> struct Tile { static constexpr int THREADS = BM * BN / 16; };
template <int BM, int BN> __global__ void k(float* y) { y[threadIdx.x] = 0.f; }
cudaStream_t g_side;
torch::Tensor run(torch::Tensor y) {
  k<32, 128><<<dim3(4, 4), Tile<32, 128>::THREADS, 0,
              {STREAM}>>>(y.data_ptr<float>());
  return y;
}
"""
_ext = load_inline(name="l", cpp_sources=_SRC, functions=["run"])
class Model(torch.nn.Module):
    def forward(self, x):
        return _ext.run(x)
'''


def test_a_templated_block_size_does_not_hide_the_current_stream():
    source = _LAUNCH.replace("{STREAM}", "at::cuda::getCurrentCUDAStream()")
    assert _rule(source, "GK501") == []


def test_a_templated_block_size_still_shows_an_unknown_stream():
    assert _rule(_LAUNCH.replace("{STREAM}", "g_side"), "GK501")


# evidence: a finding in a source file beside the submission quotes that file's line ----------
def test_a_finding_in_a_side_file_quotes_the_side_files_line(tmp_path):
    (tmp_path / "k.cu").write_text("#include <torch/extension.h>\n\ntorch::Tensor run(torch::Tensor q) {\n"
                                   "  TORCH_CHECK(q.size(2) == 1024);\n  return q;\n}\n")
    sub = tmp_path / "solution.py"
    sub.write_text(dedent('''
        import os
        import torch
        from torch.utils.cpp_extension import load
        _ext = load(name="k", sources=[os.path.join(os.path.dirname(__file__), "k.cu")])
        class Model(torch.nn.Module):
            def __init__(self, hq, hkv, d):
                super().__init__()
            def forward(self, q, k, v):
                return _ext.run(q)
    '''))
    found = [f for f in gatekeeper.check_static(sub, GQA).findings if f.location and f.location.path.endswith("k.cu")]
    assert found and all(f.location.line == 4 and "q.size(2) == 1024" in f.evidence["source_line"] for f in found)
