"""Round 12 (2026-12-07), C++ side: spellings that reached torch or a vendor library from C++
(or read the checker's observers) with no finding. Each invariant is tested through other
spellings than the red team's, each beside the closest honest one (real libcst, real analysis)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

import gatekeeper
from gatekeeper.report import Finding

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "fixtures/problems"
MATMUL = PROBLEMS / "kb_l1_17_Matmul_with_transposed_B.py"
ROW_SUM = PROBLEMS / "row_sum.py"
RAGGED = PROBLEMS / "ragged_rowsum.py"
SUBMISSIONS = ROOT / "fixtures/submissions"

# An own kernel that does a real reduction, so the torch / vendor finding is about the spelling.
_KERNEL = r"""
__global__ void own_k(const float* x, float* y, int n) {
    __shared__ float s[256];
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) { float a = 0.f; for (int i = 0; i < n; ++i) a += s[i]; y[0] = a; }
}
"""


def _submission(cpp: str, entry: str = "ModelNew") -> str:
    return (
        "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
        f"_src = r'''\n#include <torch/extension.h>\n{_KERNEL}\n{cpp}\n'''\n"
        '_ext = load_inline(name="m", cpp_sources="", cuda_sources=_src, functions=["f"])\n'
        f"class {entry}(torch.nn.Module):\n"
        "    def forward(self, a, b):\n"
        "        return _ext.f(a, b)\n"
    )


def _findings(cpp: str, problem: Path = MATMUL, profile: str = "default") -> list[Finding]:
    return gatekeeper.check_static(_submission(cpp), problem, profile=profile).findings


def _rules(cpp: str, problem: Path = MATMUL) -> set[str]:
    return {f.rule for f in _findings(cpp, problem)}


def _one(cpp: str, rule: str, problem: Path = MATMUL) -> Optional[Finding]:
    return next((f for f in _findings(cpp, problem) if f.rule == rule), None)


# 1. `__host__ __device__` bodies and the host arm of a __CUDA_ARCH__ conditional are host code ---------

_HD = "template <typename T>\n{mark} __forceinline__ T part(const T& v) {{\n{body}\n}}\n" \
      "torch::Tensor f(torch::Tensor a, torch::Tensor b) {{ return part(a); }}\n"


@pytest.mark.parametrize("mark,body", [
    ("__host__ __device__", "#if !defined(__CUDA_ARCH__)\n  return v.sum(-1);\n#else\n  return v;\n#endif"),
    ("__device__ __host__", "#ifndef __CUDA_ARCH__\n  return v.sum(-1);\n#else\n  return v;\n#endif"),
    ("__host__ __device__", "#ifdef __CUDA_ARCH__\n  return v;\n#else\n  return v.sum(-1);\n#endif"),
    ("__host__ __device__", "#if __CUDA_ARCH__ >= 800\n  return v;\n#else\n  return v.sum(-1);\n#endif"),
    ("__host__ __device__", "  return v.sum(-1);"),
    ("C10_HOST_DEVICE", "  return v.sum(-1);"),
    ("HD", "  return v.sum(-1);"),  # #define HD __host__ __device__
    ("__device__ constexpr", "  return v.sum(-1);"),  # host may call it under --expt-relaxed-constexpr
    # a pure __device__ function's host arm is host code too
    ("__device__", "#if !defined(__CUDA_ARCH__)\n  return v.sum(-1);\n#else\n  return v;\n#endif"),
])
def test_host_side_of_device_marked_code_is_host_code(mark, body):
    cpp = "#define HD __host__ __device__\n" + _HD.format(mark=mark, body=body)
    finding = _one(cpp, "GK306", ROW_SUM)
    assert finding is not None and "Tensor::sum" in finding.message


@pytest.mark.parametrize("mark,body", [
    ("__device__", "  return v.sum(-1);"),  # device code: not a tensor method
    ("__host__ __device__", "#ifdef __CUDA_ARCH__\n  return v.sum(-1);\n#else\n  return v;\n#endif"),
    ("__host__ __device__", "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n  return v.any(1);\n#else\n  return v;\n#endif"),
    ("__host__ __device__", "#if !defined(__CUDA_ARCH__)\n  return (v + 3) / 4;\n#else\n  return v;\n#endif"),
])
def test_device_only_code_and_host_arithmetic_stay_clean(mark, body):
    assert "GK306" not in _rules(_HD.format(mark=mark, body=body), ROW_SUM)


# 2. a symbol binding makes the declared name its target ------------------------------------------------

_GEMM_CALL = "torch::Tensor f(torch::Tensor a, torch::Tensor b) { panel(0, 0, 0, 64, 64, 64); return a; }\n"


@pytest.mark.parametrize("decl", [
    'static int panel(int, int, int, int, int, int) __attribute__((weakref("cublasSgemm_v2")));',
    'int panel(int, int, int, int, int, int) __attribute__((weak, alias("cublasGemmEx")));',
    '[[gnu::alias("cublasSgemm_v2")]] int panel(int, int, int, int, int, int);',
    'extern "C" int panel(int, int, int, int, int, int) __asm__("cublas" "Sgemm_v2");',
    '#pragma redefine_extname panel cublasSgemm_v2\nextern "C" int panel(int, int, int, int, int, int);',
    '#pragma weak panel = cublasLtMatmul\nextern "C" int panel(int, int, int, int, int, int);',
])
def test_a_name_bound_to_a_vendor_symbol_is_the_vendor_routine(decl):
    cpp = decl + "\n" + _GEMM_CALL
    finding = _one(cpp, "GK307")
    assert finding is not None and "panel (bound to " in finding.message


def test_a_name_bound_to_a_mangled_aten_function_is_aten():
    cpp = ('static at::Tensor blend(const at::Tensor&, const at::Tensor&) '
           '__attribute__((weakref("_ZN2at6matmulERKNS_6TensorES2_")));\n'
           "torch::Tensor f(torch::Tensor a, torch::Tensor b) { return blend(a, b); }\n")
    finding = _one(cpp, "GK306")
    assert finding is not None and "blend (bound to at::matmul)" in finding.message


def test_a_binding_to_an_own_function_is_own():
    cpp = ('extern "C" void own_panel(const float* a, float* c, int n) { own_k<<<1, 256>>>(a, c, n); }\n'
           'static void panel(const float*, float*, int) __attribute__((weakref("own_panel")));\n'
           "torch::Tensor f(torch::Tensor a, torch::Tensor b) {\n"
           "  auto c = torch::empty_like(a); panel(a.data_ptr<float>(), c.data_ptr<float>(), 64); return c; }\n")
    assert not _rules(cpp) & {"GK306", "GK307"}


# 3 and 6b. an op's name handed to a CPython / pybind11 attribute API, literal or named constant ---------

@pytest.mark.parametrize("call", [
    'PyObject_CallMethod(o.ptr(), "matmul", "O", py::cast(b).ptr())',
    'PyObject_CallObject(PyObject_GetAttrString(o.ptr(), "matmul"), nullptr)',
    'PyObject_CallObject(PyObject_GetAttr(o.ptr(), PyUnicode_FromString("matmul")), nullptr)',
    'PyObject_CallMethodObjArgs(o.ptr(), kName, py::cast(b).ptr(), nullptr)',
    'PyObject_CallObject(PyObject_GetAttrString(o.ptr(), kEntry), nullptr)',
    '_PyObject_CallMethodId(o.ptr(), &PyId_matmul, "O", py::cast(b).ptr())',
    'o.attr(ENTRY)(b).ptr()',
    'o.attr(kEntry)(b).ptr()',
])
def test_torch_op_named_to_a_python_attribute_api_is_torch(call):
    cpp = ('namespace py = pybind11;\n#define ENTRY "matmul"\n_Py_IDENTIFIER(matmul);\n'
           'constexpr const char* kEntry = "matmul";\nstatic PyObject* kName = PyUnicode_InternFromString("matmul");\n'
           "torch::Tensor f(torch::Tensor a, torch::Tensor b) {\n  py::object o = py::cast(a);\n"
           f"  PyObject* r = {call};\n  return py::reinterpret_steal<py::object>(r).cast<torch::Tensor>();\n}}\n")
    finding = _one(cpp, "GK306")
    assert finding is not None and "torch through Python" in finding.message and "matmul" in finding.message


@pytest.mark.parametrize("call", [
    'PyObject_GetAttrString(o.ptr(), "__name__")',
    'PyObject_GetAttrString(o.ptr(), kShape)',
    'PyObject_CallMethod(m, "sqrt", "d", 2.0)',  # m = PyImport_ImportModule("math")
])
def test_non_op_attributes_and_other_modules_are_not_torch(call):
    cpp = ('namespace py = pybind11;\nconstexpr const char* kShape = "shape";\n'
           "torch::Tensor f(torch::Tensor a, torch::Tensor b) {\n  py::object o = py::cast(a);\n"
           '  PyObject* m = PyImport_ImportModule("math");\n'
           f"  PyObject* r = {call};\n  Py_XDECREF(r);\n  return a;\n}}\n")
    assert "GK306" not in _rules(cpp)


# 4. a dispatcher lookup is own only when its text names the source's registered namespace ----------------

_LIB = 'TORCH_LIBRARY(mine, m) { m.def("gemm(Tensor a, Tensor b) -> Tensor"); }\n'


@pytest.mark.parametrize("name", [
    'std::string(c10::namespaces::aten.toUnqualString()) + "::" + "mm"',
    "full",  # auto full = std::string("aten") + "::" + "mm";
    "qualified(kStage)",
])
def test_run_time_dispatcher_names_are_foreign_even_beside_an_own_library(name):
    cpp = (_LIB + 'static const char* kStage = "mm";\n'
           'static std::string qualified(const char* s) { return std::string("aten::") + s; }\n'
           "torch::Tensor f(torch::Tensor a, torch::Tensor b) {\n"
           '  auto full = std::string("aten") + "::" + "mm";\n'
           f'  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(({name}).c_str(), "")'
           ".typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();\n  return op.call(a, b);\n}\n")
    finding = _one(cpp, "GK306")
    assert finding is not None and "findSchemaOrThrow" in finding.message and finding.evidence["op"] == "mm"


def test_a_lookup_of_the_own_registered_op_is_own():
    cpp = (_LIB + "torch::Tensor f(torch::Tensor a, torch::Tensor b) {\n"
           '  auto op = c10::Dispatcher::singleton().findSchemaOrThrow("mine::gemm", "")'
           ".typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();\n  return op.call(a, b);\n}\n")
    assert "GK306" not in _rules(cpp)


# 5. device-wide CUB / Thrust algorithms are vendor work; block and warp collectives are own code --------

_RUN = "torch::Tensor f(torch::Tensor a, torch::Tensor b) {{\n  float* x = a.data_ptr<float>(); float* y = b.data_ptr<float>();\n{body}\n  return b;\n}}\n"


@pytest.mark.parametrize("body,what", [
    ("  cub::DeviceReduce::Sum(tmp, bytes, x, y, 64);", "cub::DeviceReduce::Sum"),
    ("  ::cub::DeviceSegmentedReduce::Sum(tmp, bytes, x, y, 4, x, x);", "cub::DeviceSegmentedReduce::Sum"),
    ("  namespace cb = cub;\n  cb::DeviceScan::InclusiveSum(tmp, bytes, x, y, 64);", "cub::DeviceScan::InclusiveSum"),
    ("  using namespace cub;\n  DeviceRadixSort::SortKeys(tmp, bytes, x, y, 64);", "cub::DeviceRadixSort::SortKeys"),
    ("  thrust::reduce(thrust::device, x, x + 64);", "thrust::reduce"),
    ("  thrust::transform_reduce(thrust::cuda::par, x, x + 64, sq(), 0.f, plus());", "thrust::transform_reduce"),
    ("  reduce(thrust::cuda::par.on(s), x, x + 64);", "thrust::reduce"),
    ("  using namespace thrust;\n  sort(device, x, x + 64);", "thrust::sort"),
])
def test_device_wide_cub_and_thrust_are_vendor_work(body, what):
    finding = _one(_RUN.format(body=body), "GK307", RAGGED)
    assert finding is not None and what in finding.message


@pytest.mark.parametrize("cpp", [
    "__global__ void k(const float* x, float* y) {\n  using R = cub::BlockReduce<float, 128>;\n"
    "  __shared__ typename R::TempStorage t;\n  float s = R(t).Sum(x[threadIdx.x]);\n  if (!threadIdx.x) y[0] = s;\n}\n",
    "__global__ void k(const float* x, float* y) {\n  using W = cub::WarpReduce<float>;\n"
    "  __shared__ typename W::TempStorage t;\n  y[0] = W(t).Sum(x[threadIdx.x]);\n}\n",
    "__device__ float row(const float* x, int n) { return thrust::reduce(thrust::seq, x, x + n); }\n",
    _RUN.format(body="  cub::DeviceReduce::Sum(nullptr, bytes, x, y, 64);  // the scratch size only"),
])
def test_block_warp_and_sequential_collectives_are_own_code(cpp):
    assert "GK307" not in _rules(cpp, RAGGED)


# 6a. observer / profiler state read from C++ is a checker fingerprint --------------------------------------

@pytest.mark.parametrize("read", [
    "at::RecordFunction span(at::RecordScope::USER_SCOPE); const bool on = span.isActive();",
    "const bool on = at::hasCallbacks();",
    "const bool on = at::hasGlobalCallbacks();",
    "const bool on = c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) != nullptr;",
    "const bool on = torch::autograd::profiler::profilerEnabled();",
    "const bool on = torch::profiler::impl::isProfilerEnabledInMainThread();",
    "CUpti_SubscriberHandle h; const bool on = cuptiSubscribe(&h, nullptr, nullptr) != 0;",
])
def test_observer_and_profiler_state_read_from_cpp_is_a_fingerprint(read):
    cpp = f"torch::Tensor f(torch::Tensor a, torch::Tensor b) {{\n  {read}\n  return on ? a : b;\n}}\n"
    finding = _one(cpp, "GK425")
    assert finding is not None and finding.severity.value == "error"


@pytest.mark.parametrize("cpp", [
    "torch::Tensor f(torch::Tensor a, torch::Tensor b) {\n"
    '  at::RecordFunction span(at::RecordScope::USER_SCOPE); span.before("gemm");\n  return a;\n}\n',
    'torch::Tensor f(torch::Tensor a, torch::Tensor b) {\n  RECORD_FUNCTION("gemm", std::vector<c10::IValue>());\n'
    "  return a;\n}\n",
    "struct Pool { bool isActive() const { return true; } };\n"
    "torch::Tensor f(torch::Tensor a, torch::Tensor b) {\n  Pool p; return p.isActive() ? a : b;\n}\n",
])
def test_naming_a_range_and_own_is_active_are_clean(cpp):
    assert "GK425" not in _rules(cpp)


# the red team's files and their twins ---------------------------------------------------------------------

@pytest.mark.parametrize("name,problem,rule", [
    ("rt12_hd_template_host_reduce", "row_sum.py", "GK306"),
    ("rt12_weakref_symbol_gemm", "kb_l1_17_Matmul_with_transposed_B.py", "GK307"),
    ("rt12_cpython_callmethod_softmax", "kbhard_softmax", "GK306"),
    ("rt12_dispatcher_lookup_own_library", "kb_l1_2_Standard_matrix_multiplication_.py", "GK306"),
    ("rt12_cub_segmented_reduce", "ragged_rowsum.py", "GK307"),
    ("rt12_record_function_gate_pyattr", "cat_b_matmul_fp32.py", "GK425"),
])
def test_hack_is_found_and_twin_is_clean(name, problem, rule):
    hack = gatekeeper.check_static(SUBMISSIONS / f"{name}.py", PROBLEMS / problem, profile="strict")
    assert any(f.rule == rule and f.severity.value == "error" for f in hack.findings)
    assert hack.verdict.value == "reject"
    for profile in ("default", "strict"):
        twin = gatekeeper.check_static(SUBMISSIONS / f"{name}_twin.py", PROBLEMS / problem, profile=profile)
        assert not twin.findings, [(f.rule, f.message) for f in twin.findings]


# more spellings of the same invariants ----------------------------------------------------------------------

@pytest.mark.parametrize("decl", [
    '#define BIND(x) __attribute__((weakref(#x)))\nstatic int panel(int, int, int, int, int, int) BIND(cublasSgemm_v2);',
    '#define TARGET "cublasSgemm_v2"\nstatic int panel(int, int, int, int, int, int) __attribute__ ((weakref(TARGET)));',
])
def test_a_binding_spelled_through_a_macro_is_the_vendor_routine(decl):
    finding = _one(decl + "\n" + _GEMM_CALL, "GK307")
    assert finding is not None and "panel (bound to cublasSgemm_v2)" in finding.message


@pytest.mark.parametrize("call", [
    'o.attr("__getattribute__")("matmul")(b).ptr()',
    'PyDict_GetItemString(PyModule_GetDict(PyImport_ImportModule("torch")), "matmul")',
])
def test_indirect_attribute_reads_of_torch_ops_are_torch(call):
    cpp = ('namespace py = pybind11;\n'
           "torch::Tensor f(torch::Tensor a, torch::Tensor b) {\n  py::object o = py::cast(a);\n"
           f"  PyObject* r = {call};\n  return py::reinterpret_steal<py::object>(r).cast<torch::Tensor>();\n}}\n")
    assert "GK306" in _rules(cpp)


def test_a_cub_algorithm_class_under_another_name_is_vendor_work():
    body = "  using R = cub::DeviceReduce;\n  R::Sum(tmp, bytes, x, y, 64);"
    finding = _one(_RUN.format(body=body), "GK307", RAGGED)
    assert finding is not None and "cub::DeviceReduce::Sum" in finding.message


def test_an_op_structs_name_handed_to_the_dispatcher_is_that_op():
    cpp = (_LIB + "torch::Tensor f(torch::Tensor a, torch::Tensor b) {\n"
           "  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(at::_ops::mm::name, at::_ops::mm::overload_name)"
           ".typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();\n  return op.call(a, b);\n}\n")
    assert "GK306" in _rules(cpp)
