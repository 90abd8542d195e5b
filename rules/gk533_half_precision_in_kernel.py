from __future__ import annotations

from typing import Optional, Sequence

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.stream_support import asm_strings, assumed_note, enclosing_call, idents, problem_dtype, ptx_words
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

# Half and bfloat16 storage types, conversions and arithmetic (cuda_fp16.h / cuda_bf16.h),
# tensor-core and library switches to 16-bit math.
HALF_TYPES = frozenset({"__half", "__half2", "half2", "__nv_bfloat16", "__nv_bfloat162", "nv_bfloat16", "nv_bfloat162",
                        "half_t", "bfloat16_t"})  # the last two: CUTLASS / CuTe
HALF_PREFIXES = ("__float2half", "__floats2half", "__float22half", "__half2", "__half22", "__float2bfloat16",
                 "__floats2bfloat16", "__float22bfloat16", "__bfloat162", "__bfloat1622", "__int2half",
                 "__uint2half", "__double2half", "__double2bfloat16")
HALF_MATH = frozenset({
    "__hadd", "__hsub", "__hmul", "__hdiv", "__hfma", "__hadd2", "__hsub2", "__hmul2", "__h2div", "__hfma2",
    "__hneg", "__hneg2", "__habs", "__habs2", "__hmax", "__hmin", "__hmax2", "__hmin2", "__hadd_rn", "__hmul_rn",
    "__hfma_relu", "__hfma2_relu", "hexp", "h2exp", "hlog", "h2log", "hsqrt", "h2sqrt", "hrcp", "h2rcp",
    "hrsqrt", "h2rsqrt", "__low2float", "__high2float", "__low2half", "__high2half",
    "cublasHgemm", "cublasHgemmBatched", "cublasHgemmStridedBatched", "CUDA_R_16F", "CUDA_R_16BF",
    "CUBLAS_COMPUTE_16F", "CUDNN_DATA_HALF", "CUDNN_DATA_BFLOAT16",
})
FP8 = frozenset({"__nv_fp8_e4m3", "__nv_fp8_e5m2", "__nv_fp8x2_e4m3", "__nv_fp8x2_e5m2", "__nv_fp8x4_e4m3",
                 "__nv_fp8x4_e5m2", "__nv_cvt_float_to_fp8", "__nv_cvt_float2_to_fp8x2", "CUDA_R_8F_E4M3",
                 "CUDA_R_8F_E5M2", "kFloat8_e4m3fn", "kFloat8_e5m2", "Float8_e4m3fn", "Float8_e5m2",
                 "float_e4m3_t", "float_e5m2_t"})
# Scalar-type enums: a downgrade when a tensor is converted or allocated with them, not when compared.
HALF_ENUMS = frozenset({"kHalf", "kFloat16", "kBFloat16"})
_ENUM_SCOPES = frozenset({"ScalarType"})
_CHECKS = ("AT_DISPATCH", "TORCH_CHECK", "AT_ASSERT", "TORCH_INTERNAL_ASSERT", "C10_", "static_assert", "assert")
_INT_TYPES = frozenset({"int", "unsigned", "long", "short", "auto", "size_t", "int64_t", "int32_t", "uint32_t",
                        "uint64_t", "char", "bool", "double", "float", "const", "constexpr"})
_TRIGGERS = HALF_TYPES | HALF_MATH | FP8 | HALF_ENUMS | {"half", "Half", "BFloat16"}
PTX_HALF = frozenset({"f16", "bf16", "f16x2", "bf16x2"})
PTX_FP8 = frozenset({"e4m3", "e5m2", "e4m3x2", "e5m2x2"})


