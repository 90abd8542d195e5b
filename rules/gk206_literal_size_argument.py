from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.shape_helpers import in_main_guard, module_constant, py_int, size_read_kind
from gatekeeper.analyses.size_literals import launch_setting_parameter
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

_P = "R = 4\nB = 16\nD = 48\ndef get_inputs():\n    return [torch.randn(R, B, D)]\n"
_EXT = ("import torch\nfrom torch.utils.cpp_extension import load_inline\n"
        "_ext = load_inline(name='e', cpp_sources='', cuda_sources='', functions=['run'])\n"
        "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        y = torch.empty_like(x[0])\n")
# Launch options of a Triton call, not kernel arguments.
_LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "stream", "waves_per_eu", "maxnreg", "grid"})


def _is_tile_like(value: int) -> bool:
    return value <= 1024 and value & (value - 1) == 0


# `B` and the letter(s) of the dimension it tiles (BM, BN, BK, BD, BH, BE, BKV): Triton's usual
# spelling of a block width. BS and BSZ are left out: they also spell a batch size.
_WIDTH_NAME = re.compile(r"^(B[A-Z]{1,2}|BLK_?[MNK]?|[MNK]_?(BLOCK|TILE)|WARPS|STAGES|SPLIT_?K|VEC(_SIZE)?|UNROLL)$")
_NOT_WIDTHS = frozenset({"BS", "BSZ"})


def _is_width_keyword(name: str) -> bool:
    """BLOCK_SIZE, TILE_M, GROUP_M, and the short Triton tile names BM, BN, BK, BH."""
    upper = name.upper().lstrip("_")
    if upper in _NOT_WIDTHS:
        return False
    return "BLOCK" in upper or "TILE" in upper or upper.startswith("GROUP") or bool(_WIDTH_NAME.match(upper))


