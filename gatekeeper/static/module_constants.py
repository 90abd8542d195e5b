"""The pre-pass of the static engine: module-level constants and imports, read before the
traversal so that any function can resolve them wherever it stands in the file."""

from __future__ import annotations

import libcst as cst

from gatekeeper.static.context import FileContext
from gatekeeper.static.names import paired_values


def collect_module_constants(ctx: FileContext) -> None:
    """Module-level `NAME = value` and `NAME += value`, and imports, before the traversal, so
    a function above an import or a string defined below its use still resolves."""
    for stmt in ctx.module.body:
        if type(stmt) is not cst.SimpleStatementLine:
            continue
        for small in stmt.body:
            if type(small) is cst.Assign:
                for target in small.targets:
                    if type(target.target) is cst.Name:
                        ctx.constants.setdefault(target.target.value, []).append(small.value)
                    for name, value in zip(target.target.elements if type(target.target) in (cst.Tuple, cst.List) else (),
                                           paired_values(target.target, small.value) or ()):
                        if type(name.value) is cst.Name:  # `_M, _K, _N = 1024, 2048, 512`
                            ctx.constants.setdefault(name.value.value, []).append(value)
            elif type(small) is cst.AnnAssign and small.value is not None and type(small.target) is cst.Name:
                ctx.constants.setdefault(small.target.value, []).append(small.value)
            elif type(small) is cst.AugAssign and type(small.operator) is cst.AddAssign and type(small.target) is cst.Name:
                ctx.constants.setdefault(small.target.value, []).append(small.value)
            elif type(small) is cst.Import:
                ctx.resolver.bind_import(small)
            elif type(small) is cst.ImportFrom:
                ctx.resolver.bind_import_from(small)