class HalfPrecisionInKernel(Rule):
    """The C++/CUDA source computes in half precision on a float32 problem: `__half` /
    `half` / `__nv_bfloat16` values, conversions (`__float2half`, `__half2float`,
    `__float2bfloat16`...), half arithmetic (`__hmul`, `__hfma`, `__hadd2`...), WMMA fragments
    of `half`, `cublasHgemm` / `CUDA_R_16F` / `CUBLAS_COMPUTE_16F`, `.to(at::kHalf)` or an
    allocation with `at::kHalf` / `torch::kBFloat16`, `at::Half` data pointers, and inline
    PTX with `f16` / `bf16` operands (`mma.sync ... .f16`, `cvt.rn.f16.f32`). On a float16
    or bfloat16 problem only fp8 (`__nv_fp8_e4m3`, `e4m3`/`e5m2` PTX) is a downgrade.

    Why it games the benchmark: tensor cores run fp16/bf16 math many times faster than
    float32, and half the bytes move; the result, converted back to float32, can pass a
    loose tolerance on benign inputs while being less accurate than the problem requires.

    Not flagged: fp8 constructs when the problem's own inputs are fp8 (its file names a
    `float8` dtype: a scaled fp8 GEMM computes on e4m3 operands by definition);
    `AT_DISPATCH_FLOATING_TYPES_AND_HALF` and dtype checks (`x.scalar_type() ==
    at::kHalf`, `TORCH_CHECK(...)`, `case at::kHalf:`), `#include <cuda_fp16.h>` on its own,
    `float` accumulators, and a variable that happens to be called `half`
    (`int half = blockDim.x / 2`). Reading fp16 inputs and accumulating in float32 is fine
    on a float16 problem. Each distinct construct is reported once per source. A warning
    under `default`, an error under `strict`.
    """

    code = "GK533"
    name = "HalfPrecisionInKernel"
    category = Category.PRECISION_DOWNGRADE
    severity = Severity.WARNING
    strict_severity = Severity.ERROR
    summary = "the C++/CUDA kernel computes in fp16/bf16 (or fp8) on a higher-precision problem"
    message = (
        "{what} in the C++/CUDA source computes in {low}, below the problem's {dtype}: the speedup comes "
        "from precision the problem did not allow."
    )
    hint = (
        "Load, compute and accumulate in `float` for a float32 problem (`float4` loads if you want wide "
        "memory access), call cuBLAS with `CUDA_R_32F` / `CUBLAS_COMPUTE_32F`, and never convert to "
        "`__half` / `__nv_bfloat16`."
    )
    VALID = [
        Valid(snippet("""
            src = r'''
            #include <cuda_fp16.h>
            __global__ void k(const float* x, float* y, int n) {
              for (int half = blockDim.x / 2; half > 0; half >>= 1) { if (threadIdx.x < half) y[threadIdx.x] += y[threadIdx.x + half]; }
            }
            torch::Tensor f(torch::Tensor x) {
              TORCH_CHECK(x.scalar_type() != at::kHalf, "float32 only");
              AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "k", [&] {});
              return x;
            }
            '''
        """)),
        Valid(snippet("""
            src = r'''
            __global__ void k(const float4* x, float4* y) { float4 v = x[threadIdx.x]; y[threadIdx.x] = v; }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = r'''
            #include <cuda_fp16.h>
            __global__ void k(const float* a, const float* b, float* c) {
              __half x = __float2half(a[threadIdx.x]);
              c[threadIdx.x] = __half2float(__hmul(x, __float2half(b[threadIdx.x])));
            }
            '''
        """), line=4, message="`__half` in the C++/CUDA source computes in float16"),
        Invalid(snippet("""
            src = r'''
            #include <mma.h>
            using namespace nvcuda;
            __global__ void k(const half* a, const half* b, float* c) {
              wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
            }
            '''
        """), line=4, message="`half` in the C++/CUDA source computes in float16"),
        Invalid(snippet("""
            src = r'''
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              auto ah = a.to(torch::kHalf);
              auto bh = b.to(at::ScalarType::Half);
              return run(ah, bh).to(torch::kFloat);
            }
            '''
        """), line=3, message="`kHalf` as a target dtype in the C++/CUDA source computes in float16"),
        Invalid(snippet("""
            src = r'''
            __global__ void k(float* d, unsigned a0, unsigned b0) {
              asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" : "+f"(d[0]));
            }
            '''
        """), line=3, message="Inline PTX with `f16` operands in the C++/CUDA source computes in f16"),
    ]

    def check_cpp(self, source: CppSource) -> None:
        dtype, _ = problem_dtype(self.ctx)
        if dtype in ("float32", "float64"):
            half_is_low = True
        elif dtype in ("float16", "bfloat16"):
            half_is_low = False
        else:
            return
        if self.ctx.problem is not None and "float8" in self.ctx.problem.text:
            fp8_is_input = True  # the problem's own inputs are fp8: computing on them in fp8 is no downgrade
        else:
            fp8_is_input = False
        if fp8_is_input and not half_is_low:
            return
        names = idents(source)
        if not (names & _TRIGGERS or any(n.startswith(HALF_PREFIXES) for n in names)):
            names = frozenset()
        tokens = source.tokens if names else []
        half_is_variable = _declares_half_variable(tokens)
        seen: set[str] = set()
        for i, tok in enumerate(tokens):
            if tok.kind != "ident":
                continue
            what = self._classify(tokens, i, half_is_low, half_is_variable)
            if what is None or what[0] in seen or (fp8_is_input and what[1] == "fp8"):
                continue
            seen.add(what[0])
            self._flag(source, tok.offset, what[0], what[1], dtype)
        for offset, text in asm_strings(source):
            words = ptx_words(text)
            low = words & ((PTX_HALF if half_is_low else frozenset()) | (frozenset() if fp8_is_input else PTX_FP8))
            if low and "ptx" not in seen:
                seen.add("ptx")
                self._flag(source, offset, f"Inline PTX with `{sorted(low)[0]}` operands", sorted(low)[0], dtype)

    @staticmethod
    def _classify(tokens: Sequence[Token], i: int, half_is_low: bool, half_is_variable: bool) -> Optional[tuple[str, str]]:
        text = tokens[i].text
        if text in FP8:
            return f"`{text}`", "fp8"
        if not half_is_low:
            return None
        if text in HALF_TYPES or text in HALF_MATH or text.startswith(HALF_PREFIXES):
            return f"`{text}`", "bfloat16" if "bf" in text.lower() or "BF" in text else "float16"
        prev = tokens[i - 1].text if i > 0 else ""
        if text == "half":
            if prev in (".", "->"):
                return "`.half()`", "float16"
            if not half_is_variable:
                return "`half`", "float16"
            return None
        if text in ("Half", "BFloat16") and prev == "::":
            scope = tokens[i - 2].text if i >= 2 else ""
            if scope in _ENUM_SCOPES:
                return _enum_use(tokens, i, text)
            if scope in ("at", "c10"):
                return f"`{scope}::{text}`", "bfloat16" if text == "BFloat16" else "float16"
            return None
        if text in HALF_ENUMS:
            return _enum_use(tokens, i, text)
        return None

    def _flag(self, source: CppSource, offset: int, what: str, low: str, dtype: str) -> None:
        self.report_cpp(source, offset, self.message.format(what=what, low=low, dtype=dtype) + assumed_note(self.ctx),
                        evidence={"construct": what, "lower_dtype": low, "problem_dtype": dtype})


