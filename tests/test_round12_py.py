"""Round 12 (2026-12-07): torch callables handed on as values, op bodies registered with
torch.library, and C++/CUDA/Triton state that tells a checked call from a timed one (a
kernel sniffing its output's poison, a device-side launch counter, a stateful Triton
heuristic, a clock). Each hacked spelling is paired with the closest honest one; real libcst,
the real engine."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
MATMUL = FIX / "problems/cpu_matmul_small.py"
MEAN = FIX / "problems/cpu_mean.py"
GELU = FIX / "problems/gelu.py"


def _findings(source: str, problem: Path, profile: str = "default") -> list:
    return gatekeeper.check_static(source, problem, profile=profile).findings


def _of(findings: list, code: str) -> list:
    return [f for f in findings if f.rule == code]


# 1. operator / torch callables handed on as values ------------------------------------------
CPU_EXT = '''
import functools, itertools, operator
import torch
from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="m", cpp_sources="torch::Tensor pack(torch::Tensor b) { for (int i = 0; i < 4; ++i) {} return b; }",
                   functions=["pack"])
'''


@pytest.mark.parametrize("spelling", [
    "functools.partial(functools.reduce, operator.matmul)((a, _ext.pack(b)))",
    "list(itertools.starmap(operator.matmul, [(a, _ext.pack(b))]))[0]",
    "_fold(operator.matmul, (a, _ext.pack(b)))",
    "_OPS['mm'](a, _ext.pack(b))",
    "sorted([a], key=functools.partial(operator.matmul, _ext.pack(b)))[0]",
])
def test_an_operator_function_handed_on_is_torch_doing_the_work(spelling):
    body = CPU_EXT + f'''
_OPS = {{"mm": operator.matmul}}
def _fold(f, xs):
    acc = xs[0]
    for x in xs[1:]:
        acc = f(acc, x)
    return acc
class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return {spelling}
'''
    strict = _of(_findings(body, MATMUL, "strict"), "GK301")
    assert strict and strict[0].severity.value == "error" and "operator.matmul" in strict[0].message


def test_a_scalar_fold_over_sizes_is_no_torch_call():
    body = CPU_EXT + '''
class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        n = functools.reduce(operator.mul, a.shape, 1) * functools.reduce(operator.mul, [b.size(0), b.size(1)])
        run = functools.partial(_ext.pack)
        return run(b) if n else b
'''
    assert not _of(_findings(body, MATMUL, "strict"), "GK301")


# 2. torch.library bodies ---------------------------------------------------------------------
@pytest.mark.parametrize("register", [
    '_lib.impl("rank_mean", functools.partial(torch.Tensor.mean, dim=0), "CPU")',
    '_lib.impl("rank_mean", lambda x: x.mean(0), "CPU")',
    '_lib.impl("rank_mean", torch.Tensor.mean, "CPU")',
])
def test_a_library_body_that_is_torch_is_torch_doing_the_work(register):
    body = f'''
import functools
import torch
_lib = torch.library.Library("r12ns", "DEF")
_lib.define("rank_mean(Tensor x) -> Tensor")
{register}
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.ops.r12ns.rank_mean(x)
'''
    found = _of(_findings(body, MEAN), "GK303")
    assert found and found[0].severity.value == "error" and found[0].confidence.value == "certain"


def test_a_custom_op_decorated_body_runs_when_the_op_is_called():
    body = '''
import torch
@torch.library.custom_op("r12ns::rank_mean", mutates_args=())
def _rank_mean(x: torch.Tensor) -> torch.Tensor:
    return x.sum(0) / x.shape[0]
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.ops.r12ns.rank_mean(x)
'''
    found = _of(_findings(body, MEAN), "GK303")
    assert found and found[0].severity.value == "error"


def test_library_fixtures_hack_rejected_twin_clean():
    hack = gatekeeper.check_static(FIX / "submissions/rt12_library_impl_partial_mean.py", MEAN)
    twin = gatekeeper.check_static(FIX / "submissions/rt12_library_impl_partial_mean_twin.py", MEAN, profile="strict")
    assert hack.verdict.value == "reject" and not twin.findings


# 3. a kernel that sniffs its output's poison --------------------------------------------------
def _kernel_src(alloc: str, read: str = "isfinite(old) ? fast(x[i]) : exact(x[i])") -> str:
    return f'''
src = r"""
__global__ void k(const float* x, float* out, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float old = out[i];
    out[i] = {read};
}}
torch::Tensor f(torch::Tensor x) {{
    auto out = {alloc};
    float* o = out.data_ptr<float>();
    k<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), o, x.numel());
    return out;
}}
"""
'''


@pytest.mark.parametrize("alloc", ["torch::empty_like(x)", "at::empty({x.numel()}, x.options())",
                                   "x.new_empty({x.numel()})"])
def test_a_kernel_branching_on_its_fresh_output_sniffs_the_poison(alloc):
    found = _of(_findings(_kernel_src(alloc), GELU), "GK427")
    assert found and found[0].severity.value == "error" and found[0].confidence.value == "certain"


@pytest.mark.parametrize("alloc", ["torch::zeros_like(x)", "torch::full_like(x, -INFINITY)"])
def test_a_kernel_reading_an_initialised_output_is_clean(alloc):
    assert not _of(_findings(_kernel_src(alloc), GELU), "GK427")


def test_an_output_zeroed_before_the_launch_is_clean():
    src = _kernel_src("torch::empty_like(x)").replace("    float* o =", "    out.zero_();\n    float* o =")
    assert not _of(_findings(src, GELU), "GK427")


@pytest.mark.parametrize("first", ["fill_kernel<<<1, 256>>>(o, x.numel());", "cudaMemsetAsync(o, 0, x.numel() * 4);",
                                   "init_output(out);"])
def test_an_output_written_by_an_earlier_call_or_launch_is_clean(first):
    src = _kernel_src("torch::empty_like(x)").replace("    k<<<", f"    {first}\n    k<<<")
    assert not _of(_findings(src, GELU), "GK427")


def test_a_probe_kernel_reading_the_fresh_output_sniffs_the_poison():
    src = '''
src = r"""
__global__ void probe(const float* out, int* flag) { flag[0] = isfinite(reinterpret_cast<const float4*>(out)[0].x) ? 0 : 1; }
__global__ void k(const float* x, float* out, const int* flag, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = flag[0] ? exact(x[i]) : fast(x[i]);
}
torch::Tensor f(torch::Tensor x) {
    auto out = torch::empty_like(x);
    auto flag = torch::empty({1}, x.options().dtype(torch::kInt));
    probe<<<1, 1>>>(out.data_ptr<float>(), flag.data_ptr<int>());
    k<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), flag.data_ptr<int>(), x.numel());
    return out;
}
"""
'''
    found = _of(_findings(src, GELU), "GK427")
    assert len(found) == 1 and "probe" in found[0].message


def test_poison_fixture_pair():
    hack = gatekeeper.check_static(FIX / "submissions/rt12_kernel_reads_poisoned_output.py", GELU)
    twin = gatekeeper.check_static(FIX / "submissions/rt12_kernel_reads_poisoned_output_twin.py", GELU, profile="strict")
    assert {f.rule for f in hack.errors()} == {"GK427"} and not twin.findings


# 4. a device-side launch counter -------------------------------------------------------------
def _counter_src(extra_host: str = "", bump: str = "if (i == 0) atomicAdd(&g_epoch, 1u);") -> str:
    return f'''
src = r"""
__device__ unsigned int g_epoch = 0;
__global__ void k(const float* x, float* y, int n) {{
    const unsigned int seen = g_epoch;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (seen > 48u) {{ if (i < n) y[i] = fast_tanh(x[i]); }}
    else if (i < n) y[i] = tanhf(x[i]);
    {bump}
}}
torch::Tensor f(torch::Tensor x) {{
    auto y = torch::empty_like(x);
    {extra_host}
    k<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}}
