"""Round 13 (2026-12-07), Python side: SciPy's BLAS/LAPACK wrappers doing the GEMM, a tensor's
method fetched by a name the file fixes (`object.__getattribute__(p, _SLOT)`), and a tensor's
bound method handed on as a value (`map(p.mm, rhs)`). Each hack, its honest twin and other
spellings of the same invariant; real libcst, the real engine."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
MATMUL = FIX / "problems/cpu_matmul_small.py"


def _findings(source: str, profile: str = "default") -> list:
    return gatekeeper.check_static(source, MATMUL, profile=profile).findings


def _codes(source: str, profile: str) -> set[str]:
    return {f.rule for f in _findings(source, profile)}


# the fixtures -----------------------------------------------------------------------------
@pytest.mark.parametrize("name, rule", [
    ("rt13_scipy_blas_gemm", "GK301"),
    ("rt13_getattribute_slot_gemm", "GK303"),
    ("rt13_bound_method_map_gemm", "GK303"),
])
def test_the_hacks_are_found_and_strict_rejects_them(name, rule):
    source = (FIX / "submissions" / f"{name}.py").read_text()
    strict = [f for f in _findings(source, "strict") if f.rule == rule]
    assert strict and strict[0].severity.value == "error"
    assert rule in _codes(source, "default")


@pytest.mark.parametrize("name", ["rt13_scipy_blas_gemm_twin", "rt13_getattribute_slot_gemm_twin",
                                  "rt13_bound_method_map_gemm_twin"])
@pytest.mark.parametrize("profile", ["default", "strict"])
def test_the_twins_are_clean(name, profile):
    source = (FIX / "submissions" / f"{name}.py").read_text()
    assert _findings(source, profile) == []


CPU_EXT = '''
import functools, operator
import numpy as np
import scipy
import scipy.linalg as sla
from scipy.linalg import get_blas_funcs, get_lapack_funcs
import torch
from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="m", cpp_sources="torch::Tensor pack(torch::Tensor b) { for (int i = 0; i < 4; ++i) {} return b; }",
                   functions=["pack"])
_SLOT = "mm"
_BASE = "matmul"
_ALIAS = _BASE
_SLOTS = {"panel": "mm"}
def _apply(f, x):
    return f(x)
def _fetch(t):
    return object.__getattribute__(t, _SLOT)
def _bound(t):
    return t.matmul
'''


def _model(body: str, extra: str = "") -> str:
    return CPU_EXT + extra + f'''
class ModelNew(torch.nn.Module):
    _SLOT = "mm"
    def forward(self, a, b):
        b = _ext.pack(b)
{body}
'''


# 1. SciPy's BLAS / LAPACK ---------------------------------------------------------------------
@pytest.mark.parametrize("body", [
    "        return torch.from_numpy(sla.blas.sgemm(1.0, a.numpy(), b.numpy()))",
    "        g = scipy.linalg.blas.dgemm\n        return torch.from_numpy(g(1.0, a.numpy(), b.numpy()))",
    "        return torch.from_numpy(get_blas_funcs('gemm', (a.numpy(),))(1.0, a.numpy(), b.numpy()))",
    "        gemm = sla.get_blas_funcs('gemm', (a.numpy(),))\n        return torch.from_numpy(gemm(1.0, a.numpy(), b.numpy()))",
    "        fs = get_lapack_funcs(('gesv',), (a.numpy(),))\n        return torch.from_numpy(fs[0](a.numpy(), b.numpy())[2])",
    "        return torch.from_numpy(sla.solve(a.numpy(), b.numpy()))",
    "        gemm, = get_blas_funcs(('gemm',), (a.numpy(),))\n        return torch.from_numpy(gemm(1.0, a.numpy(), b.numpy()))",
    "        return torch.from_numpy(functools.partial(sla.blas.sgemm, 1.0)(a.numpy(), b.numpy()))",
    "        return torch.from_numpy(_ROUTINES['g'](1.0, a.numpy(), b.numpy()))",
    "        return torch.from_numpy(_panel(a.numpy(), b.numpy()))",
    "        return torch.from_numpy(_np_panel(a.numpy(), b.numpy()))",
])
def test_scipy_blas_and_lapack_compute(body):
    # (and numpy's contractions on arrays a helper was handed, as `@` on them is)
    extra = '''
_ROUTINES = {"g": sla.blas.sgemm}
def _panel(x, y):
    return sla.blas.sgemm(1.0, x, y)
def _np_panel(x, y):
    return np.matmul(x, y)
'''
    assert "GK301" in _codes(_model(body, extra), "strict")


def test_scipy_that_only_picks_or_asks_is_clean():
    body = '''        prefix, _, _ = sla.blas.find_best_blas_type((a.numpy()[:1, :1],))
        n = sla.lapack.dgeqrf_lwork(4, 4)
        w = scipy.special.erf(0.5) + scipy.fft.next_fast_len(100) + np.prod(a.shape) + np.dot(2, 3)
        return _ext.pack(a) if prefix == "s" and n and w else b'''
    assert _findings(_model(body), "strict") == []


# 2. a method fetched by a fixed name ------------------------------------------------------------
@pytest.mark.parametrize("body", [
    "        return object.__getattribute__(a, _SLOT)(b)",
    "        return type(a).__getattribute__(a, 'mm')(b)",
    "        return torch.Tensor.__getattribute__(a, _ALIAS)(b)",
    "        return a.__getattribute__('m' + 'm')(b)",
    "        return getattr(a, self._SLOT)(b)",
    "        return getattr(a, ModelNew._SLOT)(b)",
    "        return getattr(a, _SLOTS['panel'])(b)",
    "        return operator.attrgetter('mm')(a)(b)",
    "        import inspect\n        return inspect.getattr_static(a, 'mm')(a, b)",
    "        return type(a).__dict__['mm'](a, b)",
    "        k = object.__getattribute__(a, _SLOT)\n        return k(b)",
    "        k = getattr(a, _ALIAS)\n        run = k\n        return run(b)",
    "        return _fetch(a)(b)",
    "        get = operator.attrgetter(_SLOT)\n        return get(a)(b)",
    "        k = _bound(a)\n        return k(b)",
])
def test_a_method_fetched_by_a_fixed_name_is_a_call_of_it(body):
    assert "GK303" in _codes(_model(body), "strict")


def test_fetching_metadata_or_the_extension_by_name_is_clean():
    body = '''        rows = object.__getattribute__(a, "shape")[0]
        dt = getattr(a, "dtype")
        k = object.__getattribute__(_ext, "pack")
        return k(b) if rows and dt else b'''
    assert _findings(_model(body), "strict") == []


# 3. a bound method handed on ---------------------------------------------------------------------
@pytest.mark.parametrize("body", [
    "        return next(map(a.mm, (b,)))",
    "        return functools.partial(a.mm)(b)",
    "        f = a.matmul\n        return list(map(f, [b]))[0]",
    "        return _apply(a.__matmul__, b)",
    "        fs = [a.mm]\n        return fs[0](b)",
    "        fs = {'f': a.mm}\n        return fs['f'](b)",
    "        return functools.reduce(lambda acc, f: f(acc), [a.mm], b)",
    "        return sorted([b], key=a.mm)[0]",
    "        return next(map(object.__getattribute__(a, _SLOT), (b,)))",
    "        return next(map(_bound(a), (b,)))",
    "        return functools.reduce(a.add, b.unbind(0))",
    "        return _ext.pack(a.mm, b)",
    "        return [a.mm][0](b)",
    "        fs = {'f': a.mm}\n        return fs.get('f')(b)",
    "        self.k = a.mm\n        return self.k(b)",
    "        h = {}\n        h['f'] = object.__getattribute__(a, _SLOT)\n        return h['f'](b)",
    "        return a.mm.__call__(b)",
])
def test_a_bound_method_handed_on_is_a_call_of_it(body):
    assert "GK303" in _codes(_model(body), "strict")


def test_handing_on_the_extension_or_plain_callables_is_clean():
    body = '''        run = functools.partial(_ext.pack)
        names = sorted(["b", "a"], key=str.lower)
        seen = []
        list(map(seen.append, names))
        fill = _fill(_CFG)
        cfg = _CFG
        self.mode = cfg.max
        _ext.pack(b, cfg.max)
        _clip(b, cfg.max)
        return list(map(run, [b]))[0] if seen and fill is not None else next(map(_ext.pack, (b,)))'''
    extra = "import types\n_CFG = types.SimpleNamespace(max=4.0)\ndef _fill(cfg):\n    return torch.full((2,), cfg.max)\n" \
        "def _clip(x, hi):\n    return _ext.pack(x) if hi else x\n"
    assert _findings(_model(body, extra), "strict") == []
