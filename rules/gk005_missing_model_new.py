from __future__ import annotations

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.static.rule import Rule


class MissingModelNew(Rule):
    """The submission defines no `ModelNew` at module level (a class, or a name bound to
    one), so there is nothing the harness can instantiate and compare with `Model`."""

    code = "GK005"
    name = "MissingModelNew"
    category = Category.BUILD_FAILURE
    severity = Severity.ERROR
    summary = "no ModelNew defined at module level"
    message = "The submission defines no `ModelNew` at module level; the harness has nothing to instantiate."
    hint = "Define `class ModelNew(torch.nn.Module)` with the same constructor arguments as the reference `Model` and a `forward` with the same inputs."

    VALID = [
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
        "import torch\nclass _Impl(torch.nn.Module):\n    pass\nModelNew = _Impl\n",
        "from mykernels import ModelNew\n",
    ]
    INVALID = [
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
        "import torch\ndef make():\n    class ModelNew(torch.nn.Module):\n        pass\n    return ModelNew\n",
    ]

    def finish(self) -> None:
        if self.ctx.resolver.module_scope.names.get("ModelNew") is not None:
            return
        if "ModelNew" in self.ctx.constants:
            return
        body = self.ctx.module.body
        self.report(body[0] if body else self.ctx.module)
