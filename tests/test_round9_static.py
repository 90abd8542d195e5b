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
