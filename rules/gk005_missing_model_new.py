from __future__ import annotations

import libcst as cst

from gatekeeper.analyses.reference_names import entry_name
from gatekeeper.report import Category, Severity
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet


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
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return x
        """)),
        Valid(snippet("""
            import torch
            class _Impl(torch.nn.Module):
                pass
            ModelNew = _Impl
        """)),
        Valid("from mykernels import ModelNew\n"),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class Model(torch.nn.Module):
                def forward(self, x):
                    return x
        """), line=1, message="The submission defines no `ModelNew` at module level"),
        Invalid(snippet("""
            import torch
            def make():
                class ModelNew(torch.nn.Module):
                    pass
                return ModelNew
        """), line=1, message="The submission defines no `ModelNew` at module level"),
    ]

    def finish(self) -> None:
        entry = entry_name(self.ctx)  # `Model` when the problem is KernelBench-Hard's
        if self.ctx.resolver.module_scope.names.get(entry) is not None:
            return
        if entry in self.ctx.constants:
            return
        body = self.ctx.module.body
        if entry == "ModelNew":
            self.report(body[0] if body else self.ctx.module)
            return
        self.report(body[0] if body else self.ctx.module,
                    f"The submission defines no `{entry}` at module level; the harness has nothing to instantiate "
                    f"(a KernelBench-Hard solution.py defines `{entry}`).",
                    f"Define `class {entry}(torch.nn.Module)` with the same constructor arguments as the reference "
                    f"`Model` and a `forward` with the same inputs.")
