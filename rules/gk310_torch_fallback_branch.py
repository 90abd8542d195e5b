from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Confidence, Severity
from gatekeeper.analyses.torch_fallback_paths import Fallback
from gatekeeper.analyses.torch_rule_base import TorchFallbackRule
from gatekeeper.analyses.torch_policy_table import policy
from gatekeeper.analyses.torch_usage import Use
from gatekeeper.static.examples import Invalid, Valid, snippet

_EXT = "import torch\nfrom torch.utils.cpp_extension import load_inline\n_ext = load_inline('m', '', '', functions=['f'])\n"
_WHY = {
    "exception": "when the kernel raises (a jittered shape it cannot handle, a build or launch error), torch "
                 "silently produces the right answer, so correctness checks pass on torch's result",
    "input": "the condition reads the input's shape, size, dtype or layout, so the kernel handles only the "
             "inputs it was written for and torch handles the rest",
    "device": "the condition reads the device, so on the benchmark GPU the kernel path should run; the torch "
              "path is dead weight there but is still torch doing the work wherever it runs",
    "dead": "the condition is fixed when the file is written and selects the torch path, so the kernel never "
            "runs and torch does all the work",
    "flag": "the condition is a flag (a failed import or build, a mode switch), so whenever the flag flips, "
            "torch does the work and the result still looks correct",
}


class TorchFallbackBranch(TorchFallbackRule):
    """A fallback path computes with torch: the other branch of a `try`/`except` or an
    `if`/`else` whose main branch launches the submission's own kernel.

        try:                                 if x.is_cuda and x.shape[-1] % 8 == 0:
            return _ext.mean0(x)                 return _ext.mean0(x)
        except Exception:                    return x.mean(dim=0)
            return x.mean(dim=0)

    Why it games the benchmark: a kernel that fails on jittered shapes, or that only handles
    the nominal shape, still passes correctness because torch computes the answer on the
    fallback path. The ops on a fallback path are reported here once per branch, not by
    GK301-GK305.

    Severity (policy table below): which branch runs is a run-time question, so under the
    default profile a fallback is `suspect` (a warning) and the run-time work attribution
    (GK667) confirms it; strict rejects it. A switch fixed in the file to the torch path is
    an error under every profile, because the kernel never runs: a constant
    (`USE_KERNEL = False`, `if False and x.is_cuda:`) or an environment variable read with a
    default that selects torch (`os.environ.get("USE_KERNEL", "0") == "1"`, `"X" in
    os.environ`): the harness does not set the submission's own variables. Also found:
    early returns (`if not ok: return torch(x)` before or after the launch, through nested
    if/try), launches through a helper or an autograd Function of the file.

    Known false-positive patterns and why it does not fire on them: `try: import triton` /
    `except ImportError:` with no torch compute; a fallback that only raises an error;
    branches that both launch own kernels; an `os.environ[...]` read with no default (not
    fixed in the file, so not "dead"). Allow ops with `[rules.GK310.options] allow = [...]`.
    """

    code = "GK310"
    name = "TorchFallbackBranch"
    summary = "a try/except or if/else fallback path computes with torch"
    kinds = ("function", "layer", "method", "operator", "aten")
    message = ("the fallback path of this {kind} computes `{ops}` with torch while the other path launches the "
               "submission's kernel `{kernel}`: {why}.")
    hint = (
        "Remove the torch fallback: make the kernel handle every shape and dtype the problem can produce "
        "(compute sizes and the grid from the inputs) and let errors raise. If a fallback is required, "
        "raise an error instead of computing with torch."
    )
    VALID = [
        Valid(snippet("""
            import torch
            try:
                import triton
                HAS_TRITON = True
            except ImportError:
                HAS_TRITON = False
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if not HAS_TRITON:
                        raise RuntimeError('triton is required')
                    y = torch.empty_like(x)
                    kernel[(1,)](x, y)
                    return y
        """)),
        Valid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline('m', '', '', functions=['f'])
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    try:
                        return _ext.f(x)
                    except RuntimeError as exc:
                        raise ValueError('kernel failed') from exc
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            _ext = load_inline('m', '', '', functions=['f'])
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    try:
                        return _ext.f(x)
                    except Exception:
                        return x.mean(dim=0)
        """), line=9, message="the fallback path of this try/except computes `Tensor.mean` with torch"),
        Invalid(snippet("""
            import torch
            import fused_mean_cuda as _ext
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if x.shape[-1] % 8 == 0:
                        return _ext.f(x)
                    return torch.mean(x, 0)
        """), line=7, message="the fallback path of this if/else computes `torch.mean` with torch"),
        Invalid(snippet("""
            import torch
            import torch.nn.functional as F
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if USE_KERNEL:
                        y = kernel[(8,)](x)
                    else:
                        y = F.gelu(x)
                    return y
        """), line=8, message="the fallback path of this if/else computes `torch.nn.functional.gelu` with torch"),
    ]

    situations = ("fallback_dead", "fallback_live")

    def fallback_verdict(self, fallback: Fallback) -> tuple[Severity, Confidence]:
        profile = self.ctx.profile
        # Not a fallback at all when the switch is fixed: the only path that runs is torch.
        verdict = policy().verdict("fallback_dead" if fallback.condition == "dead" else "fallback_live", profile)
        if self.active_severity != type(self).severity_for(profile):
            return self.active_severity, verdict.confidence
        return verdict.level, verdict.confidence

    def finish(self) -> None:
        self.usage.resolve()
        groups: dict[int, list[Use]] = {}
        for use in self.usage.uses:
            if use.fallback is not None and use.kind in self.kinds and not self.allowed(use):
                groups.setdefault(id(use.fallback.node), []).append(use)
        for uses in groups.values():
            fallback = uses[0].fallback
            assert fallback is not None
            ops = ", ".join(dict.fromkeys(u.qual for u in uses))
            kind = "try/except" if fallback.kind == "try" else "if/else"
            message = self.message.format(kind=kind, ops=ops, kernel=fallback.kernel, why=_WHY[fallback.condition])
            node: Optional[cst.CSTNode] = uses[0].node
            severity, confidence = self.fallback_verdict(fallback)
            if node is not None:
                self.report(node, message, evidence={"ops": [u.qual for u in uses], "kernel": fallback.kernel,
                                                     "condition": fallback.condition, "statement": kind},
                            severity=severity, confidence=confidence)
