from __future__ import annotations

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.l2_hints import single_use_load, single_use_ptx, window_over_tensor
from gatekeeper.analyses.stream_support import asm_strings, call_args, idents, ptx_words
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.names import string_value
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

# Names that make L2 lines persist (runtime API, driver API, cuda-python spellings).
PERSIST_NAMES = frozenset({
    "cudaAccessPropertyPersisting", "CU_ACCESS_PROPERTY_PERSISTING",
    "cudaLimitPersistingL2CacheSize", "CU_LIMIT_PERSISTING_L2_CACHE_SIZE",
})
_SET_LIMIT = frozenset({"cudaDeviceSetLimit", "cuCtxSetLimit", "deviceSetLimit"})
# Hints that only raise a line's priority inside the cache: honest tuning, weaker than persisting.
HINT_NAMES = frozenset({"EVICT_LAST"})  # CUTLASS / CuTe CacheHintSm90::EVICT_LAST
_GATE = ("Persisting", "PERSISTING", "evict_last", "EVICT_LAST", "access_property")


class PersistsDataInL2(Rule):
    """The submission keeps its data resident in the GPU's L2 cache across calls:
    a persisting access-policy window (`cudaStreamAttrValue.accessPolicyWindow` with
    `hitProp = cudaAccessPropertyPersisting`, set on a stream, a graph node or a launch),
    a persisting L2 carve-out (`cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, n)`),
    `cuda::access_property::persisting`, or the same through cuda-python / the driver API.

    Why it games the benchmark: the harness flushes L2 before every timed call so that each
    call pays for reading its inputs from DRAM, as it would in a real model. Persisting lines
    are not evicted by the flush's ordinary accesses, so the inputs or weights are still in
    L2 and the call is timed warm: the speedup measures the cache policy, not the kernel.
    Likely, an error: there is no reason to set a persisting window in a benchmark that
    flushes L2 other than surviving the flush.

    Eviction-priority hints inside a kernel are reported as a warning only, in every
    profile: `ld.global.L2::evict_last` / `createpolicy.fractional.L2::evict_last` in
    inline PTX, `CacheHintSm90::EVICT_LAST` in CUTLASS, and Triton's
    `tl.load(..., eviction_policy="evict_last")`. They are a common, honest way to keep a
    tile that the same launch reads again, and a flush of twice the L2 size evicts them.
    The same hint on a load that the launch reads only once is GK418 (an error). A
    persisting window whose base is a tensor's data pointer (an input or weight handed in
    by the caller) is certain: it has no use in a launch other than surviving the flush.

    Not flagged (known false-positive patterns, and why): resetting the cache
    (`cudaCtxResetPersistingL2Cache`, `hitProp = cudaAccessPropertyNormal` or `Streaming`,
    `cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0)`): that restores the flushable
    state; `evict_first` / `evict_normal` / `__ldcs` streaming hints: they make data leave
    L2 sooner; these words in comments or docstrings: only code is read.
    """

    code = "GK416"
    name = "PersistsDataInL2"
    category = Category.HARNESS_TAMPERING
    severity = Severity.ERROR
    confidence = Confidence.LIKELY
    # Data that survives the flush makes the timed call faster than its memory floor allows:
    # the timing stage's floor check is the run-time evidence.
    confirmed_by = "GK701"
    summary = "keeps data resident in L2 across calls (persisting access policy), defeating the L2 flush"
    message = (
        "{what} makes L2 cache lines persist: the harness's L2 flush before each timed call does not "
        "evict them, so the call is timed with its data already in cache."
    )
    hint_message = (
        "{what} asks the cache to keep these lines longer (an eviction-priority hint). Inside one launch "
        "that is ordinary tuning, and the harness's flush still evicts them; it is reported so that a "
        "reviewer can see it."
    )
    hint = (
        "Remove the persisting access-policy window and the persisting L2 limit; let the kernel read its "
        "inputs from memory on every call. Reset any window you set (`hitProp = cudaAccessPropertyNormal`, "
        "`cudaCtxResetPersistingL2Cache()`)."
    )
    VALID = [
        Valid(snippet("""
            src = r'''
            void reset(cudaStream_t s) {
              cudaStreamAttrValue a = {};
              a.accessPolicyWindow.num_bytes = 0;
              a.accessPolicyWindow.hitProp = cudaAccessPropertyNormal;
              cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &a);
              cudaCtxResetPersistingL2Cache();
              cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
            }
            '''
        """)),
        Valid(snippet("""
            import triton
            import triton.language as tl
            @triton.jit
            def k(x, y):
                tl.store(y, tl.load(x, eviction_policy='evict_first'))
        """)),
        Valid(snippet("""
            # cudaAccessPropertyPersisting is not used here
            import torch
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = r'''
            void pin(cudaStream_t s, void* w, size_t n) {
              cudaStreamAttrValue a = {};
              a.accessPolicyWindow.base_ptr = w;
              a.accessPolicyWindow.num_bytes = n;
              a.accessPolicyWindow.hitRatio = 1.0f;
              a.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
              cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &a);
            }
            '''
        """), line=7, message="`cudaAccessPropertyPersisting` makes L2 cache lines persist"),
        Invalid(snippet("""
            src = r'''
            #include <cuda_runtime.h>
            void setup(size_t l2) { cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, l2); }
            '''
        """), line=3, message="`cudaLimitPersistingL2CacheSize` makes L2 cache lines persist"),
        Invalid(snippet("""
            from cuda import cudart
            def setup(size):
                cudart.cudaDeviceSetLimit(cudart.cudaLimit.cudaLimitPersistingL2CacheSize, size)
        """), line=3, message="`cudaLimitPersistingL2CacheSize` makes L2 cache lines persist"),
        Invalid(snippet("""
            src = r'''
            __global__ void k(const float* x, float* y) {
              float v;
              asm volatile("ld.global.L2::evict_last.f32 %0, [%1];" : "=f"(v) : "l"(x));
              y[0] = v;
            }
            '''
        """), line=4, message="Inline PTX with an `evict_last` cache hint asks the cache to keep these lines longer"),
        Invalid(snippet("""
            import triton
            import triton.language as tl
            @triton.jit
            def k(x, y):
                tl.store(y, tl.load(x, eviction_policy='evict_last'))
        """), line=5, message='`eviction_policy="evict_last"` asks the cache to keep these lines longer'),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        text = self.ctx.text
        self.on = any(word in text for word in _GATE)
        if not self.on:
            # Every Python handler below does nothing then: leave them out of this file's walk
            # (~240 calls a file on real submissions; issue 20 item 8). check_cpp gates on each source.
            self.visit_Name = self.visit_Attribute = self.visit_Arg = None  # type: ignore[assignment]

    # Python -------------------------------------------------------------------------------
    def visit_Name(self, node: cst.Name) -> None:
        if self.on and node.value in PERSIST_NAMES:
            parent = self.ctx.parent(node)
            if not (type(parent) is cst.Attribute and parent.attr is node):  # visit_Attribute has it
                self._python(node, node.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.on and node.attr.value in PERSIST_NAMES:
            self._python(node, node.attr.value)

    def _python(self, node: cst.CSTNode, name: str) -> None:
        parent = self.ctx.parent(node)
        if type(parent) is cst.Attribute and parent.value is node:
            return  # reported at the outer attribute
        holder = self.ctx.parent(parent) if (type(parent) is cst.Arg) else None
        if ("Limit" in name or "LIMIT" in name) and type(holder) is cst.Call and _zero_size(holder, parent):
            return  # setting the persisting carve-out to 0 is a reset
        self.report(node, self.message.format(what=f"`{name}`"), evidence={"api": name})

    def visit_Arg(self, node: cst.Arg) -> None:
        if self.on and node.keyword is not None and node.keyword.value == "eviction_policy" \
                and string_value(node.value) == "evict_last":
            call = self.ctx.parent(node)
            if type(call) is cst.Call and single_use_load(self.ctx, call) is not None:
                return  # a load read once: GK418 reports it as an error
            self.report(node, self.hint_message.format(what="`eviction_policy=\"evict_last\"`"),
                        evidence={"hint": "evict_last"}, severity=Severity.WARNING, confidence=Confidence.SUSPECT)

    # C++ ----------------------------------------------------------------------------------
    def check_cpp(self, source: CppSource) -> None:
        if not any(word in source.text for word in _GATE):
            return
        names = idents(source)
        tokens = source.tokens
        # a window over a tensor handed in by the caller: certain (GK418's mechanism, issue 20 item 6)
        certain = Confidence.CERTAIN if window_over_tensor(names) else None
        if names & (PERSIST_NAMES | HINT_NAMES | {"access_property"}):
            for i, tok in enumerate(tokens):
                if tok.kind != "ident":
                    continue
                if tok.text in PERSIST_NAMES:
                    if "Limit" in tok.text or "LIMIT" in tok.text:
                        if self._cpp_zero_limit(tokens, i):
                            continue
                    self.report_cpp(source, tok.offset, self.message.format(what=f"`{tok.text}`"),
                                    evidence={"api": tok.text}, confidence=certain)
                elif tok.text == "persisting" and i >= 2 and tokens[i - 1].text == "::" \
                        and tokens[i - 2].text == "access_property":
                    self.report_cpp(source, tok.offset, self.message.format(what="`cuda::access_property::persisting`"),
                                    evidence={"api": "access_property::persisting"})
                elif tok.text in HINT_NAMES:
                    self._hint(source, tok.offset, f"`{tok.text}`")
        single_use = set(single_use_ptx(source))  # GK418 reports these as errors
        for offset, text in asm_strings(source):
            if offset in single_use:
                continue
            if "evict_last" in ptx_words(text) or "L2::evict_last" in text:
                self._hint(source, offset, "Inline PTX with an `evict_last` cache hint")

    def _hint(self, source: CppSource, offset: int, what: str) -> None:
        self.report_cpp(source, offset, self.hint_message.format(what=what), evidence={"hint": what},
                        severity=Severity.WARNING, confidence=Confidence.SUSPECT)

    @staticmethod
    def _cpp_zero_limit(tokens, index: int) -> bool:
        """`cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0)`: a reset."""
        for j in range(index - 1, max(index - 4, -1), -1):
            if tokens[j].text in _SET_LIMIT:
                args, _ = call_args(tokens, j)
                return len(args) >= 2 and [t.text for t in args[1]] in (["0"], ["0u"], ["0ul"], ["0ull"])
        return False


def _zero_size(call: cst.Call, arg: cst.Arg) -> bool:
    args = list(call.args)
    if arg not in args:
        return False
    at = args.index(arg)
    rest = args[at + 1:at + 2]
    return bool(rest) and type(rest[0].value) is cst.Integer and rest[0].value.value == "0"
