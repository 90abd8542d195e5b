from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.names import int_value

from gatekeeper.report import Category, Severity
from gatekeeper.rules.gk2xx_cpp_constants import CppConstant, CppFacts
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule

_P = "R = 4\nB = 16\nD = 48\ndef get_inputs():\n    return [torch.randn(R, B, D)]\n"


def _is_tile_like(value: int) -> bool:
    return value <= 1024 and value & (value - 1) == 0


class ProblemSizeInKernelSource(Rule):
    """A number in the C++/CUDA source equals one of the problem's dimensions, a product
    of them, an offset built from them (768, 1536, 2304 for a (4, 16, 48) input), or such a
    product divided by a vector width (192 threads of float4 for 768 floats). Named
    constants are evaluated: `#define N 768`, `#define N (16 * 48)`, `constexpr int kCols =
    48;` and `const int` locals are reported with their name. The bodies of Triton kernels
    (`@triton.jit` functions) are kernel source too: their integer literals are checked the
    same way.

    Why it games the benchmark: the kernel is only right for the nominal shapes, which the
    benchmark happens to use; any other input gives wrong values or reads out of bounds.

    Not flagged, when the kernel reads its sizes at run time (`size()`, `numel()`, ...):
    powers of two up to 1024 (tile and block widths), and any constant whose every use is a
    tile width's use: the block size of a launch whose grid is computed, the divisor of a
    ceil-div `(n + T - 1) / T`, `blockIdx.x * T`, a loop stride `i += T`, a `__shared__`
    array extent or `__launch_bounds__(T)`. Needs the problem file, whose constants and
    `get_inputs()` give the dimensions.
    """

    code = "GK203"
    name = "ProblemSizeInKernelSource"
    category = Category.HARDCODED_SHAPE
    severity = Severity.ERROR
    needs_problem = True
    summary = "C++/CUDA source bakes in the problem's sizes or offsets"
    message = "The kernel source uses the literal {value}, which is {why}: the kernel only works for the benchmark's nominal shape."
    named_message = (
        "The kernel source defines {what}, and {value} is {why}: every use of {name} bakes in the "
        "benchmark's nominal shape, so any other input size gives wrong values or out-of-bounds accesses."
    )
    hint = (
        "Pass the sizes in from the tensors (`x.size(0)`, `x.numel()`) as kernel arguments, compute "
        "offsets from them (`r * B * D`), and launch a grid computed from the size, e.g. "
        "`(n + 255) / 256` blocks of 256 threads."
    )
    named_hint = (
        "Replace {name} with a kernel argument read from the tensors at run time (`x.size(1)`, "
        "`x.numel()`); keep compile-time constants only for tile and block widths, and compute the "
        "grid from the size: `(n + {name_or_tile} - 1) / {name_or_tile}`."
    )
    EXAMPLE_PROBLEM = _P
    VALID = [
        "import triton\nimport triton.language as tl\n@triton.jit\ndef k(x, y, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    m = offs < n\n    tl.store(y + offs, tl.load(x + offs, mask=m) * 2, mask=m)\n"
        "def launch(x, y):\n    k[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)\n    return 768\n",
        "src = '''\n__global__ void k(const float* x, float* y, int n, int rows) {\n"
        "  int i = blockIdx.x * 256 + threadIdx.x;\n  if (i < n) { float s = 0; for (int r = 0; r < rows; ++r) s += x[r * n + i]; y[i] = s / rows; }\n}\n"
        "torch::Tensor f(torch::Tensor x) { auto n = x.size(1) * x.size(2); auto y = torch::empty({x.size(1), x.size(2)}, x.options());\n"
        "  k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, x.size(0)); return y; }\n'''\n",
        # the number in a comment or string is not code
        "src = '''\n#include <torch/extension.h>\n// tuned for 768 elements\n__global__ void k(float* y, int n) { const char* s = \"1536\"; }\n'''\n",
        # a tile width of 48 (= D) used only as a tile width, with a computed grid
        "src = '''\n#define TILE 48\n__global__ void k(const float* x, float* y, int n) {\n"
        "  __shared__ float s[TILE];\n  int i = blockIdx.x * TILE + threadIdx.x;\n  if (i < n) y[i] = x[i];\n}\n"
        "torch::Tensor f(torch::Tensor x) { int n = x.numel(); auto y = torch::empty_like(x);\n"
        "  k<<<(n + TILE - 1) / TILE, TILE>>>(x.data_ptr<float>(), y.data_ptr<float>(), n); return y; }\n'''\n",
    ]
    INVALID = [
        "import triton\nimport triton.language as tl\n@triton.jit\ndef k(x, y, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    tl.store(y + offs, tl.load(x + offs) + tl.load(x + 768 + offs))\n",
        "src = '''\n#include <torch/extension.h>\n__global__ void k(const float* x, float* y) {\n"
        "  int off = threadIdx.x << 2;\n  y[off] = x[off] + x[768 + off] + x[1536 + off] + x[2304 + off];\n}\n'''\n",
        "src = '''\n#define N 768\n__global__ void k(const float* x, float* y) { int i = threadIdx.x; if (i < N) y[i] = x[i]; }\n'''\n",
        "src = '''\nconstexpr int kCols = 48;\n__global__ void k(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x * kCols]; }\n'''\n",
        # the macro is computed, and the source reads sizes elsewhere
        "src = '''\n#define ROW (16 * 48)\n__global__ void k(const float* x, float* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i] + x[ROW + i];\n}\n"
        "torch::Tensor f(torch::Tensor x) { int n = x.numel(); auto y = torch::empty_like(x);\n"
        "  k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n); return y; }\n'''\n",
    ]

    triton_message = (
        "The Triton kernel `{kernel}` uses the literal {value}, which is {why}: the kernel only works for "
        "the benchmark's nominal shape."
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kernels: list[cst.FunctionDef] = []
        self.triton_reported: set[tuple[str, int]] = set()

    # Triton kernels: the Python functions decorated with triton.jit / autotune / heuristics
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.ctx.problem is None or not node.decorators:
            return
        for deco in node.decorators:
            expr = deco.decorator.func if isinstance(deco.decorator, cst.Call) else deco.decorator
            if (self.ctx.qualname(expr) or "").startswith("triton."):
                self.kernels.append(node)
                return

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.kernels and self.kernels[-1] is node:
            self.kernels.pop()

    def visit_Integer(self, node: cst.Integer) -> None:
        if not self.kernels or self.ctx.problem is None:
            return
        value = int_value(node)
        kernel = self.kernels[-1].name.value
        if value is None or value < 17 or _is_tile_like(value) or (kernel, value) in self.triton_reported:
            return  # small numbers and power-of-two tile widths are what Triton code is made of
        why = self.ctx.problem.explain(value)
        if why is None:
            return
        self.triton_reported.add((kernel, value))
        self.report(node, self.triton_message.format(kernel=kernel, value=value, why=why),
                    evidence={"value": value, "meaning": why, "kernel": kernel})

    def check_cpp(self, source: CppSource) -> None:
        problem = self.ctx.problem
        if problem is None:
            return
        facts = CppFacts.of(source)
        tokens = facts.tokens
        reads_sizes = facts.reads_sizes
        reported: set[int] = set()
        in_bodies: set[int] = set()
        named_bodies: set[int] = set()
        for const in facts.constants.values():
            in_bodies.update(const.body)
            if const.kind not in ("macro", "const") or const.value is None or const.value in reported:
                continue
            why = problem.explain(const.value)
            if why is None or (reads_sizes and (_is_tile_like(const.value) or self._tile_only(facts, const))):
                continue
            reported.add(const.value)
            named_bodies.update(const.body)
            self._report_named(source, facts, const, why)
        for index in [k for k, t in enumerate(tokens) if t.kind == "number"]:
            tok = tokens[index]
            value = tok.int_value
            if value is None or value in reported or index in named_bodies:
                continue
            why = problem.explain(value)
            if why is None:
                continue
            if reads_sizes and (_is_tile_like(value) or self._tile_literal(facts, index, in_bodies)):
                continue
            reported.add(value)
            self.report_cpp(source, tok.offset, self.message.format(value=value, why=why),
                            evidence={"value": value, "meaning": why})

    @staticmethod
    def _tile_only(facts: CppFacts, const: CppConstant) -> bool:
        uses = facts.uses.get(const.name, [])
        return bool(uses) and all(facts.tile_use(i) for i in uses)

    def _tile_literal(self, facts: CppFacts, index: int, in_bodies: set[int]) -> bool:
        if index in in_bodies:
            # a literal inside a tile-only constant's definition is that tile width
            owner = self._owner(facts, index)
            return owner is not None and self._tile_only(facts, owner)
        return facts.tile_use(index)

    @staticmethod
    def _owner(facts: CppFacts, index: int) -> Optional[CppConstant]:
        for const in facts.constants.values():
            if index in const.body:
                return const
        return None

    def _report_named(self, source: CppSource, facts: CppFacts, const: CppConstant, why: str) -> None:
        first, last = facts.tokens[const.body[0]], facts.tokens[const.body[-1]]
        body = source.text[first.offset : last.offset + len(last.text)]
        what = f"`#define {const.name} {body}`" if const.kind == "macro" else f"`{const.name} = {body}`"
        offset = first.offset
        message = self.named_message.format(what=what, value=const.value, why=why, name=const.name)
        hint = self.named_hint.format(name=const.name, name_or_tile="BLOCK")
        self.report_cpp(source, offset, message, hint,
                        evidence={"value": const.value, "meaning": why, "constant": const.name})
