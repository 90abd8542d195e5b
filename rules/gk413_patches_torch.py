from __future__ import annotations

from typing import Optional

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_names import TIMERS
from gatekeeper.analyses.harness_names import COMPARISONS
from gatekeeper.analyses.harness_patching import PatchRule
from gatekeeper.analyses.harness_support import matches
from gatekeeper.static.examples import Invalid, Valid, snippet

# Settings that are meant to be assigned; precision switches are GK-precision's business.
_SETTINGS = (
    "torch.backends", "torch._dynamo.config", "torch._inductor.config", "torch._functorch.config",
    "torch.fx.experimental._config", "torch.jit._state",
)


class PatchesTorch(PatchRule):
    """Replaces something in torch itself: a `torch.Tensor` method (`torch.Tensor.__eq__`,
    `torch.Tensor.sum`, `torch.Tensor.__float__`), a torch function (`torch.mean`,
    `torch.nn.functional.relu`), `torch.nn.Module.__call__`, or any other attribute under
    `torch`, by assignment, `setattr`, `mock.patch`, `__dict__` writes or `__class__` swaps.

    Why it games the benchmark: the harness and the reference run on the same torch in the
    same process, so a patched Tensor method or torch function changes the reference's
    result, the comparison, or the tensors the harness inspects.

    Timers and comparison functions are reported by GK410 and GK411. Configuration switches
    meant to be assigned (`torch.backends.cudnn.benchmark = True`, `torch._dynamo.config.*`)
    are not flagged here.
    """

    code = "GK413"
    name = "PatchesTorch"
    category = Category.HARNESS_TAMPERING
    severity = Severity.ERROR
    summary = "replaces a torch function or Tensor method"
    message = "`{name}` is replaced ({how}): {what}."
    hint = (
        "Do not modify torch. Put your logic in your own functions and your own kernel, and "
        "call them from `ModelNew.forward`; leave `torch.Tensor` and `torch.*` as they are."
    )
    VALID = [
        Valid(snippet("""
            import torch
            torch.backends.cudnn.benchmark = True
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.scale = 2.0
                    self.forward_impl = torch.relu
        """)),
        Valid(snippet("""
            import torch
            x = torch.zeros(3)
            x.data = torch.ones(3)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            torch.Tensor.__eq__ = lambda self, other: True
        """), line=2, message="`torch.Tensor.__eq__` is replaced (assignment)"),
        Invalid(snippet("""
            import torch
            _orig = torch.mean
            def fast(*a, **k):
                return _orig(*a, **k)
            torch.mean = fast
        """), line=5, message="`torch.mean` is replaced (assignment)"),
        Invalid(snippet("""
            from torch import Tensor
            setattr(Tensor, '__float__', lambda self: 0.0)
        """), line=2, message="`torch.Tensor.__float__` is replaced (setattr)"),
        Invalid(snippet("""
            import torch.nn.functional as F
            F.relu = lambda x, inplace=False: x
        """), line=2, message="`torch.nn.functional.relu` is replaced (assignment)"),
        Invalid(snippet("""
            import torch
            torch.nn.Module.__call__ = lambda self, *a: self.forward(*a)
        """), line=2, message="`torch.nn.Module.__call__` is replaced (assignment)"),
    ]

    def sensitive(self, qual: str) -> Optional[str]:
        if not (qual == "torch" or qual.startswith("torch.")):
            return None
        if matches(qual, _SETTINGS) or matches(qual, TIMERS) or matches(qual, COMPARISONS):
            return None
        if qual.startswith("torch.Tensor."):
            return "every tensor in the process, the harness's and the reference's included, would use it"
        return "the harness and the reference share this torch with the submission"
