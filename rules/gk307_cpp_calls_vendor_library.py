from __future__ import annotations

from gatekeeper.analyses.torch_rule_base import TorchFallbackRule
from gatekeeper.static.examples import Invalid, Valid, snippet


class CppCallsVendorLibrary(TorchFallbackRule):
    """The C++/CUDA source hands the work to a vendor library: `cublasSgemm`,
    `cublasGemmEx`, `cublasLtMatmul`, `cudnnConvolutionForward`, `cufftExecC2C`,
    `cusparseSpMM`, `cusolverDn*`, `cutensorContract`, and device-wide CUB / Thrust algorithms
    (`cub::DeviceReduce::Sum`, `cub::DeviceSegmentedReduce::Sum`, `cub::DeviceRadixSort::*`,
    `thrust::reduce`, `thrust::sort`, `thrust::inclusive_scan`...); also such a routine taken as a
    pointer (`auto g = &cublasSgemm_v2; g(...)`), named through a macro, or reached through a
    name bound to it (`static int mix(...) __attribute__((weakref("cublasSgemm_v2")));`, `alias`,
    an `asm` label, `#pragma redefine_extname`: red team round 12).

    Why it games the benchmark: the library's kernel is the same one torch calls, so the
    "custom kernel" is torch's backend with a different wrapper.

    Handle, descriptor and setup calls are fine (`cublasCreate`, `cublasSetStream`,
    `cudnnCreateTensorDescriptor`...), and so is including the header. Header-only template
    libraries compiled into the submission's own kernel (CUTLASS, CuTe, CUB's block- and
    warp-level collectives `cub::BlockReduce` / `cub::WarpReduce` / `cub::BlockScan`, Thrust run
    by one thread with `thrust::seq`) are not flagged (known false-positive pattern: they are the
    submission's code, not a library call). CUB's
    scratch-size query (`Sum(nullptr, bytes, ...)`) is no second finding. Vendor calls are heavy ops under the torch-fallback policy (see GK301 and the
    table below): next to an own kernel that does real work a warning under default (a
    cuBLAS GEMM with a fused epilogue kernel is valid KernelBench), an error when the own
    kernel only transposes or copies and cuBLAS does the reference's whole op, or when
    the problem forbids it (`forbidden = ["cublas*"]`); allow with
    `[rules.GK307.options] allow = ["cublasGemmEx"]`.
    """

    code = "GK307"
    name = "CppCallsVendorLibrary"
    summary = "the C++ extension calls cuBLAS / cuDNN / cuFFT to do the work"
    kinds = ("vendor",)
    message = "the C++ source calls `{what}`: a vendor library does the work, not the submission's kernel: {why}."
    hint = (
        "Write the computation as your own `__global__` kernel (tiling with shared memory, or "
        "CUTLASS/CuTe templates compiled into it). "
        "If the problem allows this library call, add it to the `allow` option of GK307 in gatekeeper.toml (rules.GK307.options)."
    )
    VALID = [
        # CUB's block-level collective is the own kernel's code
        Valid(snippet("""
            src = r'''
            #include <cub/block/block_reduce.cuh>
            __global__ void k(const float* x, float* y) {
              using R = cub::BlockReduce<float, 128>;
              __shared__ typename R::TempStorage t;
              float s = R(t).Sum(x[threadIdx.x]);
              if (threadIdx.x == 0) y[blockIdx.x] = s;
            }
            '''
        """)),
        Valid(snippet("""
            src = r'''
            #include <cublas_v2.h>
            // cublasSgemm would be faster
            __global__ void gemm(const float* a, const float* b, float* c, int n) { c[threadIdx.x] = a[threadIdx.x] * b[threadIdx.x]; }
            void setup(cublasHandle_t* h) { cublasCreate(h); cublasSetStream(*h, 0); }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = r'''
            #include <cublas_v2.h>
            void f(cublasHandle_t h, const float* a, const float* b, float* c, int n) {
              float one = 1.f, zero = 0.f;
              cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
            }
            '''
        """), line=5, message="the C++ source calls `cublasSgemm`"),
        # a name bound to cuBLAS's symbol is cuBLAS (red team round 12)
        Invalid(snippet("""
            src = r'''
            #include <cublas_v2.h>
            static int panel(int m, int n, const float* a, float* c) __attribute__((weakref("cublasSgemm_v2")));
            void f(const float* a, float* c, int n) {
              panel(n, n, a, c);
            }
            '''
        """), line=5, message="the C++ source calls `panel (bound to cublasSgemm_v2)`"),
        # a device-wide CUB algorithm launches the library's kernels
        Invalid(snippet("""
            src = r'''
            #include <cub/device/device_reduce.cuh>
            void f(void* tmp, size_t bytes, const float* x, float* y, int n, cudaStream_t s) {
              cub::DeviceReduce::Sum(tmp, bytes, x, y, n, s);
            }
            '''
        """), line=4, message="the C++ source calls `cub::DeviceReduce::Sum`"),
        Invalid(snippet("""
            src = r'''
            #include <cublasLt.h>
            void f(cublasLtHandle_t h) {
              cublasLtMatmul(h, desc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
            }
            '''
        """), line=4, message="the C++ source calls `cublasLtMatmul`"),
        Invalid(snippet("""
            src = r'''
            #include <cublas_v2.h>
            void f(cublasHandle_t h, const float* a, float* c, int n) {
              auto g = &cublasSgemm_v2;
              float one = 1.f;
              g(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, a, n, &one, c, n);
            }
            '''
        """), line=4, message="the C++ source calls `&cublasSgemm_v2`"),
    ]
