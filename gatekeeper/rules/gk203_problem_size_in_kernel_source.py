from __future__ import annotations

from gatekeeper.report import Category, Severity
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule

_P = "R = 4\nB = 16\nD = 48\ndef get_inputs():\n    return [torch.randn(R, B, D)]\n"
# Signs that the kernel reads its sizes at run time, which makes power-of-two literals
# (tile widths, block sizes) what they look like.
_RUNTIME_SIZE_READS = ("size", "sizes", "numel", "stride", "strides", "dim", "shape")


def _is_tile_like(value: int) -> bool:
    return value <= 1024 and value & (value - 1) == 0


class ProblemSizeInKernelSource(Rule):
    """A number in the C++/CUDA source equals one of the problem's dimensions, a product
    of them, an offset built from them (768, 1536, 2304 for a (4, 16, 48) input), or such a
    product divided by a vector width (192 threads of float4 for 768 floats).

    Why it games the benchmark: the kernel is only right for the nominal shapes, which the
    benchmark happens to use; any other input gives wrong values or reads out of bounds.

    Powers of two up to 1024 are tile and block widths in honest kernels; they are only
    reported when the kernel never reads a size from its inputs (`size()`, `numel()`, ...).
    Needs the problem file, whose constants and `get_inputs()` give the dimensions.
    """

    code = "GK203"
    name = "ProblemSizeInKernelSource"
    category = Category.HARDCODED_SHAPE
    severity = Severity.ERROR
    needs_problem = True
    summary = "C++/CUDA source bakes in the problem's sizes or offsets"
    message = "The kernel source uses the literal {value}, which is {why}: the kernel only works for the benchmark's nominal shape."
    hint = (
        "Pass the sizes in from the tensors (`x.size(0)`, `x.numel()`) as kernel arguments, compute "
        "offsets from them (`r * B * D`), and launch a grid computed from the size, e.g. "
        "`(n + 255) / 256` blocks of 256 threads."
    )
    EXAMPLE_PROBLEM = _P
    VALID = [
        "src = '''\n__global__ void k(const float* x, float* y, int n, int rows) {\n"
        "  int i = blockIdx.x * 256 + threadIdx.x;\n  if (i < n) { float s = 0; for (int r = 0; r < rows; ++r) s += x[r * n + i]; y[i] = s / rows; }\n}\n"
        "torch::Tensor f(torch::Tensor x) { auto n = x.size(1) * x.size(2); auto y = torch::empty({x.size(1), x.size(2)}, x.options());\n"
        "  k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, x.size(0)); return y; }\n'''\n",
        # the number in a comment or string is not code
        "src = '''\n#include <torch/extension.h>\n// tuned for 768 elements\n__global__ void k(float* y, int n) { const char* s = \"1536\"; }\n'''\n",
    ]
    INVALID = [
        "src = '''\n#include <torch/extension.h>\n__global__ void k(const float* x, float* y) {\n"
        "  int off = threadIdx.x << 2;\n  y[off] = x[off] + x[768 + off] + x[1536 + off] + x[2304 + off];\n}\n'''\n",
        "src = '''\n#define N 768\n__global__ void k(const float* x, float* y) { int i = threadIdx.x; if (i < N) y[i] = x[i]; }\n'''\n",
        "src = '''\nconstexpr int kCols = 48;\n__global__ void k(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x * kCols]; }\n'''\n",
    ]

    def check_cpp(self, source: CppSource) -> None:
        problem = self.ctx.problem
        if problem is None:
            return
        reads_sizes = any(t.kind == "ident" and t.text in _RUNTIME_SIZE_READS for t in source.tokens)
        reported: set[int] = set()
        for tok in source.tokens:
            value = tok.int_value
            if value is None or value in reported:
                continue
            why = problem.explain(value)
            if why is None or (_is_tile_like(value) and reads_sizes):
                continue
            reported.add(value)
            self.report_cpp(source, tok.offset, self.message.format(value=value, why=why),
                            evidence={"value": value, "meaning": why})