class LiteralSizeArgument(Rule):
    """A kernel is handed the problem's size as a literal: `_ext.run(x, y, 768)` on a
    `load_inline` module, `torch.ops.myext.run(x, 16, 48)`, or a Triton launch
    `k[grid](x, y, 16384)`, directly, through a module constant or through a local
    `n = 16 * 48`.

    Why it games the benchmark: the kernel may be written generically, but it is told the
    nominal size instead of the input's, so any other input is computed wrongly or accessed
    out of bounds.

    Confidence: likely when the call passes no size read from the inputs (the literal is
    the only size the kernel gets); suspect when it also passes sizes read from the inputs,
    which the behaviour stage's jittered-shape check (GK602) confirms or clears.

    Known false-positive patterns, and why it does not fire on them:
    - block and tile widths, by keyword or by name (`BLOCK_SIZE=`, `TILE_M=`, `num_warps=`,
      `BK=BK` with `BK = 512`, a positional `BLOCK_SIZE_M` or `TILE_H` constant): a width's
      name says what it is;
    - powers of two up to 1024 next to a size read from the inputs: a tile width;
    - a width that is a problem size only by arithmetic (128 = in_features / 8): only
      exact sizes and products of sizes count;
    - numbers below 17;
    - a literal handed to an extension parameter that the C++ uses only as launch geometry
      (the block of `<<<grid, threads>>>`, a `dim3`, the divisor of a ceil-div): a
      threads-per-block choice, whatever its value;
    - a literal equal to a dimension every declared shape fixes (a head width of 128).
    Needs the problem file.
    """

    code = "GK206"
    name = "LiteralSizeArgument"
    category = Category.HARDCODED_SHAPE
    severity = Severity.ERROR
    confidence = Confidence.LIKELY
    confirmed_by = "GK602"
    needs_problem = True
    summary = "passes the problem's nominal size to a kernel as a literal"
    message = (
        "`{call}` passes the constant {shown} to the {kind} `{fn}`, and {value} is {why}: the kernel is told "
        "the benchmark's nominal size instead of the input's, so any other input is computed wrongly or "
        "accessed out of bounds."
    )
    hint = (
        "Pass sizes read from the inputs on every call: `x.numel()`, `x.size(1)`, `x.stride(0)`; keep "
        "literals only for tile widths (`BLOCK_SIZE=256`)."
    )
    EXAMPLE_PROBLEM = _P
    VALID = [
        # Triton block widths named `B` + the dimension they tile, even where a width equals a size
        Valid(snippet("""
            import torch
            import triton
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x[0])
                    kernel[(x.size(0),)](x, y, x.size(1), BH=16, BE=48)
                    return y
        """)),
        Valid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline(name='e', cpp_sources='', cuda_sources='', functions=['run'])
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x[0])
                    _ext.run(x, y, x.size(0), x.size(1) * x.size(2))
                    return y
        """)),
        # a tile width next to a size read from the input
        Valid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline(name='e', cpp_sources='', cuda_sources='', functions=['run'])
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x[0])
                    _ext.run(x, y, x.numel(), 256)
                    return y
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x)
                    n = x.numel()
                    k[(triton.cdiv(n, 1024),)](x, y, n, BLOCK_SIZE=1024, num_warps=4)
                    return y
        """)),
        # a reduction tile BK = 768 (= B*D) passed by keyword and positionally
        Valid(snippet("""
            import torch
            BK = 768
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x)
                    n = x.numel()
                    k[(triton.cdiv(n, BK),)](x, y, n, BK, BK=BK)
                    return y
        """)),
        # a tile width passed positionally under its name, equal to B*D by coincidence
        Valid(snippet("""
            import torch
            TILE_M = 768
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x)
                    n = x.numel()
                    k[(triton.cdiv(n, TILE_M),)](x, y, n, TILE_M)
                    return y
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline(name='e', cpp_sources='', cuda_sources='', functions=['run'])
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x[0])
                    _ext.run(x, y, 768)
                    return y
        """), line=7, message="`_ext.run(x, y, 768)` passes the constant 768 to the extension function `run`"),
        Invalid(snippet("""
            import torch
            N = 768
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x[0])
                    k[(3,)](x, y, N, BLOCK_SIZE=256)
                    return y
        """), line=6, message="`k[(3,)](x, y, N, BLOCK_SIZE=256)` passes the constant `N` = 768 to the Triton kernel `k`"),
        Invalid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline(name='e', cpp_sources='', cuda_sources='', functions=['run'])
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x[0])
                    rows, cols = 4, 16 * 48
                    n = 16 * 48
                    _ext.run(x, y, n)
                    return y
        """), line=9, message="`_ext.run(x, y, n)` passes the constant `n` = 768 to the extension function `run`"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return torch.ops.meanext.mean_rows(x, 4, 768)
        """), line=4, message="`torch.ops.meanext.mean_rows(x, 4, 768)` passes the constant 768 to the custom op"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.extensions: dict[str, bool] = {}
        self.pending: list[tuple] = []  # extension calls, judged once the C++ sources are known

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Subscript:
            kind, fn = "Triton kernel", self.ctx.module.code_for_node(func.value)
        elif type(func) is cst.Attribute and type(func.value) is cst.Name and self._is_extension(func.value.value):
            kind, fn = "extension function", func.attr.value
        elif type(func) is cst.Attribute and (self.ctx.qualname(func) or "").startswith("torch.ops.") \
                and not (self.ctx.qualname(func) or "").startswith(("torch.ops.aten.", "torch.ops.prims.")):
            kind, fn = "custom op", self.ctx.qualname(func) or func.attr.value
        else:
            return
        problem = self.ctx.problem
        if problem is None:
            return
        reads = any(size_read_kind(self.ctx, a.value) is not None for a in node.args)
        for arg in node.args:
            if arg.keyword is not None and (arg.keyword.value in _LAUNCH_OPTIONS or _is_width_keyword(arg.keyword.value)):
                continue
            if type(arg.value) is cst.Name and _is_width_keyword(arg.value.value):
                continue  # a positional BLOCK_SIZE_M: a tile width by its name
            value = self._constant(arg.value)
            if value is None or (reads and _is_tile_like(value)):
                continue
            why = problem.explain(value)
            if why is None or in_main_guard(self.ctx, node):
                continue
            if kind == "extension function" and arg.keyword is None:
                # judged in finish(), once the C++ sources are known: a threads-per-block
                # parameter is a launch setting
                self.pending.append((node, arg, list(node.args).index(arg), fn, value, why, reads, kind))
                return
            self._report(node, arg, fn, value, why, reads, kind)
            return

    def finish(self) -> None:
        for node, arg, position, fn, value, why, reads, kind in self.pending:
            if not launch_setting_parameter(self.ctx.cpp_sources, fn, position):
                self._report(node, arg, fn, value, why, reads, kind)

    def _report(self, node: cst.Call, arg: cst.Arg, fn: str, value: int, why: str, reads: bool, kind: str) -> None:
        call = self.ctx.module.code_for_node(node)
        call = call if len(call) <= 80 else call[:77] + "..."
        text = self.ctx.module.code_for_node(arg.value)
        shown = str(value) if text == str(value) else f"`{text}` = {value}"
        self.report(arg, self.message.format(call=call, shown=shown, value=value, kind=kind, fn=fn, why=why),
                    evidence={"value": value, "meaning": why, "callee": fn},
                    confidence=Confidence.SUSPECT if reads else Confidence.LIKELY)

    def _constant(self, expr: cst.BaseExpression) -> Optional[int]:
        value = py_int(self.ctx, expr)
        if value is None and type(expr) is cst.Name:
            binding = self.ctx.resolver.lookup(expr.value)
            if binding is not None and binding.kind == "local" and binding.value is not None \
                    and self.ctx.resolver.module_scope.names.get(expr.value) is not binding:
                value = py_int(self.ctx, binding.value)
        return value

    def _is_extension(self, name: str) -> bool:
        known = self.extensions.get(name)
        if known is None:
            value = module_constant(self.ctx, name)
            known = False
            if type(value) is cst.Call:
                qual = self.ctx.qualname(value.func) or ""
                last = value.func.attr.value if (type(value.func) is cst.Attribute) else (
                    value.func.value if (type(value.func) is cst.Name) else "")
                known = qual.endswith(("load_inline", "cpp_extension.load")) or last == "load_inline"
            self.extensions[name] = known
        return known
