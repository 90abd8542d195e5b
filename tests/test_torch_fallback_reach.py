"""Issue 20, items 4 and 5: the submission's own kernel however it is reached (closures,
lazily bound modules, stored callables, ctypes entry points, extension functions named like
torch ops), torch used outside the result (build self-tests, warm-ups, checks), and the honest
guards, shims, sidecars and build settings of the GK110 / GK401 / GK402 / GK444 rules. Real
engine, real libcst; no mocks."""

from __future__ import annotations

import pytest

import gatekeeper
from gatekeeper.report import Severity
from gatekeeper.static.testing import static_findings
from torch_fallback_cases import held, mine

_E, _W = Severity.ERROR, Severity.WARNING

BUILD = '''import ctypes
import functools
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
_SRC = "__global__ void k(const float* x, float* y) {}\\ntorch::Tensor f(torch::Tensor x);"
_MOD = None
def _mod():
    global _MOD
    if _MOD is None:
        _MOD = load_inline(name="m", cpp_sources="", cuda_sources=_SRC, functions=["f", "max"])
    return _MOD
'''
# Each runs the own kernel, then torch.relu on its output: glue next to an own kernel is a
# warning; were the launch not seen, it would be "no kernel of its own", a certain error.
REACHED = {
    "closure over a lazily built module": "    def forward(self, x):\n        run = _mod().f\n"
                                          "        self._fast = lambda t: run(t.contiguous())\n        return torch.relu(self._fast(x))\n",
    "stored callable of a getter's module": "    def __init__(self):\n        super().__init__()\n        self._fn = _mod().f\n"
                                            "    def forward(self, x):\n        return torch.relu(self._fn(x))\n",
    "nested closure": "    def forward(self, x):\n        fn = _mod().f\n        def go(t):\n            return fn(t)\n"
                      "        return torch.relu(go(x))\n",
    "functools.partial": "    def forward(self, x):\n        fn = functools.partial(_mod().f)\n        return torch.relu(fn(x))\n",
    "alias named like a torch op": "    def forward(self, x):\n        mx = _mod().max\n        return torch.relu(mx(x))\n",
    "ctypes library from a getter": "    def forward(self, x):\n        y = torch.empty_like(x)\n"
                                    "        _lib().run(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()))\n"
                                    "        return torch.relu(y)\n",
    "CuPy RawKernel held by a class attribute": "    def forward(self, x):\n        import cupy as cp\n"
                                               "        if not hasattr(ModelNew, 'k'):\n"
                                               "            ModelNew.k = cp.RawKernel(_SRC, 'k')\n"
                                               "        y = torch.empty_like(x)\n"
                                               "        ModelNew.k((1,), (256,), (x.data_ptr(), y.data_ptr()))\n"
                                               "        return torch.relu(y)\n",
    "CuPy RawModule function on self": "    def __init__(self):\n        super().__init__()\n        import cupy as cp\n"
                                       "        self.mod = cp.RawModule(code=_SRC)\n"
                                       "        self.fn = self.mod.get_function('k')\n"
                                       "    def forward(self, x):\n        y = torch.empty_like(x)\n"
                                       "        self.fn((1,), (256,), (x.data_ptr(), y.data_ptr()))\n"
                                       "        return torch.relu(y)\n",
    "TileLang program compiled by a call": "    def __init__(self):\n        super().__init__()\n        import tilelang\n"
                                           "        self.k = tilelang.compile(_program(), out_idx=[1])\n"
                                           "    def forward(self, x):\n        return torch.relu(self.k(x))\n",
    "closure defined in __init__": "    def __init__(self):\n        super().__init__()\n        ext = _mod()\n"
                                   "        def run(t):\n            return ext.f(t.contiguous())\n        self.run = run\n"
                                   "    def forward(self, x):\n        return torch.relu(self.run(x))\n",
    "getattr with a literal name": "    def forward(self, x):\n        fn = getattr(_mod(), 'f')\n"
                                   "        return torch.relu(fn(x))\n",
    "jiterator kernel": "    def __init__(self):\n        super().__init__()\n"
                        "        self.fn = torch.cuda.jiterator._create_jit_fn('template <typename T> T f(T x) { return x; }')\n"
                        "    def forward(self, x):\n        return torch.relu(self.fn(x))\n",
    "loader method returning the function": "    def __init__(self):\n        super().__init__()\n"
                                            "        self.fn = self._load()\n    def _load(self):\n"
                                            "        m = load_inline(name='m2', cpp_sources='', cuda_sources=_SRC, functions=['f'])\n"
                                            "        return m.f\n"
                                            "    def forward(self, x):\n        return torch.relu(self.fn(x))\n",
    "static getter of a class attribute": "    _k = None\n    @staticmethod\n    def _get():\n"
                                          "        if ModelNew._k is None:\n            ModelNew._k = _mod().f\n"
                                          "        return ModelNew._k\n"
                                          "    def forward(self, x):\n        k = ModelNew._get()\n"
                                          "        return torch.relu(k(x))\n",
    "raw C function pointer": "    def __init__(self):\n        super().__init__()\n"
                              "        self._entry = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_ADDR)\n"
                              "    def forward(self, x):\n        y = torch.empty_like(x)\n"
                              "        self._entry(y.data_ptr())\n        return torch.relu(y)\n",
}
CTYPES = '''_LIB = None
_ADDR = 0
def _lib():
    global _LIB
    if _LIB is None:
        _LIB = ctypes.CDLL("{lib}")
    return _LIB
class ModelNew(nn.Module):
'''


