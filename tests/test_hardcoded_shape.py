"""Hardcoded-shape family (GK201-GK205) beyond the automatic example tests: the seed's exact
lines, behaviour without a problem file, and the near misses that must stay quiet."""

from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.report import Severity
from gatekeeper.static.testing import static_findings

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SEED = FIXTURES / "submissions" / "seed_cached_hardcoded.py"
SEED_PROBLEM = FIXTURES / "problems" / "seed_mean.py"
SEED_PROBLEM_SRC = SEED_PROBLEM.read_text("utf-8")
FORWARD = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"


def _shape(findings):
    """The GK2xx findings (not notices such as "rules that need the problem did not run")."""
    return [f for f in findings if f.category.value == "hardcoded-shape" and f.rule.startswith("GK2")]


def test_seed_findings_are_on_the_right_lines():
    report = gatekeeper.check_static(SEED, SEED_PROBLEM)
    found = {(f.rule, f.location.line) for f in _shape(report.findings)}
    values = {f.evidence.get("value"): f.location.line for f in report.findings if f.rule == "GK203"}
    assert values[768] == 14 and values[1536] == 15 and values[2304] == 16
    # 192 in __launch_bounds__ and <<<1, 192>>> is launch geometry: GK204's finding, not GK203's
    assert 192 not in values
    assert ("GK201", 43) in found  # torch.empty((16, 48))
    assert ("GK204", 26) in found  # <<<1, 192>>>: 192 threads of float4 = 768 = B*D
    alloc = next(f for f in report.findings if f.rule == "GK201")
    assert "(16, 48)" in alloc.message and "B = 16" in alloc.message and "D = 48" in alloc.message
    # the source reads no size at all and the seed's sizes are all free (jittered): the
    # offsets, the launch and the output can only be the nominal sizes, so each is certain
    # and rejects with the static stage alone
    conf = {(f.rule, f.location.line): f.confidence.value for f in _shape(report.findings)}
    assert conf[("GK201", 43)] == "certain"
    assert conf[("GK203", 14)] == "certain" and conf[("GK204", 26)] == "certain"
    assert all(f.severity == Severity.ERROR for f in _shape(report.findings))
    assert "hardcoded-shape" in {f.category.value for f in report.errors()}
    assert "as an index offset" in next(f for f in report.findings if f.rule == "GK203").message
    assert all(f.confirmed_by == "GK602" for f in _shape(report.findings))


def test_seed_honest_generic_has_no_hardcoded_shape_finding_at_all():
    report = gatekeeper.check_static(FIXTURES / "submissions" / "seed_honest_generic.py", SEED_PROBLEM)
    assert _shape(report.findings) == []


def test_without_problem_file_allocation_is_a_warning_naming_the_problem_flag():
    report = gatekeeper.check_static(SEED, None)
    shape = _shape(report.findings)
    assert [(f.rule, f.location.line) for f in shape] == [("GK201", 43)]
    assert shape[0].severity == Severity.WARNING
    assert "--problem" in shape[0].message
    # without the problem no literal can be called a size: nothing hardcoded-shape rejects
    assert "hardcoded-shape" not in {f.category.value for f in report.errors()}


@pytest.mark.parametrize("name,rule", [
    ("shape_hacked_alias_alloc", "GK201"),
    ("shape_hacked_dispatch", "GK205"),
])
def test_hacked_fixtures_warn_without_problem(name, rule):
    report = gatekeeper.check_static(FIXTURES / "submissions" / f"{name}.py", None)
    shape = _shape(report.findings)
    assert [f.rule for f in shape] == [rule]
    assert shape[0].severity == Severity.WARNING


def test_tile_constant_near_miss_is_meaningful():
    """The honest fixture's THREADS = 192 (= R*D) is quiet only because every use is a
    tile width's use: used as a bound, the same macro is reported by name."""
    honest = (FIXTURES / "submissions" / "shape_honest_tile_seed.py").read_text("utf-8")
    assert not _shape(static_findings(honest, SEED_PROBLEM_SRC))
    hacked = honest.replace("if (i >= n) return;", "if (i >= THREADS) return;")
    assert hacked != honest
    findings = [f for f in static_findings(hacked, SEED_PROBLEM_SRC) if f.rule == "GK203"]
    assert len(findings) == 1 and "`#define THREADS 192`" in findings[0].message
    assert findings[0].location.line == hacked.splitlines().index("#define THREADS 192") + 1


