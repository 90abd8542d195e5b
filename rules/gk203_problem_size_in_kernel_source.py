from __future__ import annotations

import libcst as cst

from gatekeeper.static.names import int_value

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.cpp_constants import CppConstant, CppFacts
from gatekeeper.analyses.cpp_literal_shapes import judged_shapes
from gatekeeper.analyses.cpp_number_roles import CppRoles
from gatekeeper.analyses.kernel_size_uses import (
    definition_text, is_triton_kernel, size_constants, size_numbers, triton_size_use,
)
from gatekeeper.analyses.size_literals import ROLES, address_names, local_size_arguments, triton_reads_sizes
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

_P = "R = 4\nB = 16\nD = 48\ndef get_inputs():\n    return [torch.randn(R, B, D)]\n"


class ProblemSizeInKernelSource(Rule):
    """A number in the C++/CUDA source that is one of the problem's sizes (a dimension or a
    product of dimensions) and is used as a size: the bound a loop or guard compares
    against (`for (k = 0; k < 8192; ++k)`, `if (i >= N) return;`), an offset or row stride
    in an index (`x[768 + i]`, `x + 1536 + off`, `in[row * 8192 + k]`), or a size given to
    an allocation or view (`torch::empty({16, 48})`). Offsets built from the sizes (768,
    1536, 2304 for R = 4 slices of 16*48) and sizes counted in float4 vectors count only
    where the literal is such an offset or bound. Named constants (`#define N 768`,
    `constexpr int kCols = 48;`) are judged by their uses and reported with their name.
    The bodies of Triton kernels (`@triton.jit`) are checked the same way: a comparison
    bound, a `range()` bound, or an operand of index arithmetic.

    Why it games the benchmark: the kernel is only right for the nominal shapes, which the
    benchmark happens to use; any other input gives wrong values or reads out of bounds.

    A C++ allocation whose shape is all literals (`torch::empty({2, 64, 4, 128}, ...)`) is
    judged as one shape, like GK201 judges Python allocations: certain when the function
    returns it and every entry is a problem size (a fixed dimension such as a head width of
    128 counts as part of the problem), likely otherwise.

    A local constant handed to a kernel launch as an argument (`int n = 768;` then
    `k<<<g, b>>>(..., n)`) is reported too: the kernel is told the nominal size.

    Confidence: certain where the literal is a free size (never a dimension every declared
    shape fixes), not a power-of-two tile width nor a count of vectors, used as a bound or
    as an offset or stride into a pointer argument, in a function that learns no size at
    run time (`x + 768 + off` in a kernel told nothing): at any other size it computes a
    wrong result or goes out of bounds. Otherwise likely where the function holding the literal learns no size at run time
    (no integer parameter, no `size()`/`numel()`), for an allocation at literal sizes, and
    for a constant size argument; suspect where the function also reads sizes (the literal
    may be a tile width), which the behaviour stage's jittered-shape check (GK602) confirms
    or clears. A suspect is a warning outside the `strict` profile.

    Known false-positive patterns, and why it does not fire on them:
    - a tile or block width equal to a size (`#define TILE 48`, `BK = 512`,
      `DEF_TILE(64, 256)`): every use is a tile width's use (the block of a launch whose
      grid is computed, the divisor of a ceil-div, `blockIdx.x * T`, a loop stride
      `i += T`, a `__shared__` extent, `__launch_bounds__`), and a power of two up to 1024
      in a function that reads its sizes is a tile width (unless it is the stride or offset
      of an index into a pointer argument: global memory is laid out by the input's shape);
    - a cap or clamp (`std::min(blocks, 4096)`), a bit pattern (`0x4B000000u`), an
      addend that is not an index (`t0 + 48` with no pointer in the expression), a
      `__shared__ float s[256]` or register array extent, or an offset into such an array
      (`s[t0 + 48]`, tile geometry): none is a size role;
    - a number that is 16*48 / 4 or 25*(K*N) by arithmetic: derived relations are only
      asked of literals already used as an index offset or a bound.
    - a constant dividing a dimension every declared shape fixes (`kHalf = kHeadDim / 2`
      with HEAD_DIM = 128 in every shape): a part of a fixed dimension is fixed by the
      problem too, whatever free size the quotient equals.
    Needs the problem file, whose constants and `get_inputs()` give the dimensions.
    """

    code = "GK203"
    name = "ProblemSizeInKernelSource"
    category = Category.HARDCODED_SHAPE
    severity = Severity.ERROR
    confidence = Confidence.LIKELY
    confirmed_by = "GK602"
    needs_problem = True
    summary = "C++/CUDA or Triton kernel uses the problem's sizes as bounds, offsets or strides"
    message = (
        "The kernel source uses the literal {value} as {role}, and {value} is {why}: the kernel only works "
        "for the benchmark's nominal shape; any other size reads or writes out of bounds or leaves part "
        "of the data uncomputed."
    )
    alloc_message = (
        "The kernel source allocates the literal shape {shape}, which spells out the problem's sizes ({why}): "
        "the output has the benchmark's nominal shape whatever the input is, so any other input size "
        "gets a wrong-shaped result or out-of-bounds writes."
    )
    named_message = (
        "The kernel source defines {what} and uses {name} as {role}, and {value} is {why}: every such use "
        "bakes in the benchmark's nominal shape, so any other input size gives wrong values or "
        "out-of-bounds accesses."
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
        # 48 KiB, the default shared-memory limit: a memory size, not D = 48
        Valid(snippet("""
            src = '''
            torch::Tensor f(torch::Tensor x, int64_t k) {
              int64_t shmem = k * k * sizeof(float);
              TORCH_CHECK(shmem <= 48 * 1024, "tile too large for shared memory");
              return run(x, shmem); }
            '''
        """)),
        Valid(snippet("""
            import triton
            import triton.language as tl
            @triton.jit
            def k(x, y, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                m = offs < n
                tl.store(y + offs, tl.load(x + offs, mask=m) * 2, mask=m)
            def launch(x, y):
                k[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
                return 768
        """)),
        Valid(snippet("""
            src = '''
            __global__ void k(const float* x, float* y, int n, int rows) {
              int i = blockIdx.x * 256 + threadIdx.x;
              if (i < n) { float s = 0; for (int r = 0; r < rows; ++r) s += x[r * n + i]; y[i] = s / rows; }
            }
            torch::Tensor f(torch::Tensor x) { auto n = x.size(1) * x.size(2); auto y = torch::empty({x.size(1), x.size(2)}, x.options());
              k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, x.size(0)); return y; }
            '''
        """)),
        # Triton: 768 (= B*D) and 1536 scale and shift a value: not address layout
        Valid(snippet("""
            import triton
            import triton.language as tl
            @triton.jit
            def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
                pid = tl.program_id(0)
                offs = pid * BLOCK + tl.arange(0, BLOCK)
                m = offs < n
                v = tl.load(x_ptr + offs, mask=m)
                tl.store(y_ptr + offs, v * 768 + 1536, mask=m)
        """)),
        # the number in a comment or string is not code
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            // tuned for 768 elements
            __global__ void k(float* y, int n) { const char* s = "1536"; }
            '''
        """)),
        # a tile width of 48 (= D) used only as a tile width, with a computed grid
        Valid(snippet("""
            src = '''
            #define TILE 48
            __global__ void k(const float* x, float* y, int n) {
              __shared__ float s[TILE];
              int i = blockIdx.x * TILE + threadIdx.x;
              if (i < n) y[i] = x[i];
            }
            torch::Tensor f(torch::Tensor x) { int n = x.numel(); auto y = torch::empty_like(x);
              k<<<(n + TILE - 1) / TILE, TILE>>>(x.data_ptr<float>(), y.data_ptr<float>(), n); return y; }
            '''
        """)),
        # a grid capped at 768 blocks (= B*D) with a grid-stride loop, a float addend, a bit
        # pattern and a tile macro's argument: none of them is a size role
        Valid(snippet("""
            src = '''
            #define DEF_TILE(a, b) constexpr int T##a = a * b;
            DEF_TILE(64, 192)
            __global__ void k(const float* x, float* y, int n) {
              for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
                float t0 = x[i]; unsigned m = 0x300u & __float_as_uint(t0); y[i] = t0 + 48 + m; }
            }
            torch::Tensor f(torch::Tensor x) { int n = x.numel(); auto y = torch::empty_like(x);
              int blocks = std::min((n + 255) / 256, 768);
              k<<<blocks, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n); return y; }
            '''
        """)),
        # a reduction tile BK = 768 stepped over n, and a shared buffer of 768 with a loop over n
        Valid(snippet("""
            src = '''
            constexpr int BK = 768;
            __global__ void k(const float* x, float* y, int n) {
              __shared__ float s[768];
              float acc = 0;
              for (int k0 = 0; k0 < n; k0 += BK) {
                for (int j = threadIdx.x; j < BK && k0 + j < n; j += blockDim.x) s[j] = x[k0 + j];
                __syncthreads();
                if (threadIdx.x == 0) for (int j = 0; j < min(BK, n - k0); ++j) acc += s[j];
                __syncthreads();
              }
              if (threadIdx.x == 0) y[0] = acc;
            }
            '''
        """)),
        # a halo of 48 (= D) inside a shared tile: shared-memory geometry, not the input's layout
        Valid(snippet("""
            src = '''
            __global__ void k(const float* x, float* y, int n) {
              __shared__ float s[96];
              int t0 = threadIdx.x, i = blockIdx.x * 48 + t0;
              if (i < n) s[t0 + 48] = x[i];
              __syncthreads();
              if (i < n) y[i] = s[t0 + 48] + s[t0];
            }
            '''
        """)),
        # a tiled matmul with TILE = 48 (= D): 2-D shared tiles, t * TILE + threadIdx.x, a loop
        # over the tile, and a pointer argument named x next to threadIdx.x
        Valid(snippet("""
            src = '''
            #define TILE 48
            __global__ void mm(const float* x, const float* w, float* y, int M, int N, int K) {
              __shared__ float xs[TILE][TILE];
              __shared__ float ws[TILE][TILE];
              int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
              float acc = 0;
              for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
                int xc = t * TILE + threadIdx.x, wr = t * TILE + threadIdx.y;
                xs[threadIdx.y][threadIdx.x] = (row < M && xc < K) ? x[row * K + xc] : 0.f;
                ws[threadIdx.y][threadIdx.x] = (wr < K && col < N) ? w[wr * N + col] : 0.f;
                __syncthreads();
                for (int i = 0; i < TILE; ++i) acc += xs[threadIdx.y][i] * ws[i][threadIdx.x];
                __syncthreads();
              }
              if (row < M && col < N) y[row * N + col] = acc;
            }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import triton
            import triton.language as tl
            @triton.jit
            def k(x, y, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(y + offs, tl.load(x + offs) + tl.load(x + 768 + offs))
        """), line=6, message="The Triton kernel `k` uses the literal 768 as an index offset"),
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            __global__ void k(const float* x, float* y) {
              int off = threadIdx.x << 2;
              y[off] = x[off] + x[768 + off] + x[1536 + off] + x[2304 + off];
            }
            '''
        """), line=5, message="The kernel source uses the literal 768 as an index offset"),
        Invalid(snippet("""
            src = '''
            #define N 768
            __global__ void k(const float* x, float* y) { int i = threadIdx.x; if (i < N) y[i] = x[i]; }
            '''
        """), line=2, message="The kernel source defines `#define N 768` and uses N as a loop or guard bound"),
        Invalid(snippet("""
            src = '''
            constexpr int kCols = 48;
            __global__ void k(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x * kCols]; }
            '''
        """), line=2, message="The kernel source defines `kCols = 48` and uses kCols as a row stride in an index"),
        # the size computed from constants declared together (`a = .., b = ..;`), round 7, 2026-12-06
        Invalid(snippet("""
            src = '''
            constexpr int kPanels = 6, kTail = 0;
            constexpr int kCols = (kPanels << 3) + kTail;
            __global__ void k(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x * kCols]; }
            '''
        """), line=3, message="defines `kCols = (kPanels << 3) + kTail` and uses kCols as a row stride in an index, and 48 is"),
        # the macro is computed, and the source reads sizes elsewhere
        Invalid(snippet("""
            src = '''
            #define ROW (16 * 48)
            __global__ void k(const float* x, float* y, int n) {
              int i = blockIdx.x * blockDim.x + threadIdx.x;
              if (i < n) y[i] = x[i] + x[ROW + i];
            }
            torch::Tensor f(torch::Tensor x) { int n = x.numel(); auto y = torch::empty_like(x);
              k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n); return y; }
            '''
        """), line=2, message="The kernel source defines `#define ROW (16 * 48)` and uses ROW as an index offset"),
        # the kernel is given n but loops to the nominal row length and strides by it
        Invalid(snippet("""
            src = '''
            __global__ void k(const float* x, float* y, int n) {
              int r = blockIdx.x * blockDim.x + threadIdx.x;
              if (r < n) { float s = 0; for (int k = 0; k < 48; ++k) s += x[r * 48 + k]; y[r] = s; }
            }
            '''
        """), line=4, message="The kernel source uses the literal 48 as a loop or guard bound"),
        # Triton: the row stride 48 (= D) baked into offsets that address the input
        Invalid(snippet("""
            import triton
            import triton.language as tl
            @triton.jit
            def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
                row = tl.program_id(0)
                offs = row * 48 + tl.arange(0, BLOCK)
                tl.store(y_ptr + offs, tl.load(x_ptr + offs))
        """), line=6, message="The Triton kernel `k` uses the literal 48 as a row stride in an index"),
        # a power-of-two row stride (64 = R*B) into an input pointer, in a kernel given n
        Invalid(snippet("""
            src = '''
            __global__ void k(const float* x, float* y, int n) {
              int r = blockIdx.x * blockDim.x + threadIdx.x;
              if (r < n) y[r] = x[r * 64 + 1];
            }
            '''
        """), line=4, message="The kernel source uses the literal 64 as an index offset"),
        # an output allocated at the nominal shape in C++
        Invalid(snippet("""
            src = '''
            torch::Tensor f(torch::Tensor x) { auto y = torch::empty({16, 48}, x.options()); return y; }
            '''
        """), line=2, message="The kernel source allocates the literal shape {16, 48}"),
    ]

    triton_message = (
        "The Triton kernel `{kernel}` uses the literal {value} as {role}, and {value} is {why}: the kernel "
        "only works for the benchmark's nominal shape."
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # (kernel, reads its sizes, names that take part in address arithmetic)
        self.kernels: list[tuple[cst.FunctionDef, bool, set[str]]] = []
        self.triton_reported: set[tuple[str, int]] = set()

    # Triton kernels: the Python functions decorated with triton.jit / autotune / heuristics
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.ctx.problem is not None and is_triton_kernel(self.ctx, node):
            self.kernels.append((node, triton_reads_sizes(node), address_names(node)))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.kernels and self.kernels[-1][0] is node:
            self.kernels.pop()

    def visit_Integer(self, node: cst.Integer) -> None:
        if not self.kernels or self.ctx.problem is None:
            return
        value = int_value(node)
        kernel, reads = self.kernels[-1][0].name.value, self.kernels[-1][1]
        if value is None or value < 17 or (kernel, value) in self.triton_reported:
            return
        hit = triton_size_use(self.ctx, node, value, reads, self.kernels[-1][2])
        if hit is None:
            return
        why, role, confidence = hit
        self.triton_reported.add((kernel, value))
        self.report(node, self.triton_message.format(kernel=kernel, value=value, why=why, role=ROLES[role]),
                    evidence={"value": value, "meaning": why, "kernel": kernel, "role": role},
                    confidence=confidence)

    # C++ / CUDA -------------------------------------------------------------------------
    def check_cpp(self, source: CppSource) -> None:
        problem = self.ctx.problem
        if problem is None:
            return
        facts = CppFacts.of(source)
        roles = CppRoles.of(source)
        reported: set[int] = set()
        for const, why, role, confidence in size_constants(problem, facts, roles, reported):
            self._report_named(source, facts, const, why, role, confidence)
        for const, why in local_size_arguments(facts, problem, reported):  # `int n = 768;` to a launch
            self._report_named(source, facts, const, why, "a size argument of a kernel launch", Confidence.LIKELY)
        handled = self._literal_allocations(source)
        for index, value, why, role, confidence in size_numbers(source, problem, facts, roles, reported, handled):
            self.report_cpp(source, facts.tokens[index].offset,
                            self.message.format(value=value, why=why, role=ROLES[role]),
                            evidence={"value": value, "meaning": why, "role": role}, confidence=confidence)

    def _literal_allocations(self, source: CppSource) -> set[int]:
        """`torch::empty({2, 64, 4, 128}, ...)`: judged whole (cpp_literal_shapes); returns the
        entries' token indices, which are then not judged one by one."""
        handled: set[int] = set()
        for shape, why, certain in judged_shapes(source, self.ctx.problem):
            handled.update(shape.numbers)
            self.report_cpp(source, source.tokens[shape.start].offset,
                            self.alloc_message.format(shape="{" + ", ".join(map(str, shape.values)) + "}", why=why),
                            evidence={"shape": shape.values, "meaning": why, "role": "alloc"},
                            confidence=Confidence.CERTAIN if certain else Confidence.LIKELY)
        return handled

    def _report_named(self, source: CppSource, facts: CppFacts, const: CppConstant, why: str, role: str,
                      confidence: Confidence) -> None:
        what = definition_text(source, facts, const)
        offset = facts.tokens[const.body[0]].offset
        message = self.named_message.format(what=what, value=const.value, why=why, name=const.name, role=role)
        hint = self.named_hint.format(name=const.name, name_or_tile="BLOCK")
        self.report_cpp(source, offset, message, hint,
                        evidence={"value": const.value, "meaning": why, "constant": const.name},
                        confidence=confidence)
