"""Uses of a module that look like reference reuse and are not. Not a rule file; GK401 and
GK402 ask it.

- input-builder shims: `def get_inputs(): import reference; return reference.get_inputs()`,
  or `from reference import get_inputs, get_init_inputs` at module level (a re-export).
  The harness glue borrows the reference's input builders; the model is never built and
  forward never touches the reference. A warning at most (GK402, under every profile), never "builds
  the reference model" (GK401). Anything else the shim does with the module (building its
  `Model`, keeping the module in a global) keeps the findings.
- the submission's own sidecar module: `import softmax_triton_fallback` shipped beside the
  submission, whose `Model` is the submission's own code. A module whose name is not the
  reference's (not `reference`/`problem`/the problem's stem/a KernelBench level) is the
  reference only if it imports the reference itself: read the file beside the submission
  when it is there; when it is not, the question stays open (suspect).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import libcst as cst

from gatekeeper.analyses.reference_names import is_reference_module, is_reference_path
from gatekeeper.static.context import FileContext
from gatekeeper.static.walk import subtree, walk

INPUT_BUILDERS = frozenset({"get_inputs", "get_init_inputs"})
_IMPORT = re.compile(r"^\s*(?:from\s+(\.*[\w.]*)\s+import\s+([\w., ()*]+)|import\s+([\w., ]+))", re.MULTILINE)
# Ways a module can reach the reference without naming it in an import statement.
_INDIRECT = re.compile(r"\bimportlib\b|\brunpy\b|\bsys\.modules\b|\b__main__\b|\bexec\s*\(|\b__import__\b")


def input_builder_function(ctx: FileContext, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The module-level `get_inputs`/`get_init_inputs` that `node` sits in."""
    function: Optional[cst.FunctionDef] = None
    for parent in ctx.ancestors(node):
        if type(parent) is cst.ClassDef:
            return None
        if type(parent) is cst.FunctionDef:
            if function is not None:
                return None  # nested: not the module-level glue itself
            function = parent
    return function if function is not None and function.name.value in INPUT_BUILDERS else None


def shim_scope(ctx: FileContext, statement: cst.CSTNode) -> Optional[cst.CSTNode]:
    """Where the names an import binds can be used: the module-level get_inputs /
    get_init_inputs it sits in, or the whole file for an import at module level."""
    function = input_builder_function(ctx, statement)
    if function is not None:
        return function
    if any(type(p) in (cst.FunctionDef, cst.ClassDef) for p in ctx.ancestors(statement)):
        return None
    return ctx.module


def borrows_only_builders(function: cst.CSTNode, modules: set[str], builders: set[str],
                          statement: cst.CSTNode) -> bool:
    """Every use of the imported `modules` in `function` (apart from the import) is a call of
    an input builder, `reference.get_inputs()`, and every use of `builders` (input builders
    imported by name, `from reference import get_inputs as gi`) is a call."""
    names = modules | builders
    skip = {id(n) for n in subtree(statement)}
    parents: dict[int, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = []
    for entering, node in walk(function):
        if entering:
            if stack:
                parents[id(node)] = stack[-1]
            stack.append(node)
        else:
            stack.pop()
    for node in subtree(function):
        if type(node) is not cst.Name or node.value not in names or id(node) in skip:
            continue
        parent = parents.get(id(node))
        if node.value in builders and type(parent) is cst.Call and parent.func is node:
            continue
        if node.value in modules and type(parent) is cst.Attribute and parent.value is node \
                and parent.attr.value in INPUT_BUILDERS:
            grand = parents.get(id(parent))
            if type(grand) is cst.Call and grand.func is parent:
                continue
        if type(parent) is cst.Attribute and parent.attr is node:
            continue  # `x.reference`: an attribute name, not the module
        return False
    return True


def sidecar_verdict(ctx: FileContext, module: str) -> Optional[bool]:
    """For a module that is not the reference by name: True when a file of that name beside
    the submission imports the reference (or reaches modules indirectly), False when it is
    there and does not, None when it is not there to read."""
    root = module.split(".", 1)[0]
    folder = Path(ctx.path).resolve().parent
    for candidate in (folder / f"{root}.py", folder / root / "__init__.py"):
        try:
            if ctx.problem is not None and candidate.resolve() == Path(ctx.problem.path).resolve():
                return True  # the problem file itself under another name
            text = candidate.read_text("utf-8", errors="replace")
        except OSError:
            continue
        return _imports_reference(ctx, text)
    return None


def _imports_reference(ctx: FileContext, text: str) -> bool:
    if _INDIRECT.search(text):
        return True
    for match in _IMPORT.finditer(text):
        modules = [match.group(1)] if match.group(1) is not None else \
            [m.strip().split(" ")[0] for m in (match.group(3) or "").split(",")]
        for name in modules:
            if name and (is_reference_module(ctx, name.lstrip(".")) or is_reference_path(ctx, name + ".py")):
                return True
        if match.group(1) is not None and match.group(1).strip(".") == "":
            names = [n.strip(" ()").split(" ")[0] for n in match.group(2).split(",")]
            if any(is_reference_module(ctx, n) for n in names if n):
                return True  # from . import reference
    return False
