from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.stream_support import assumed_note, problem_dtype
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

HALF = frozenset({
    "torch.float16", "torch.half", "torch.bfloat16", "triton.language.float16", "triton.language.bfloat16",
    "numpy.float16", "cupy.float16", "torch.HalfTensor", "torch.cuda.HalfTensor", "torch.BFloat16Tensor",
    "torch.cuda.BFloat16Tensor",
})
FP8 = frozenset({
    "torch.float8_e4m3fn", "torch.float8_e5m2", "torch.float8_e4m3fnuz", "torch.float8_e5m2fnuz",
    "torch.float8_e8m0fnu", "torch.float4_e2m1fn_x2", "triton.language.float8e4nv", "triton.language.float8e5",
    "triton.language.float8e4b15", "triton.language.float8e4b8", "triton.language.float8e5b16",
})
# Methods that cast their receiver to half precision.
HALF_METHODS = frozenset({"half", "bfloat16"})
# Calls that only describe a dtype.
DESCRIBE = frozenset({"torch.finfo", "torch.iinfo", "builtins.isinstance", "builtins.issubclass", "builtins.print",
                      "builtins.str", "builtins.repr", "builtins.dict", "builtins.set", "builtins.tuple", "builtins.list",
                      "torch.promote_types", "torch.can_cast", "builtins.hash", "builtins.id"})


def lower_dtypes(problem: str) -> frozenset[str]:
    """Dtypes below the problem's precision."""
    if problem in ("float32", "float64"):
        return HALF | FP8
    if problem in ("float16", "bfloat16"):
        return FP8
    return frozenset()


# Triton's names for the same formats as torch's.
_SAME_FORMAT = {"float16": ("triton.language.float16", "numpy.float16", "cupy.float16", "torch.half",
                            "torch.HalfTensor", "torch.cuda.HalfTensor"),
                "half": ("torch.float16",), "bfloat16": ("triton.language.bfloat16", "torch.BFloat16Tensor",
                                                         "torch.cuda.BFloat16Tensor"),
                "float8_e4m3fn": ("triton.language.float8e4nv",), "float8_e5m2": ("triton.language.float8e5",),
                "float8_e4m3fnuz": ("triton.language.float8e4b8",), "float8_e5m2fnuz": ("triton.language.float8e5b16",)}


_LOW_NAME = re.compile(r"16|half|Half|float8|float4")


def reference_dtypes(problem: object) -> frozenset[str]:
    """The low dtypes the reference names (`torch.float8_e4m3fn`), with their other spellings."""
    tree = getattr(problem, "tree", None)
    if tree is None:
        return frozenset()
    cached = problem.__dict__.get("_gk530_dtypes")  # the problem is shared by many submissions
    if cached is not None:
        return cached
    source = getattr(problem, "source", None)
    if isinstance(source, str) and not _LOW_NAME.search(source):
        # every low dtype's name holds one of these: no walk of a tree that names none
        problem.__dict__["_gk530_dtypes"] = frozenset()
        return problem.__dict__["_gk530_dtypes"]
    import ast

    names = {n.attr for n in ast.walk(tree) if type(n) is ast.Attribute and type(n.value) is ast.Name
             and n.value.id == "torch"}
    found = {f"torch.{name}" for name in names} & (HALF | FP8)
    for name in names:
        found.update(_SAME_FORMAT.get(name, ()))
    problem.__dict__["_gk530_dtypes"] = frozenset(found)
    return problem.__dict__["_gk530_dtypes"]


