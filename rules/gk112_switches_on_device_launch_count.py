from __future__ import annotations

from typing import Optional

from gatekeeper.analyses.cpp_choices import signal_choices
from gatekeeper.analyses.cpp_device_globals import launch_counters
from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.examples import Invalid, Valid, snippet
from gatekeeper.static.rule import Rule


class SwitchesOnDeviceLaunchCount(Rule):
    """A CUDA kernel picks its computation on a device-resident counter of launches: a
    file-scope `__device__` (or `__managed__`) variable that device code advances
    (`atomicAdd(&g_epoch, 1)`, `g++`, `g = ...`), that nothing resets for each launch, and
    that an `if` / `switch` / `?:` reads (directly or through a local) where one side
    computes something else.

    Why it games the benchmark: it is GK104's call counter kept on the device, where the host
    never sees it. A harness checks the first calls and times the later ones; red team round 12
    switched from `tanhf` to `tanh.approx.f32` after 48 launches.

    Confidence: certain. A value that only grows from launch to launch says how many calls
    came before, nothing about the inputs.

    Not flagged: a global reset for every launch (host `cudaMemcpyToSymbol(g, ...)` or
    `cudaGetSymbolAddress(&p, g)` then a memset; a device `g = 0` or `atomicExch(&g, 0)`; a
    ticket `atomicInc(&g, gridDim.x ...)` that wraps each launch, the "last block" pattern),
    a global the kernel only accumulates into without choosing a path on it, and `__constant__`
    data (the kernel cannot write it).
    """

    code = "GK112"
    name = "SwitchesOnDeviceLaunchCount"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    confidence = Confidence.CERTAIN
    confirmed_by = "GK611"
    summary = "a __device__ global counts launches across calls and picks the kernel's path"
    message = ("This condition reads `{name}`, a `__device__` global that the kernel advances and nothing resets "
               "between launches: it counts the calls made so far, so later (timed) calls can take another path "
               "than the first (checked) ones.")
    hint = ("Make every launch do the same work on its inputs. A device-side counter must be reset for each launch "
            "(`cudaMemsetAsync` on its symbol address, or by the last block) and must not choose the computation.")
    VALID = [
        Valid(snippet("""
            src = r'''
            __device__ unsigned int g_done = 0;
            __global__ void k(const float* x, float* part, float* out, int n) {
              part[blockIdx.x] = block_sum(x, n);
              __threadfence();
              unsigned int ticket = atomicInc(&g_done, gridDim.x);
              if (ticket == gridDim.x - 1) out[0] = final_sum(part, gridDim.x);
            }
            '''
        """)),
        Valid(snippet("""
            src = r'''
            __device__ float g_acc;
            __global__ void k(const float* x, int n) { atomicAdd(&g_acc, x[threadIdx.x]); }
            torch::Tensor f(torch::Tensor x) {
              float zero = 0.f;
              cudaMemcpyToSymbolAsync(g_acc, &zero, sizeof(float));
              k<<<1, 256>>>(x.data_ptr<float>(), x.numel());
              return x;
            }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = r'''
            __device__ unsigned int g_epoch = 0;
            __global__ void k(const float* x, float* y, int n) {
              const bool warm = g_epoch >= 48u;
              int i = blockIdx.x * blockDim.x + threadIdx.x;
              if (i < n) y[i] = warm ? fast_tanh(x[i]) : tanhf(x[i]);
              if (i == 0) atomicAdd(&g_epoch, 1u);
            }
            '''
        """), line=6, message="reads `g_epoch`, a `__device__` global"),
    ]

    def check_cpp(self, source: CppSource) -> None:
        counters = launch_counters(source)
        if not counters:
            return
        tokens = source.tokens
        names = {c.name for c in counters}

        def seed(i: int) -> Optional[str]:
            tok = tokens[i]
            if tok.kind == "ident" and tok.text in names and not (i and tokens[i - 1].text in (".", "->", "::")):
                nxt = tokens[i + 1].text if i + 1 < len(tokens) else ""
                return None if nxt == "=" else tok.text
            return None

        seen: set[int] = set()
        for fn in source.functions:
            for found in signal_choices(tokens, fn.body_start, fn.body_end, seed):
                if found.offset not in seen:
                    seen.add(found.offset)
                    self.report_cpp(source, found.offset, self.message.format(name=found.label),
                                    evidence={"counter": found.label})