def test_constant_block_with_constant_grid_is_launch_geometry():
    """THREADS = 192 (= R*D) is a block width everywhere it is used; with a constant grid of
    one block the launch covers exactly R*D: GK204 reports the launch, and the macro itself
    is not a size (it is never a bound, offset or stride)."""
    src = ("src = '''\n#define THREADS 192\n__global__ void k(const float* x, float* y, int n) {\n"
           "  int i = blockIdx.x * THREADS + threadIdx.x; if (i < n) y[i] = x[i]; }\n"
           "torch::Tensor f(torch::Tensor x) { auto y = torch::empty_like(x);\n"
           "  k<<<1, THREADS>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel()); return y; }\n'''\n")
    found = {f.rule: f for f in static_findings(src, SEED_PROBLEM_SRC)}
    assert "GK204" in found and "GK203" not in found
    # the host function reads x.numel(): a suspect, a warning under default, an error in strict
    assert found["GK204"].confidence.value == "suspect" and found["GK204"].severity == Severity.WARNING
    strict = {f.rule: f for f in static_findings(src, SEED_PROBLEM_SRC, profile="strict")}
    assert strict["GK204"].severity == Severity.ERROR


def test_python_grid_that_is_a_block_count_of_a_problem_size():
    problem = "n = 3000\ndef get_inputs():\n    return [torch.randn(n)]\n"
    hacked = FORWARD + "        y = torch.empty_like(x)\n        grid = (12,)\n        k[grid](x, y, BLOCK_SIZE=256)\n        return y\n"
    found = [f for f in static_findings(hacked, problem) if f.rule == "GK204"]
    assert len(found) == 1 and "ceil(n / 256) = 12" in found[0].message
    honest = hacked.replace("grid = (12,)", "grid = (triton.cdiv(x.numel(), 256),)")
    assert not [f for f in static_findings(honest, problem) if f.rule == "GK204"]


def test_assert_on_the_nominal_shape_is_held_for_the_jitter_trials_and_says_assert():
    src = FORWARD + "        assert x.shape == (4, 16, 48)\n        return k(x)\n"
    found = [f for f in static_findings(src, SEED_PROBLEM_SRC) if f.rule == "GK205"]
    assert len(found) == 1 and "asserts" in found[0].message
    assert found[0].confidence.value == "likely" and found[0].confirmed_by == "GK602"
    assert found[0].severity == Severity.WARNING
    strict = [f for f in static_findings(src, SEED_PROBLEM_SRC, profile="strict") if f.rule == "GK205"]
    assert strict[0].severity == Severity.ERROR


@pytest.mark.parametrize("test", [
    "x.dim() == 3", "x.ndim != 2", "len(x.shape) == 3", "x.shape[-1] % 4 == 0", "x.size(0) == 1",
    "x.numel() == 0", "x.size(-1) <= 1024", "x.shape == y.shape", "x.stride(-1) == 1",
])
def test_shape_tests_that_are_not_dispatch(test):
    src = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x, y):\n"
           f"        if {test}:\n            return k(x, y)\n        return k2(x, y)\n")
    assert not _shape(static_findings(src, SEED_PROBLEM_SRC))
    assert not _shape(static_findings(src))


def test_shape_dispatch_on_other_literals_is_a_warning_with_the_problem():
    src = FORWARD + "        if x.size(2) == 100:\n            return fast(x)\n        return k(x)\n"
    found = [f for f in static_findings(src, SEED_PROBLEM_SRC) if f.rule == "GK205"]
    assert len(found) == 1 and found[0].severity == Severity.WARNING


