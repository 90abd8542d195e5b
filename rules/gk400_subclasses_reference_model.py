from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.own_definitions import is_own_class, is_pasted_class
from gatekeeper.analyses.reference_names import reference_model
from gatekeeper.analyses.harness_support import in_main_guard, resolve
from gatekeeper.static.syntax import argument
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet


class SubclassesReferenceModel(Rule):
    """`ModelNew` (or any class) derives from the reference `Model`: `class
    ModelNew(Model)`, a base imported from the reference module (`from reference import
    Model as Base`), `ModelNew = Model`, or `type("ModelNew", (Model,), {})`. With the
    problem file, every class the problem defines counts as a reference class.

    Why it games the benchmark: the reference's `__init__` and `forward` (PyTorch doing the
    work) are inherited, so the "submission" is the reference with a different name.

    Not flagged: a pasted copy of `Model` used only inside `if __name__ == "__main__":`
    (a self-test that never runs under the harness), and bases from torch (`nn.Module`).

    Known false-positive patterns: a base the submission defines itself under a reference
    class's name but with its own code in it (not flagged: it differs from the reference's
    class in some method, see own_definitions.py); and `class ModelNew(Model)` on a pasted copy
    of `Model` that overrides `forward` with its own kernels, inheriting only the layers
    built in `__init__` (torch doing part of the work, which KernelBench allows):
    `suspect`, a warning under `default` (GK401 reports a `super().forward` call, GK403 a
    copied body). Without its own `forward`, or with a base imported from the reference
    module, it stays certain.
    """

    code = "GK400"
    name = "SubclassesReferenceModel"
    category = Category.REFERENCE_REUSE
    severity = Severity.ERROR
    summary = "ModelNew subclasses or aliases the reference Model"
    message = "`{cls}` derives from the reference model `{base}`, so it inherits the reference's computation."
    hint = (
        "Derive `ModelNew` from `torch.nn.Module` only, and implement `forward` with your own "
        "kernel; copy parameter shapes from the reference's `__init__` if you need them."
    )
    VALID = [
        Valid(snippet("""
            import torch.nn as nn
            class ModelNew(nn.Module):
                def forward(self, x):
                    return x
        """)),
        Valid(snippet("""
            import torch.nn as nn
            class _Base(nn.Module):
                pass
            class ModelNew(_Base):
                pass
        """)),
        Valid(snippet("""
            if __name__ == '__main__':
                class Check(Model):
                    pass
        """)),
        # the submission's own `Model` (not the reference's): derives from it freely
        Valid(snippet("""
            import torch.nn as nn
            class Model(nn.Module):
                def forward(self, x):
                    return _ext.run(x)
            class ModelNew(Model):
                pass
        """)),
    ]
    EXAMPLE_PROBLEM = (
        "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.lin = nn.Linear(8, 8)\n    def forward(self, x):\n"
        "        return self.lin(x)\n"
    )
    INVALID = [
        Invalid(snippet("""
            class ModelNew(Model):
                pass
        """), line=1, message="`ModelNew` derives from the reference model `Model`"),
        Invalid(snippet("""
            from reference import Model as Base
            class ModelNew(Base):
                def forward(self, x):
                    return super().forward(x)
        """), line=2, message="`ModelNew` derives from the reference model `reference.Model`"),
        Invalid(snippet("""
            import torch.nn as nn
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(8, 8)
                def forward(self, x):
                    return self.lin(x)
            ModelNew = Model
        """), line=8, message="`ModelNew` derives from the reference model `Model`"),
        Invalid(snippet("""
            import problem
            ModelNew = type('ModelNew', (problem.Model,), {})
        """), line=2, message="`ModelNew` derives from the reference model `problem.Model`"),
        # a pasted `Model` with its own forward: suspect (a warning under default, an error under strict)
        Invalid(snippet("""
            import torch.nn as nn
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(8, 8)
                def forward(self, x):
                    return self.lin(x)
            class ModelNew(Model):
                def forward(self, x):
                    return _ext.linear(x, self.lin.weight, self.lin.bias)
        """), line=8, message="`ModelNew` derives from the reference model `Model`"),
    ]

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            if base.keyword is None:
                self._check(base.value, node.name.value, base, guard=node, owner=node)

    def visit_Assign(self, node: cst.Assign) -> None:
        names = [t.target.value for t in node.targets if type(t.target) is cst.Name]
        if "ModelNew" not in names:
            return
        value = node.value
        if type(value) is cst.Call and resolve(self.ctx, value.func) == "builtins.type":
            bases = argument(value, 1)
            if type(bases) in (cst.Tuple, cst.List):
                for element in bases.elements:
                    self._check(element.value, "ModelNew", node)
            return
        self._check(value, "ModelNew", node)

    def _check(self, expr: cst.BaseExpression, cls: str, node: cst.CSTNode, guard: Optional[cst.CSTNode] = None,
               owner: Optional[cst.ClassDef] = None) -> None:
        base = reference_model(self.ctx, expr)
        # A base argument has no recorded parent yet while its class is visited: guard on the class.
        if base is None or base == cls or in_main_guard(self.ctx, guard or node):
            return
        confidence = None
        if type(expr) is cst.Name:
            if is_own_class(self.ctx, expr.value):
                return  # the submission's own class under a reference class's name
            if owner is not None and is_pasted_class(self.ctx, expr.value) and _defines_forward(owner):
                confidence = Confidence.SUSPECT
        self.report(node, self.message.format(cls=cls, base=base), evidence={"base": base}, confidence=confidence)


def _defines_forward(cls: cst.ClassDef) -> bool:
    body = cls.body.body if (type(cls.body) is cst.IndentedBlock) else []
    return any(type(s) is cst.FunctionDef and s.name.value in ("forward", "__call__") for s in body)
