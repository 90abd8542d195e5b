from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.path_targets import classify
from gatekeeper.analyses.reference_names import is_reference_module, is_reference_path, model_names
from gatekeeper.analyses.harness_support import in_main_guard, literal, resolve
from gatekeeper.static.syntax import argument
from gatekeeper.static.names import dotted
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

# loader -> (argument index, keyword, what the argument is)
_LOADERS = {
    "importlib.import_module": (0, "name", "module"), "builtins.__import__": (0, "name", "module"),
    "runpy.run_module": (0, "mod_name", "module"), "runpy.run_path": (0, "path_name", "path"),
    "importlib.util.spec_from_file_location": (1, "location", "path"),
    "importlib.machinery.SourceFileLoader": (1, "path", "path"), "imp.load_source": (1, "pathname", "path"),
}


_MODULE_NAMES = frozenset({"reference", "references", "reference_model", "ref_model", "problem", "problems"})


class ImportsReference(Rule):
    """Imports the reference problem's module: `import reference`, `from problem import
    Model`, the problem file's own stem (`from 17_matmul import ...` through importlib),
    KernelBench problem modules (`kernelbench.level1...`), `from __main__ import Model`,
    or loads it by name or path through `importlib` / `runpy`
    (`spec_from_file_location("r", "../reference.py")`).

    Why it games the benchmark: with the reference at hand the submission can call it,
    inherit it, or copy its results, so the output is PyTorch's and not the kernel's.

    Not flagged: the shims a problem itself imports
    (`kernelbench.distributed_collectives`), and imports inside
    `if __name__ == "__main__":` (a self-test the harness never runs).
    """

    code = "GK402"
    name = "ImportsReference"
    category = Category.REFERENCE_REUSE
    severity = Severity.ERROR
    summary = "imports the reference problem module"
    message = "{what} imports the reference problem, whose `Model` computes with PyTorch."
    hint = (
        "Remove the import of the reference. `ModelNew` must stand alone: define its "
        "parameters in `__init__` and compute `forward` with your own kernel."
    )
    VALID = [
        Valid("from kernelbench.distributed_collectives import default_device\n"),
        Valid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
        """)),
        Valid(snippet("""
            if __name__ == '__main__':
                from reference import Model
                print(Model())
        """)),
        Valid(snippet("""
            if __name__ == '__main__':
                import reference
                print(reference.Model())
        """)),
        Valid("import preference_utils\n"),
        Valid("from weakref import ref\n"),
    ]
    INVALID = [
        Invalid("from reference import Model\n", line=1, message="`from reference import ...` imports the reference problem"),
        Invalid("import problem as P\n", line=1, message="`import problem` imports the reference problem"),
        Invalid("from kernelbench.level1 import matmul\n", line=1, message="`from kernelbench.level1 import ...` imports the reference problem"),
        Invalid(snippet("""
            import importlib
            m = importlib.import_module('reference')
        """), line=2, message="`importlib.import_module('reference')` imports the reference problem"),
        Invalid(snippet("""
            import importlib.util
            spec = importlib.util.spec_from_file_location('r', '../reference.py')
        """), line=2, message="`importlib.util.spec_from_file_location('../reference.py')` imports the reference problem"),
        Invalid("from __main__ import Model\n", line=1, message="`from __main__ import Model` imports the reference problem"),
    ]

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted(alias.name)
            if is_reference_module(self.ctx, full):
                self._report(alias, f"`import {full}`", guard=node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        base = dotted(node.module) if node.module is not None else ""
        if is_reference_module(self.ctx, base):
            self._report(node, f"`from {'.' * len(node.relative)}{base} import ...`")
            return
        if type(node.names) is cst.ImportStar:
            return
        names = model_names(self.ctx)
        stem = self.ctx.problem.name if self.ctx.problem is not None else None
        for alias in node.names:
            name = dotted(alias.name) or ""
            # `from . import reference` imports a module; `from weakref import ref` a function.
            module_like = is_reference_module(self.ctx, name) and (
                bool(node.relative) or name == stem or name in _MODULE_NAMES)
            if module_like or (base == "__main__" and name in names):
                self._report(alias, f"`from {'.' * len(node.relative)}{base} import {name}`", guard=node)

    def visit_Call(self, node: cst.Call) -> None:
        func = resolve(self.ctx, node.func)
        spec = _LOADERS.get(func or "")
        if spec is None:
            return
        index, keyword, kind = spec
        given = argument(node, index, keyword)
        text: Optional[str] = literal(self.ctx, given)
        if text is None and kind == "path":
            text = classify(self.ctx, given).text  # os.path.join(here, "..", "reference.py")
        if text is None:
            return
        hit = is_reference_path(self.ctx, text) if kind == "path" else is_reference_module(self.ctx, text)
        if hit:
            self._report(node, f"`{func.replace('builtins.', '')}({text!r})`")  # type: ignore[union-attr]

    def _report(self, node: cst.CSTNode, what: str, guard: Optional[cst.CSTNode] = None) -> None:
        # An import alias has no recorded parent yet when its statement is visited.
        if not in_main_guard(self.ctx, guard or node):
            self.report(node, self.message.format(what=what), evidence={"import": what})
