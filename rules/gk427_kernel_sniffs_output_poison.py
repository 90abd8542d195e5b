from __future__ import annotations

from gatekeeper.analyses.cpp_output_sniffing import output_sniffs
from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.examples import Invalid, Valid, snippet
from gatekeeper.static.rule import Rule


class KernelSniffsOutputPoison(Rule):
    """A CUDA kernel reads an element of its output before writing it and branches on the
    value, and the launching code allocated that output uninitialised (`torch::empty`,
    `at::empty_like`, `x.new_empty`) and did not fill or hand to another call first: the C++
    side of GK426. A probe kernel that only reads the fresh buffer (and writes a flag the main
    kernel branches on) is the same read.

    Why it games the benchmark: an uninitialised buffer holds whatever the allocator hands back,
    unless a checker fills fresh memory to expose outputs a kernel never wrote (NaN poisoning,
    `fill_uninitialized_memory`). A kernel that tests `isfinite(out[i])` before writing
    `out[i]` can take the exact path when the checker poisoned the memory and a cheaper one
    when timed (red team round 12: `isfinite(slot) ? gelu_tanh(v) : gelu_erf(v)`).

    Confidence: certain. Nothing honest reads memory it never wrote to choose what to write.

    Not flagged: a kernel that accumulates into an output the launcher zeroed or filled
    (`torch::zeros`, `torch::full`, `out.zero_()`, `cudaMemsetAsync`), or that a caller hands in
    (an in-place buffer), or that an earlier launch or call writes (`init<<<...>>>(o)`); a read
    of the output after the kernel wrote it; a read that feeds no choice (`out[i] += v` into a
    zeroed buffer). Not covered: an output allocated in Python and passed in (GK676 at run time).
    """

    code = "GK427"
    name = "KernelSniffsOutputPoison"
    category = Category.INTROSPECTION
    severity = Severity.ERROR
    confidence = Confidence.CERTAIN
    confirmed_by = "GK676"
    summary = "a kernel branches on its uninitialised output's old values (a probe for the checker's NaN poison)"
    message = ("Kernel `{kernel}` reads {read} before writing it and chooses its computation on the value, and "
               "`{buffer}` passed as `{param}` comes from `{alloc}` with nothing written: the values are garbage "
               "unless a checker poisons fresh memory, so the branch can only tell a checked call from a timed one.")
    hint = ("Do not read an output before writing it. If the kernel accumulates into its output, allocate it with "
            "`torch::zeros` (or zero it first); choose the computation from the inputs only.")
    VALID = [
        Valid(snippet("""
            src = r'''
            __global__ void rowmax(const float* x, float* out, int n) {
              int i = blockIdx.x * blockDim.x + threadIdx.x;
              if (i < n && x[i] > out[i % 64]) out[i % 64] = x[i];
            }
            torch::Tensor f(torch::Tensor x) {
              auto out = torch::full({64}, -INFINITY, x.options());
              rowmax<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
              return out;
            }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = r'''
            __global__ void k(const float* x, float* out, int n) {
              int i = blockIdx.x * blockDim.x + threadIdx.x;
              if (i >= n) return;
              const float old = out[i];
              out[i] = isfinite(old) ? fast(x[i]) : exact(x[i]);
            }
            torch::Tensor f(torch::Tensor x) {
              auto out = torch::empty_like(x);
              k<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
              return out;
            }
            '''
        """), line=6, message="Kernel `k` reads `out[...]` before writing it"),
    ]

    def check_cpp(self, source: CppSource) -> None:
        if "<<<" not in source.by_text["punct"]:
            return
        seen: set[int] = set()
        for sniff in output_sniffs(source):
            if sniff.choice.offset in seen:
                continue
            seen.add(sniff.choice.offset)
            self.report_cpp(source, sniff.choice.offset,
                            self.message.format(kernel=sniff.kernel, read=sniff.choice.label, buffer=sniff.buffer,
                                                param=sniff.param, alloc=sniff.alloc),
                            evidence={"kernel": sniff.kernel, "param": sniff.param, "alloc": sniff.alloc})
