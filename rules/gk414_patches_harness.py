from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_patching import PatchRule
from gatekeeper.analyses.harness_support import matches, resolve
from gatekeeper.static.names import dotted
from gatekeeper.static.examples import Invalid, Valid, snippet

HARNESS_MODULES = ("gatekeeper", "kernelbench", "popcorn", "src.eval", "eval_harness", "reference_kernels")
# Objects the harness injects as globals (the jitter object), never imported.
HARNESS_GLOBALS = ("popcorn_pri",)


class PatchesHarness(PatchRule):
    """Writes into the gatekeeper's own modules (`gatekeeper.*`) or a harness's
    (`kernelbench.*`, `popcorn`, the injected `popcorn_pri` jitter object), by assignment,
    `setattr`, `mock.patch`, `__dict__` writes or `__class__` swaps. The module list is the
    `modules` option; `globals` names injected harness objects.

    Why it games the benchmark: a harness that runs in the same process as the submission
    can be told to skip checks, report a fake time, or hand out the nominal shape instead of
    a jittered one.

    Not flagged: calling the shim functions a problem provides
    (`kernelbench.distributed_collectives.default_device()`).
    """

    code = "GK414"
    name = "PatchesHarness"
    category = Category.HARNESS_TAMPERING
    severity = Severity.ERROR
    summary = "modifies the gatekeeper or the benchmark harness"
    message = "`{name}` is replaced ({how}): {what}."
    hint = (
        "Remove every write to the harness (`gatekeeper`, `kernelbench`, `popcorn_pri`). A "
        "submission only defines `ModelNew`; the harness is not its to change."
    )
    options = {"modules": list(HARNESS_MODULES), "globals": list(HARNESS_GLOBALS)}
    VALID = [
        Valid(snippet("""
            from kernelbench.distributed_collectives import default_device
            dev = default_device()
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.gatekeeper = None
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import gatekeeper.behaviour as gb
            gb.compare = lambda *a, **k: True
        """), line=2, message="`gatekeeper.behaviour.compare` is replaced (assignment)"),
        Invalid("popcorn_pri.jitter_int = lambda n, align=1: n\n", line=1, message="`popcorn_pri.jitter_int` is replaced (assignment)"),
        Invalid(snippet("""
            import kernelbench.distributed_collectives as kd
            setattr(kd, 'default_device', lambda: 'cpu')
        """), line=2, message="`kernelbench.distributed_collectives.default_device` is replaced (setattr)"),
        Invalid(snippet("""
            from unittest import mock
            mock.patch('gatekeeper.timing.measure', lambda *a: 1e-6).start()
        """), line=2, message="`gatekeeper.timing.measure` is replaced (mock.patch)"),
    ]

    def target_name(self, target: cst.Attribute) -> Optional[str]:
        qual = resolve(self.ctx, target)
        if qual is None:
            text = dotted(target)
            if text and text.split(".")[0] in self.settings["globals"] and self.ctx.resolver.lookup(text.split(".")[0]) is None:
                return text
        return qual

    def sensitive(self, qual: str) -> Optional[str]:
        entry = matches(qual, tuple(self.settings["modules"]) + tuple(self.settings["globals"]))
        return f"`{entry}` belongs to the harness that checks and times the submission" if entry else None