def _enum_use(tokens: Sequence[Token], i: int, text: str) -> Optional[tuple[str, str]]:
    """`at::kHalf` passed to a conversion or allocation, not compared or checked."""
    prev = tokens[i - 1].text if i > 0 else ""
    j = i - 1
    while j >= 0 and tokens[j].text in ("::", "at", "c10", "torch", "ScalarType"):
        j -= 1
    before = tokens[j].text if j >= 0 else ""
    after = tokens[i + 1].text if i + 1 < len(tokens) else ""
    if before in ("==", "!=", "case", "return") or after in ("==", "!=", ":") or prev == "case":
        return None
    caller = enclosing_call(tokens, i) or ""
    if caller.startswith(_CHECKS) or caller in ("if", "while", "switch"):
        return None
    low = "bfloat16" if "BF" in text or "BFloat" in text else "float16"
    return f"`{text}` as a target dtype", low


def _declares_half_variable(tokens: Sequence[Token]) -> bool:
    """`int half = ...`, `for (unsigned half = ...)`, `auto half{...}`: `half` names a value here."""
    for i, tok in enumerate(tokens):
        if tok.text == "half" and i > 0 and tokens[i - 1].text in _INT_TYPES:
            nxt = tokens[i + 1].text if i + 1 < len(tokens) else ""
            if nxt in ("=", ";", ",", ")", "{", "["):
                return True
    return False