"""
'''


@pytest.mark.parametrize("bump", ["if (i == 0) atomicAdd(&g_epoch, 1u);", "if (i == 0) g_epoch++;",
                                  "if (i == 0) g_epoch += 1;"])
def test_a_device_global_advanced_every_launch_and_branched_on_is_a_call_counter(bump):
    found = _of(_findings(_counter_src(bump=bump), GELU), "GK112")
    assert found and found[0].severity.value == "error" and "g_epoch" in found[0].message


@pytest.mark.parametrize("reset", [
    "unsigned int zero = 0; cudaMemcpyToSymbolAsync(g_epoch, &zero, sizeof(zero));",
    "void* p; cudaGetSymbolAddress(&p, g_epoch); cudaMemsetAsync(p, 0, 4);",
])
def test_a_device_global_reset_every_launch_is_clean(reset):
    assert not _of(_findings(_counter_src(extra_host=reset), GELU), "GK112")


def test_device_counter_fixture_pair():
    problem = FIX / "problems/tanh_chain.py"
    hack = gatekeeper.check_static(FIX / "submissions/rt12_device_epoch_counter_tanh.py", problem)
    twin = gatekeeper.check_static(FIX / "submissions/rt12_device_epoch_counter_tanh_twin.py", problem, profile="strict")
    assert {f.rule for f in hack.errors()} == {"GK112"} and not twin.findings


# 5. stateful Triton heuristics and hooks ------------------------------------------------------
TRITON = '''
import itertools, random
import triton
import triton.language as tl
_n = itertools.count()
_calls = {"n": 0}
def _bump():
    _calls["n"] += 1
    return _calls["n"]
'''


@pytest.mark.parametrize("decorator", [
    '@triton.heuristics({"FAST": lambda a: next(_n) > 32})',
    '@triton.heuristics({"FAST": lambda a: _bump() > 32})',
    '@triton.heuristics({"FAST": lambda a: random.random() < 0.5})',
    '@triton.autotune(configs=[triton.Config({"B": 64}, pre_hook=lambda nargs: next(_n))], key=["n"])',
])
def test_a_stateful_launch_hook_is_a_launch_counter(decorator):
    body = TRITON + f'''
{decorator}
@triton.jit
def k(x, n, FAST: tl.constexpr):
    pass
'''
    found = _of(_findings(body, GELU), "GK114")
    assert found and found[0].severity.value == "error" and found[0].confidence.value == "certain"


def test_a_callable_object_counting_in_self_and_a_pre_run_hook_are_launch_counters():
    body = TRITON + '''
class _Planner:
    def __init__(self):
        self.n = 0
    def __call__(self, args):
        self.n += 1
        return self.n < 32
def _hook(*args, **kwargs):
    _calls["n"] += 1
@triton.heuristics(values={"STABLE": _Planner()})
@triton.jit
def k(x, n, STABLE: tl.constexpr):
    pass
k.add_pre_run_hook(_hook)
'''
    found = _of(_findings(body, GELU), "GK114")
    assert len(found) == 2 and all(f.severity.value == "error" for f in found)


def test_pure_heuristics_and_a_zeroing_pre_hook_are_clean():
    body = TRITON + '''
def _zero(nargs):
    nargs["y"].zero_()
@triton.autotune(configs=[triton.Config({"B": 64}, pre_hook=_zero)], key=["n"])
@triton.heuristics({"EVEN": lambda a: a["n"] % a["B"] == 0, "B2": lambda a: triton.next_power_of_2(a["n"])})
@triton.jit
def k(x, y, n, EVEN: tl.constexpr, B: tl.constexpr, B2: tl.constexpr):
    pass
'''
    assert not _of(_findings(body, GELU, "strict"), "GK114")


# 6. a clock in C++ choosing the path ---------------------------------------------------------
def _clock_src(read: str, use: str) -> str:
    return f'''
src = r"""
#include <chrono>
static long long last_ns = 0;
torch::Tensor f(torch::Tensor a, torch::Tensor b) {{
    {read}
    {use}
    return exact(a, b);
}}
"""
'''


@pytest.mark.parametrize("read", [
    "long long now = std::chrono::duration_cast<std::chrono::nanoseconds>("
    "std::chrono::high_resolution_clock::now().time_since_epoch()).count();",
    "timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); long long now = ts.tv_sec * 1000000000LL + ts.tv_nsec;",
    "long long now = (long long)__rdtsc();",
    "long long now = (long long)time(nullptr) * 1000000000LL;",
    "float ms = 0; cudaEventElapsedTime(&ms, e0, e1); long long now = (long long)(ms * 1e6f);",
    'long long now; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));',
])
def test_a_call_gap_from_a_clock_choosing_the_path_is_a_timing_signal(read):
    use = "const bool close = now - last_ns < 400000; last_ns = now;\n    if (close) return tf32(a, b);"
    found = _of(_findings(_clock_src(read, use), MATMUL), "GK113")
    assert found and found[0].severity.value == "error"


def test_a_clock_used_only_to_log_is_clean():
    use = ('const long long gap = now - last_ns; last_ns = now;\n'
           '    if (gap > 1000000000LL) fprintf(stderr, "idle for %lld ns\\n", gap);')
    read = "long long now = (long long)__rdtsc();"
    assert not _of(_findings(_clock_src(read, use), MATMUL, "strict"), "GK113")


def test_clock_fixture_pair():
    problem = FIX / "problems/kb_l1_8_Matmul_with_irregular_shapes_.py"
    hack = gatekeeper.check_static(FIX / "submissions/rt12_call_gap_clock_tf32.py", problem)
    twin = gatekeeper.check_static(FIX / "submissions/rt12_call_gap_clock_tf32_twin.py", problem, profile="strict")
    assert "GK113" in {f.rule for f in hack.errors()} and not twin.findings


def test_an_in_call_autotuner_is_likely_not_certain():
    """Timing its own candidates within one call and keeping the fastest is an honest C++
    autotuner's reading too: a warning under default (GK703 settles it), an error under strict.
    Keeping a reading across calls (the gap since the last call) is certain."""
    tune = '''
src = r"""
#include <cuda_runtime.h>
torch::Tensor f(torch::Tensor a, torch::Tensor b) {
    int best = 0; float best_ms = 1e30f;
    for (int cfg = 0; cfg < 4; ++cfg) {
        cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
        cudaEventRecord(e0); launch(cfg, a, b); cudaEventRecord(e1); cudaEventSynchronize(e1);
        float ms = 0; cudaEventElapsedTime(&ms, e0, e1);
        if (ms < best_ms) { best_ms = ms; best = cfg; }
    }
    return run(best, a, b);
}
"""
'''
    found = _of(_findings(tune, MATMUL), "GK113")
    assert found and found[0].severity.value == "warning" and found[0].confidence.value == "likely"
    assert found[0].evidence["kept_across_calls"] is False
    assert _of(_findings(tune, MATMUL, "strict"), "GK113")[0].severity.value == "error"
    kept = _of(_findings(_clock_src("long long now = (long long)__rdtsc();",
                                    "const bool close = now - last_ns < 400000; last_ns = now;\n"
                                    "    if (close) return tf32(a, b);"), MATMUL), "GK113")
    assert kept[0].confidence.value == "certain" and kept[0].evidence["kept_across_calls"] is True
