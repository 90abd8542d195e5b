from __future__ import annotations

from typing import Optional

from gatekeeper.analyses.cpp_choices import signal_choices
from gatekeeper.analyses.cpp_signal_functions import file_scope_names, widen
from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import match_close
from gatekeeper.static.examples import Invalid, Valid, snippet
from gatekeeper.static.rule import Rule

# free functions that read a clock (host or device)
_CLOCK_CALLS = frozenset({
    "clock_gettime", "gettimeofday", "__rdtsc", "__rdtscp", "rdtsc", "clock64", "omp_get_wtime", "timespec_get",
    "__builtin_readcyclecounter", "__builtin_ia32_rdtsc", "cudaEventElapsedTime", "clock",
})
# `X::now()`: std::chrono's clocks (steady, system, high_resolution) and any like them
_NOW = "now"
# inline PTX reading a timer register (`mov.u64 %0, %%globaltimer;`)
_ASM_TIMERS = ("globaltimer", "%clock", "%%clock")


class CppBranchesOnClock(Rule):
    """C++ or CUDA code chooses what it computes on a clock: a value read from
    `std::chrono::*::now()`, `clock_gettime`, `gettimeofday`, `__rdtsc`, `clock()`,
    `time(nullptr)`, `cudaEventElapsedTime`, device `clock64()` or the `%globaltimer` register (or a difference of such readings, kept in a
    static across calls) reaches the condition of an `if` / `switch` / `?:` one of whose sides
    launches a kernel, calls a function or writes a value.

    Why it games the benchmark: a timing loop calls back to back, a checker calls with gaps
    between calls (it compares, copies, allocates). Code that measures the gap since its last
    call can take an exact path when checked and a cheaper, less precise one (TF32, an
    approximation) when timed (red team round 12: launches closer than 400 us took a TF32
    WMMA path). It is GK110's idea (a timing signal picks the path) on the C++ side.

    Confidence: certain when a reading is kept across calls (a file-scope or `static`
    variable): that is how code measures the gap since its last call. Readings that live
    within one call are durations of its own work, which an honest C++ autotuner compares too
    (`if (ms < best_ms) best = cfg;`): likely, a warning under `default` that the timing
    stage's check (GK703) settles.

    Not flagged: a clock read only for a log (`if (dt > budget) fprintf(stderr, ...)`: the
    side only reports), `clock64()` in a spin or back-off loop (`while (clock64() - t0 < d)`:
    a loop, no choice of result), and timing that never reaches a condition.
    """

    code = "GK113"
    name = "CppBranchesOnClock"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    confidence = Confidence.CERTAIN
    confirmed_by = "GK703"
    summary = "C++/CUDA code picks its computation on a clock reading (call gaps tell a timing loop from a check)"
    message = ("This condition in the C++/CUDA source reads {what}, and one side computes something the other "
               "does not: the clock (how close calls come, how long since the last one) tells a timing loop from "
               "a checker's calls, so the path taken when timed is not the path that was checked.")
    hint = ("Choose the path only from the inputs (shapes, dtypes, strides) and the device. Time code only to log "
            "it, or move measurement-based tuning to a one-off set-up that does not change the result's precision.")
    VALID = [
        Valid(snippet("""
            src = r'''
            #include <chrono>
            torch::Tensor f(torch::Tensor x) {
              auto t0 = std::chrono::steady_clock::now();
              auto y = run(x);
              auto dt = std::chrono::steady_clock::now() - t0;
              if (dt > std::chrono::milliseconds(50)) fprintf(stderr, "slow call\\n");
              return y;
            }
            '''
        """)),
        Valid(snippet("""
            src = r'''
            __global__ void k(float* y, const float* x, int n) {
              long long t0 = clock64();
              while (clock64() - t0 < 1000) { }
              int i = blockIdx.x * blockDim.x + threadIdx.x;
              if (i < n) y[i] = x[i] * 2.f;
            }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = r'''
            #include <chrono>
            static std::chrono::steady_clock::time_point last;
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              const auto now = std::chrono::steady_clock::now();
              const bool close = (now - last) < std::chrono::microseconds(400);
              last = now;
              if (close) return fast_tf32(a, b);
              return exact(a, b);
            }
            '''
        """), line=8, message="reads the clock (`std::chrono::steady_clock::now()`)"),
        Invalid(snippet("""
            src = r'''
            static double prev = 0;
            static bool back_to_back() {
              timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
              double t = ts.tv_sec + 1e-9 * ts.tv_nsec, gap = t - prev; prev = t;
              return gap < 1e-3;
            }
            torch::Tensor f(torch::Tensor x) {
              return back_to_back() ? approx(x) : exact(x);
            }
            '''
        """), line=9, message="reads the clock (`clock_gettime`)"),
    ]

    def check_cpp(self, source: CppSource) -> None:
        idents = source.by_text["ident"]
        asm_outputs = _asm_timer_outputs(source)
        if not (idents.keys() & _CLOCK_CALLS) and _NOW not in idents and "time" not in idents and not asm_outputs:
            return
        tokens = source.tokens

        def seed(i: int) -> Optional[str]:
            tok = tokens[i]
            if tok.kind != "ident" or i + 1 >= len(tokens) or tokens[i + 1].text != "(":
                return None
            prev = tokens[i - 1].text if i else ""
            if tok.text == _NOW and prev == "::":
                k = i - 2
                while k >= 1 and tokens[k - 1].text == "::":
                    k -= 2
                return "`" + "".join(t.text for t in tokens[max(k, 0):i + 1]) + "()`"
            if tok.text in _CLOCK_CALLS and prev not in (".", "->"):
                return f"`{tok.text}`"
            if tok.text == "time" and prev not in (".", "->") and i + 3 < len(tokens) \
                    and tokens[i + 2].text in ("nullptr", "NULL", "0") and tokens[i + 3].text == ")":
                return "`time(nullptr)`"
            return None

        wide, globals_ = widen(source, seed)
        start = dict(globals_)
        start.update(asm_outputs)
        seen: set[int] = set()
        file_scope = file_scope_names(source)
        for fn in source.functions:
            tainted: dict[str, str] = {}
            found_here = signal_choices(tokens, fn.body_start, fn.body_end, wide, start, tainted)
            # A gap since the last call needs a reading kept across calls (file scope, a static):
            # certain. Readings that live within one call are durations of its own work, which
            # an honest C++ autotuner compares too (`if (ms < best_ms)`): likely, settled by GK703.
            kept = bool(globals_) or bool(tainted.keys() & (file_scope | _local_statics(tokens, fn.body_start,
                                                                                        fn.body_end)))
            for found in found_here:
                if found.offset in seen:
                    continue
                seen.add(found.offset)
                self.report_cpp(source, found.offset, self.message.format(what=f"the clock ({found.label})"),
                                evidence={"clock": found.label, "kept_across_calls": kept},
                                confidence=None if kept else Confidence.LIKELY)


