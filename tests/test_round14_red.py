"""Round 14 (2026-12-07): torch's GEMM reached through names no rule read (Tensor's base class,
`functools.reduce(getattr, ...)`, a function picked by name out of a table torch hands back, a
decomposition table keyed by an op) and vendor GEMMs under spellings the C++ scan did not know
(MKL's ILP64/batch variants, a routine qualified by a namespace). Each hack, its honest twin and
other spellings of the same invariant; real libcst, the real engine."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
MATMUL = FIX / "problems/cpu_matmul_small.py"


def _findings(source: str, profile: str = "default") -> list:
    return gatekeeper.check_static(source, MATMUL, profile=profile).findings


def _codes(source: str, profile: str = "default") -> set[str]:
    return {f.rule for f in _findings(source, profile)}


HACKS = [
    ("rt14_tensorbase_panel_mm", "GK303"),
    ("rt14_overrides_table_mm", "GK301"),
    ("rt14_getattr_fold_mm", "GK301"),
    ("rt14_decomp_table_addmm", "GK305"),
    ("rt14_sgemm_ilp64", "GK307"),
    ("rt14_fbgemm_ref_sgemm", "GK307"),
]


@pytest.mark.parametrize("name, rule", HACKS)
def test_the_hacks_are_found_and_strict_rejects_them(name, rule):
    source = (FIX / "submissions" / f"{name}.py").read_text()
    default = [f for f in _findings(source) if f.rule == rule]
    assert default and default[0].confidence.value == "likely"  # held for the run-time attribution
    strict = [f for f in _findings(source, "strict") if f.rule == rule]
    assert strict and strict[0].severity.value == "error"


@pytest.mark.parametrize("name", [n + "_twin" for n, _ in HACKS] + ["rt14_sigaction_number_sampler_twin"])
@pytest.mark.parametrize("profile", ["default", "strict"])
def test_the_twins_are_clean(name, profile):
    source = (FIX / "submissions" / f"{name}.py").read_text()
    assert _findings(source, profile) == []


PY = '''
import functools
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="m", cpp_sources="torch::Tensor stitch(torch::Tensor b) { for (int i = 0; i < 4; ++i) {} return b; }",
                   functions=["stitch"])
{setup}

class ModelNew(nn.Module):
    def forward(self, a, b):
        return _ext.stitch({expr})
'''


@pytest.mark.parametrize("setup, expr", [
    ("from torch._C import TensorBase", "TensorBase.mm(a, b)"),
    ("from torch._C import _TensorBase as TB", "TB.matmul(a, b)"),
    ("", "torch._C._TensorBase.mm(a, b)"),
    ("_NAMES = ('_C', '_VariableFunctions', 'mm')", "functools.reduce(getattr, _NAMES, torch)(a, b)"),
    ("_F = functools.reduce(getattr, ['nn', 'functional', 'linear'], torch)", "_F(a, b)"),
    ("", "next(f for f in torch.overrides.get_overridable_functions()[torch] if f.__name__ == 'mm')(a, b)"),
    ("_T = {f.__name__: f for f in torch.overrides.get_overridable_functions()[torch]}", "_T['matmul'](a, b)"),
    ("_F = [v for k, v in vars(torch).items() if k == 'mm'][0]", "_F(a, b)"),
    ("_F = [f for f in torch.overrides.get_overridable_functions()[torch.Tensor] if 'mm' == f.__name__][0]",
     "_F(a, b)"),
    ("import torch._decomp as d", "d.get_decompositions([torch.ops.aten.mm])[torch.ops.aten.mm.default](a, b)"),
])
def test_other_spellings_are_torch_calls(setup, expr):
    codes = _codes(PY.replace("{setup}", setup).replace("{expr}", expr))
    assert codes & {"GK301", "GK303", "GK305", "GK302"}, codes


@pytest.mark.parametrize("setup, expr", [
    ("from torch._C import TensorBase", "TensorBase.contiguous(a)"),
    ("", "torch._C.TensorBase.size(a, 0) and a"),
    ("_F = functools.reduce(getattr, ('stitch',), _ext)", "_F(a)"),
    ("_F = functools.reduce(getattr, ('cuda', 'is_available'), torch)", "a if _F() else b"),
    ("_F = [f for f in torch.overrides.get_overridable_functions()[torch.Tensor] if f.__name__ == 'contiguous'][0]",
     "_F(a)"),
    ("_N = [f.__name__ for f in torch.overrides.get_overridable_functions()[torch]]", "a if 'mm' in _N else b"),
    ("import torch._decomp as d\n_HAS = torch.ops.aten.mm.default in d.get_decompositions([torch.ops.aten.mm])",
     "a if _HAS else b"),
])
def test_near_misses_stay_clean(setup, expr):
    codes = _codes(PY.replace("{setup}", setup).replace("{expr}", expr))
    assert not codes & {"GK301", "GK303", "GK305", "GK302"}, codes


CPP = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
_src = r"""
#include <torch/extension.h>
{decl}
torch::Tensor run(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty({a.size(0), b.size(1)}, a.options());
    const int m = a.size(0), k = a.size(1), n = b.size(1);
    float* c = out.data_ptr<float>(); const float* pa = a.data_ptr<float>(); const float* pb = b.data_ptr<float>();
    for (int i = 0; i < m * n; ++i) c[i] = 0.0f;
    {call}
    return out;
}
"""
_ext = load_inline(name="m", cpp_sources=_src, functions=["run"])

class ModelNew(nn.Module):
    def forward(self, a, b):
        return _ext.run(a, b)
'''

_FORTRAN = "(const char*, const char*, const int*, const int*, const int*, const float*, const float*, " \
           "const int*, const float*, const int*, const float*, float*, const int*)"
_CALL = "const char t = 'N'; const float one = 1.0f, zero = 0.0f; {name}(&t, &t, &n, &m, &k, &one, pb, &n, pa, &k, &zero, c, &n);"


@pytest.mark.parametrize("name", ["SGEMM_64", "sgemm_64_", "dgemm_batch_strided", "sgemm_compute", "sgemm_direct"])
def test_mkl_interface_variants_are_vendor_routines(name):
    source = CPP.replace("{decl}", f'extern "C" void {name}{_FORTRAN};').replace("{call}", _CALL.replace("{name}", name))
    assert "GK307" in _codes(source)


def test_a_defined_routine_of_that_name_is_own_code():
    body = "{ for (int i = 0; i < *m; ++i) c[i] += a[i] * b[i]; }"
    decl = 'static void sgemm_64(const char*, const char*, const int* m, const int*, const int*, const float*, ' \
           f'const float* a, const int*, const float* b, const int*, const float*, float* c, const int*) {body}'
    source = CPP.replace("{decl}", decl).replace("{call}", _CALL.replace("{name}", "sgemm_64"))
    assert "GK307" not in _codes(source)


@pytest.mark.parametrize("ns", ["fbgemm", "vendor::blas", "mkl_wrappers"])
def test_a_vendor_routine_under_a_namespace_is_the_vendors(ns):
    decl = f"namespace {ns.split('::')[0]} {{ void cblas_sgemm_ref(int, int, int, const float*, const float*, float*); }}"
    if "::" in ns:
        decl = "namespace vendor { namespace blas { void cblas_sgemm_ref(int, int, int, const float*, const float*, float*); } }"
    source = CPP.replace("{decl}", decl).replace("{call}", f"{ns}::cblas_sgemm_ref(m, n, k, pa, pb, c);")
    assert "GK307" in _codes(source)


def test_a_namespaced_routine_the_source_defines_is_own_code():
    decl = "namespace mine { void cblas_sgemm_ref(int m, int n, int k, const float* a, const float* b, float* c) " \
           "{ for (int i = 0; i < m * n; ++i) c[i] = a[i % k] * b[i % k]; } }"
    source = CPP.replace("{decl}", decl).replace("{call}", "mine::cblas_sgemm_ref(m, n, k, pa, pb, c);")
    assert "GK307" not in _codes(source)


def test_a_namespaced_setup_call_is_not_work():
    decl = "namespace vendor { void mkl_set_num_threads(int); }"
    source = CPP.replace("{decl}", decl).replace("{call}", "vendor::mkl_set_num_threads(1);")
    assert "GK307" not in _codes(source)


def test_the_sampler_sniff_is_rejected_statically():
    source = (FIX / "submissions/rt14_sigaction_number_sampler.py").read_text()
    errors = {f.rule for f in _findings(source) if f.severity.value == "error"}
    assert {"GK311", "GK425"} <= errors


SIG = CPP.replace("#include <torch/extension.h>", "#include <torch/extension.h>\n#include <signal.h>")
_SGEMM = 'extern "C" void sgemm_' + _FORTRAN + ";"
_OWN = "for (int i = 0; i < m * n; ++i) c[i] += pa[i % k] * pb[i % k];"


@pytest.mark.parametrize("probe", [
    "struct sigaction sa {}; sigaction(27, nullptr, &sa); bool seen = sa.sa_handler != SIG_DFL;",
    "sigset_t s; sigemptyset(&s); pthread_sigmask(SIG_BLOCK, nullptr, &s); bool seen = sigismember(&s, 27);",
    "struct itimerval t {}; getitimer(2, &t); bool seen = t.it_interval.tv_usec != 0;",
])
def test_a_library_chosen_on_the_signal_state_is_gk311(probe):
    call = probe + " if (seen) { " + _OWN + " } else { " + _CALL.replace("{name}", "sgemm_") + " }"
    source = SIG.replace("{decl}", _SGEMM + "\n#include <sys/time.h>").replace("{call}", call)
    found = [f for f in _findings(source) if f.rule == "GK311"]
    assert found and found[0].severity.value == "error"


def test_the_profiling_signal_by_number_is_gk425():
    call = "struct sigaction sa {}; sigaction(27, nullptr, &sa); if (sa.sa_handler == SIG_DFL) {} " + _OWN
    source = SIG.replace("{decl}", "").replace("{call}", call)
    assert "GK425" in {f.rule for f in _findings(source) if f.severity.value == "error"}


@pytest.mark.parametrize("probe", [
    # the signal state deciding between two own loops, and an interrupt handler's query
    "struct sigaction sa {}; sigaction(SIGINT, nullptr, &sa); if (sa.sa_handler != SIG_DFL) { " + _OWN + " } else { "
    + _OWN + " }",
    "struct sigaction sa {}; sigaction(2, nullptr, &sa); " + _OWN,
    "int sig = 27; (void)sig; " + _OWN,
])
def test_signal_reads_without_a_library_choice_are_clean(probe):
    source = SIG.replace("{decl}", "").replace("{call}", probe)
    assert not {f.rule for f in _findings(source)} & {"GK311", "GK425"}