def test_allocation_in_init_is_a_warning_and_a_shadowed_constant_is_not_a_literal():
    init = ("import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.w = torch.nn.Parameter(torch.randn(48, 16))\n    def forward(self, x):\n        return k(x, self.w)\n")
    found = [f for f in static_findings(init, SEED_PROBLEM_SRC) if f.rule == "GK201"]
    assert len(found) == 1 and found[0].severity == Severity.WARNING
    shadowed = ("import torch\nSHAPE = (16, 48)\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                "        SHAPE = x.shape[1:]\n        y = torch.empty(SHAPE, device=x.device)\n        k(x, y)\n        return y\n")
    assert not _shape(static_findings(shadowed, SEED_PROBLEM_SRC))


def test_problem_without_sizes_produces_no_shape_findings_and_no_crash():
    problem = "import torch\ndef get_inputs():\n    return [torch.randn(n_from_elsewhere)]\n"
    src = SEED.read_text("utf-8")
    shape = _shape(static_findings(src, problem))
    assert [f.rule for f in shape] == []


def test_main_guard_self_test_is_not_checked_and_an_uncalled_helper_is_a_warning():
    main = (FORWARD + "        return k(x)\n\nif __name__ == '__main__':\n    x = torch.randn(4, 16, 48)\n"
            "    y = x.view(16, 4, 48)\n    if x.shape == (4, 16, 48):\n        print(ModelNew()(x))\n")
    assert not _shape(static_findings(main, SEED_PROBLEM_SRC))
    pasted = FORWARD + "        return k(x)\n\ndef get_inputs():\n    return [torch.randn(4, 16, 48)]\n"
    assert not _shape(static_findings(pasted, SEED_PROBLEM_SRC))
    dead = FORWARD + "        return k(x)\n\ndef _selftest():\n    return torch.randn(4, 16, 48)\n"
    found = [f for f in static_findings(dead, SEED_PROBLEM_SRC) if f.rule == "GK201"]
    assert len(found) == 1 and found[0].severity == Severity.WARNING
    called = dead.replace("return k(x)", "return k(x, _selftest())")
    found = [f for f in static_findings(called, SEED_PROBLEM_SRC) if f.rule == "GK201"]
    assert len(found) == 1 and found[0].severity == Severity.ERROR


def test_literal_size_passed_to_the_extension():
    seed = SEED.read_text("utf-8")
    hacked = seed.replace("_ext.mean_rank4_out(x, y)", "_ext.mean_rank4_out(x, y, 768)")
    found = [f for f in static_findings(hacked, SEED_PROBLEM_SRC) if f.rule == "GK206"]
    assert len(found) == 1 and found[0].location.line == 45 and "B*D = 768" in found[0].message
    fixture = gatekeeper.check_static(FIXTURES / "submissions" / "shape_hacked_literal_args.py", SEED_PROBLEM)
    found = [f for f in fixture.findings if f.category.value == "hardcoded-shape"]
    assert [f.rule for f in found] == ["GK206"] and "`_ELEMS` = 768" in found[0].message
    assert not [f for f in static_findings(seed, SEED_PROBLEM_SRC) if f.rule == "GK206"]


SOFTMAX_PROBLEM_SRC = (FIXTURES / "problems" / "shape_softmax.py").read_text("utf-8")


def test_number_coincidences_are_quiet_until_used_as_a_size():
    """The honest fixture holds 16384 (= dim) as a grid cap: quiet. Used as the loop bound in
    place of the row length it is reported, a suspect (the kernel also reads cols), which
    the jittered-shape check confirms: a warning under default, an error in strict."""
    honest = (FIXTURES / "submissions" / "shape_honest_number_coincidences.py").read_text("utf-8")
    assert not _shape(static_findings(honest, SOFTMAX_PROBLEM_SRC, profile="strict"))
    hacked = honest.replace("for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmaxf",
                            "for (int c = threadIdx.x; c < 16384; c += BLOCK) m = fmaxf")
    assert hacked != honest
    found = [f for f in static_findings(hacked, SOFTMAX_PROBLEM_SRC) if f.rule == "GK203"]
    assert len(found) == 1 and found[0].evidence["value"] == 16384 and found[0].evidence["role"] == "bound"
    assert found[0].confidence.value == "suspect" and found[0].severity == Severity.WARNING
    strict = [f for f in static_findings(hacked, SOFTMAX_PROBLEM_SRC, profile="strict") if f.rule == "GK203"]
    assert strict and strict[0].severity == Severity.ERROR


def test_loop_bound_in_a_kernel_told_no_size_is_certain():
    """16384 (the free row width) bounds the loops and strides the rows of a kernel that is
    told no size: at any other width it reads out of bounds. Certain, so the static stage
    alone rejects it."""
    report = gatekeeper.check_static(FIXTURES / "submissions" / "shape_hacked_loop_bound.py",
                                     FIXTURES / "problems" / "shape_softmax.py")
    found = [f for f in report.findings if f.rule == "GK203"]
    assert found and all(f.confidence.value == "certain" and f.severity == Severity.ERROR for f in found)
    assert report.verdict.value == "reject"


def test_the_same_bound_in_a_kernel_told_its_width_is_held():
    """Hand the kernel its width and the same literal may be a tile: a suspect for GK602."""
    hacked = (FIXTURES / "submissions" / "shape_hacked_loop_bound.py").read_text("utf-8")
    told = hacked.replace("float* __restrict__ y)", "float* __restrict__ y, int n)")
    assert told != hacked
    found = [f for f in static_findings(told, (FIXTURES / "problems" / "shape_softmax.py").read_text("utf-8"))
             if f.rule == "GK203"]
    assert found and all(f.confidence.value == "suspect" and f.severity == Severity.WARNING for f in found)
    assert found[0].confirmed_by == "GK602"


@pytest.mark.parametrize("snippet", [
    "k = x.size(0)\n        k = (k, k, k)\n        if k == (16, 16, 16):\n            return x\n",
    "a = (x.size(0), x.size(1))\n        b = (a, a, a, a, a, a, a, a)\n        a = (b, b, b, b, b, b, b, b)\n"
    "        if a == (4, 16, 48):\n            return x\n",
])
def test_self_referential_bindings_are_unknown_not_a_crash(snippet):
    """`k = (k, k, k)` once sent size_read_kind into endless recursion, reported as a
    "nests too deeply" reject: the submission's fault for the analyser's bug."""
    src = FORWARD + "        " + snippet + "        return k2(x)\n"
    report_findings = static_findings(src, SEED_PROBLEM_SRC)
    assert not [f for f in report_findings if f.rule == "GK003"]
    assert not [f for f in report_findings if "nests too deeply" in f.message]


def test_weak_derived_relations_do_not_make_tile_widths_sizes():
    """With offsets and vector counts, 32 "is" 128/4 and 4096 "is" 2*(32*64): only an
    index offset may be explained that way; a cap or a tile is not."""
    problem = "batch_size = 128\nchannels = 32\ndim = 64\ndef get_inputs():\n    return [torch.randn(batch_size, channels, dim)]\n"
    src = ("src = '''\n#define TILE_DIM 32\n__global__ void k(const float* x, float* y, int n) {\n"
           "  __shared__ float t[TILE_DIM][TILE_DIM + 1];\n"
           "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i];\n}\n"
           "torch::Tensor f(torch::Tensor x) { int n = x.numel(); auto y = torch::empty_like(x);\n"
           "  const int blocks = std::min((n + 255) / 256, 4096);\n"
           "  k<<<blocks, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n); return y; }\n'''\n")
    assert not _shape(static_findings(src, problem, profile="strict"))


@pytest.mark.parametrize("body", [
    "#define N " + "(" * 600 + "768" + ")" * 600 + "\n",
    "#define M0 " + "(" * 40 + "768" + ")" * 40 + "\n"
    + "".join(f"#define M{k} " + "(" * 40 + f"M{k - 1}" + ")" * 40 + "\n" for k in range(1, 14))
    + "#define N M13\n",
])
def test_deeply_nested_cpp_constants_are_not_constant_not_a_crash(body):
    """C++ text escapes the Python nesting screen: a macro nested 600 deep (or 13 macros of
    40) once exhausted the evaluator's stack and was reported as "nests too deeply"."""
    src = "src = '''\n" + body + "__global__ void k(float* y) { y[threadIdx.x + N] = 0; }\n'''\n"
    findings = static_findings(src, SEED_PROBLEM_SRC)
    assert not [f for f in findings if f.rule == "GK003" or "nests too deeply" in f.message]


HONEST_SEED = (FIXTURES / "submissions" / "seed_honest_generic.py").read_text("utf-8")


@pytest.mark.parametrize("old,new,rule,confidence", [
    # a literal bound or stride where the kernel also gets n: suspect, confirmed at run time
    ("if (i >= n) return;", "if (i >= 768) return;", "GK203", "suspect"),
    ("x[(long)r * n + i]", "x[(long)r * 768 + i]", "GK203", "suspect"),
    # the returned output allocated at (16, 48): the nominal shape whatever is read, certain
    ("torch::empty({x.size(1), x.size(2)}, x.options())", "torch::empty({16, 48}, x.options())", "GK203", "certain"),
    # the size handed to the launch as a constant: likely
    ("int n = x.size(1) * x.size(2);", "int n = 768;", "GK203", "likely"),
    # a constant grid whose blocks cover B*D exactly, next to size reads: suspect
    ("int blocks = (n + threads - 1) / threads;", "int blocks = 3;", "GK204", "suspect"),
])
def test_one_baked_in_size_in_the_honest_seed_is_found(old, new, rule, confidence):
    assert old in HONEST_SEED
    found = [f for f in static_findings(HONEST_SEED.replace(old, new), SEED_PROBLEM_SRC) if f.rule == rule]
    assert found and found[0].confidence.value == confidence
    # not certain: held as an unconfirmed warning under default for the jitter trials (GK602)
    assert found[0].severity == (Severity.ERROR if confidence == "certain" else Severity.WARNING)


MATMUL_PROBLEM_SRC = (FIXTURES / "problems" / "shape_matmul.py").read_text("utf-8")
HONEST_TRITON = (FIXTURES / "submissions" / "shape_honest_triton_matmul.py").read_text("utf-8")


@pytest.mark.parametrize("old,new,rule", [
    ("rm[:, None] * sam", "rm[:, None] * 4096", "GK203"),  # the row stride of A baked in (K)
    ("kk[:, None] * sbk", "kk[:, None] * 2048", "GK203"),  # the row stride of B baked in (N)
    ("range(0, tl.cdiv(K, BLOCK_K))", "range(0, 4096 // BLOCK_K)", "GK203"),  # the K loop's bound
    ("A.stride(0), A.stride(1)", "4096, A.stride(1)", "GK206"),  # a stride handed in as a literal
])
def test_one_baked_in_size_in_the_honest_triton_matmul_is_a_suspect(old, new, rule):
    """The kernel still reads M, N, K: each literal is a suspect (a warning under default),
    for the jittered-shape check to confirm."""
    assert old in HONEST_TRITON
    found = [f for f in static_findings(HONEST_TRITON.replace(old, new), MATMUL_PROBLEM_SRC) if f.rule == rule]
    assert found and found[0].confidence.value == "suspect" and found[0].severity == Severity.WARNING
    assert not _shape(static_findings(HONEST_TRITON, MATMUL_PROBLEM_SRC, profile="strict"))


def test_a_rule_that_recurses_without_end_is_an_error_verdict_not_a_reject(tmp_path):
    """Whatever rule recurses without end (a user rule here), the submission is not blamed:
    the verdict is `error` (exit 3), never a GK003 "nests too deeply" reject."""
    from gatekeeper.config import Config

    (tmp_path / "gk999_recurse.py").write_text(
        "import libcst as cst\nfrom gatekeeper.report import Category\nfrom gatekeeper.static.rule import Rule\n"
        "def _down(n):\n    return _down(n + 1)\n"
        "class Recurse(Rule):\n    code = 'GK999'\n    name = 'Recurse'\n    category = Category.HARDCODED_SHAPE\n"
        "    summary = message = hint = 'recurses'\n"
        "    def visit_Module(self, node: cst.Module) -> None:\n        _down(0)\n"
    )
    report = gatekeeper.check_static(FIXTURES / "submissions" / "seed_honest_generic.py", SEED_PROBLEM,
                                     config=Config(rule_dirs=[str(tmp_path)]))
    assert report.verdict.value == "error" and "gatekeeper bug" in report.error
    assert not [f for f in report.findings if f.rule == "GK003"]


THREADS_EXT = (
    "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
    "_SRC = r'''\n__global__ void k(const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }\n"
    "torch::Tensor run(torch::Tensor x, int64_t P) {\n  auto y = torch::empty_like(x); int n = x.numel();\n"
    "  BODY\n  return y;\n}\n'''\n"
    "_ext = load_inline(name='t', cpp_sources='', cuda_sources=_SRC, functions=['run'])\n"
    "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return _ext.run(x, 768)\n"
)


def test_a_threads_per_block_argument_is_a_launch_setting_not_a_size():
    """768 = B*D handed to a parameter the C++ uses only as the block width (and the
    ceil-div of the grid) is a threads-per-block choice; the same literal handed to a
    parameter the kernel bounds its loop with is the nominal size."""
    threads = THREADS_EXT.replace("BODY", "k<<<(n + P - 1) / P, P>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);")
    assert not [f for f in static_findings(threads, SEED_PROBLEM_SRC, profile="strict") if f.rule == "GK206"]
    size = THREADS_EXT.replace("BODY", "k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), P);")
    found = [f for f in static_findings(size, SEED_PROBLEM_SRC) if f.rule == "GK206"]
    assert len(found) == 1 and "768 is B*D" in found[0].message and found[0].confirmed_by == "GK602"


def test_warp_width_in_scalar_code_is_not_a_count_of_vectors():
    """`s[r * 32 + lane]` in code without vector types: 32 is the warp width. Only code that
    loads float2/float4 makes "BATCH/2 = 32, the size in 2-wide vectors" a reading."""
    problem = "BATCH = 64\nWIDTH = 6000\ndef get_inputs():\n    return [torch.randn(BATCH, WIDTH)]\n"
    src = ("src = r'''\n__device__ float chunk(const float* s) { const int lane = threadIdx.x & 31; float m = 0;\n"
           "  for (int r = 0; r < 4; ++r) m = fmaxf(m, s[r * 32 + lane]); return m; }\n"
           "__global__ void k(const float* x, float* y, int w) { y[blockIdx.x] = chunk(x + (size_t)blockIdx.x * w); }\n'''\n")
    assert not _shape(static_findings(src, problem, profile="strict"))


def test_fixed_launch_is_certain_only_when_nothing_tells_the_kernel_a_size():
    """<<<1, 192>>> of float4 covers B*D = 768: certain when the source reads no size at all
    (the seed); an integer parameter of the launching function may carry n for a
    grid-stride loop, so there it is not certain."""
    told_nothing = SEED.read_text("utf-8")
    found = [f for f in static_findings(told_nothing, SEED_PROBLEM_SRC) if f.rule == "GK204"]
    assert found and found[0].confidence.value == "certain"
    told_n = told_nothing.replace("torch::Tensor mean_rank4_out(torch::Tensor x, torch::Tensor y) {",
                                  "torch::Tensor mean_rank4_out(torch::Tensor x, torch::Tensor y, int64_t n) {")
    assert told_n != told_nothing
    found = [f for f in static_findings(told_n, SEED_PROBLEM_SRC) if f.rule == "GK204"]
    assert found and found[0].confidence.value != "certain"


@pytest.mark.parametrize("table,lookup,flagged", [
    ("TUNED = {(4, 16, 48): 8}\n", "TUNED.get(tuple(x.shape), 4)", False),  # settings, generic default
    ("TUNED = {(4, 16, 48): 8}\n", "TUNED.get(tuple(x.shape))", True),  # no default: None elsewhere
    ("TUNED = {(4, 16, 48): 8}\n", "TUNED.get(tuple(x.shape), None)", True),
    ("TUNED = {(4, 16, 48): fast_kernel}\n", "TUNED.get(tuple(x.shape), slow_kernel)", True),  # kernels: dispatch
    ("TUNED = {(4, 16, 48): {'BLOCK': 768, 'num_warps': 8}}\n", "TUNED.get(tuple(x.shape), {'BLOCK': 1024})", False),
])
def test_tuning_tables_with_a_generic_default_are_not_dispatch(table, lookup, flagged):
    src = ("import torch\n" + table + "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
           f"        cfg = {lookup}\n        return k(x, cfg)\n")
    found = [f for f in static_findings(src, SEED_PROBLEM_SRC, profile="strict") if f.rule == "GK205"]
    assert bool(found) == flagged, found


def test_a_literal_equal_to_a_fixed_dimension_is_not_a_product_of_free_sizes(tmp_path):
    # kbhard_head_rmsnorm fixes HEAD_DIM = 128 in every declared shape; at the nominal shape
    # BATCH*SEQ is 128 too. The literal 128 is the head width, not that product (issue 20 item 3).
    sub = tmp_path / "solution.py"
    sub.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                   "        out = torch.empty(x.shape[0], x.shape[1], x.shape[2], 128, device=x.device)\n"
                   "        _ext.rms(x, out)\n        return out\n", "utf-8")
    report = gatekeeper.check(sub, FIXTURES / "problems" / "kbhard_head_rmsnorm", stages="static")
    assert not _shape(report.findings), [f.message for f in _shape(report.findings)]
    # 64 (SEQ at the nominal shape) is a free size: still a finding
    sub.write_text(sub.read_text("utf-8").replace("x.shape[1], x.shape[2], 128", "64, x.shape[2], 128"), "utf-8")
    report = gatekeeper.check(sub, FIXTURES / "problems" / "kbhard_head_rmsnorm", stages="static")
    assert any(f.rule == "GK201" for f in report.findings), [f.message for f in report.findings]


def test_a_parameter_shape_check_is_named_as_the_parameter_s():
    # red team round 5 (W3): `self.weight.shape[2:] == (3, 3)` is the weight's, not "the input's shape"
    src = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
           "        assert self.weight.shape[2:] == (3, 3)\n        return _ext.conv(x, self.weight)\n")
    found = [f for f in static_findings(src) if f.rule == "GK205"]
    assert found and all("the input" not in f.message and "`self.weight`" in f.message for f in found), found
