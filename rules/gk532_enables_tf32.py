from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.stream_support import (
    asm_strings, assumed_note, call_args, idents, is_false, is_true, problem_dtype, ptx_words,
)
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.names import bound_string, string_value
from gatekeeper.static.rule import Rule
from gatekeeper.static.syntax import argument
from gatekeeper.static.examples import Invalid, Valid, snippet

FLAGS = frozenset({
    "torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
})
# Switches that only concern half-precision GEMMs, with the problem dtype they touch and
# PyTorch's default. Turning on one that is already on by default changes nothing: info.
HALF_FLAGS = {
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": ("float16", True),
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": ("bfloat16", True),
    "torch.backends.cuda.matmul.allow_fp16_accumulation": ("float16", False),
}
# Private setters behind the public switches: enabling when the argument is not False.
PRIVATE_SETTERS = frozenset({
    "torch._C._set_cublas_allow_tf32", "torch._C._set_cudnn_allow_tf32",
    "torch._C._set_float32_matmul_precision",
})
LOW_PRECISION_NAMES = frozenset({"tf32", "bf16", "fp16", "high", "medium"})
ENV_SWITCHES = frozenset({"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "NVIDIA_TF32_OVERRIDE", "TRITON_F32_DEFAULT"})
_CPP_SETTERS = frozenset({"setAllowTF32CuBLAS", "setAllowTF32CuDNN", "setAllowFP16ReductionCuBLAS",
                          "setAllowBF16ReductionCuBLAS", "setFloat32MatmulPrecision", "setFloat32Precision"})
_CPP_MODES = frozenset({"CUBLAS_TF32_TENSOR_OP_MATH", "CUBLAS_COMPUTE_32F_FAST_TF32", "CUBLAS_COMPUTE_32F_FAST_16F",
                        "CUBLAS_COMPUTE_32F_FAST_16BF", "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION",
                        "__float_to_tf32", "CUBLASLT_COMPUTE_32F_FAST_TF32", "tfloat32_t"})
_CPP_TRIGGERS = _CPP_SETTERS | _CPP_MODES | {"tf32"}


class EnablesTF32(Rule):
    """The submission switches float32 matrix math to TF32 or reduced-precision reductions:
    `torch.backends.cuda.matmul.allow_tf32 = True`, `torch.backends.cudnn.allow_tf32 = True`,
    `allow_fp16/bf16_reduced_precision_reduction`, the `fp32_precision = "tf32"` settings,
    `torch.set_float32_matmul_precision("high" | "medium")`, the TF32 override environment
    variables; in Triton `tl.dot(..., allow_tf32=True)` or `input_precision="tf32"`; in C++
    `at::globalContext().setAllowTF32CuBLAS(true)`, `CUBLAS_TF32_TENSOR_OP_MATH`,
    `CUBLAS_COMPUTE_32F_FAST_*`, `wmma::precision::tf32`, `__float_to_tf32`, and `tf32`
    operands in inline PTX (`mma.sync ... .tf32`, `cvt.rna.tf32.f32`).

    Why it games the benchmark: TF32 keeps 10 of float32's 23 mantissa bits and runs matmuls
    several times faster on tensor cores; the harness's float32 reference is slower because
    it is exact, so the speedup is bought with precision the problem did not grant.

    Only on float32 problems (assumed when no problem file is given). Setting these switches
    to their exact values (`False`, `"highest"`, `"ieee"`, `input_precision="tf32x3"`) is not
    flagged. `set_float32_matmul_precision("medium")` is named as what it is: float32
    matmuls computed in bfloat16 (8 mantissa bits), worse than TF32.

    The half-precision switches are judged on the problems they concern, against PyTorch's
    defaults: `allow_fp16_accumulation = True` (fp16 GEMMs accumulate in fp16, off by
    default) is a warning on float16 problems; `allow_fp16_reduced_precision_reduction` /
    `allow_bf16_reduced_precision_reduction = True` are PyTorch's defaults, so setting them
    changes nothing and is only `info` on a float16 / bfloat16 problem. Known false-positive
    pattern, not flagged: these half-precision switches on a float32 problem (they do not
    touch float32 matmuls). Whether set at import, in `__init__` or in `forward`, the switch
    is process-wide: in a harness that runs the reference in the same process it changes the
    reference too; gatekeeper computes the reference in a process that never imports the
    submission. A Triton `tl.dot` on float32 operands that does not choose its precision uses
    TF32 on tensor-core GPUs by default: that is reported as `info`, not as a warning.
    A warning under `default`, an error under `strict`.
    """

    code = "GK532"
    name = "EnablesTF32"
    category = Category.PRECISION_DOWNGRADE
    severity = Severity.WARNING
    strict_severity = Severity.ERROR
    summary = "switches float32 matmuls to TF32 or reduced-precision math"
    message = (
        "{what} makes float32 matrix math run in TF32 (10 mantissa bits) or with reduced-precision "
        "accumulation: faster than the problem's {dtype} reference because it is less accurate."
    )
    default_dot_message = (
        "`tl.dot` on float32 operands without `input_precision` uses TF32 on tensor-core GPUs by default, "
        "which is less accurate than the problem's float32."
    )
    half_message = (
        "{what} makes {dtype} matrix math accumulate in {dtype} instead of float32 (off by default): "
        "faster than the problem's {dtype} reference because its sums lose precision."
    )
    default_on_message = (
        "{what} sets a switch that is already on by default in PyTorch (reduced-precision reductions in "
        "{dtype} GEMMs): it changes nothing for this {dtype} problem."
    )
    hint = (
        "Leave the TF32 switches at their defaults (off for matmul), call "
        "`torch.set_float32_matmul_precision('highest')` if anything, and pass `input_precision=\"ieee\"` "
        "to Triton's `tl.dot` for float32 operands."
    )
    VALID = [
        Valid(snippet("""
            import torch
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.set_float32_matmul_precision('highest')
        """)),
        # half-precision GEMM switches do not touch a float32 problem
        Valid(snippet("""
            import torch
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
            torch.backends.cuda.matmul.allow_fp16_accumulation = True
        """)),
        Valid(snippet("""
            import triton
            import triton.language as tl
            @triton.jit
            def k(a, b, c):
                acc = tl.zeros((16, 16), dtype=tl.float32)
                acc += tl.dot(tl.load(a), tl.load(b), input_precision='ieee')
                tl.store(c, acc)
        """)),
        Valid(snippet("""
            src = r'''
            __global__ void k(const float* a, float* c) { c[0] = a[0] * a[1]; }
            void f() { cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH); }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            torch.backends.cuda.matmul.allow_tf32 = True
        """), line=2, message="`torch.backends.cuda.matmul.allow_tf32 = ...` makes float32 matrix math run in TF32"),
        Invalid(snippet("""
            import torch.backends.cudnn as cudnn
            cudnn.allow_tf32 = True
        """), line=2, message="`torch.backends.cudnn.allow_tf32 = ...` makes float32 matrix math run in TF32"),
        Invalid(snippet("""
            import torch
            torch.set_float32_matmul_precision('high')
        """), line=2, message="`torch.set_float32_matmul_precision(...)` makes float32 matrix math run in TF32"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    torch.set_float32_matmul_precision('medium')
                    return _ext.run(x)
        """), line=4, message='`torch.set_float32_matmul_precision("medium")` (bfloat16 inside float32 matmuls, 8 mantissa bits)'),
        Invalid(snippet("""
            import triton.language as tl
            import triton
            @triton.jit
            def k(a, b, c):
                tl.store(c, tl.dot(tl.load(a), tl.load(b), allow_tf32=True))
        """), line=5, message="`tl.dot(..., allow_tf32=True)` makes float32 matrix math run in TF32"),
        Invalid(snippet("""
            import torch
            setattr(torch.backends.cuda.matmul, 'allow_tf32', True)
        """), line=2, message="`setattr(torch.backends.cuda.matmul, 'allow_tf32', ...)` makes float32 matrix math run in TF32"),
        Invalid(snippet("""
            src = r'''
            void setup() { at::globalContext().setAllowTF32CuBLAS(true); }
            '''
        """), line=2, message="`setAllowTF32CuBLAS(...)` makes float32 matrix math run in TF32"),
        Invalid(snippet("""
            src = r'''
            __global__ void k(float* d) {
              asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" : "+f"(d[0]));
            }
            '''
        """), line=3, message="Inline PTX with `tf32` operands makes float32 matrix math run in TF32"),
    ]


    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.dtype = problem_dtype(self.ctx)[0]  # read once, not at every call
    def _on(self) -> Optional[str]:
        dtype = self.dtype
        return dtype if dtype in ("float32", "float64") else None

    def _flag(self, node: cst.CSTNode, what: str, dtype: str, severity: Optional[Severity] = None) -> None:
        self.report(node, self.message.format(what=what, dtype=dtype) + assumed_note(self.ctx),
                    evidence={"switch": what, "problem_dtype": dtype}, severity=severity)

    # Python ---------------------------------------------------------------------------
    def _half_switch(self, node: cst.CSTNode, qual: str, value: cst.BaseExpression) -> None:
        """`allow_fp16_accumulation = True` and friends, judged on the problem they concern."""
        concerns, default = HALF_FLAGS[qual]
        if self.dtype != concerns or is_false(value):
            return
        what = f"`{qual} = ...`"
        if default:
            self.report(node, self.default_on_message.format(what=what, dtype=concerns),
                        evidence={"switch": what, "problem_dtype": concerns, "default": True}, severity=Severity.INFO)
        else:
            self.report(node, self.half_message.format(what=what, dtype=concerns),
                        evidence={"switch": what, "problem_dtype": concerns})

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            qual = self.ctx.qualname(target.target) if (type(target.target) is not cst.Subscript) else None
            if qual in HALF_FLAGS:
                self._half_switch(node, qual, node.value)
        dtype = self._on()
        if dtype is None:
            return
        for target in node.targets:
            expr = target.target
            if type(expr) is cst.Subscript:
                self._env_write(node, expr, node.value, dtype)
                continue
            qual = self.ctx.qualname(expr)
            if qual is not None and self._enables(qual, node.value):
                self._flag(node, f"`{qual} = ...`", dtype)

    def _enables(self, qual: str, value: cst.BaseExpression) -> bool:
        if qual in FLAGS:
            return not is_false(value)
        if qual.startswith("torch.backends.") and qual.endswith(".fp32_precision"):
            text = string_value(value)
            return text is None or text.lower() in LOW_PRECISION_NAMES
        return False

    def _env_write(self, node: cst.CSTNode, target: cst.Subscript, value: cst.BaseExpression, dtype: str) -> None:
        if self.ctx.qualname(target.value) != "os.environ" or len(target.slice) != 1:
            return
        index = target.slice[0].slice
        key = string_value(index.value) if (type(index) is cst.Index) else None
        if key in ENV_SWITCHES and (key != "TRITON_F32_DEFAULT" or (string_value(value) or "tf32") != "ieee"):
            self._flag(node, f"`os.environ[{key!r}] = ...`", dtype)

    def visit_Call(self, node: cst.Call) -> None:
        qual = self.ctx.qualname(node.func)
        if qual == "builtins.setattr" and len(node.args) >= 3:
            base = self.ctx.qualname(node.args[0].value)
            attr = string_value(node.args[1].value)
            if base and attr and f"{base}.{attr}" in HALF_FLAGS:
                self._half_switch(node, f"{base}.{attr}", node.args[2].value)
                return
        dtype = self._on()
        if dtype is None:
            return
        if qual == "torch.set_float32_matmul_precision":
            text = string_value(argument(node, 0, "precision") or cst.Name("None"))
            if text is not None and text.lower() == "medium":
                self._flag(node, "`torch.set_float32_matmul_precision(\"medium\")` (bfloat16 inside float32 matmuls, "
                                 "8 mantissa bits)", dtype)
            elif text is None or text.lower() != "highest":
                self._flag(node, "`torch.set_float32_matmul_precision(...)`", dtype)
        elif qual in PRIVATE_SETTERS and node.args:
            value = node.args[0].value
            text = string_value(value)
            if not is_false(value) and (text is None or text.lower() != "highest"):
                self._flag(node, f"`{qual}(...)`", dtype)
        elif qual == "builtins.setattr" and len(node.args) >= 3:
            base = self.ctx.qualname(node.args[0].value)
            attr = string_value(node.args[1].value)
            if base and attr and self._enables(f"{base}.{attr}", node.args[2].value):
                self._flag(node, f"`setattr({base}, {attr!r}, ...)`", dtype)
        elif qual in ("os.putenv", "os.environ.setdefault") and string_value(node.args[0].value if node.args else cst.Name("x")) in ENV_SWITCHES:
            self._flag(node, f"`{qual}(...)`", dtype)
        elif qual == "triton.language.dot":
            self._triton_dot(node, dtype)
        else:
            for arg in node.args:  # `cudnn.flags(allow_tf32=True)`, `kernel[grid](..., ALLOW_TF32=True)`
                if arg.keyword is not None and arg.keyword.value.lower() == "allow_tf32" and is_true(arg.value):
                    self._flag(arg, f"`{arg.keyword.value}=True`", dtype)

    def _triton_dot(self, node: cst.Call, dtype: str) -> None:
        allow = precision = None
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "allow_tf32":
                allow = arg.value
            elif arg.keyword is not None and arg.keyword.value == "input_precision":
                precision = arg.value
        if allow is not None and is_true(allow):
            self._flag(node, "`tl.dot(..., allow_tf32=True)`", dtype)
        elif precision is not None:
            text = bound_string(self.ctx.resolver, precision) or self._parameter_default(precision)
            if text == "tf32":
                self._flag(node, "`tl.dot(..., input_precision=\"tf32\")`", dtype)
        elif (allow is None or not is_false(allow)) and not self._casts_operands(node):
            self.report(node, self.default_dot_message + assumed_note(self.ctx),
                        evidence={"problem_dtype": dtype}, severity=Severity.INFO)

    def _parameter_default(self, expr: cst.BaseExpression) -> Optional[str]:
        """`DOT_PRECISION: tl.constexpr = "tf32"`, a kernel parameter's string default used as
        the precision (red team round 9: a default never passed is the precision used)."""
        if type(expr) is not cst.Name or not self.ctx.functions:
            return None
        params = self.ctx.functions[-1].params
        for param in (*params.params, *params.kwonly_params):
            if param.name.value == expr.value and param.default is not None:
                return string_value(param.default)
        return None

    def _casts_operands(self, node: cst.Call) -> bool:
        """`tl.dot(a.to(tl.float16), b.to(...))`: the operands are not float32, so the TF32 default
        does not apply (a cast below float32 is GK530's finding)."""
        operands = [a.value for a in node.args[:2] if a.keyword is None]
        return bool(operands) and all(
            type(v) is cst.Call and type(v.func) is cst.Attribute and v.func.attr.value == "to" and v.args
            and self.ctx.qualname(v.args[0].value) not in ("triton.language.float32", "torch.float32")
            for v in operands)

    # C++ ---------------------------------------------------------------------------------
    def check_cpp(self, source: CppSource) -> None:
        dtype = self._on()
        if dtype is None:
            return
        tokens = source.tokens
        names = idents(source)
        if not names & _CPP_TRIGGERS:
            tokens = []  # nothing to find in the C++ itself; inline PTX is still read below
        for i, tok in enumerate(tokens):
            if tok.kind != "ident":
                continue
            if tok.text in _CPP_SETTERS:
                args, _ = call_args(tokens, i)
                if args and any(t.text == "false" for t in args[0]):
                    continue
                self._flag_cpp(source, tok.offset, f"`{tok.text}(...)`", dtype)
            elif tok.text in _CPP_MODES:
                self._flag_cpp(source, tok.offset, f"`{tok.text}`", dtype)
            elif tok.text == "tf32" and i >= 2 and tokens[i - 1].text == "::" and tokens[i - 2].text == "precision":
                self._flag_cpp(source, tok.offset, "`wmma::precision::tf32`", dtype)
        for offset, text in asm_strings(source):
            if "tf32" in ptx_words(text):
                self._flag_cpp(source, offset, "Inline PTX with `tf32` operands", dtype)

    def _flag_cpp(self, source: CppSource, offset: int, what: str, dtype: str) -> None:
        self.report_cpp(source, offset, self.message.format(what=what, dtype=dtype) + assumed_note(self.ctx),
                        evidence={"switch": what, "problem_dtype": dtype})

