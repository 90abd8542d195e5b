from __future__ import annotations

import libcst as cst

from typing import Optional

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.l2_hints import (
    enclosing_triton_kernel, evict_last, is_triton_kernel, single_use_load, single_use_ptx,
)
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.examples import Invalid, Valid, snippet
from gatekeeper.static.rule import Rule


class KeepsSingleUseInputInL2(Rule):
    """An `evict_last` cache hint on a load that the launch never reads again: Triton's
    `tl.load(x_ptr + offs, eviction_policy="evict_last")` in an elementwise or row-wise
    kernel (each program reads its own part once, no loop, no other load of that argument,
    no `tl.dot`), or inline PTX `ld.global.L2::evict_last` / `createpolicy ...
    L2::evict_last` in a loop-free CUDA kernel without shared memory (also inside a
    `__device__` helper that only such kernels call).

    Why it games the benchmark: `evict_last` raises a line's priority in L2 so that ordinary
    accesses evict it last. A line read once gains nothing from that in the launch that
    reads it; the only effect is on the next call, which finds its input still resident
    after the harness's L2 flush (made of ordinary accesses). The speedup measures a warm
    cache, not the kernel. Certain: there is no within-launch use for the hint on such a
    load. Likely only (held under `default`, for review) where another launch of the same
    Python function may read the same tensor again: kernel 1 keeps `x` for kernel 2 (a
    two-launch softmax), or the launch of the kernel cannot be found among several kernels.

    Not flagged (the honest uses, and why): `evict_last` on data the launch reads again, a
    tile re-read in a loop (a GEMM's K loop), a second pass over the same argument
    (multi-pass softmax), a weight or bias every program loads (offsets without
    `tl.program_id`), kernels with `tl.dot` (operand tiles are shared across programs) or
    a grouped program order (`pid // n`, `pid % g`); `evict_first`, `evict_normal`,
    `__ldcs` / `L2::evict_first` streaming hints (they make data leave sooner);
    `cache_modifier=".cg"/".ca"` (L1 policy). Persisting access-policy windows are GK416.
    """

    code = "GK418"
    name = "KeepsSingleUseInputInL2"
    category = Category.HARNESS_TAMPERING
    severity = Severity.ERROR
    summary = "an evict_last L2 hint on a load the launch never reads again (keeps inputs warm across calls)"
    message = ("{what} on `{arg}`, which this launch reads exactly once: the hint cannot help this launch; it only "
               "keeps the input resident in L2 across the harness's flush, so the next call is timed with a warm cache.")
    hint = (
        "Drop the hint (or use `evict_first` / streaming loads for data read once). Keep `evict_last` for data "
        "the same launch reads again: a tile reused in a loop, a second pass, a weight every program loads."
    )
    VALID = [
        Valid(snippet("""
            import triton
            import triton.language as tl
            @triton.jit
            def rows(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
                pid = tl.program_id(0)
                offs = tl.arange(0, BLOCK)
                acc = tl.zeros([BLOCK], dtype=tl.float32)
                for k in range(0, n, BLOCK):
                    acc += tl.load(x_ptr + pid * n + k + offs, eviction_policy='evict_last')
                for k in range(0, n, BLOCK):
                    v = tl.load(x_ptr + pid * n + k + offs)
                    tl.store(y_ptr + pid * n + k + offs, v / tl.sum(acc))
        """)),
        Valid(snippet("""
            import triton
            import triton.language as tl
            @triton.jit
            def scale(x_ptr, w_ptr, y_ptr, BLOCK: tl.constexpr):
                pid = tl.program_id(0)
                cols = tl.arange(0, BLOCK)
                w = tl.load(w_ptr + cols, eviction_policy='evict_last')
                x = tl.load(x_ptr + pid * BLOCK + cols, eviction_policy='evict_first')
                tl.store(y_ptr + pid * BLOCK + cols, x * w)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import triton
            import triton.language as tl
            @triton.jit
            def relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
                pid = tl.program_id(0)
                offs = pid * BLOCK + tl.arange(0, BLOCK)
                x = tl.load(x_ptr + offs, mask=offs < n, eviction_policy='evict_last')
                tl.store(y_ptr + offs, tl.maximum(x, 0), mask=offs < n)
        """), line=7, message='`eviction_policy="evict_last"` on `x_ptr`, which this launch reads exactly once'),
        Invalid(snippet("""
            src = r'''
            __global__ void relu(const float* x, float* y, int n) {
              int i = blockIdx.x * blockDim.x + threadIdx.x;
              float v;
              asm volatile("ld.global.L2::evict_last.f32 %0, [%1];" : "=f"(v) : "l"(x + i));
              if (i < n) y[i] = v > 0.f ? v : 0.f;
            }
            '''
        """), line=5, message="Inline PTX with an `evict_last` L2 hint on `the kernel's input`"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # (load, kernel, argument) held until every launch of the file has been seen
        self.loads: list[tuple[cst.Call, cst.FunctionDef, str]] = []
        # Triton launches `kernel[grid](args)`: (kernel name, call, enclosing function key)
        self.launches: list[tuple[str, cst.Call, str]] = []
        self.kernels: set[str] = set()  # names of the file's Triton kernels
        if "evict_last" not in self.ctx.text:  # nearly every file: no per-call work
            self.visit_Call = self.visit_FunctionDef = self.finish = None  # type: ignore[assignment]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.decorators and is_triton_kernel(self.ctx, node):
            self.kernels.add(node.name.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Subscript and type(func.value) is cst.Name:
            self.launches.append((func.value.value, node, self.ctx.function_key))
            return
        if not node.args or not self.ctx.functions or not evict_last(self.ctx, node):
            return
        base = single_use_load(self.ctx, node)
        if base is not None:
            kernel = enclosing_triton_kernel(self.ctx)
            assert kernel is not None  # single_use_load found it
            self.loads.append((node, kernel, base))

    def finish(self) -> None:
        for node, kernel, base in self.loads:
            likely = self._read_again(kernel, base)
            self.report(node, self.message.format(what='`eviction_policy="evict_last"`', arg=base),
                        evidence={"hint": "evict_last", "argument": base,
                                  **({"read_again_by": likely} if likely else {})},
                        confidence=Confidence.LIKELY if likely else None)

    def _read_again(self, kernel: cst.FunctionDef, base: str) -> Optional[str]:
        """How another launch may read the tensor passed as `base` again in the same call, or
        None when none can: every launch that may be of `kernel` (by its name, or through a
        name that is no kernel of the file: `k = a if small else b; k[grid](...)`) passes a
        name that no other launch in the same function passes."""
        name = kernel.name.value
        mine = [(call, where) for kind, call, where in self.launches if kind == name or kind not in self.kernels]
        params = [p.name.value for p in (*kernel.params.posonly_params, *kernel.params.params)]
        position = params.index(base) if base in params else -1
        for call, where in mine:
            rivals = [other for _, other, at in self.launches if at == where and other is not call]
            if not rivals:
                continue
            passed = _passed(call, base, position)
            if passed is None:
                return f"`{base}` is given an expression that another launch in the same function may read too"
            if any(passed in {_key(a.value) for a in other.args} for other in rivals):
                return f"`{passed}` is passed to another launch in the same function, which reads it again"
        return None

    def check_cpp(self, source: CppSource) -> None:
        if "evict_last" not in source.text:
            return
        for offset in single_use_ptx(source):
            self.report_cpp(source, offset, self.message.format(what="Inline PTX with an `evict_last` L2 hint",
                                                                arg="the kernel's input"),
                            evidence={"hint": "L2::evict_last"})


def _key(expr: cst.BaseExpression) -> Optional[str]:
    """`x` or `self.x` (a dotted name), else None."""
    if type(expr) is cst.Name:
        return expr.value
    if type(expr) is cst.Attribute:
        inner = _key(expr.value)
        return f"{inner}.{expr.attr.value}" if inner is not None else None
    return None


def _passed(call: cst.Call, param: str, position: int) -> Optional[str]:
    """The dotted name a launch passes for `param` (by keyword or at `position`), else None."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param:
            return _key(arg.value)
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return _key(positional[position].value) if 0 <= position < len(positional) else None
