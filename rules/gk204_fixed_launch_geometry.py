from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.cpp_constants import CppFacts, Launch
from gatekeeper.analyses.cpp_number_roles import CppRoles
from gatekeeper.analyses.shape_helpers import in_main_guard, module_constant, py_int, py_shape, size_read_kind, sizes_for
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

_P = "R = 4\nB = 16\nD = 48\ndef get_inputs():\n    return [torch.randn(R, B, D)]\n"
_TRITON = "import torch, triton\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        y = torch.empty_like(x[0])\n"


def _is_tile_like(value: int) -> bool:
    return 0 < value <= 1024 and value & (value - 1) == 0


def _is_block_width(keyword: str) -> bool:
    """BLOCK_SIZE, BLOCK_M, BLOCK_N: the widths the grid is tiled by; not BLOCK_K, the
    reduction tile, which no program count multiplies."""
    upper = keyword.upper()
    return "BLOCK" in upper and not upper.endswith("K")


class FixedLaunchGeometry(Rule):
    """A launch whose grid and block are both compile-time constants and together cover
    exactly one of the problem's sizes: `<<<1, 192>>>` for 768 floats read as float4,
    `<<<GRID, THREADS>>>` through `#define`/`constexpr`/`dim3`, a Triton
    `kernel[(12,)](..., BLOCK_SIZE=256)` for 3072 elements, or `grid = (B,)` with `B = 16`
    in Python.

    Why it games the benchmark: the kernel does exactly the nominal amount of work; a
    larger input is left partly uncomputed, a smaller one is read and written out of bounds.

    Confidence: certain for a C++ launch when nothing in the source reads a size (no
    `size()`/`numel()`, no computed grid) and the block count times threads (times the
    vector width) is exactly a free size: the kernel does the nominal work whatever the
    input. Likely where the launching code reads no size (nothing else tells the
    kernel how much data there is); suspect where it also reads sizes (a fixed grid with a
    grid-stride loop over n is a legitimate persistent-kernel launch), which the behaviour
    stage's jittered-shape check (GK602) confirms or clears.

    Known false-positive patterns, and why it does not fire on them:
    - a grid computed from the sizes (`(n + 255) / 256`, `triton.cdiv(n, BLOCK)`) with a
      constant block width: the grid is not a constant;
    - a single block or program of a power-of-two width up to 1024 when the kernel reads its
      sizes: a loop over the data;
    - a fixed persistent grid (1024 blocks x 256 threads) whose product is only a multiple
      of a size (8*(features*dim2)): only exact sizes and products count, not offsets;
    - `self.layers[3](x)` and other calls on an indexed container: only a subscripted name
      (a Triton kernel, `kernel[grid](...)`) is a launch.
    Needs the problem file.
    """

    code = "GK204"
    name = "FixedLaunchGeometry"
    category = Category.HARDCODED_SHAPE
    severity = Severity.ERROR
    confidence = Confidence.LIKELY
    confirmed_by = "GK602"
    needs_problem = True
    summary = "launches a constant grid that covers exactly the problem's nominal size"
    message = (
        "{launch} launches a fixed geometry of {geometry}, and {why}: the launch covers exactly the "
        "benchmark's nominal size, so a larger input is left partly uncomputed and a smaller one is "
        "accessed out of bounds."
    )
    hint = (
        "Compute the grid from the input's size at run time: `(n + 255) / 256` blocks of 256 threads in "
        "CUDA, `triton.cdiv(n, BLOCK_SIZE)` programs in Triton, with `n = x.numel()` passed to the kernel "
        "and a bounds check (`if (i < n)`, `mask=offs < n`)."
    )
    EXAMPLE_PROBLEM = _P
    VALID = [
        Valid(snippet("""
            src = '''
            __global__ void k(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }
            torch::Tensor f(torch::Tensor x) { int n = x.numel(); auto y = torch::empty_like(x);
              const int threads = 256; k<<<(n + threads - 1) / threads, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n); return y; }
            '''
        """)),
        # a single block looping over n
        Valid(snippet("""
            src = '''
            __global__ void k(const float* x, float* y, int n) { for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i]; }
            torch::Tensor f(torch::Tensor x) { auto y = torch::empty_like(x); k<<<1, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel()); return y; }
            '''
        """)),
        Valid(snippet("""
            import torch, triton
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x[0])
                    n = y.numel()
                    k[(triton.cdiv(n, 256),)](x, y, n, BLOCK_SIZE=256)
                    return y
        """)),
        Valid(snippet("""
            import torch, triton
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x[0])
                    grid = lambda meta: (triton.cdiv(y.numel(), meta['BLOCK']),)
                    k[grid](x, y, y.numel(), BLOCK=128)
                    return y
        """)),
        # indexing a module list is not a launch
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return self.heads[16](x)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = '''
            __global__ void k(const float* x, float* y) { int i = threadIdx.x << 2; y[i] = x[i]; }
            torch::Tensor f(torch::Tensor x, torch::Tensor y) { k<<<1, 192>>>(x.data_ptr<float>(), y.data_ptr<float>()); return y; }
            '''
        """), line=3, message="`<<<1, 192>>>` launches a fixed geometry of 1 block(s) x 192 threads"),
        Invalid(snippet("""
            src = '''
            #define THREADS 256
            constexpr int BLOCKS = 3;
            __global__ void k(const float* x, float* y) { int i = blockIdx.x * THREADS + threadIdx.x; y[i] = x[i]; }
            torch::Tensor f(torch::Tensor x) { auto y = torch::empty({x.size(1), x.size(2)}, x.options()); k<<<BLOCKS, THREADS>>>(x.data_ptr<float>(), y.data_ptr<float>()); return y; }
            '''
        """), line=5, message="`<<<BLOCKS, THREADS>>>` launches a fixed geometry of 3 block(s) x 256 threads"),
        Invalid(snippet("""
            src = '''
            __global__ void k(const float* x, float* y) { y[blockIdx.y * 48 + blockIdx.x] = x[0]; }
            torch::Tensor f(torch::Tensor x) { auto y = torch::empty({x.size(1), x.size(2)}, x.options()); dim3 grid(16, 48); k<<<grid, 1>>>(x.data_ptr<float>(), y.data_ptr<float>()); return y; }
            '''
        """), line=3, message="`<<<grid, 1>>>` launches a fixed geometry of 768 block(s) x 1 threads"),
        Invalid(snippet("""
            import torch, triton
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x[0])
                    k[(3,)](x, y, BLOCK_SIZE=256)
                    return y
        """), line=5, message="`k[(3,)]` launches a fixed geometry of 3 program(s)"),
        Invalid(snippet("""
            import torch
            B = 16
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x[0])
                    grid = (B,)
                    row_kernel[grid](x, y, x.stride(1))
                    return y
        """), line=7, message="`row_kernel[grid]` launches a fixed geometry of 16 program(s)"),
    ]

    # C++ / CUDA ------------------------------------------------------------------------
    def check_cpp(self, source: CppSource) -> None:
        if self.ctx.problem is None:
            return
        facts = CppFacts.of(source)
        roles = CppRoles.of(source)
        reads_sizes = facts.reads_sizes
        for launch in facts.launches:
            grid, block = launch.grid_value, launch.block_value
            if grid is None or block is None or grid <= 0 or block <= 0:
                continue
            widths = (1, 2, 4, 8) if facts.vector_types else (1,)
            why = self._why(grid, [block], widths, reads_sizes)
            if why is None:
                continue
            text = self._launch_text(source, facts, launch)
            self.report_cpp(source, facts.tokens[launch.index].offset,
                            self.message.format(launch=f"`{text}`", geometry=f"{grid} block(s) x {block} threads", why=why),
                            evidence={"grid": grid, "block": block, "meaning": why},
                            confidence=Confidence.CERTAIN if self._fixed_work(facts, why) and not
                            roles.reads_sizes_at(launch.index) else
                            self._confidence(why, roles.reads_sizes_at(launch.index)))

    @staticmethod
    def _fixed_work(facts: CppFacts, why: str) -> bool:
        """Nothing in the source reads a size (no size()/numel(), no computed grid; the caller
        also checks the launching function has no integer parameter) and the
        fixed geometry covers exactly a free size: the work done is the nominal work whatever
        the input, so any other size is computed wrongly or out of bounds."""
        return not facts.reads_sizes and " = " in why and not why.startswith("the grid of")

    @staticmethod
    def _launch_text(source: CppSource, facts: CppFacts, launch: Launch) -> str:
        start = facts.tokens[launch.index].offset
        end = source.text.find(">>>", start)
        return source.text[start : end + 3] if 0 <= end - start < 120 else "<<<...>>>"

    # Triton / Python --------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Subscript or len(func.slice) != 1 or self.ctx.problem is None:
            return
        index = func.slice[0].slice
        if type(index) is not cst.Index or not self._kernel_name(func.value):
            return
        grid = self._grid(index.value)
        if grid is None or grid <= 0:
            return
        blocks = [v for a in node.args if a.keyword is not None and _is_block_width(a.keyword.value)
                  and (v := py_int(self.ctx, a.value)) is not None and v > 0]
        reads_sizes = any(a.keyword is None and size_read_kind(self.ctx, a.value) == "size" for a in node.args)
        why = self._why(grid, blocks, (1,), reads_sizes)
        if why is None or in_main_guard(self.ctx, node):
            return
        launch = self.ctx.module.code_for_node(func)
        launch = launch if len(launch) <= 60 else launch[:57] + "..."
        block_text = "".join(f", {a.keyword.value}={v}" for a in node.args
                             if a.keyword is not None and _is_block_width(a.keyword.value)
                             and (v := py_int(self.ctx, a.value)) is not None)
        self.report(node, self.message.format(launch=f"`{launch}`", geometry=f"{grid} program(s){block_text}", why=why),
                    evidence={"grid": grid, "blocks": blocks, "meaning": why},
                    confidence=self._confidence(why, reads_sizes))

    @staticmethod
    def _confidence(why: str, reads_sizes: bool) -> Confidence:
        """One program or block per item of a dimension (`grid = (16,)` for 16 rows) is
        likely even next to other size reads; a grid times block that happens to cover a
        size is suspect when the code reads its sizes (a persistent, grid-stride launch)."""
        if why.startswith("the grid of") and "ceil(" not in why:
            return Confidence.LIKELY
        return Confidence.SUSPECT if reads_sizes else Confidence.LIKELY

    def _kernel_name(self, expr: cst.BaseExpression) -> bool:
        """`kernel[grid]` or `module.kernel[grid]`: a name that is not a local container
        (`self.layers[3]`, `blocks[i]`)."""
        if type(expr) is cst.Attribute:
            return not (type(expr.value) is cst.Name and expr.value.value == "self")
        if type(expr) is not cst.Name:
            return False
        binding = self.ctx.resolver.lookup(expr.value)
        value = binding.value if binding is not None else None
        return type(value) not in (cst.List, cst.Tuple, cst.Dict, cst.ListComp, cst.Call) or (
            type(value) is cst.Call and "triton" in (self.ctx.qualname(value.func) or ""))

    def _grid(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[int]:
        """The number of programs a constant grid launches, or None if it is computed."""
        if depth > 4:
            return None
        if type(expr) is cst.Lambda:
            return self._grid(expr.body, depth + 1)
        shape = py_shape(self.ctx, expr)
        if shape is not None:
            if not shape or any(v is None for v in shape):
                return None
            product = 1
            for v in shape:
                product *= v  # type: ignore[operator]
            return product
        if type(expr) is cst.Name:
            binding = self.ctx.resolver.lookup(expr.value)
            if binding is not None and binding.kind == "local" and binding.value is not None:
                if self.ctx.resolver.module_scope.names.get(expr.value) is binding:
                    value = module_constant(self.ctx, expr.value)
                    return self._grid(value, depth + 1) if value is not None else None
                return self._grid(binding.value, depth + 1)
            value = module_constant(self.ctx, expr.value)
            if type(value) is cst.Lambda:
                return self._grid(value, depth + 1)
        return py_int(self.ctx, expr) if (type(expr) in (cst.Integer, cst.BinaryOperation)) else None

    # what the numbers mean ---------------------------------------------------------------
    def _why(self, grid: int, blocks: list[int], widths: tuple[int, ...], reads_sizes: bool) -> Optional[str]:
        problem = self.ctx.problem
        if problem is None:
            return None
        sizes = sizes_for(problem)
        block = 1
        for b in blocks:
            block *= b
        if grid == 1 and (reads_sizes or not blocks) and (not blocks or _is_tile_like(block)):
            return None  # one block or program looping over the sizes it is given
        for width in widths:
            total = grid * block * width
            why = problem.explain(total) if blocks else None
            if why is not None:
                covered = f"{grid} x {block}" + (f" x {width}-wide vectors" if width > 1 else "")
                return f"{covered} = {total} is {why}"
        if grid > 1 and (meaning := sizes.shape_size(grid)) is not None:
            return f"the grid of {grid} is {meaning}"
        if blocks and (count := sizes.count_for(grid, block)) is not None:
            return f"the grid of {grid} is {count}"
        return None
