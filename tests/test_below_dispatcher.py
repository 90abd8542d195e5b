"""Work done below the dispatcher and hidden from the checker's recorders, and the
checker's own fingerprints read by a submission:

- GK306: C++ that reaches ATen by any spelling (dispatcher lookups by name, `at::_ops`,
  TorchScript from C++, pointers and references to ATen functions, macros that build an
  `at::` name);
- GK419: C++ or Python that excludes torch's Python dispatch keys;
- GK425: the SIGPROF handler, the profiling timer, the dispatch-mode state from C++, and the
  program name when it reaches the forward path.

Each hack must be a certain error of its rule under `default`; each near miss must not be
flagged by it at all. Runs the real static engine on source strings."""

from __future__ import annotations

import textwrap

import pytest

from gatekeeper.static.testing import static_findings

MEAN = textwrap.dedent('''
    import torch
    class Model(torch.nn.Module):
        def forward(self, x):
            return x.mean(dim=0)
    def get_inputs():
        return [torch.randn(4, 16, 48)]
    def get_init_inputs():
        return []
''')


def _cpp(body: str, header: str = "") -> str:
    """A submission whose only work is the C++ function `f`."""
    return textwrap.dedent('''
        import torch
        from torch.utils.cpp_extension import load_inline
        _src = r"""
        HEADER
        BODY
        """
        _ext = load_inline(name="t", cpp_sources=_src, functions=["f"])
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _ext.f(x)
    ''').replace("HEADER", header).replace("BODY", textwrap.dedent(body).strip())


def _py(body: str) -> str:
    return textwrap.dedent(body)


OWN_LOOP = '''
torch::Tensor f(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty({xc.size(1), xc.size(2)}, xc.options());
    const float* s = xc.data_ptr<float>(); float* d = y.data_ptr<float>();
    const int64_t n = xc.size(1) * xc.size(2);
    for (int64_t i = 0; i < n; ++i) { float a = 0; for (int64_t r = 0; r < xc.size(0); ++r) a += s[r * n + i]; d[i] = a / xc.size(0); }
    return y;
}
'''