def _source(body: str, lib: str = "./softmax_rows.so") -> str:
    return BUILD + CTYPES.format(lib=lib) + body


@pytest.mark.parametrize("name", sorted(REACHED))
def test_the_own_launch_is_found_however_it_is_reached(name):
    assert mine(static_findings(_source(REACHED[name]))) == [("GK301", _W)], name


def test_the_same_shapes_without_a_launch_of_its_own_stay_certain():
    # a stored lambda that is never called launches nothing
    never = _source("    def forward(self, x):\n        run = _mod().f\n        self._fast = lambda t: run(t)\n"
                    "        return torch.softmax(x, 1)\n")
    assert held(static_findings(never)) == [("GK301", _E, "certain")]
    # a kernel compiled from its own source but never launched does no work
    compiled_only = _source("    def forward(self, x):\n        import cupy as cp\n        k = cp.RawKernel(_SRC, 'k')\n"
                            "        return torch.relu(x)\n")
    assert held(static_findings(compiled_only)) == [("GK301", _E, "certain")]
    # cuBLAS through ctypes is a vendor library, not the submission's code
    vendor = _source(REACHED["ctypes library from a getter"], lib="libcublas.so.12")
    assert held(static_findings(vendor)) == [("GK301", _E, "certain")]
    # a name bound to a torch op somewhere is not the extension's function
    torch_bound = _source("    def forward(self, x):\n        mx = _mod().max\n        mx = torch.amax\n"
                          "        return torch.relu(mx(x, 1))\n")
    assert ("GK301", _E, "certain") in held(static_findings(torch_bound))
    # the tensor method of the same name as the extension's function is torch's
    method = _source("    def forward(self, x):\n        return torch.relu(x.max(1)[0])\n")
    assert {r for r, _, c in held(static_findings(method)) if c == "certain"} == {"GK301", "GK303"}


SELFTEST = BUILD + '''_EXT = None
def _ext():
    global _EXT
    if _EXT is None:
        ext = _mod()
        t = torch.rand(8, 300) * 6 - 3
        {check}
        _EXT = ext
    return _EXT
class ModelNew(nn.Module):
    def forward(self, x):
{forward}
'''


def _selftest(check: str, forward: str) -> str:
    return SELFTEST.replace("{check}", check).replace("{forward}", forward)


@pytest.mark.parametrize("check", [
    "if not torch.allclose(ext.f(t), torch.softmax(t, -1)):\n            raise RuntimeError('self-test failed')",
    "assert torch.allclose(ext.f(t), torch.softmax(t, -1), atol=1e-5)",
    "for _ in range(3):\n            torch.softmax(t, -1)",  # a warm-up whose result is dropped
    # round 13: the set-up cast to a dtype; `torch.bfloat16` handed to `.to()` is no store into torch
    "w = (torch.randn(8, 8) * 0.1).to(torch.bfloat16)\n        got = ext.f(w)\n"
    "        if not torch.allclose(got, torch.softmax(w.float(), -1)):\n            raise RuntimeError('bad')",
])
def test_torch_outside_the_result_is_not_a_fallback(check):
    honest = _selftest(check, "        return _ext().f(x.contiguous())")
    assert mine(static_findings(honest, profile="strict")) == []


def test_a_self_test_that_hides_the_torch_result_stays_caught():
    check = "assert torch.allclose(ext.f(t), torch.softmax(t, -1))"
    # the kernel only runs in the self-test: no kernel of its own does the work (certain)
    only_test = _selftest(check, "        _ext()\n        return torch.softmax(x, -1)")
    found = [f for f in static_findings(only_test) if f.rule.startswith("GK3")]
    assert held(found) == [("GK301", _E, "certain")]
    assert "never reach the result" in found[0].message
    # a "check" in forward whose torch result is the one returned: torch computes the result
    returned = _selftest(check, "        ref = torch.softmax(x, -1)\n"
                                                    "        if torch.allclose(_ext().f(x), ref):\n"
                                                    "            return ref\n        raise RuntimeError('mismatch')")
    assert ("GK301", _E) in mine(static_findings(returned, profile="strict"))
    # torch stashed on self or in a global reaches later results
    stored = _selftest(check, "        self.ref = torch.softmax(x, -1)\n"
                                                  "        return _ext().f(x)")
    assert ("GK301", _E) in mine(static_findings(stored, profile="strict"))


