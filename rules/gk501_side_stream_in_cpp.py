from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.cpp_branches import Region, covers, regions
from gatekeeper.analyses.cpp_stream_calls import (
    ACQUIRE, CREATE, CURRENT, DEFAULT_STREAMS, NOT_USES, SWITCH, SYNC, called, is_join, is_use, returns_any,
    statement_has,
)
from gatekeeper.analyses.stream_support import (
    assigned_name, call_args, capture_spans, derived_from, function_at, idents, launch_config, match_close,
)
from gatekeeper.static.cpp_functions import CppFunction
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet


@dataclass
class _Site:
    index: int
    identity: Optional[str]  # the variable holding the stream, when there is one
    what: str


class SideStreamInCpp(Rule):
    """C++/CUDA work is put on a stream other than PyTorch's current stream: a stream from
    `cudaStreamCreate*` (typically with `cudaStreamNonBlocking`), from
    `at::cuda::getStreamFromPool()` / `c10::cuda::getStreamFromPool()`, `cudaStreamPerThread`,
    a `CUDAStreamGuard` / `setCurrentCUDAStream` that makes such a stream current, and kernel
    launches (`<<<g, b, smem, s>>>`), `cublasSetStream`, async copies or `cudaLaunchKernel` on
    it, without a join before the host function returns.

    Why it games the benchmark: the harness records its timing events on, and synchronises,
    the current stream. A non-blocking side stream does not order with it, so the timed region
    contains only the launch and the output may be compared before the kernel has written it.

    What counts as the current stream: `at::cuda::getCurrentCUDAStream()` /
    `c10::cuda::getCurrentCUDAStream()` (also `.stream()` of it, or a variable assigned from
    it), `getDefaultCUDAStream()`, and the legacy default stream (`0`, `nullptr`, or no fourth
    launch argument). PyTorch's current stream is the default stream unless the caller changed
    it, so `<<<g, b>>>` is not a finding here; the legacy default stream synchronises with
    blocking streams but not with non-blocking ones, which is why the timing stage also
    synchronises the whole device. A launch on a stream that arrives as a function parameter
    is not flagged either: it is whatever the caller passed, and the caller's stream is judged
    where it is created.

    Joined back (at most a warning): after the last use in the same host function, one of
    `cudaStreamSynchronize(side)`, `cudaEventRecord(ev, side)` + `cudaStreamWaitEvent(current,
    ev)`, `cudaEventSynchronize`, `cudaDeviceSynchronize`, or c10's `stream.synchronize()` /
    `event.block(current)`. The join must be on every path to the return (cpp_branches.py):
    one under an `if` the launch is not also under (`if (step % 100 == 0)
    cudaStreamSynchronize(side);`), in a loop body, or behind an earlier `return` does not
    count; one in both arms of an `if`/`else`, or before each return, does.

    A stream used only for capture (every use between `cudaStreamBeginCapture(s, ...)` and
    `cudaStreamEndCapture(s, ...)`) is not flagged: capture records a graph and runs
    nothing; where the graph is launched is what runs (`cudaGraphLaunch(exec, s)` on the
    private stream is a use like any other).
    """

    code = "GK501"
    name = "SideStreamInCpp"
    category = Category.STREAM_ESCAPE
    severity = Severity.ERROR
    summary = "C++/CUDA launches on a stream other than the current one without joining it back"
    message = (
        "{what} in the C++/CUDA source puts work on a stream other than PyTorch's current stream, and "
        "it is not joined back before the host function returns: the harness's events on the current "
        "stream do not wait for it, so the kernel is not timed and may still run when the output is read."
    )
    joined_message = (
        "{what} in the C++/CUDA source uses a side stream; it is joined back before the host function "
        "returns, so the work is timed. A warning only: keep the join on every path out of the call (the "
        "timing stage's GK705 checks that no work runs on after it)."
    )
    unknown_message = (
        "A kernel launch in the C++/CUDA source uses a stream that is neither PyTorch's current stream "
        "nor a stream handed in by the caller; if it is not the current stream, the harness's events do "
        "not time this kernel."
    )
    hint = (
        "Launch on the current stream: `auto stream = at::cuda::getCurrentCUDAStream();` then "
        "`kernel<<<grid, block, smem, stream>>>(...)`, and `cublasSetStream(handle, stream)`. Do not "
        "create streams or take them from the pool; if you must, make the current stream wait for the "
        "side stream (`cudaEventRecord` + `cudaStreamWaitEvent`) before returning."
    )
    VALID = [
        # the current stream, inline and through a variable
        Valid(snippet("""
            src = r'''
            #include <ATen/cuda/CUDAContext.h>
            __global__ void k(float* y) {}
            torch::Tensor f(torch::Tensor y) {
              auto stream = at::cuda::getCurrentCUDAStream();
              k<<<1, 32, 0, stream>>>(y.data_ptr<float>());
              k<<<1, 32, 0, c10::cuda::getCurrentCUDAStream().stream()>>>(y.data_ptr<float>());
              cublasSetStream(handle, stream);
              return y;
            }
            '''
        """)),
        # legacy default stream, no stream argument, and a stream passed in by the caller
        Valid(snippet("""
            src = r'''
            __global__ void k(float* y) {}
            void launch(float* y, cudaStream_t s) { k<<<1, 32, 0, s>>>(y); }
            torch::Tensor f(torch::Tensor y) {
              k<<<1, 32>>>(y.data_ptr<float>());
              k<<<1, 32, 0, 0>>>(y.data_ptr<float>());
              launch(y.data_ptr<float>(), at::cuda::getCurrentCUDAStream());
              return y;
            }
            '''
        """)),
        # a private stream used only to capture a graph, which runs on the current stream
        Valid(snippet("""
            src = r'''
            __global__ void k(float* y) {}
            void f(torch::Tensor y) {
              static cudaGraphExec_t exec = nullptr;
              if (!exec) {
                cudaStream_t cap;
                cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking);
                cudaStreamBeginCapture(cap, cudaStreamCaptureModeThreadLocal);
                k<<<1, 32, 0, cap>>>(y.data_ptr<float>());
                cudaGraph_t g;
                cudaStreamEndCapture(cap, &g);
                cudaGraphInstantiate(&exec, g, 0);
                cudaStreamDestroy(cap);
              }
              cudaGraphLaunch(exec, at::cuda::getCurrentCUDAStream());
            }
            '''
        """)),
    ]
    INVALID = [
        # the same capture, but the graph is launched on the private stream and never joined
        Invalid(snippet("""
            src = r'''
            __global__ void k(float* y) {}
            void f(torch::Tensor y) {
              cudaStream_t cap;
              cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking);
              cudaStreamBeginCapture(cap, cudaStreamCaptureModeThreadLocal);
              k<<<1, 32, 0, cap>>>(y.data_ptr<float>());
              cudaGraph_t g;
              cudaStreamEndCapture(cap, &g);
              cudaGraphExec_t exec;
              cudaGraphInstantiate(&exec, g, 0);
              cudaGraphLaunch(exec, cap);
            }
            '''
        """), line=6, message="Using the stream `cap`"),
        # joined only on a rarely taken branch
        Invalid(snippet("""
            src = r'''
            __global__ void k(float* y) {}
            void f(float* y, int step) {
              cudaStream_t side;
              cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
              k<<<1, 32, 0, side>>>(y);
              if (step % 100 == 0) cudaStreamSynchronize(side);
            }
            '''
        """), line=5, message="`cudaStreamCreateWithFlags` in the C++/CUDA source puts work on a stream"),
        Invalid(snippet("""
            src = r'''
            __global__ void k(float* y) {}
            static cudaStream_t side;
            torch::Tensor f(torch::Tensor y) {
              if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
              k<<<1, 32, 0, side>>>(y.data_ptr<float>());
              return y;
            }
            '''
        """), line=5, message="`cudaStreamCreateWithFlags` in the C++/CUDA source puts work on a stream"),
        Invalid(snippet("""
            src = r'''
            #include <ATen/cuda/CUDAContext.h>
            __global__ void k(float* y) {}
            torch::Tensor f(torch::Tensor y) {
              at::cuda::CUDAStream s = at::cuda::getStreamFromPool(true);
              k<<<1, 32, 0, s.stream()>>>(y.data_ptr<float>());
              return y;
            }
            '''
        """), line=5, message="`getStreamFromPool` in the C++/CUDA source puts work on a stream"),
        # a guard makes a pool stream current: the getCurrentCUDAStream launch is then on it
        Invalid(snippet("""
            src = r'''
            __global__ void k(float* y) {}
            torch::Tensor f(torch::Tensor y) {
              c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool());
              k<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>());
              return y;
            }
            '''
        """), line=4, message="`getStreamFromPool` in the C++/CUDA source puts work on a stream"),
        Invalid(snippet("""
            src = r'''
            torch::Tensor mm(torch::Tensor a, torch::Tensor b) {
              cudaStream_t s;
              cudaStreamCreate(&s);
              cublasSetStream(handle, s);
              cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, a, 1, b, 1, &zero, c, 1);
              return c;
            }
            '''
        """), line=4, message="`cudaStreamCreate` in the C++/CUDA source puts work on a stream"),
    ]

    def check_cpp(self, source: CppSource) -> None:
        self._regions: dict[int, list[Region]] = {}  # conditional regions by host function, per source
        tokens = source.tokens
        if not idents(source) & (CREATE | ACQUIRE | SWITCH | {"cudaStreamNonBlocking"}):
            # nothing here can name a side stream; only launches on streams of unknown origin remain
            if "<<<" in source.text:
                self._unknown_launch_streams(source, None, set())
            return
        funcs = source.functions
        sites = self._acquisitions(tokens, ACQUIRE)
        identities = {s.identity for s in sites if s.identity}
        # `static cudaStream_t fast() { ...create...; return g; }`: calling the helper hands out g
        helpers = frozenset(fn.name for fn in funcs if returns_any(tokens, fn, identities))
        if helpers:
            more = [site for site in self._acquisitions(tokens, helpers) if site.identity]
            sites += more
            identities |= {site.identity for site in more if site.identity}
        # uses: (token index, identity or None for inline acquisitions/switches)
        uses: list[tuple[int, Optional[str], str]] = []
        for site in sites:
            if site.identity is None and function_at(funcs, site.index) is not None:
                uses.append((site.index, None, site.what))
        skip_until = -1
        for i, tok in enumerate(tokens):
            if i <= skip_until or tok.kind != "ident":
                continue
            if tok.text in CREATE or tok.text in NOT_USES or tok.text in SYNC:
                _, skip_until = call_args(tokens, i)  # its arguments are not uses
                continue
            if tok.text in identities and function_at(funcs, i) is not None and is_use(tokens, i):
                uses.append((i, tok.text, f"Using the stream `{tok.text}`"))
        # A stream used only between cudaStreamBeginCapture(s) and cudaStreamEndCapture(s) runs
        # nothing: capture records a graph, and where the graph is launched is what counts.
        captures = capture_spans(tokens, identities)
        captured = {identity for identity in identities if captures.get(identity)}
        for index, identity, _ in uses:
            if identity in captured and not any(a <= index <= b for a, b in captures[identity]):
                captured.discard(identity)
        uses = [u for u in uses if u[1] not in captured]
        unjoined_ids: set[Optional[str]] = set()
        used_ids: set[Optional[str]] = set()
        reported: set[tuple[int, Optional[str]]] = set()
        for index, identity, what in uses:
            fn = function_at(funcs, index)
            used_ids.add(identity)
            if fn is None or self._joined_after(tokens, index, fn, identities):
                continue
            unjoined_ids.add(identity)
            key = (fn.body_start, identity)
            if key in reported:
                continue
            reported.add(key)
            self.report_cpp(source, tokens[index].offset, self.message.format(what=what),
                            evidence={"stream": identity, "host_function": fn.name, "joined": False})
        for site in sites:
            if site.identity is None or site.identity in captured:
                continue
            bad = site.identity in unjoined_ids or site.identity not in used_ids and not any(
                t.text in ("cudaStreamSynchronize", "cudaDeviceSynchronize") for t in tokens)
            self._emit(source, site, bad)
        self._unknown_launch_streams(source, funcs, identities)

    def _unknown_launch_streams(self, source: CppSource, funcs: Optional[list[CppFunction]],
                                identities: set[str]) -> None:
        """`<<<g, b, smem, s>>>` where `s` is neither the current stream, the default stream, a
        parameter, a value derived from one of those, nor a side stream reported above: its
        origin is unknown here, so it is a warning (a stream handle kept from an earlier call,
        or set through another entry point, is how a side stream reaches C++ unseen)."""
        tokens = source.tokens
        for i in source.by_text["punct"].get("<<<", ()):
            tok = tokens[i]
            close = match_close(tokens, i)
            args = launch_config(tokens, i, close)
            if len(args) < 4:
                continue
            texts = {t.text for t in args[3] if t.kind in ("ident", "number")}
            if not texts or texts <= DEFAULT_STREAMS or texts & (CURRENT | ACQUIRE | identities):
                continue
            if funcs is None:
                funcs = source.functions  # only for the rare launch on some other stream
            fn = function_at(funcs, i)
            if fn is None:
                continue
            if texts & set(fn.params) or derived_from(tokens, fn, texts, set(fn.params) | CURRENT):
                continue
            self.report_cpp(source, tok.offset, self.unknown_message, severity=Severity.WARNING,
                            evidence={"stream": " ".join(t.text for t in args[3]), "host_function": fn.name})

    # pieces ----------------------------------------------------------------------------
    def _acquisitions(self, tokens: Sequence[Token], acquire: frozenset[str]) -> list[_Site]:
        sites: list[_Site] = []
        create_spans: list[tuple[int, int]] = []
        for i, tok in enumerate(tokens):
            if tok.kind != "ident":
                continue
            if acquire is not ACQUIRE:
                if tok.text in acquire and i > 0 and tokens[i - 1].text != "cudaStream_t" and called(tokens, i):
                    sites.append(_Site(i, assigned_name(tokens, i), f"`{tok.text}()`"))
            elif tok.text in CREATE:
                args, close = call_args(tokens, i)
                create_spans.append((i, close))
                target = args[0] if args else []
                ident = next((t.text for t in target if t.kind == "ident"), None)
                sites.append(_Site(i, ident, f"`{tok.text}`"))
            elif tok.text in ACQUIRE:
                ident = assigned_name(tokens, i)
                if ident is not None and statement_has(tokens, i, SWITCH):
                    ident = None  # `CUDAStreamGuard g(getStreamFromPool())`: a switch, not a variable
                sites.append(_Site(i, ident, f"`{tok.text}`"))
            elif tok.text in SWITCH:
                args, _ = call_args(tokens, i)
                if not args and i + 2 < len(tokens) and tokens[i + 2].text == "(":
                    args, _ = call_args(tokens, i + 1)  # `CUDAStreamGuard guard(stream)`
                if args and not any(t.text in CURRENT for t in args[0]) and not any(
                        t.text in ACQUIRE for t in args[0]):
                    sites.append(_Site(i, None, f"`{tok.text}`"))
            elif tok.text == "cudaStreamNonBlocking" and not any(a <= i <= b for a, b in create_spans):
                sites.append(_Site(i, None, "`cudaStreamNonBlocking`"))
        return sites

    def _joined_after(self, tokens: Sequence[Token], index: int, fn: CppFunction, identities: set[str]) -> bool:
        joins = [j for j in range(index + 1, fn.body_end) if is_join(tokens, j, identities)]
        if not joins:
            return False
        found = self._regions.get(fn.body_start)
        if found is None:
            found = self._regions[fn.body_start] = regions(tokens, fn)
        return any(covers(tokens, fn, found, index, j, joins) for j in joins)

    def _emit(self, source: CppSource, site: _Site, bad: bool) -> None:
        tok_offset = source.tokens[site.index].offset
        if bad:
            self.report_cpp(source, tok_offset, self.message.format(what=site.what),
                            evidence={"stream": site.identity, "joined": False})
        else:
            self.report_cpp(source, tok_offset, self.joined_message.format(what=site.what),
                            evidence={"stream": site.identity, "joined": True},
                            severity=Severity.WARNING if self.active_severity == Severity.ERROR else self.active_severity)

