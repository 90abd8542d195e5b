from __future__ import annotations

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.stream_support import assumed_note, is_false, problem_dtype
from gatekeeper.static.syntax import argument
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

AUTOCAST = frozenset({
    "torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast",
    "torch.amp.autocast_mode.autocast", "torch.cuda.amp.autocast_mode.autocast",
    "torch.set_autocast_enabled", "torch.set_autocast_gpu_dtype", "torch.set_autocast_dtype",
    "torch._C._set_autocast_enabled",
})
FULL_PRECISION = frozenset({"torch.float32", "torch.float", "torch.float64", "torch.double"})


class AutocastRegion(Rule):
    """The submission turns on autocast: `torch.autocast(...)`, `torch.amp.autocast`,
    `torch.cuda.amp.autocast` (as a `with`, a decorator or a call), or
    `torch.set_autocast_enabled(True)` / `set_autocast_gpu_dtype`.

    Why it games the benchmark: inside an autocast region matmuls and convolutions of a
    float32 problem run in float16 or bfloat16, which is faster and less accurate than the
    problem allows, while the outputs are still float32 tensors.

    Not flagged: `autocast(..., enabled=False)` (which turns it off), autocast with
    `dtype=torch.float32`, and any autocast on a float16/bfloat16 problem (there it changes
    nothing the problem did not already allow). Without a problem file float32 is assumed.
    A warning under `default`, an error under `strict`.
    """

    code = "GK531"
    name = "AutocastRegion"
    category = Category.PRECISION_DOWNGRADE
    severity = Severity.WARNING
    strict_severity = Severity.ERROR
    summary = "runs under autocast, lowering a float32 problem to fp16/bf16"
    message = (
        "`{name}` turns on autocast: matmuls and convolutions of this {dtype} problem then run in "
        "float16/bfloat16, faster and less accurate than the problem allows."
    )
    hint = "Remove autocast and compute in the problem's dtype; write the fast path in your own kernel."
    VALID = [
        Valid(snippet("""
            import torch
            def forward(x):
                with torch.autocast('cuda', enabled=False):
                    return _ext.run(x)
        """)),
        Valid(snippet("""
            import torch
            def forward(x):
                with torch.autocast('cuda', dtype=torch.float32):
                    return _ext.run(x)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            def forward(x):
                with torch.autocast(device_type='cuda'):
                    return _ext.run(x)
        """), line=3, message="`torch.autocast` turns on autocast"),
        Invalid(snippet("""
            from torch.cuda.amp import autocast as ac
            class ModelNew:
                @ac()
                def forward(self, x):
                    return _ext.run(x)
        """), line=3, message="`torch.cuda.amp.autocast` turns on autocast"),
        Invalid(snippet("""
            import torch
            torch.set_autocast_enabled(True)
        """), line=2, message="`torch.set_autocast_enabled` turns on autocast"),
    ]


    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.dtype = problem_dtype(self.ctx)[0]  # read once, not at every call
    def visit_Call(self, node: cst.Call) -> None:
        qual = self.ctx.qualname(node.func)
        if qual not in AUTOCAST:
            return
        dtype = self.dtype
        if dtype not in ("float32", "float64"):
            return
        if qual.endswith("set_autocast_enabled"):
            if is_false(argument(node, 0, "enabled")) or is_false(argument(node, 1, "enabled")):
                return
        elif is_false(argument(node, None, "enabled")) or self.ctx.qualname(argument(node, None, "dtype")) in FULL_PRECISION:
            return
        self.report(node, self.message.format(name=qual, dtype=dtype) + assumed_note(self.ctx),
                    evidence={"call": qual, "problem_dtype": dtype})