def test_a_launch_assigned_to_a_throwaway_name_still_writes_its_output():
    source = BUILD + ("class ModelNew(nn.Module):\n    def forward(self, x):\n        out = torch.empty_like(x)\n"
                      "        _ = _mod().f(x, out)\n        return torch.relu(out)\n")
    assert [(r, s) for r, s in mine(static_findings(source)) if r == "GK301"] == [("GK301", _W)]



def test_a_launch_handed_a_container_writes_what_the_container_holds():
    """Round 12's honest writer: `args = (x, y, ...)` then `k[grid](*args)`; the kernel writes y,
    which is returned, so the torch path under a device condition is a fallback (a warning),
    not the only work. A tuple holding only scratch leaves torch doing the work. (Handed an
    input, a launch may write it in place, as when handed it directly: not certain then.)"""
    launch = ("        args = (x, y, x.size(0))\n        _mod().f(*args)\n")
    honest = BUILD + ("class ModelNew(nn.Module):\n    def forward(self, x):\n"
                      "        if not x.is_cuda:\n            return torch.softmax(x, -1)\n"
                      "        y = torch.empty_like(x)\n" + launch + "        return y\n")
    assert not [f for f in mine(static_findings(honest)) if f[1] == _E]
    scratch = BUILD + ("class ModelNew(nn.Module):\n    def forward(self, x):\n"
                       "        y = torch.empty_like(x)\n        args = (y, x.size(0))\n        _mod().f(*args)\n"
                       "        return torch.softmax(x, -1)\n")
    assert held(static_findings(scratch)) == [("GK301", _E, "certain")]


# --- GK110: guards that cannot change what a call computes --------------------------------

GUARDED = '''import os, torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
{body}
        _launch(x, y)
        return y
'''


@pytest.mark.parametrize("body, flagged", [
    # the capture guard: a warm-up launch that the block repeats, a sync, its own latch
    ("        if not self.ready and not torch.cuda.is_current_stream_capturing():\n"
     "            _launch(x, y)\n            torch.cuda.synchronize()\n            self.ready = True", False),
    # ... with an else branch, or a body that calls something else, it is a signal again
    ("        if not torch.cuda.is_current_stream_capturing():\n            _launch(x, y)\n"
     "        else:\n            y.zero_()", True),
    ("        if not torch.cuda.is_current_stream_capturing():\n            _reference_into(x, y)", True),
    # the capture state read in a once-block is still read per call until the block runs
    ("        if self.mode is None:\n            self.mode = 'fast' if torch.cuda.is_current_stream_capturing() else 'exact'",
     True),
    # the environment read once in a lazy build is configuration; read per call it is a signal
    ("        if self.mode is None:\n            self.mode = os.environ.get('ARCH', 'sm90')", False),
    ("        if os.environ.get('TIMING'):\n            return y", True),
    # a latch nobody else reads cannot carry the signal anywhere
    ("        if os.environ.get('TIMING'):\n            self.seen_timing = True", False),
])
def test_gk110_guards(body, flagged):
    found = [f for f in static_findings(GUARDED.format(body=body)) if f.rule == "GK110"]
    assert bool(found) == flagged, found


# --- GK401 / GK402: input-builder shims and the submission's own sidecar ------------------

SIDECAR_USER = '''import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        import softmax_helpers
        self.inner = softmax_helpers.Model()
    def forward(self, x):
        return self.inner(x)
'''


@pytest.mark.parametrize("sidecar, expected", [
    ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return _own(x)\n", []),
    ("from reference import Model\n", [("GK401", _E, "certain")]),
    ("import importlib\nModel = importlib.import_module('ref' + 'erence').Model\n", [("GK401", _E, "certain")]),
    (None, [("GK401", _E, "suspect")]),  # not there to read: open, a warning under default
])
def test_a_sidecar_model_is_the_reference_only_if_the_sidecar_imports_it(tmp_path, sidecar, expected):
    problem = tmp_path / "prob" / "softmax.py"
    problem.parent.mkdir()
    problem.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                       "        return torch.softmax(x, 1)\ndef get_inputs():\n    return [torch.rand(4, 8)]\n"
                       "def get_init_inputs():\n    return []\n", "utf-8")
    submission = tmp_path / "solution.py"
    submission.write_text(SIDECAR_USER, "utf-8")
    if sidecar is not None:
        (tmp_path / "softmax_helpers.py").write_text(sidecar, "utf-8")
    report = gatekeeper.check_static(submission, problem)
    assert report.error is None, report.error
    assert held(report.findings, "GK401") == expected
    if expected and expected[0][2] == "suspect":
        assert [f.severity for f in report.findings if f.rule == "GK401"] == [_W]


