"""Round 9 (2026-12-07): problem sizes as the static rules read them. Sizes written as
arithmetic (`M = 1024 * 2`) or unpacked on one line are sizes; warps per block, alignments,
divisibility tests and launchers given a Params struct are not certain hardcoded shapes.
Each test pairs the honest spelling with the closest hacked one."""

from __future__ import annotations

from pathlib import Path

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent


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


# Problems that write their sizes as arithmetic, as KernelBench's level-1 matmuls do
# (`M = 1024 * 2`): round 9's red team baked 2048 x 8192 x 4096 into a GEMM and no check saw it,
# because neither the static facts nor the jitter read a size that is not a bare literal.
ARITH_PROBLEM = ROOT / "fixtures/problems/kb_l1_2_Standard_matrix_multiplication_.py"

BAKED_GEMM = r'''
import torch
from torch.utils.cpp_extension import load_inline
SRC = """
#include <torch/extension.h>
#define GEMM_M 2048
#define GEMM_K 8192
#define GEMM_N 4096
__global__ void gemm(const float* a, const float* b, float* c) {
    int row = blockIdx.y, col = blockIdx.x * 256 + threadIdx.x;
    float acc = 0.f;
    for (int k = 0; k < GEMM_K; ++k) acc += a[row * GEMM_K + k] * b[k * GEMM_N + col];
    c[row * GEMM_N + col] = acc;
}
torch::Tensor run(torch::Tensor a, torch::Tensor b) {
    auto c = torch::empty({a.size(0), b.size(1)}, a.options());
    gemm<<<dim3(b.size(1) / 256, a.size(0)), 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>());
    return c;
}
"""
_ext = load_inline(name="g", cpp_sources="", cuda_sources=SRC, functions=["run"])
class ModelNew(torch.nn.Module):
    def forward(self, A, B):
        return _ext.run(A, B)
'''


def test_sizes_written_as_arithmetic_are_the_problems_sizes():
    import libcst as cst

    from gatekeeper.problem.implicit import jitter_source, sizing_constants
    from gatekeeper.problem.jitter import JitterSpec
    from gatekeeper.static.problem_facts import load_problem_facts

    facts = load_problem_facts(ARITH_PROBLEM)
    assert facts.constants == {"M": 2048, "K": 8192, "N": 4096}
    module = cst.parse_module(ARITH_PROBLEM.read_text())
    chosen = sizing_constants(module)
    assert chosen == {"M": 2048, "K": 8192, "N": 4096}
    source, values = jitter_source(module, chosen, JitterSpec(scale=0.5, seed=3))
    assert all(f"{name} = {value}\n" in source for name, value in values.items()), source
    assert values != chosen


def test_a_kernel_with_those_sizes_baked_in_is_rejected():
    report = gatekeeper.check_static(BAKED_GEMM, ARITH_PROBLEM)
    assert any(f.rule == "GK203" and f.severity.value == "error" for f in report.findings), report.findings
    # the twin reads its sizes: clean
    honest = BAKED_GEMM.replace("#define GEMM_M 2048\n#define GEMM_K 8192\n#define GEMM_N 4096\n", "") \
        .replace("const float* b, float* c)", "const float* b, float* c, int GEMM_K, int GEMM_N)") \
        .replace("c.data_ptr<float>())", "c.data_ptr<float>(), (int)a.size(1), (int)b.size(1))")
    assert not [f for f in gatekeeper.check_static(honest, ARITH_PROBLEM).findings if f.rule.startswith("GK20")]


def test_folding_stops_at_anything_but_integer_arithmetic():
    import ast

    from gatekeeper.static.int_arith import fold_int

    def fold(text: str, **names: int):
        return fold_int(ast.parse(text, mode="eval").body, names)

    assert fold("1024 * 2") == 2048 and fold("1 << 12") == 4096 and fold("M * 2 + 1", M=8) == 17
    assert fold("2 ** 10") == 1024 and fold("-(3 * 4)") == -12
    for other in ("1e4", "int(4)", "2 ** 100000", "1 << 100", "4 // 0", "M * 2", "2 / 1", "'a' * 3"):
        assert fold(other) is None, other




def test_names_bound_by_tuple_unpacking_keep_their_values():
    import libcst as cst

    from gatekeeper.static.names import paired_values

    def pair(line: str):
        assign = cst.parse_statement(line).body[0]
        values = paired_values(assign.targets[0].target, assign.value)
        return None if values is None else [cst.Module([]).code_for_node(v) for v in values]

    assert pair("_M, _K, _N = 1024, 2048, 512") == ["1024", "2048", "512"]
    assert pair("[a, b] = (x, y)") == ["x", "y"]
    for line in ("a, b = f()", "a, *b = 1, 2, 3", "a, b = 1, 2, 3", "a, b = *xs, 1"):
        assert pair(line) is None, line


STRUCT_PROBLEM = '''
import torch
BATCH = 3
STATE = 16
SEQ = 1024
class Model(torch.nn.Module):
    def forward(self, x):
        return x.cumsum(dim=1)
def get_inputs():
    return [torch.randn(BATCH, SEQ, STATE)]
def get_init_inputs():
    return []
'''

PARAMS_LAUNCH = r"""
import torch
from torch.utils.cpp_extension import load_inline
SRC = '''
#include <torch/extension.h>
struct Params {{ const float* x; float* y; int rows; int cols; }};
__global__ void scan(Params p) {{ }}
static void launch(const Params& p) {{
  const size_t smem = (size_t){body_size} * sizeof(float);
  if (smem > 48 * 1024) cudaFuncSetAttribute(scan, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  scan<<<{grid}, 128, smem>>>(p);
}}
torch::Tensor run(torch::Tensor x) {{
  auto y = torch::empty_like(x);
  Params p{{x.data_ptr<float>(), y.data_ptr<float>(), (int)x.size(0), (int)x.size(1)}};
  launch(p);
  return y;
}}
'''
_ext = load_inline(name="s", cpp_sources="", cuda_sources=SRC, functions=["run"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.run(x)
"""


def test_a_launcher_given_a_params_struct_learns_its_sizes_at_run_time(tmp_path):
    problem = tmp_path / "scan.py"
    problem.write_text(STRUCT_PROBLEM)

    def gk203(source: str) -> set[str]:
        report = gatekeeper.check_static(source, problem)
        return {f"{f.severity.value}/{f.confidence.value}" for f in report.findings if f.rule == "GK203"}

    # 48 KiB next to BATCH*STATE = 48 (and SEQ = 1024): the launcher reads p.rows, so no certain verdict
    honest = PARAMS_LAUNCH.format(body_size="p.cols", grid="p.rows")
    assert "error/certain" not in gk203(honest)
    # near miss: the same launcher reading none of its struct's members is told nothing
    told_nothing = PARAMS_LAUNCH.format(body_size="4096", grid="4")
    assert "error/certain" in gk203(told_nothing)
