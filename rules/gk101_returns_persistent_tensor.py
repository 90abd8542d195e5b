from __future__ import annotations

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.returned_values_rule import FlowRule
from gatekeeper.static.returns import MAYBE, NONE, OPAQUE, VISIBLE, ReturnSite, storage_key
from gatekeeper.static.syntax import store_key
from gatekeeper.static.examples import Invalid, Valid, snippet


class ReturnsPersistentTensor(FlowRule):
    """The model's output is storage kept across calls: a value that reaches
    `ModelNew.forward`'s return (directly, through helpers it returns, inside a returned
    tuple, or through an extension function whose C++ body returns the buffer it was
    handed) is an attribute of `self`, a module global, a closure variable, or an entry of
    a container held there.

    Why it games the benchmark: every call returns the same storage. When nothing on the
    path to the `return` can write it, the call hands back an earlier call's result
    without computing (certain). When the call writes it first (a kernel or extension takes
    it, directly, through an alias or inside a tuple or list of buffers; `copy_`, `out=`,
    a CUDA-graph replay; a write in every arm of an `if`/`else`), the work is done but the
    output storage is reused: a caller that keeps the first result sees it overwritten.
    KernelBench and KernelBench-Hard accept that, so it is a policy question: `likely` when
    the write is opaque (a kernel may write only part of it), `suspect` when it is visibly
    whole, a warning under `default` and an error under `strict`. "No write" is certain only
    when no call the analysis cannot see into could write it: a stored callable (a bound
    graph replay kept with the input), a method of `self`, a helper handed `self`, an
    extension function once the buffer was handed to native code, or a write on some paths
    only (one arm, a loop) make it `likely`. The run-time two-call check settles all of
    them: GK610 (the second call's values are stale or wrong) confirms a stale result;
    GK612 (the storage came back with values right for the second call) is reused storage.
    A write filled only under a test of the stored state (`if self.y is None:`) is the
    cache being filled on the first call, and does not count.

    Known false-positive patterns it does not fire on, and why:
    - an extension module from a lazy loader (`return _ext`), a config dict, a flag, a shape
      tuple, a packed weight or a scratch workspace returned by a helper: only values that
      reach forward's return are considered, and stored extension handles are skipped;
    - `get_inputs`/`get_init_inputs` returning module-level lists: not forward's return;
    - `self.out = compute(x); return self.out`: rebound to a fresh tensor on every call;
    - a persistent workspace written by the kernel but not returned;
    - `self.static_out.clone()` after a graph replay: the replay recomputes it.
    A copy of a stored result returned on a path that writes nothing (`return
    self._res[shape].clone()`) is flagged as certain: fresh storage, stale contents.
    """

    code = "GK101"
    name = "ReturnsPersistentTensor"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    confirmed_by = "GK610"
    summary = "returns a tensor stored across calls instead of a fresh output"
    message = ("forward returns {origin}, which persists across calls, on a path that does not recompute it: "
               "the call hands back the result stored by an earlier call.")
    reused = ("forward returns {origin}, which persists across calls; this call writes it first ({how}), so the "
              "work is done but every call hands back the same storage (output storage reused){why}. "
              "The two-call run-time check (GK610) confirms or clears this.")
    copied = ("forward returns a copy of {origin}, which persists across calls, on a path that does not recompute "
              "it: the copy is fresh storage, but its contents are an earlier call's result.")
    unseen = ("forward returns {origin}, which persists across calls; no statement on the path to this return "
              "visibly writes it, but {how} could, so it may hand back an earlier call's result. "
              "The two-call run-time check (GK610) settles it.")
    hint = (
        "Allocate the output on every call from the input's sizes, e.g. "
        "`out = torch.empty((x.size(1), x.size(2)), device=x.device, dtype=x.dtype)`, write it "
        "in the kernel and return it. Keep only scratch workspaces across calls, never outputs."
    )

    VALID = [
        # fresh output every call
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    out = torch.empty_like(x)
                    _ext.run(x, out)
                    return out
        """)),
        # persistent scratch workspace, never returned
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self._ws = None
                def forward(self, x):
                    if self._ws is None:
                        self._ws = torch.empty(1024, device=x.device)
                    out = torch.empty_like(x)
                    _ext.run(x, self._ws, out)
                    return out
        """)),
        # parameter used as an input, the call returns a fresh tensor
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = torch.nn.Parameter(torch.randn(4))
                def forward(self, x):
                    return _ext.scale(x, self.w)
        """)),
        # a lazily built extension handle kept in a global and returned by a getter
        Valid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _EXT = None
            def _ext():
                global _EXT
                if _EXT is None:
                    _EXT = load_inline(name='e', cpp_sources=SRC, functions=['f'])
                return _EXT
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return _ext().f(x)
        """)),
        # a packed weight and a workspace returned by helpers, consumed by forward
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def _packed(self):
                    if self._wp is None:
                        self._wp = pack(self.w)
                    return self._wp
                def _workspace(self, n):
                    return self._ws
                def forward(self, x):
                    out = torch.empty_like(x)
                    _ext.run(x, self._packed(), self._workspace(x.numel()), out)
                    return out
        """)),
        # a config dict and module-level lists returned outside forward's return
        Valid(snippet("""
            import torch
            SIZES = [1, 2]
            class ModelNew(torch.nn.Module):
                def config(self):
                    return self._cfg
                def forward(self, x):
                    return _ext.run(x, self.config()['block'])
            def get_init_inputs():
                return [SIZES]
        """)),
        # rebound to a fresh result on every call
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    self.hidden = _ext.step(x, self.hidden)
                    return self.hidden
        """)),
    ]
    INVALID = [
        # a class attribute is shared by every call, like a global (red team round 9)
        Invalid(snippet("""
            import torch
            class _Plan:
                out = None
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if _Plan.out is None:
                        _Plan.out = torch.relu(x)
                    return _Plan.out
        """), line=8, message="forward returns class attribute _Plan.out"),
        # the seed: lazily allocated self._y handed to an extension that returns it
        Invalid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline(name='m', cpp_sources='', cuda_sources='''
            torch::Tensor f(torch::Tensor x, torch::Tensor y) { k<<<1, 32>>>(x.data_ptr<float>(), y.data_ptr<float>()); return y; }
            ''', functions=['f'])
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self._y = None
                def forward(self, x):
                    y = self._y
                    if y is None:
                        y = torch.empty((16, 48), device=x.device)
                        self._y = y
                    return _ext.f(x, y)
        """), line=15, message="forward returns self._y"),
        # returning the attribute directly after a kernel wrote it
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if not hasattr(self, 'out'):
                        self.out = torch.empty_like(x)
                    kernel[(1,)](x, self.out)
                    return self.out
        """), line=7, message="forward returns self.out"),
        # module global cache: computed once, returned ever after
        Invalid(snippet("""
            import torch
            _OUT = None
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    global _OUT
                    if _OUT is None:
                        _OUT = compute(x)
                    return _OUT
        """), line=8, message="forward returns closure variable _OUT"),
        # closure dict reached through a helper that forward returns
        Invalid(snippet("""
            import torch
            def make():
                store = {}
                def fwd(x):
                    if 'r' not in store:
                        store['r'] = compute(x)
                    return store['r']
                return fwd
            _fwd = make()
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return _fwd(x)
        """), line=7, message="forward returns closure variable store[...] (through `fwd`)"),
        # in-place method on a stored tensor returns the stored tensor
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return self.buf.copy_(x * 2)
        """), line=4, message="forward returns self.buf"),
        # a shape-keyed result cache handed back as a clone
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    k = tuple(x.shape)
                    if k in self._res:
                        return self._res[k].clone()
                    y = run(x)
                    self._res[k] = y
                    return y
        """), line=6, message="forward returns a copy of self._res[...]"),
        # a helper returns the stored result, forward returns the helper's result in a tuple
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def _run(self, x):
                    if self._last is not None:
                        return self._last
                    self._last = compute(x)
                    return self._last
                def forward(self, x):
                    y = self._run(x)
                    return (y, x)
        """), line=5, message="forward returns self._last (through `ModelNew._run`)"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Everything assigned to `self.X` and to module names, to tell a stored extension
        # handle (`_EXT = load_inline(...)`, returned by a lazy getter) from a stored tensor.
        self.assigned: dict[str, list[cst.BaseExpression]] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        super().visit_Assign(node)
        for target in node.targets:
            key = store_key(target.target)
            if key is not None:
                self.assigned.setdefault(key, []).append(node.value)

    def _holds_handle(self, origin: str) -> bool:
        values = self.assigned.get(storage_key(origin), [])
        return any(type(v) is cst.Call and (self.ctx.qualname(v.func) or "") in _HANDLE_MAKERS for v in values)

    def finish(self) -> None:
        for site in self.flow.forward_sites():
            handed = self.flow.extension_returns(site)
            if site.origin is not None and not self._holds_handle(site.origin) and self.ctx.qualname(site.value) is None:
                self._report_site(site)
            elif (site.origin is None and site.stored is not None and site.write in (NONE, MAYBE)
                  and not self._holds_handle(site.stored)):
                # `return self._cache[shape].clone()`: fresh storage, an earlier call's contents
                self.report(site.node, self.copied.format(origin=site.stored),
                            evidence={"returns_copy_of": site.stored, "write": site.write, "function": site.key},
                            confidence=Confidence.LIKELY if site.write == MAYBE else Confidence.CERTAIN)
            elif handed is not None:
                name, index, origin = handed
                self.report(
                    site.node,
                    self.reused.format(origin=origin, how=f"handed to the extension function `{name}`",
                                       why=f"; the C++ body of `{name}` returns that argument and may write only part of it"),
                    evidence={"returns": origin, "extension_function": name, "argument": index, "write": OPAQUE},
                    confidence=Confidence.LIKELY,
                )

    def _report_site(self, site: ReturnSite) -> None:
        if site.write == NONE and not site.key.endswith("forward"):
            # a getter's buffer that the caller hands to a kernel before returning it
            site.write, site.how = self.flow.caller_write(site)
        evidence = {"returns": site.origin, "write": site.write, "function": site.key}
        origin = site.origin if site.key.endswith("forward") else f"{site.origin} (through `{site.key}`)"
        if site.write == NONE:
            self.report(site.node, self.message.format(origin=origin), evidence=evidence)
        elif site.write == MAYBE:
            how = f"`{site.how}`" if site.how else "a write that runs only on some paths"
            self.report(site.node, self.unseen.format(origin=origin, how=how), evidence=evidence,
                        confidence=Confidence.LIKELY)
        elif site.write in (OPAQUE, VISIBLE):
            opaque = site.write == OPAQUE
            self.report(
                site.node,
                self.reused.format(origin=origin, how=f"`{site.how}`" if site.how else "in place",
                                   why="; the write is a call whose coverage cannot be seen" if opaque else ""),
                evidence=evidence,
                confidence=Confidence.LIKELY if opaque else Confidence.SUSPECT,
            )


# Calls that build something other than a tensor: a compiled extension, a module, a kernel.
_HANDLE_MAKERS = frozenset({
    "torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load", "importlib.import_module",
    "torch.compile", "torch.jit.script", "torch.jit.trace", "triton.jit", "ctypes.CDLL", "ctypes.cdll.LoadLibrary",
    "cupy.RawKernel", "cupy.RawModule",
})