def _local_statics(tokens, lo: int, hi: int) -> set[str]:
    """Names a function body declares `static` (`static auto last = ...;`, `static double t0;`)."""
    out: set[str] = set()
    for i in range(lo, hi):
        if tokens[i].text != "static":
            continue
        j = i + 1
        while j < hi and tokens[j].text not in ("=", ";", "{", "(", ","):
            j += 1
        if j < hi and tokens[j - 1].kind == "ident":
            out.add(tokens[j - 1].text)
    return out


def _asm_timer_outputs(source: CppSource) -> dict[str, str]:
    """Names an inline-PTX statement that reads a timer register writes (`"=l"(t)`)."""
    tokens, out = source.tokens, {}
    idents = source.by_text["ident"]
    for i in [*idents.get("asm", ()), *idents.get("__asm__", ()), *idents.get("__asm", ())]:
        j = i + 1
        while j < len(tokens) and tokens[j].text in ("volatile", "__volatile__"):
            j += 1
        if j >= len(tokens) or tokens[j].text != "(":
            continue
        close = match_close(tokens, j)
        text = source.text[tokens[j].offset:tokens[close].offset]
        if not any(timer in text for timer in _ASM_TIMERS):
            continue
        colon = next((k for k in range(j + 1, close) if tokens[k].text == ":"), None)
        if colon is None:
            continue
        for k in range(colon + 1, close):
            if tokens[k].text == ":":
                break
            if tokens[k].kind == "ident":
                out[tokens[k].text] = "the `%globaltimer` register"
    return out
