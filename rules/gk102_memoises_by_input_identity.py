from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.memo_keys import Frame, MemoRule
from gatekeeper.static.walk import subtree

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
        "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._cfg = {}\n"
        "    def forward(self, x):\n        key = (tuple(x.shape), x.dtype)\n        if key not in self._cfg:\n"
        "            self._cfg[key] = pick_block(x.shape)\n        return run(x, self._cfg[key])\n",
        "import torch\ndef forward(x):\n    ptr = x.data_ptr()\n    return kernel(ptr, x.numel())\n",
        # careful weight cache keyed on _version: consumed, not returned
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        v = (self.weight.data_ptr(), self.weight._version, self.weight.shape)\n"
        "        if self._wkey != v:\n            self._wt = self.weight.t().contiguous()\n            self._wkey = v\n"
        "        return _ext.mm(x, self._wt)\n",
        # CUDA graph keyed on the input's pointer, replayed on the live buffer
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        if self._graph is None or self._ptr != x.data_ptr():\n            self._capture(x)\n"
        "            self._ptr = x.data_ptr()\n        self._graph.replay()\n        return self._out.clone()\n",
        # pointer remembered for a layout decision
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        if self._last_ptr == x.data_ptr():\n            fast = True\n        else:\n            self._last_ptr = x.data_ptr()\n"
        "            fast = False\n        return run(x, fast)\n",
    ]
    INVALID = [
        "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.cache = {}\n"
        "    def forward(self, x):\n        k = x.data_ptr()\n        if k in self.cache:\n            return self.cache[k]\n"
        "        out = compute(x)\n        self.cache[k] = out\n        return out\n",
        "import torch\n_memo = {}\ndef forward(x):\n    hit = _memo.get((id(x), x._version))\n    if hit is not None:\n        return hit\n"
        "    _memo[(id(x), x._version)] = r = compute(x)\n    return r\n",
        # a stored pointer compared, the stored result returned as a clone
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        if x.data_ptr() == self._ptr and x._version == self._ver:\n            return self._out.clone()\n"
        "        self._ptr, self._ver = x.data_ptr(), x._version\n        self._out = compute(x)\n        return self._out\n",
    ]

    def key_of(self, expr: cst.BaseExpression, frame: Frame) -> Optional[str]:
        for current in subtree(expr, into_functions=False):
            if isinstance(current, cst.Call):
                qual = self.ctx.qualname(current.func)
                if qual in _IDENTITY_BUILTINS:
                    return f"{qual.split('.')[-1]}(...)"  # type: ignore[union-attr]
                if isinstance(current.func, cst.Attribute) and current.func.attr.value in _IDENTITY_METHODS:
                    return f".{current.func.attr.value}()"
            if isinstance(current, cst.Attribute) and current.attr.value in ("_version", "_cdata"):
                return f".{current.attr.value}"
        return None
