"""Round 13 (2026-12-07), C++ side: libtorch and vendor compute reached from C++ with no
spelled op call. Each hack (fixtures/submissions/rt13_*) must get its torch-fallback finding
under `strict` and each honest twin none under `default` or `strict`; each invariant is also
tested through other spellings than the red team's, beside the closest honest one."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "fixtures/problems"
SUBMISSIONS = ROOT / "fixtures/submissions"
CPU_MATMUL = PROBLEMS / "cpu_matmul_small.py"

# hack -> (problem, the rules any one of which is its finding under strict)
HACKS = {
    "rt13_upper_fortran_sgemm": ("cpu_matmul_small.py", {"GK307"}),
    "rt13_autograd_node_apply": ("cpu_matmul_small.py", {"GK306"}),
    "rt13_member_pointer_traits_gemm": ("cpu_matmul_small.py", {"GK306"}),
    "rt13_cpp_frontend_linear": ("cpu_linear_relu.py", {"GK306"}),
    "rt13_pynumber_matmul": ("cpu_matmul_small.py", {"GK306"}),
    "rt13_pybind_object_ops_mean": ("cpu_mean.py", {"GK306"}),
    "rt13_capture_status_hidden_mm": ("kb_l1_2_Standard_matrix_multiplication_.py", {"GK311", "GK306"}),
    "rt13_jit_node_operation": ("cpu_matmul_small.py", {"GK306"}),
    "rt13_cpp_compound_assign_mean": ("cpu_mean.py", {"GK306"}),
}


def _rules(source, problem: Path, profile: str) -> set[str]:
    report = gatekeeper.check_static(source, problem, profile=profile)
    return {f.rule for f in report.findings if f.category.value == "torch-fallback"}


@pytest.mark.parametrize("name", sorted(HACKS))
def test_hack_is_found_under_strict(name):
    problem, expected = HACKS[name]
    found = _rules(SUBMISSIONS / f"{name}.py", PROBLEMS / problem, "strict")
    assert found & expected, f"{name}: {found}"


@pytest.mark.parametrize("name", sorted(HACKS))
@pytest.mark.parametrize("profile", ["default", "strict"])
def test_twin_is_clean(name, profile):
    problem, _ = HACKS[name]
    report = gatekeeper.check_static(SUBMISSIONS / f"{name}_twin.py", PROBLEMS / problem, profile=profile)
    assert not report.findings, [(f.rule, f.message[:120]) for f in report.findings]


def test_capture_status_choice_is_gk311_certain_under_default():
    report = gatekeeper.check_static(SUBMISSIONS / "rt13_capture_status_hidden_mm.py",
                                     PROBLEMS / "kb_l1_2_Standard_matrix_multiplication_.py", profile="default")
    assert any(f.rule == "GK311" and f.severity.value == "error" for f in report.findings)


# Other spellings of each invariant (C++ host code of a CPU extension) -----------------------------------

_OWN = """
static void own_rows(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; ++i) for (int64_t p = 0; p < k; ++p) for (int64_t j = 0; j < n; ++j)
        c[i * n + j] += a[i * k + p] * b[p * n + j];
}
"""


def _cpu(body: str) -> str:
    return ("import torch\nfrom torch.utils.cpp_extension import load_inline\n"
            f"_src = r'''\n#include <torch/extension.h>\nnamespace py = pybind11;\n{_OWN}\n{body}\n'''\n"
            '_ext = load_inline(name="m", cpp_sources=_src, functions=["f"])\n'
            "class ModelNew(torch.nn.Module):\n"
            "    def forward(self, a, b):\n"
            "        return _ext.f(a, b)\n")


def _strict(body: str) -> set[str]:
    return _rules(_cpu(body), CPU_MATMUL, "strict")


SPELLINGS = {
    # Fortran names: any case, trailing underscore or not
    "fortran_mixed_case": 'extern "C" void Sgemm_(const char*, const char*, const int*, const int*, const int*,'
                          ' const float*, const float*, const int*, const float*, const int*, const float*, float*,'
                          ' const int*);\n'
                          "torch::Tensor f(torch::Tensor a, torch::Tensor b) { char t = 'N'; int n = 4; float o = 1;"
                          " Sgemm_(&t, &t, &n, &n, &n, &o, b.data_ptr<float>(), &n, a.data_ptr<float>(), &n, &o,"
                          " a.data_ptr<float>(), &n); return a; }",
    # a generated autograd helper, through a namespace alias
    "generated_details": "namespace gen = torch::autograd::generated;\n"
                         "torch::Tensor f(torch::Tensor a, torch::Tensor b) {"
                         " return gen::details::mm_mat1_backward(a, b.t(), a.sym_sizes(), a.sym_strides(),"
                         " a.layout(), 1); }",
    # a member pointer through a decltype alias and std::mem_fn
    "mem_fn_decltype": "torch::Tensor f(torch::Tensor a, torch::Tensor b) { using Tn = decltype(a);"
                       " auto op = std::mem_fn(&Tn::matmul); return op(a, b); }",
    # the module a holder holds
    "module_holder_impl": "torch::Tensor f(torch::Tensor a, torch::Tensor b) {"
                          " torch::nn::ModuleHolder<torch::nn::LinearImpl> lin(4, 4); return lin->forward(a); }",
    # the in-place number protocol on a wrapped tensor
    "pynumber_inplace": "torch::Tensor f(torch::Tensor a, torch::Tensor b) {"
                        " PyObject* pa = THPVariable_Wrap(a); PyObject* pb = THPVariable_Wrap(b);"
                        " PyObject* r = PyNumber_InPlaceMultiply(pa, pb); return THPVariable_Unpack(r); }",
    # pybind11 operators on an object cast from a tensor
    "pybind_cast_ops": "torch::Tensor f(torch::Tensor a, torch::Tensor b) { py::object t = py::cast(a);"
                       " py::object s = t - t; return b; }",
    # the JIT registry with the symbol given as a string
    "jit_qual_string": "torch::Tensor f(torch::Tensor a, torch::Tensor b) { auto g = std::make_shared<torch::jit::Graph>();"
                       ' auto* n = g->create(c10::Symbol::fromQualString("aten::bmm"), {g->addInput(), g->addInput()});'
                       " torch::jit::Stack s{a, b}; n->getOperation()(s); return s.back().toTensor(); }",
    # binary and compound operators on tensors (declared, auto, elements of a tensor container)
    "tensor_binary": "torch::Tensor f(torch::Tensor a, torch::Tensor b) { at::Tensor y = a * b; return y; }",
    "tensor_vector_sub": "torch::Tensor f(torch::Tensor a, torch::Tensor b) { std::vector<at::Tensor> parts{a, b};"
                         " auto out = a.clone(); out -= parts[1]; return out; }",
}

HONEST = {
    # an own function of that name is the source's own code
    "own_upper_sgemm": "static void SGEMM(const float* a, const float* b, float* c, int64_t n) { own_rows(a, b, c, n, n, n); }\n"
                       "torch::Tensor f(torch::Tensor a, torch::Tensor b) { auto c = torch::zeros_like(a);"
                       " SGEMM(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), a.size(0)); return c; }",
    # a member pointer to the source's own method of a compute name
    "own_member_pointer": "struct Tile { std::vector<float> v; Tile matmul(const Tile& o) const { return o; } };\n"
                          "torch::Tensor f(torch::Tensor a, torch::Tensor b) { Tile x, y;"
                          " auto r = std::invoke(&Tile::matmul, x, y); return a; }",
    # the number protocol and pybind11 operators on Python numbers
    "pynumber_ints": "torch::Tensor f(torch::Tensor a, torch::Tensor b) { PyObject* n = PyLong_FromLong(a.size(0));"
                     " PyObject* h = PyNumber_FloorDivide(n, n); auto c = torch::zeros_like(a);"
                     " own_rows(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), a.size(0), a.size(0),"
                     " a.size(0)); return c; }",
    "pybind_float_ops": "torch::Tensor f(torch::Tensor a, torch::Tensor b) { py::object s = py::float_(2.0);"
                        " py::object t = s * s; auto c = torch::zeros_like(a); float k = t.cast<float>();"
                        " own_rows(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), a.size(0),"
                        " a.size(0), a.size(0)); return c; }",
    # operators on sizes and on own buffers next to tensors
    "own_buffers": "torch::Tensor f(torch::Tensor a, torch::Tensor b) { const int64_t n = a.size(0) * 2 / 2;"
                   " auto c = torch::zeros_like(a); float* pc = c.data_ptr<float>(); std::vector<float> acc(n * n);"
                   " own_rows(a.data_ptr<float>(), b.data_ptr<float>(), acc.data(), n, n, n);"
                   " for (int64_t i = 0; i < n * n; ++i) { acc[i] *= 0.5f; pc[i] += acc[i] + acc[i]; } return c; }",
}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_other_spelling_is_found(name):
    assert _strict(SPELLINGS[name]) & {"GK306", "GK307"}, name


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_spelling_is_clean(name):
    assert not _strict(HONEST[name]), name


def test_unspelled_class_spellings():
    # the class as an expression's type, and a generated node named after a using-directive
    assert _strict("torch::Tensor f(torch::Tensor a, torch::Tensor b) {"
                   " return std::invoke(&decltype(a)::mm, a, b); }") & {"GK306"}
    assert _strict("using namespace torch::autograd::generated;\n"
                   "torch::Tensor f(torch::Tensor a, torch::Tensor b) { auto n = std::make_shared<AddmmBackward0>();"
                   " return n->apply({a})[0]; }") & {"GK306"}
    # an own node class whose name looks generated
    assert not _strict("namespace generated {}\nstruct RowsBackward0 : torch::autograd::Node {"
                       " torch::autograd::variable_list apply(torch::autograd::variable_list&& g) override { return g; } };\n"
                       "torch::Tensor f(torch::Tensor a, torch::Tensor b) { auto n = std::make_shared<RowsBackward0>();"
                       " auto c = torch::zeros_like(a); own_rows(a.data_ptr<float>(), b.data_ptr<float>(),"
                       " c.data_ptr<float>(), 4, 4, 4); return c; }")


def test_python_objects_from_the_caller_may_be_tensors():
    # objects the caller hands in, never shown to be numbers: a tensor benchmark's tensors
    assert _strict("torch::Tensor f(torch::Tensor a, torch::Tensor b) { PyObject* args = nullptr;"
                   " PyObject* x = PyTuple_GetItem(args, 0); PyObject* r = PyNumber_MatrixMultiply(x, x);"
                   " return a; }") & {"GK306"}
    assert _strict("torch::Tensor f(torch::Tensor a, py::object x, py::object y) { py::object s = x * y;"
                   " return a; }") & {"GK306"}
    # the same objects read back as numbers
    assert not _strict("torch::Tensor f(torch::Tensor a, py::object x, py::object y) {"
                       " py::object q = py::reinterpret_steal<py::object>(PyNumber_Add(x.ptr(), y.ptr()));"
                       " long v = PyLong_AsLong(q.ptr()); py::object s = x * y; double d = s.cast<double>();"
                       " auto c = torch::zeros_like(a); own_rows(a.data_ptr<float>(), a.data_ptr<float>(),"
                       " c.data_ptr<float>(), v, v, v); return c; }")


def test_simd_vectors_and_unary_operators_are_not_tensor_arithmetic():
    assert not _strict("torch::Tensor f(torch::Tensor a, torch::Tensor b) { auto c = torch::zeros_like(a);"
                       " const float* pa = a.data_ptr<float>(); float* pc = c.data_ptr<float>();"
                       " auto v = at::vec::Vectorized<float>::loadu(pa); auto w = v * v;"
                       " w.store(pc); own_rows(pa, b.data_ptr<float>(), pc, 4, 4, 4); return c; }")
    assert not _strict("at::Tensor* pick(at::Tensor* out, bool f) { if (f) return out; return out + 0; }\n"
                       "torch::Tensor f(torch::Tensor a, torch::Tensor b) { at::Tensor* o = &a;"
                       " if (a.numel() > 0) return *o; auto c = torch::zeros_like(a);"
                       " own_rows(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), 4, 4, 4); return c; }")


def test_a_free_function_does_not_hide_a_tensor_member_pointer():
    # an own free function named `mm` is no member: `&T::mm` with T = torch::Tensor is still ATen's
    assert _strict("static void mm() {}\ntemplate <class T> T prod(const T& a, const T& b) {"
                   " return std::invoke(&T::mm, a, b); }\n"
                   "torch::Tensor f(torch::Tensor a, torch::Tensor b) { mm(); return prod(a, b); }") & {"GK306"}


def test_lapack_names_any_case():
    assert _strict('extern "C" void SGESV(const int*, const int*, float*, const int*, int*, float*, const int*, int*);\n'
                   "torch::Tensor f(torch::Tensor a, torch::Tensor b) { int n = 4, one = 1, info = 0; int piv[4];"
                   " SGESV(&n, &one, a.data_ptr<float>(), &n, piv, b.data_ptr<float>(), &n, &info); return b; }") \
        & {"GK307"}


def test_standard_folds_and_functors_on_tensors():
    assert _strict("torch::Tensor f(torch::Tensor a, torch::Tensor b) { std::vector<torch::Tensor> parts{a, b};"
                   " return std::accumulate(parts.begin(), parts.end(), torch::zeros_like(a)); }") & {"GK306"}
    assert _strict("torch::Tensor f(torch::Tensor a, torch::Tensor b) {"
                   " return std::multiplies<at::Tensor>()(a, b); }") & {"GK306"}
    assert _strict("torch::Tensor f(torch::Tensor a, torch::Tensor b) { return std::plus<>{}(a, b); }") & {"GK306"}
    assert _strict("torch::Tensor f(torch::Tensor a, torch::Tensor b) { auto acc = torch::zeros_like(a);"
                   " acc.operator+=(b); return acc; }") & {"GK306"}
    # the same folds over the floats behind a tensor's pointer are the submission's own loop
    assert not _strict("torch::Tensor f(torch::Tensor a, torch::Tensor b) { auto c = torch::zeros_like(a);"
                       " const float* p = a.data_ptr<float>(); float s = std::accumulate(a.data_ptr<float>(),"
                       " a.data_ptr<float>() + a.numel(), 0.0f); float t = std::reduce(p, p + 4, 0.0f, std::plus<float>());"
                       " own_rows(p, b.data_ptr<float>(), c.data_ptr<float>(), 4, 4, 4); return c; }")


def test_registry_spellings():
    assert _strict("torch::Tensor f(torch::Tensor a, torch::Tensor b) { auto g = std::make_shared<torch::jit::Graph>();"
                   " auto* n = g->create(c10::aten::mm, {g->insertConstant(a), g->insertConstant(b)});"
                   " auto out = torch::jit::runNodeIfInputsAreConstant(n); return (*out)[0].toTensor(); }") & {"GK306"}
    # an own plan class with a getOperation method is the source's own
    assert not _strict("struct Plan { int getOperation() const { return 1; } };\n"
                       "torch::Tensor f(torch::Tensor a, torch::Tensor b) { Plan p; auto c = torch::zeros_like(a);"
                       " if (p.getOperation() == 1) own_rows(a.data_ptr<float>(), b.data_ptr<float>(),"
                       " c.data_ptr<float>(), 4, 4, 4); return c; }")


def test_raw_cpython_function_without_tensor_names():
    assert _strict("static PyObject* prod(PyObject* self, PyObject* args) { PyObject* a = PyTuple_GetItem(args, 0);"
                   " PyObject* b = PyTuple_GetItem(args, 1); return PyNumber_MatrixMultiply(a, b); }\n"
                   "torch::Tensor f(torch::Tensor a, torch::Tensor b) { return a; }") & {"GK306"}