HACKS = [
    # GK306: the dispatcher, by name
    ("GK306", "aten::mean", _cpp('''
        torch::Tensor f(torch::Tensor x) {
            static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::mean", "dim")
                .typed<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool, std::optional<at::ScalarType>)>();
            std::vector<int64_t> d{0};
            return op.call(x, d, false, std::nullopt);
        }''')),
    ("GK306", "aten::sum", _cpp('''
        torch::Tensor f(torch::Tensor x) {
            auto op = c10::Dispatcher::singleton().findOp(c10::OperatorName("aten::sum", "dim_IntList"));
            torch::jit::Stack s{x, std::vector<int64_t>{0}, false, c10::IValue()};
            op->callBoxed(&s);
            return s[0].toTensor();
        }''')),
    ("GK306", "Dispatcher::findSchemaOrThrow", _cpp('''
        torch::Tensor f(torch::Tensor x) {
            std::string name = std::string("at") + "en::mean";
            auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "dim");
            return op.typed<at::Tensor(const at::Tensor&)>().call(x);
        }''')),
    ("GK306", "at::_ops::mean", _cpp('''
        torch::Tensor f(torch::Tensor x) { return at::_ops::mean_dim::call(x, {0}, false, std::nullopt); }''')),
    # GK306: TorchScript from C++
    ("GK306", "torch::jit::compile", _cpp('''
        torch::Tensor f(torch::Tensor x) {
            static auto cu = torch::jit::compile("def g(x):\\n    return x.mean(0)\\n");
            return cu->run_method("g", x).toTensor();
        }''')),
    ("GK306", "torch::jit::load", _cpp('''
        torch::Tensor f(torch::Tensor x) {
            static auto m = torch::jit::load("mean.pt");
            return m.forward({x}).toTensor();
        }''')),
    # GK306: references that are not calls
    ("GK306", "&at::sum", _cpp('''
        using Fn = at::Tensor (*)(const at::Tensor&, std::optional<at::ScalarType>);
        static Fn kSum = &at::sum;
        torch::Tensor f(torch::Tensor x) { return kSum(x, std::nullopt); }''')),
    ("GK306", "at::relu_", _cpp('''
        torch::Tensor f(torch::Tensor x) {
            auto g = at::relu_;
            return g(x);
        }''')),
    ("GK306", "at::mm", _cpp('''
        static std::function<at::Tensor(const at::Tensor&, const at::Tensor&)> kMm = at::mm;
        torch::Tensor f(torch::Tensor x) { return kMm(x, x); }''', "#include <functional>")),
    # GK306: macros that build or hold the name
    ("GK306", "through the macro ATEN", _cpp('''
        #define ATEN(name) at::name
        torch::Tensor f(torch::Tensor x) { return ATEN(mean)(x, {0}); }''')),
    ("GK306", "through the macro REDUCE", _cpp('''
        #define REDUCE at::mean
        torch::Tensor f(torch::Tensor x) { return REDUCE(x, {0}); }''')),
    ("GK306", "at::sum_ (through the macro PASTE)", _cpp('''
        #define PASTE(op) at::op##_
        torch::Tensor f(torch::Tensor x) { auto y = x.clone(); return PASTE(sum)(y); }''')),
    ("GK306", "through the macro CALL", _cpp('''
        #define CALL(fn, ...) torch::fn(__VA_ARGS__)
        torch::Tensor f(torch::Tensor x) { return CALL(sum, x, {0}); }''')),
    # GK419: the Python dispatch keys excluded
    ("GK419", "ExcludeDispatchKeyGuard", _cpp(OWN_LOOP.replace(
        "auto xc", "c10::impl::ExcludeDispatchKeyGuard g(c10::DispatchKey::Python);\n    auto xc"))),
    ("GK419", "ExcludeDispatchKeySetGuard", _cpp(OWN_LOOP.replace(
        "auto xc", "c10::impl::ExcludeDispatchKeySetGuard g(c10::python_ks);\n    auto xc"))),
    ("GK419", "tls_set_dispatch_key_excluded", _cpp(OWN_LOOP.replace(
        "auto xc", "c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::PythonTLSSnapshot, true);\n    auto xc"))),
    ("GK419", "IncludeDispatchKeyGuard", _cpp(OWN_LOOP.replace(
        "auto xc", "c10::impl::IncludeDispatchKeyGuard g(c10::DispatchKey::PythonDispatcher);\n    auto xc"))),
    ("GK419", "torch._C._DisableTorchDispatch", _py('''
        import torch
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                with torch._C._DisableTorchDispatch():
                    return _ext.f(x)
    ''')),
    # GK425: the checker's sampler and dispatch state, from C++ and Python
    ("GK425", "SIGPROF", _cpp(OWN_LOOP.replace(
        "auto xc", "struct sigaction sa; sigaction(SIGPROF, nullptr, &sa);\n    auto xc"), "#include <csignal>")),
    ("GK425", "ITIMER_PROF", _cpp(OWN_LOOP.replace(
        "auto xc", "struct itimerval t; getitimer(ITIMER_PROF, &t);\n    auto xc"), "#include <sys/time.h>")),
    ("GK425", "dispatch_mode_enabled", _cpp(OWN_LOOP.replace(
        "auto xc", "bool watched = c10::impl::dispatch_mode_enabled();\n    auto xc"))),
    ("GK425", "signal.SIGPROF", _py('''
        import signal, torch
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                if signal.getsignal(signal.SIGPROF) is signal.SIG_DFL:
                    return x.new_zeros(x.shape[1:])
                return _ext.f(x)
    ''')),
    ("GK425", "signal.ITIMER_PROF", _py('''
        from signal import getitimer, ITIMER_PROF
        import torch
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _ext.f(x, getitimer(ITIMER_PROF)[1] > 0)
    ''')),
    ("GK425", "torch.utils._python_dispatch._get_current_dispatch_mode", _py('''
        import torch
        from torch.utils._python_dispatch import _get_current_dispatch_mode as mode
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _ext.f(x, mode() is not None)
    ''')),
    ("GK425", "sys.argv[0]", _py('''
        import sys, torch
        _CHECKED = sys.argv[0].endswith("worker.py")
        _FAST = not _CHECKED
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _ext.f(x, _FAST)
    ''')),
    ("GK425", "sys.argv[0]", _py('''
        import sys, torch
        def _worker():
            return "worker" in sys.argv[0]
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _ext.f(x) if _worker() else _ext.g(x)
    ''')),
]

HACKS += [
    # an ATen entry point below the dispatcher, reached by its tail after `using namespace at`
    ("GK306", "at::cpu::mean_out", _cpp('''
        torch::Tensor f(torch::Tensor x) {
            using namespace at;
            auto y = torch::empty({x.size(1), x.size(2)}, x.options());
            cpu::mean_out(y, x, {0});
            return y;
        }''')),
]