@pytest.mark.parametrize("shim, expected", [
    # (rule, severity under default, severity under strict)
    ("def get_inputs():\n    import reference\n    return reference.get_inputs()\n", [("GK402", _W, _W)]),
    ("def get_init_inputs():\n    from reference import get_init_inputs as g\n    return g()\n", [("GK402", _W, _W)]),
    # module level: a re-export of the builders is a shim; the module used for anything else is not
    ("import reference\ndef get_inputs():\n    return reference.get_inputs()\n", [("GK402", _W, _W)]),
    ("from reference import get_inputs, get_init_inputs\n", [("GK402", _W, _W)]),
    ("import reference\ndef get_inputs():\n    return reference.get_inputs()\nclass ModelNew:\n"
     "    def forward(self, x):\n        return reference.Model()(x)\n", [("GK401", _E, _E), ("GK402", _E, _E)]),
    ("from reference import get_inputs, Model\n", [("GK402", _E, _E)]),
    # a shim that builds the model is not one either
    ("def get_inputs():\n    import reference as r\n    xs = r.get_inputs()\n    r.Model()(*xs)\n    return xs\n",
     [("GK401", _E, _E), ("GK402", _E, _E)]),
    # kept in a global for forward: the module escapes the shim
    ("def get_inputs():\n    global R\n    import reference as R\n    return R.get_inputs()\n", [("GK402", _E, _E)]),
])
def test_input_builder_shims_are_a_warning_at_most(shim, expected):
    """A warning under every profile: the reference's input builders build no model."""
    default = sorted((f.rule, f.severity) for f in static_findings(shim) if f.rule.startswith("GK40"))
    strict = sorted((f.rule, f.severity) for f in static_findings(shim, profile="strict") if f.rule.startswith("GK40"))
    assert default == [(rule, d) for rule, d, _ in expected]
    assert strict == [(rule, s) for rule, _, s in expected]


def test_gk110_is_certain_only_for_signals_that_identify_the_harness():
    capture = GUARDED.format(body="        if torch.cuda.is_current_stream_capturing():\n            return y")
    found = [f for f in static_findings(capture) if f.rule == "GK110"]
    assert [(f.severity, f.confidence.value, f.probe.check) for f in found] == [(_W, "likely", "GK703")]
    assert [f.severity for f in static_findings(capture, profile="strict") if f.rule == "GK110"] == [_E]
    stack = GUARDED.format(body="        import sys\n        if sys._getframe(1).f_code.co_name == 'time_it':\n"
                                "            return y")
    assert [(f.severity, f.confidence.value) for f in static_findings(stack) if f.rule == "GK110"] == [(_E, "certain")]


@pytest.mark.parametrize("body", [
    "    def forward(self, x):\n        fn = getattr(_mod(), self.kind)\n        return torch.relu(fn(x))\n",
    "    def __init__(self):\n        super().__init__()\n        self.table = {'f': _mod().f}\n"
    "        self.op = self.table.get('f')\n    def forward(self, x):\n        return torch.relu(self.op(x))\n",
])
def test_a_callable_fetched_at_run_time_makes_no_own_kernel_likely_not_certain(body):
    """No launch is seen, but a callable fetched at run time may be the file's own kernel: the
    work-attribution check (GK667) settles it; strict still rejects."""
    found = [f for f in static_findings(_source(body)) if f.rule == "GK301"]
    assert [(f.severity, f.confidence.value, f.probe.check) for f in found] == [(_W, "likely", "GK667")]
    assert "fetched at run time" in found[0].message
    assert [f.severity for f in static_findings(_source(body), profile="strict") if f.rule == "GK301"] == [_E]
    # with no code of its own anywhere in the file, nothing fetched can be a kernel: certain
    pure = ("import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n"
            "    def forward(self, x):\n        fn = getattr(self, 'impl')\n        return torch.relu(fn(x))\n")
    assert held(static_findings(pure)) == [("GK301", _E, "certain")]


def test_a_private_holder_class_s_getter_reaches_the_own_launch():
    # round 13's honest selective scan: `_Lazy.get().f(...)`, the extension built in a
    # classmethod of a class whose name starts with an underscore (was "no kernel of its own")
    src = BUILD + '''
class _Lazy:
    ext = None
    @classmethod
    def get(cls):
        if cls.ext is None:
            cls.ext = load_inline(name="m3", cpp_sources="", cuda_sources=_SRC, functions=["f"])
        return cls.ext
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(_Lazy.get().f(x))
'''
    assert mine(static_findings(src)) == [("GK301", _W)]
