from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.own_definitions import is_own_class, is_pasted_class
from gatekeeper.analyses.reference_names import is_reference_module, reference_model
from gatekeeper.analyses.reference_shims import INPUT_BUILDERS, sidecar_verdict
from gatekeeper.analyses.harness_support import in_main_guard, resolve
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

_DISPATCH = ("forward", "__call__", "_call_impl")


class CallsReferenceModel(Rule):
    """Runs the reference model: `super().forward(x)` / `super(ModelNew, self).forward(x)`
    in a class whose base is the reference or cannot be told apart from it,
    `Model.forward(self, x)`, or building the reference (`Model(*init)`,
    `reference.Model()`) to call it.

    Why it games the benchmark: the output is computed by the reference itself (PyTorch),
    so the "speedup" measures nothing of the submission's, or the submission only wraps the
    reference in a cache.

    Not flagged: `super().__init__()`, `super().forward` when every base is a class the
    submission defines or a torch class (`nn.Module`), and any use inside
    `if __name__ == "__main__":`, which never runs under the harness.

    Known false-positive patterns: level-3 submissions define their own `DenseBlock` or
    `PatchEmbed`, with the reference's class name but their own kernels inside; building
    that class is not building the reference (not flagged: the class differs from the
    reference's in some method, see own_definitions.py). A pasted, unchanged helper class of the
    reference (a `PatchEmbed` kept as torch layers) is torch doing part of the work, which
    KernelBench allows next to the submission's own kernels: `suspect` (a warning under
    `default`, confirmed by who did the work at run time). Building the reference `Model`
    itself, or any class imported from the reference module, stays certain, except
    `orig = Model(*init)` kept in a local of init-only code to borrow its initialised
    layers (`self.enc = Fused(orig.enc)`): suspect, since the model is never run.
    """

    code = "GK401"
    name = "CallsReferenceModel"
    category = Category.REFERENCE_REUSE
    severity = Severity.ERROR
    summary = "calls or instantiates the reference Model"
    message = "{what}: the result comes from the reference model, not from the submission's kernel."
    hint = (
        "Compute the output in `ModelNew.forward` with your own kernel. Do not call, build or "
        "inherit the reference `Model`; the harness runs it separately for comparison."
    )
    VALID = [
        Valid(snippet("""
            import torch.nn as nn
            class ModelNew(nn.Module):
                def __init__(self):
                    super().__init__()
                def forward(self, x):
                    return x * 2
        """)),
        Valid(snippet("""
            import torch.nn as nn
            class _Base(nn.Module):
                def forward(self, x):
                    return x
            class ModelNew(_Base):
                def forward(self, x):
                    return super().forward(x) * 2
        """)),
        Valid(snippet("""
            class Model:
                pass
            if __name__ == '__main__':
                ref = Model()
        """)),
        # the submission's own `Block`: same name as the reference's, its own kernel inside
        Valid(snippet("""
            import torch.nn as nn
            class Block(nn.Module):
                def forward(self, x):
                    return _ext.block(x)
            class ModelNew(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.b = Block()
                def forward(self, x):
                    return self.b(x)
        """)),
    ]
    EXAMPLE_PROBLEM = (
        "import torch\nimport torch.nn as nn\nclass Block(nn.Module):\n    def forward(self, x):\n"
        "        return torch.relu(x)\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.b = Block()\n    def forward(self, x):\n        return self.b(x).sum()\n"
    )
    INVALID = [
        Invalid(snippet("""
            class ModelNew(Model):
                def forward(self, x):
                    return super().forward(x)
        """), line=3, message="`super().forward(...)` runs the forward of the base `Model`"),
        Invalid(snippet("""
            import torch.nn as nn
            class ModelNew(nn.Module):
                def forward(self, x):
                    return Model.forward(self, x)
        """), line=4, message="`Model.forward(...)` runs the reference's forward"),
        Invalid(snippet("""
            import torch.nn as nn
            from reference import Model as Ref
            class ModelNew(nn.Module):
                def __init__(self, *a):
                    super().__init__()
                    self.ref = Ref(*a)
                def forward(self, x):
                    return self.ref(x)
        """), line=6, message="`reference.Model(...)` builds the reference model"),
        Invalid(snippet("""
            import importlib
            Base = importlib.import_module('problem_17').Model
            class ModelNew(Base):
                def forward(self, x):
                    return super(ModelNew, self).forward(x)
        """), line=5, message="`super().forward(...)` runs the forward of the base `Base`"),
        # a pasted, unchanged helper class of the reference: suspect (an error under strict)
        Invalid(snippet("""
            import torch
            import torch.nn as nn
            class Block(nn.Module):
                def forward(self, x):
                    return torch.relu(x)
            class ModelNew(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.b = Block()
                def forward(self, x):
                    return _ext.sum(self.b(x))
        """), line=9, message="`Block(...)` builds the reference model"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        what: Optional[str] = None
        confidence: Optional[Confidence] = None
        if type(func) is cst.Attribute and func.attr.value in _DISPATCH:
            owner = func.value
            if type(owner) is cst.Call and type(owner.func) is cst.Name and owner.func.value == "super":
                base = self._suspect_base()
                if base is not None:
                    what = f"`super().{func.attr.value}(...)` runs the forward of the base `{base}`"
            else:
                ref = reference_model(self.ctx, owner)
                if ref is not None:
                    what = f"`{ref}.{func.attr.value}(...)` runs the reference's forward"
        elif type(func) in (cst.Name, cst.Attribute):
            ref = reference_model(self.ctx, func)
            if ref is not None and not self._defining_itself(ref):
                if type(func) is cst.Name and is_own_class(self.ctx, func.value):
                    return  # the submission's own class that shares a reference class's name
                if ref.rsplit(".", 1)[-1] in INPUT_BUILDERS:
                    return  # reference.get_inputs(): the input builders build no model (GK402 sees the import)
                sidecar = self._other_module(func)
                if sidecar is False:
                    return  # the submission's own module beside it, which does not import the reference
                what = f"`{ref}(...)` builds the reference model"
                if sidecar is not None:
                    confidence = Confidence.SUSPECT
                    what = (f"`{ref}(...)` may build the reference model (`{ref.rsplit('.', 1)[0]}` is not the "
                            "reference by name and is not beside the submission to read; ship it with the submission "
                            "if it is your own module)")
                elif type(func) is cst.Name and func.value != "Model" and is_pasted_class(self.ctx, func.value):
                    confidence = Confidence.SUSPECT
                elif self._init_local(node):
                    confidence = Confidence.SUSPECT
        if what is not None and not in_main_guard(self.ctx, node):
            self.report(node, self.message.format(what=what), evidence={"call": what}, confidence=confidence)

    def _other_module(self, func: cst.BaseExpression) -> Optional[bool]:
        """`X.Model(...)` of an imported module X that is not the reference by name: the
        submission's own sidecar (shipped beside it) unless that file imports the reference.
        False: not the reference; True: open (the file is not there to read); None: no change."""
        qual = resolve(self.ctx, func) if type(func) is cst.Attribute else None
        if qual is None or "." not in qual or is_reference_module(self.ctx, qual.rsplit(".", 1)[0]):
            return None
        verdict = sidecar_verdict(self.ctx, qual.rsplit(".", 1)[0])
        if verdict is None:
            return True
        return None if verdict else False

    def _init_local(self, node: cst.Call) -> bool:
        """`orig = Model(*init)` in init-only code, kept in a local: the reference is built to
        borrow its initialised layers, not to run it (suspect: torch layers doing work)."""
        parent = self.ctx.parent(node)
        return (type(parent) is cst.Assign and all(type(t.target) is cst.Name for t in parent.targets)
                and bool(self.ctx.functions) and self.ctx.is_init_only(self.ctx.function_key))

    def _defining_itself(self, ref: str) -> bool:
        return self.ctx.class_name is not None and ref == self.ctx.class_name

    def _suspect_base(self) -> Optional[str]:
        """The first base of the enclosing class that is the reference or opaque."""
        if not self.ctx.classes:
            return None
        for base in self.ctx.classes[-1].bases:
            if base.keyword is not None:
                continue
            ref = reference_model(self.ctx, base.value)
            if ref is not None:
                if type(base.value) is cst.Name and is_own_class(self.ctx, base.value.value):
                    continue  # a class of the submission's own that shares a reference name
                return ref
            if resolve(self.ctx, base.value) is not None:
                continue  # torch.nn.Module, an imported helper class
            if type(base.value) is cst.Name:
                binding = self.ctx.resolver.lookup(base.value.value)
                if binding is not None and binding.kind == "class":
                    continue
                return base.value.value
        return None
