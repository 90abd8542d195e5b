from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.reference_shims import INPUT_BUILDERS, borrows_only_builders, shim_scope
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
    shim_note = (" Here {where} only borrows the reference's input builders and nothing builds its model; "
                 "the harness builds the inputs itself, so the shim is not needed.")
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
        # a get_inputs shim borrowing the reference's input builders: a warning under every profile
        Invalid(snippet("""
            def get_inputs():
                import reference
                return reference.get_inputs()
        """), line=2, message="only borrows the reference's input builders"),
        # ... but a shim that also builds the reference's model is not one
        Invalid(snippet("""
            def get_inputs():
                import reference
                xs = reference.get_inputs()
                global OUT
                OUT = reference.Model()(*xs)
                return xs
        """), line=2, message="`import reference` imports the reference problem, whose `Model` computes with PyTorch."),
    ]

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted(alias.name)
            if is_reference_module(self.ctx, full):
                bound = alias.asname.name.value if alias.asname is not None and type(alias.asname.name) is cst.Name \
                    else (full or "").split(".", 1)[0]
                self._report(alias, f"`import {full}`", guard=node, shim=({bound}, set()))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        base = dotted(node.module) if node.module is not None else ""
        if is_reference_module(self.ctx, base):
            shim = None
            if type(node.names) is not cst.ImportStar and all(dotted(a.name) in INPUT_BUILDERS for a in node.names):
                shim = (set(), {a.asname.name.value if a.asname is not None and type(a.asname.name) is cst.Name
                                else dotted(a.name) or "" for a in node.names})
            self._report(node, f"`from {'.' * len(node.relative)}{base} import ...`", shim=shim)
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

    def _report(self, node: cst.CSTNode, what: str, guard: Optional[cst.CSTNode] = None,
                shim: Optional[tuple[set[str], set[str]]] = None) -> None:
        # An import alias has no recorded parent yet when its statement is visited.
        statement = guard or node
        if in_main_guard(self.ctx, statement):
            return
        scope = shim_scope(self.ctx, statement) if shim is not None else None
        if scope is not None and borrows_only_builders(scope, shim[0], shim[1], statement):  # type: ignore[index]
            # get_inputs/get_init_inputs borrowing the reference's input builders: the model is
            # never built and forward never touches it. The harness's own builders are the
            # ones used, so this is worth a look, not a rejection, under every profile.
            where = f"`{scope.name.value}`" if type(scope) is cst.FunctionDef else "the file"
            self.report(node, self.message.format(what=what) + self.shim_note.format(where=where),
                        evidence={"import": what, "shim": where}, severity=Severity.WARNING)
            return
        self.report(node, self.message.format(what=what), evidence={"import": what})
