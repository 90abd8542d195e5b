from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.memo_keys import Frame, MemoRule
from gatekeeper.static.walk import subtree
from gatekeeper.static.examples import Invalid, Valid, snippet

# Expressions that identify a tensor's storage, not its values.
_IDENTITY_METHODS = frozenset({"data_ptr", "storage", "untyped_storage", "storage_offset", "_cdata"})
_IDENTITY_BUILTINS = frozenset({"builtins.id", "builtins.hash"})


class MemoisesByInputIdentity(MemoRule):
    """A result memo keyed by identity: a persistent cache (attribute of `self`, module
    global, closure) is looked up with a key built from a tensor's identity (`id(x)`,
    `x.data_ptr()`, `x._version`, `x.untyped_storage()`), directly, through a local or
    through a key helper, and the looked-up value is what the model returns (or the lookup
    decides a branch that returns a stored value).

    Why it games the benchmark: harnesses reuse the same input tensors across timed calls;
    a result looked up by identity skips the work. With `_version` in the key the memo
    survives an in-place overwrite check but still skips every timed call, and goes stale
    when the allocator hands the address to new data.

    Known false-positive patterns it does not fire on, and why:
    - a weight prepared once and re-prepared when its `._version` (pointer, shape, dtype)
      changes: a careful cache whose value is consumed, never returned;
    - a CUDA graph keyed on the input's `data_ptr()` that replays on the live buffers: the
      replay recomputes; returning its static output is at most GK101 (output storage
      reused), never a skipped computation;
    - a pointer compared to remember a layout decision (channels-last done) or passed to a
      kernel; caches keyed by shape or dtype (launch configurations, compiled kernels).
    Content fingerprints (`x[0, 0].item()`) are GK107.
    """

    code = "GK102"
    name = "MemoisesByInputIdentity"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    confirmed_by = "GK611"
    summary = "returns results memoised by input identity (id, data_ptr, _version)"
    message = ("A persistent cache ({container}) is keyed by `{key}`, the input's identity rather than its values, "
               "and the model returns what it holds: repeated calls on the same tensor skip the computation.")
    hint = (
        "Compute the output from the input's values on every call. If you cache something "
        "across calls, cache what is derived from parameters (a packed weight, keyed on its "
        "`_version`) or launch parameters keyed by shape, never results."
    )

    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self._cfg = {}
                def forward(self, x):
                    key = (tuple(x.shape), x.dtype)
                    if key not in self._cfg:
                        self._cfg[key] = pick_block(x.shape)
                    return run(x, self._cfg[key])
        """)),
        Valid(snippet("""
            import torch
            def forward(x):
                ptr = x.data_ptr()
                return kernel(ptr, x.numel())
        """)),
        # careful weight cache keyed on _version: consumed, not returned
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    v = (self.weight.data_ptr(), self.weight._version, self.weight.shape)
                    if self._wkey != v:
                        self._wt = self.weight.t().contiguous()
                        self._wkey = v
                    return _ext.mm(x, self._wt)
        """)),
        # CUDA graph keyed on the input's pointer, replayed on the live buffer
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if self._graph is None or self._ptr != x.data_ptr():
                        self._capture(x)
                        self._ptr = x.data_ptr()
                    self._graph.replay()
                    return self._out.clone()
        """)),
        # pointer remembered for a layout decision
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if self._last_ptr == x.data_ptr():
                        fast = True
                    else:
                        self._last_ptr = x.data_ptr()
                        fast = False
                    return run(x, fast)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.cache = {}
                def forward(self, x):
                    k = x.data_ptr()
                    if k in self.cache:
                        return self.cache[k]
                    out = compute(x)
                    self.cache[k] = out
                    return out
        """), line=8, message="A persistent cache (self.cache) is keyed by `.data_ptr()`"),
        Invalid(snippet("""
            import torch
            _memo = {}
            def forward(x):
                hit = _memo.get((id(x), x._version))
                if hit is not None:
                    return hit
                _memo[(id(x), x._version)] = r = compute(x)
                return r
        """), line=4, message="A persistent cache (module global _memo) is keyed by `._version`"),
        # a stored pointer compared, the stored result returned as a clone
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if x.data_ptr() == self._ptr and x._version == self._ver:
                        return self._out.clone()
                    self._ptr, self._ver = x.data_ptr(), x._version
                    self._out = compute(x)
                    return self._out
        """), line=4, message="A persistent cache (self._ptr) is keyed by `.data_ptr()`"),
    ]

    def key_of(self, expr: cst.BaseExpression, frame: Frame) -> Optional[str]:
        for current in subtree(expr, into_functions=False):
            if type(current) is cst.Call:
                qual = self.ctx.qualname(current.func)
                if qual in _IDENTITY_BUILTINS:
                    return f"{qual.split('.')[-1]}(...)"  # type: ignore[union-attr]
                if type(current.func) is cst.Attribute and current.func.attr.value in _IDENTITY_METHODS:
                    return f".{current.func.attr.value}()"
            if type(current) is cst.Attribute and current.attr.value in ("_version", "_cdata"):
                return f".{current.attr.value}"
        return None
