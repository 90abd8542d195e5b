from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.memo_keys import Frame, MemoRule
from gatekeeper.static.walk import subtree
from gatekeeper.static.examples import Invalid, Valid, snippet

# Methods that turn tensor elements into Python values a dict can be keyed on.
_TO_PYTHON = frozenset({"item", "tolist", "tobytes", "numpy"})


class MemoisesBySampledValues(MemoRule):
    """A content-keyed result cache: a persistent cache is keyed on a fingerprint of the
    input's values turned into Python numbers (`x[0, 0].item()`, `x.sum().item()`,
    `x[::97].tolist()`, `x.cpu().numpy().tobytes()`), or such a fingerprint is compared
    with a stored one, and the cached value is what the model returns (directly, as a
    clone, or copied into a fresh output).

    Why it games the benchmark: a fingerprint of a few sampled elements (or a sum) is
    equal for inputs that differ elsewhere, and timing loops repeat the same input; the
    memo returns a stored result without computing, and a wrong one for a near-duplicate.

    Known false-positive patterns it does not fire on, and why:
    - `.item()` values used to pick a kernel or a launch configuration (a dict of configs
      keyed on a scale): the cached value is consumed, not returned;
    - `.item()` on a parameter for a one-time constant, outside the call's return path;
    - fingerprints of the input that only feed arithmetic. Identity keys (data_ptr, id,
      _version) are GK102; `is` comparisons GK106.
    """

    code = "GK107"
    name = "MemoisesBySampledValues"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    confirmed_by = "GK611"
    summary = "returns results cached under a fingerprint of sampled input values"
    message = ("A persistent cache ({container}) is keyed by `{key}`, a fingerprint of the input's values "
               "(sampled elements, a sum or a hash of them), and the model returns what it holds: inputs with the "
               "same fingerprint get a stored result without any computation.")
    hint = ("Compute the output from all of the input's values on every call; never return results cached "
            "under sampled elements, sums or hashes of the input.")

    VALID = [
        # a scale read from the input picks a config; the output is computed
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    s = x.abs().max().item()
                    cfg = self._cfgs.get(s > 1.0)
                    out = torch.empty_like(x)
                    _ext.run(x, out, cfg)
                    return out
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    sig = float(x[0, 0].item())
                    if sig == getattr(self, '_sig', None):
                        return self._last
                    self._sig = sig
                    self._last = compute(x)
                    return self._last
        """), line=5, message="A persistent cache (self._sig) is keyed by `x[0, 0].item()`"),
        # a dict keyed on sampled elements and the sum, returned as a clone
        Invalid(snippet("""
            import torch
            _CACHE = {}
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    key = (x[0, 0].item(), x[-1, -1].item(), x.sum().item())
                    if key in _CACHE:
                        return _CACHE[key].clone()
                    out = _ext.run(x)
                    _CACHE[key] = out
                    return out
        """), line=6, message="A persistent cache (module global _CACHE) is keyed by `x.sum().item()`"),
        # copied into a fresh output
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    k = tuple(x.flatten()[::4096].tolist())
                    out = torch.empty_like(x)
                    hit = self._memo.get(k)
                    if hit is not None:
                        out.copy_(hit)
                        return out
                    _ext.run(x, out)
                    self._memo[k] = out.clone()
                    return out
        """), line=6, message="A persistent cache (self._memo) is keyed by `x.flatten()[::4096].tolist()`"),
    ]

    def key_of(self, expr: cst.BaseExpression, frame: Frame) -> Optional[str]:
        for current in subtree(expr, into_functions=False):
            if (type(current) is cst.Call and type(current.func) is cst.Attribute
                    and current.func.attr.value in _TO_PYTHON and self.is_input(current.func.value, frame)):
                return _text(current)
        return None


def _text(node: cst.CSTNode) -> str:
    text = " ".join(cst.Module([]).code_for_node(node).split())
    return text if len(text) <= 60 else text[:57] + "..."