NEAR_MISSES = [
    # a namespace of the source's own named like one of ATen's (`cpu`), after `using namespace at`
    ("GK306", _cpp('''
        using namespace at;
        namespace cpu {
        float row_sum(const float* s, int64_t n, int64_t stride) { float a = 0; for (int64_t r = 0; r < n; ++r) a += s[r * stride]; return a; }
        }
        torch::Tensor f(torch::Tensor x) {
            auto xc = x.contiguous();
            auto y = torch::empty({xc.size(1), xc.size(2)}, xc.options());
            const int64_t n = xc.size(1) * xc.size(2);
            for (int64_t i = 0; i < n; ++i) y.data_ptr<float>()[i] = cpu::row_sum(xc.data_ptr<float>() + i, xc.size(0), n) / xc.size(0);
            return y;
        }''')),
    # allocation, metadata, CUDA utilities, checks and types: not ATen compute
    ("GK306", _cpp('''
        torch::Tensor f(torch::Tensor x) {
            TORCH_CHECK(x.scalar_type() == at::kFloat, "aten::mean needs float here");
            auto y = torch::empty_like(x);
            auto z = at::empty({x.size(0)}, x.options());
            auto stream = at::cuda::getCurrentCUDAStream();
            c10::optional<at::ScalarType> t = c10::nullopt;
            using acc_t = at::acc_type<float, false>;
            namespace F = torch::nn::functional;
            float* p = y.data_ptr<float>(); auto acc = x.accessor<float, 1>();
            return y;
        }''')),
    # a pointer to the source's own function, a macro over allocation, an own op via the dispatcher
    ("GK306", _cpp('''
        #define ALLOC(t) torch::empty_like(t)
        #define K(name) my_##name
        static void my_mean(const float* s, float* d, int64_t n) { for (int64_t i = 0; i < n; ++i) d[i] = s[i]; }
        static auto kMean = &my_mean;
        TORCH_LIBRARY(myext, m) { m.def("mean0(Tensor x) -> Tensor"); }
        torch::Tensor f(torch::Tensor x) {
            auto y = ALLOC(x);
            K(mean)(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
            auto op = c10::Dispatcher::singleton().findSchemaOrThrow("myext::mean0", "");
            return y;
        }''')),
    # a TorchScript module type named, never compiled or loaded
    ("GK306", _cpp(OWN_LOOP + "\nstatic torch::jit::script::Module* kUnused = nullptr;\n")),
    # guards over other keys; the Python key only in a comment
    ("GK419", _cpp(OWN_LOOP.replace(
        "auto xc", "// not DispatchKey::Python\n    at::AutoDispatchBelowADInplaceOrView g;\n"
                   "    c10::impl::ExcludeDispatchKeyGuard h(c10::DispatchKey::AutogradCPU);\n    auto xc"))),
    ("GK419", _py('''
        import torch
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradCPU)):
                    return _ext.f(x)
    ''')),
    # another signal, a self-imposed timeout timer, SIGPROF in a string
    ("GK425", _py('''
        import signal, sys, torch
        _note = "SIGPROF is the sampler's signal"
        if __name__ == "__main__":
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            print(sys.argv[0], sys.argv[1:])
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _ext.f(x)
    ''')),
    # the program name read at import for a log line the call never reads
    ("GK425", _py('''
        import os, sys, torch
        _LOG = os.path.join("/tmp", os.path.basename(sys.argv[0]) + ".log")
        _ext = load(verbose="-v" in sys.argv)
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _ext.f(x)
    ''')),
]


@pytest.mark.parametrize("code,fragment,source", HACKS, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(HACKS)])
def test_hack_is_a_certain_error(code, fragment, source):
    found = [f for f in static_findings(source, MEAN) if f.rule == code]
    assert found, f"{code} missed:\n{source}"
    assert any(f.severity.value == "error" and f.confidence.value == "certain" and fragment in f.message
               for f in found), [(f.severity.value, f.confidence.value, f.message) for f in found]


@pytest.mark.parametrize("code,source", NEAR_MISSES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(NEAR_MISSES)])
def test_near_miss_is_not_flagged(code, source):
    found = [f.message for f in static_findings(source, MEAN) if f.rule == code]
    assert not found, found


def test_timer_without_profiling_name_is_likely():
    source = _py('''
        import signal, torch
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _ext.f(x, signal.getitimer(signal.ITIMER_REAL)[0])
    ''')
    found = [f for f in static_findings(source, MEAN) if f.rule == "GK425"]
    assert found and all(f.confidence.value == "likely" for f in found), [(f.confidence, f.message) for f in found]


def test_command_line_switch_read_by_forward_is_likely():
    source = _py('''
        import sys, torch
        FAST = "--fast" in sys.argv
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _ext.g(x) if FAST else _ext.f(x)
    ''')
    found = [f for f in static_findings(source, MEAN) if f.rule == "GK425"]
    assert found and all(f.confidence.value == "likely" for f in found), [(f.confidence, f.message) for f in found]


def test_dispatch_mode_reader_is_not_gk521():
    source = _py('''
        import torch
        from torch.utils._python_dispatch import _get_current_dispatch_mode
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return _ext.f(x, _get_current_dispatch_mode() is None)
    ''')
    rules = {f.rule for f in static_findings(source, MEAN)}
    assert "GK425" in rules and "GK521" not in rules, rules
