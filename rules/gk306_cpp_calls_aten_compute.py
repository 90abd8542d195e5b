from __future__ import annotations

from gatekeeper.analyses.torch_rule_base import TorchFallbackRule
from gatekeeper.static.examples import Invalid, Valid, snippet


class CppCallsAtenCompute(TorchFallbackRule):
    """The C++/CUDA source computes with ATen or libtorch: `at::matmul(a, b)`,
    `torch::mean(x, 0)`, `at::native::add(...)`, `at::_ops::mm::call(...)`,
    `torch::nn::functional::linear(...)`, or a tensor compute method in host code
    (`x.matmul(y)`, `x.sum(0)`); also ATen reached without such a call: an operator looked
    up by name through the dispatcher (`c10::Dispatcher::singleton().findSchemaOrThrow(
    "aten::mean", "dim")`, `findOp`, then `.typed<...>().call(...)` or `callBoxed`),
    TorchScript run from C++ (`torch::jit::compile`, `torch::jit::load`), a pointer or
    reference to an ATen function (`&at::addmm`, `auto f = at::relu_;`, `std::function<...>
    g = at::mm;`), and a macro whose expansion names one (`#define ATEN(n) at::n` then
    `ATEN(addmm)(...)`). A dispatcher lookup of an op in a namespace the source registers
    itself (`TORCH_LIBRARY(myext, m)`), named by a literal (`"myext::gemm"`) or a named constant,
    is the submission's own op and is not flagged; any other lookup is foreign, even in a file
    that registers a library (a name built from `c10::namespaces::aten` is ATen's op, read back
    from the strings it spells; red team round 12).
    Names are read as the compiler resolves them (red team round 10): a leading `::`
    (`::at::matmul`), namespace aliases (`namespace A = ::at; A::mm`), `using namespace at;`
    at any scope and `using at::mm;`, a namespace that nominates `at` (`blk::mm`),
    argument-dependent lookup (`mm(a, b)` on `at::Tensor`s when the file declares no `mm`),
    an op struct as a template argument (`contract<at::_ops::mm>`), macros that build the
    name (`SCOPE(at)::matmul`), `torch::jit::CompilationUnit`, `torch::jit::getAllOperators()`,
    torch reached through pybind11 (`py::cast(x).attr("softmax")(1)`) or CPython
    (`PyObject_CallMethod(obj, "softmax", "i", -1)`, `PyObject_GetAttrString(obj, "matmul")`),
    the op's name a literal or a named constant (`constexpr const char* kEntry = "matmul";`),
    and a name bound to an ATen symbol (`__attribute__((weakref("_ZN2at6matmul...")))`).
    Also libtorch compute with no op spelled (red team round 13): an operator on a value that
    holds a tensor (`acc += x[r]` on `at::Tensor`s, pybind11's `py::object` operators and
    CPython's `PyNumber_MatrixMultiply` on an object holding one: analyses/cpp_tensor_operators.py),
    a member pointer to a Tensor compute method (`std::invoke(&T::mm, a, b)`, whatever names
    the class), a generated autograd node (`torch::autograd::generated::MmBackward0`), an
    operator fetched from the JIT registry (`node->getOperation()` on `c10::aten::mm`), and a
    C++ frontend module's `*Impl` (`torch::nn::LinearImpl`).

    Why it games the benchmark: the extension compiles, so it looks like a custom kernel,
    but the work is done by torch's kernels called from C++.

    Allocation, metadata and CUDA utilities are fine: `torch::empty`, `at::empty_like`,
    `torch::zeros`, `x.size(0)`, `x.options()`, `x.data_ptr<float>()`, `x.contiguous()`,
    `at::cuda::getCurrentCUDAStream()`, types and constants (`at::Tensor`, `at::kFloat`).
    Comments and string literals in the C++ are ignored, and so are docstrings that mention
    `torch::mean`. Device code (purely `__global__`/`__device__` bodies, and the device arm of
    a `__CUDA_ARCH__` conditional) is not checked for method calls; a `__host__ __device__`
    body and the host arm of a `__CUDA_ARCH__` conditional (`#if !defined(__CUDA_ARCH__)`) are
    host code and are checked. Known false-positive patterns and why it does not fire on them: the
    submission's own C++ function named like an ATen op (`Tensor mean(Tensor x)` then
    `mean(x)`), because only calls through `at::`/`torch::` (or `using namespace at`) count;
    `return torch::mean(x, dim);` as the other return path of a function that launches a
    kernel is a run-time fallback, so it never counts towards "torch does every op".
    Severity follows the torch-fallback policy (see GK301 and the table below), where "own
    kernel" means the source defines a `__global__` kernel; allow with
    `[rules.GK306.options] allow = ["at::relu"]`.
    """

    code = "GK306"
    name = "CppCallsAtenCompute"
    summary = "the C++ extension computes with ATen / libtorch (at::matmul, torch::mean)"
    kinds = ("cpp",)
    message = "the C++ source calls `{what}`, so ATen computes `{op}`, not the submission's kernel: {why}."
    hint = (
        "Write the op as a `__global__` kernel and launch it; use ATen only to allocate and inspect "
        "tensors (`torch::empty({x.size(1)}, x.options())`, `x.data_ptr<float>()`). "
        "If the problem allows this op, add it to the `allow` option of GK306 in gatekeeper.toml (rules.GK306.options)."
    )
    VALID = [
        # the same compound assignments on the extension's own float buffers (red team round 13's twin)
        Valid(snippet("""
            src = r'''
            #include <torch/extension.h>
            torch::Tensor f(torch::Tensor x) {
              auto res = torch::zeros({x.size(1)}, x.options());
              const float* src = x.data_ptr<float>(); float* acc = res.data_ptr<float>();
              for (int64_t r = 0; r < x.size(0); ++r) for (int64_t i = 0; i < x.size(1); ++i) acc[i] += src[r * x.size(1) + i];
              for (int64_t i = 0; i < x.size(1); ++i) acc[i] *= 0.5f;
              return res;
            }
            '''
        """)),
        Valid(snippet("""
            src = r'''
            #include <torch/extension.h>
            // torch::mean(x, 0) was the baseline; at::matmul too
            __global__ void k(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }
            torch::Tensor f(torch::Tensor x) {
              auto y = torch::empty_like(x);
              const char* s = "at::matmul";
              k<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.contiguous().data_ptr<float>(), y.data_ptr<float>(), x.numel());
              return y;
            }
            '''
        """)),
        # a docstring that mentions torch::mean is not C++ code
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    '''Replaces torch::mean(x, 0) and at::sum(x) with { a kernel }.'''
                    return _ext.f(x)
        """)),
        # ATen's thread pool runs the submission's own loop (red team round 6, a GEMM handed to a
        # worker thread): `at::launch` schedules a callable, it computes nothing itself
        Valid(snippet("""
            src = r'''
            #include <torch/extension.h>
            #include <ATen/Parallel.h>
            torch::Tensor f(torch::Tensor x) {
              auto y = torch::empty_like(x);
              float* py = y.data_ptr<float>(); const float* px = x.data_ptr<float>();
              at::launch([=] { for (int64_t i = 0; i < 64; ++i) py[i] = 2.f * px[i]; });
              return y;
            }
            '''
        """)),
        # a type alias of ATen's vector class: its loads and stores are the submission's own loop
        Valid(snippet("""
            src = r'''
            #include <ATen/cpu/vec/vec.h>
            using Vec = at::vec::Vectorized<float>;
            typedef at::vec::Vectorized<float> V2;
            void scale(const float* x, float* y, int64_t n) {
              for (int64_t i = 0; i + Vec::size() <= n; i += Vec::size()) (Vec::loadu(x + i) * Vec(2.f)).store(y + i);
            }
            '''
        """)),
        # the CUDA backend's stream, device and allocation helpers are no op kernels
        Valid(snippet("""
            src = r'''
            #include <ATen/cuda/CUDAContext.h>
            __global__ void k(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = 1.f; }
            torch::Tensor f(torch::Tensor x) {
              TORCH_CHECK(at::cuda::is_available() && at::cuda::device_count() > 0, "no GPU");
              auto y = at::cuda::empty_strided_cuda(x.sizes(), x.strides(), x.scalar_type());
              const int w = at::cuda::warp_size();
              k<<<1, 8 * w, 0, at::cuda::getStreamFromPool()>>>(y.data_ptr<float>(), y.numel());
              return y;
            }
            '''
        """)),
        # the file's own `mm` in its own namespace, called unqualified; `using namespace at;` for types
        Valid(snippet("""
            src = r'''
            #include <torch/extension.h>
            namespace k { torch::Tensor mm(const torch::Tensor& a, const torch::Tensor& b) { return torch::empty_like(a); } }
            using namespace k;
            using namespace at;
            Tensor f(Tensor a, Tensor b) { Tensor c = mm(a, b); return c; }
            '''
        """)),
        # a __host__ __device__ helper whose host arm is arithmetic (red team round 12's near miss)
        Valid(snippet("""
            src = r'''
            template <typename T> __host__ __device__ T ceil_div(T a, T b) {
            #ifndef __CUDA_ARCH__
              return (a + b - 1) / b;
            #else
              return (a + b - 1) / b;
            #endif
            }
            '''
        """)),
    ]
    INVALID = [
        # ATen's add_ / mul_ through C++ operator overloads on tensors (red team round 13)
        Invalid(snippet("""
            src = r'''
            #include <torch/extension.h>
            torch::Tensor f(torch::Tensor x) {
              auto acc = torch::zeros_like(x[0]);
              for (int64_t r = 0; r < x.size(0); ++r) acc += x[r];
              return acc;
            }
            '''
        """), line=5, message="operator+= on the tensor acc"),
        # the host arm of a __CUDA_ARCH__ conditional in a __host__ __device__ template is host code
        Invalid(snippet("""
            src = r'''
            template <typename T> __host__ __device__ T part(const T& v) {
            #if !defined(__CUDA_ARCH__)
              return v.sum(-1);
            #else
              return v;
            #endif
            }
            '''
        """), line=4, message="the C++ source calls `Tensor::sum`"),
        Invalid(snippet("""
            src = r'''
            #include <torch/extension.h>
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              return at::matmul(a, b);
            }
            '''
        """), line=4, message="the C++ source calls `at::matmul`"),
        # a leading `::` and argument-dependent lookup are the same call (red team round 10)
        Invalid(snippet("""
            src = r'''
            #include <torch/extension.h>
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              auto c = ::at::matmul(a, b);
              return mm(c, b);
            }
            '''
        """), line=4, message="the C++ source calls `at::matmul`"),
        # a backend's generated kernel, below the dispatcher (round 7, 2026-12-06)
        Invalid(snippet("""
            src = r'''
            #include <ATen/CUDAFunctions.h>
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              auto stream = at::cuda::getCurrentCUDAStream();
              return at::cuda::mm(a, b);
            }
            '''
        """), line=5, message="the C++ source calls `at::cuda::mm`"),
        # an ATen op struct under another name, redispatched below the autograd keys
        Invalid(snippet("""
            src = r'''
            #include <ATen/Operators.h>
            using contraction = at::_ops::mm;
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              return contraction::redispatch(c10::DispatchKeySet(c10::DispatchKey::CUDA), a, b);
            }
            '''
        """), line=5, message="the C++ source calls `at::_ops::mm`"),
        Invalid(snippet("""
            src = r'''
            #include <torch/extension.h>
            torch::Tensor f(torch::Tensor x) {
              return torch::mean(x, 0);
            }
            '''
        """), line=4, message="the C++ source calls `torch::mean`"),
        Invalid(snippet("""
            src = r'''
            #include <torch/extension.h>
            torch::Tensor f(torch::Tensor x, torch::Tensor w) {
              return x.matmul(w);
            }
            '''
        """), line=4, message="the C++ source calls `Tensor::matmul`"),
        # ATen's compute inside a callable handed to its thread pool is still ATen's
        Invalid(snippet("""
            src = r'''
            #include <torch/extension.h>
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              torch::Tensor c;
              at::launch([&] { c = at::matmul(a, b); });
              return c;
            }
            '''
        """), line=5, message="the C++ source calls `at::matmul`"),
    ]
