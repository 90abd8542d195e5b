from __future__ import annotations

from typing import Optional

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_names import TIMERS
from gatekeeper.analyses.harness_names import COMPARISONS
from gatekeeper.analyses.harness_patching import PatchRule
from gatekeeper.analyses.harness_support import matches

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
        "import torch\ntorch.backends.cudnn.benchmark = True\n",
        "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.scale = 2.0\n        self.forward_impl = torch.relu\n",
        "import torch\nx = torch.zeros(3)\nx.data = torch.ones(3)\n",
    ]
    INVALID = [
        "import torch\ntorch.Tensor.__eq__ = lambda self, other: True\n",
        "import torch\n_orig = torch.mean\ndef fast(*a, **k):\n    return _orig(*a, **k)\ntorch.mean = fast\n",
        "from torch import Tensor\nsetattr(Tensor, '__float__', lambda self: 0.0)\n",
        "import torch.nn.functional as F\nF.relu = lambda x, inplace=False: x\n",
        "import torch\ntorch.nn.Module.__call__ = lambda self, *a: self.forward(*a)\n",
    ]

    def sensitive(self, qual: str) -> Optional[str]:
        if not (qual == "torch" or qual.startswith("torch.")):
            return None
        if matches(qual, _SETTINGS) or matches(qual, TIMERS) or matches(qual, COMPARISONS):
            return None
        if qual.startswith("torch.Tensor."):
            return "every tensor in the process, the harness's and the reference's included, would use it"
        return "the harness and the reference share this torch with the submission"