class CastsToLowerPrecision(Rule):
    """The submission computes in a lower precision than the problem's dtype: `.half()`,
    `.bfloat16()`, `.to(torch.float16)`, `.to(dtype=torch.bfloat16)`, `.type(torch.HalfTensor)`,
    an allocation or any call given `dtype=torch.float16` (or an fp8 dtype), `torch.set_default_dtype`,
    and in Triton `x.to(tl.float16)`, `tl.zeros(..., dtype=tl.bfloat16)` or
    `tl.dot(..., out_dtype=tl.float16)`. Dtypes are resolved through aliases (`dt = torch.half`).

    Why it games the benchmark: half precision runs 2-16x faster on tensor cores and moves half
    the bytes, so the speedup is bought with accuracy the problem did not grant; the result
    can still pass a loose tolerance on benign inputs. The problem's dtype decides: on a
    float32 problem fp16/bf16/fp8 are downgrades; on a float16/bfloat16 problem only fp8 is.
    Without a problem file float32 is assumed, and the message says so.

    Not flagged: a dtype the reference itself computes in (an fp8 problem's quantisation step,
    in torch's or Triton's spelling), `.float()` and other upcasts, comparisons of dtypes (`x.dtype == torch.half`),
    dtype tables (a dict literal mapping torch to Triton dtypes), `torch.finfo(torch.float16)`,
    and Triton's `tl.float32` accumulators. A warning under `default`, an error under `strict`.
    """

    code = "GK530"
    name = "CastsToLowerPrecision"
    category = Category.PRECISION_DOWNGRADE
    severity = Severity.WARNING
    strict_severity = Severity.ERROR
    summary = "casts or allocates in a lower precision than the problem's dtype"
    message = (
        "{what} computes in {low}, below the problem's {dtype}: the speedup comes from giving up accuracy "
        "the problem did not allow, and a loose tolerance on benign inputs may still pass it."
    )
    hint = (
        "Keep the problem's dtype end to end: allocate with `dtype=x.dtype`, load and accumulate in float32 "
        "(`tl.float32` in Triton, `float` in CUDA), and do not cast inputs or outputs to fp16/bf16."
    )
    VALID = [
        Valid(snippet("""
            import torch
            def forward(x):
                if x.dtype == torch.float16:
                    raise TypeError('float32 only')
                eps = torch.finfo(torch.float16).eps
                return _ext.run(x.float(), eps)
        """)),
        Valid(snippet("""
            import triton
            import triton.language as tl
            import torch
            DT = {torch.float32: tl.float32, torch.float16: tl.float16}
            @triton.jit
            def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                acc = tl.zeros((BLOCK,), dtype=tl.float32)
                acc += tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
                tl.store(y_ptr + offs, acc, mask=offs < n)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            def forward(x, w):
                return (x.half() @ w.half()).float()
        """), line=3, message="`.half()` computes in float16"),
        Invalid(snippet("""
            import torch
            low = torch.bfloat16
            def forward(x):
                y = torch.empty(x.shape, device=x.device, dtype=low)
                _ext.run(x.to(dtype=low), y)
                return y.to(torch.float32)
        """), line=4, message="`torch.empty(..., dtype=low)` computes in bfloat16"),
        Invalid(snippet("""
            import torch
            def forward(x):
                y = torch.empty(x.shape, device=x.device, dtype=torch.bfloat16)
                return _ext.run(x, y).float()
        """), line=3, message="`torch.empty(..., dtype=torch.bfloat16)` computes in bfloat16"),
        Invalid(snippet("""
            import triton.language as tl
            import triton
            @triton.jit
            def k(a_ptr, b_ptr, c_ptr):
                a = tl.load(a_ptr).to(tl.float16)
                b = tl.load(b_ptr).to(tl.float16)
                tl.store(c_ptr, tl.dot(a, b))
        """), line=5, message="`.to(tl.float16)` computes in float16"),
        Invalid(snippet("""
            from torch import float16 as f16
            def forward(x):
                return _ext.run(x.to('cuda', f16))
        """), line=3, message="`x.to(..., f16)` computes in float16"),
    ]


    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.dtype = problem_dtype(self.ctx)[0]  # read once, not at every call
        # A low dtype the reference itself computes in (an fp8 quantise-then-GEMM problem) is
        # the problem's precision for that step, not a downgrade.
        lower = lower_dtypes(self.dtype)
        self.lower = lower - reference_dtypes(self.ctx.problem) if lower else lower

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        dtype = self.dtype
        lower = self.lower
        if not lower:
            return
        if type(func) is cst.Attribute and func.attr.value in HALF_METHODS and not node.args and "torch.float16" in lower:
            if self.ctx.qualname(func) is None:  # a method on a value, not torch.bfloat16 itself
                self._report(node, f"`.{func.attr.value}()`", "float16" if func.attr.value == "half" else "bfloat16", dtype)
                return
        found: Optional[str] = None
        found_arg: Optional[cst.Arg] = None
        for arg in node.args:
            value = arg.value
            if type(value) in (cst.Name, cst.Attribute, cst.Call):
                qual = self.ctx.qualname(value)
                if qual in lower:
                    found, found_arg = qual, arg
                    break
        if found is None or found_arg is None:
            return
        qual_func = self.ctx.qualname(func)
        if qual_func in DESCRIBE or (qual_func or "").rsplit(".", 1)[-1].startswith(("autocast", "set_autocast")):
            return  # autocast is GK531's finding
        self._report(node, f"`{_as_written(self.ctx, node, found_arg)}`", found.rsplit(".", 1)[-1], dtype)

    def _report(self, node: cst.CSTNode, what: str, low: str, dtype: str) -> None:
        self.report(node, self.message.format(what=what, low=low, dtype=dtype) + assumed_note(self.ctx),
                    evidence={"lower_dtype": low, "problem_dtype": dtype})


def _as_written(ctx, call: cst.Call, arg: cst.Arg) -> str:
    """The call as the code writes it, other arguments elided: `torch.empty(..., dtype=low)`,
    `x.to(f16)`; a long receiver (`tl.load(p).to`) is cut to the method."""
    func = call.func
    code = ctx.module.code_for_node
    name = code(func)
    if type(func) is cst.Attribute and (len(name) > 30 or type(func.value) not in (cst.Name, cst.Attribute)):
        name = f".{func.attr.value}"
    shown = (f"{arg.keyword.value}=" if arg.keyword is not None else "") + code(arg.value)
    return f"{name}(..., {shown})" if len(call.args) > 1 else f"{name}({shown})"
