from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_support import UseRule
from gatekeeper.static.examples import Invalid, Valid, snippet


class ReadsModuleRegistry(UseRule):
    """Reads `sys.modules` (indexing it, `.get`, `.values()`, iterating it) or the
    `__main__` module (`import __main__`, `from __main__ import ...`,
    `sys.modules["__main__"]`).

    Why it games the benchmark: the harness's modules and its `__main__` hold the reference
    model, its outputs and the harness state; reading them lets the submission find the
    answer or detect the timing phase without importing anything suspicious by name.

    Not flagged: `sys.modules[__name__]` (the submission's own module). Writes to
    `sys.modules` are GK415 (harness tampering).
    """

    code = "GK423"
    name = "ReadsModuleRegistry"
    category = Category.INTROSPECTION
    severity = Severity.ERROR
    summary = "reads sys.modules or the __main__ module"
    message = "`{name}` is read: it exposes the harness's modules and the reference that runs beside the submission."
    hint = (
        "Import the modules you need by name (`import torch`) and never look through "
        "`sys.modules` or `__main__`; the harness and the reference are not the submission's to read."
    )
    NAMES = ("sys.modules", "__main__")
    VALID = [
        Valid(snippet("""
            import sys
            me = sys.modules[__name__]
        """)),
        Valid(snippet("""
            if __name__ == '__main__':
                print('self test')
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import sys
            ref = sys.modules['__main__'].Model
        """), line=2, message="`__main__.Model` is read"),
        Invalid(snippet("""
            import __main__
            expected = __main__.ref_output
        """), line=2, message="`__main__.ref_output` is read"),
        Invalid(snippet("""
            import sys
            harness = [m for name, m in sys.modules.items() if 'eval' in name]
        """), line=2, message="`sys.modules.items` is read"),
        Invalid("from __main__ import Model\n", line=1, message="`__main__.Model` is read"),
        Invalid(snippet("""
            import sys as s
            mods = s.modules.get('kernelbench.eval')
        """), line=2, message="`sys.modules.get` is read"),
    ]

    def describe(self, qual: str, entry: str, node: cst.CSTNode) -> Optional[tuple[str, Optional[Severity]]]:
        if entry == "sys.modules" and isinstance(node, cst.BaseExpression):
            parent = self.ctx.parent(node)
            if type(parent) is cst.Subscript and parent.value is node:
                index = parent.slice[0].slice if len(parent.slice) == 1 else None
                if type(index) is cst.Index and type(index.value) is cst.Name and index.value.value == "__name__":
                    return None
                grand = self.ctx.parent(parent)
                if _is_write_target(self.ctx, parent, grand):
                    return None  # GK415
            if type(parent) is cst.Attribute and parent.attr.value in (
                    "update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"):
                return None  # GK415
        return self.message.format(name=qual), None


def _is_write_target(ctx, node: cst.CSTNode, parent: Optional[cst.CSTNode]) -> bool:
    if type(parent) is cst.AssignTarget and parent.target is node:
        return True
    if type(parent) is cst.Del:
        return True
    if type(parent) in (cst.AugAssign, cst.AnnAssign) and parent.target is node:
        return True
    if type(parent) in (cst.Element, cst.Tuple, cst.List):
        return any(type(a) in (cst.Del, cst.AssignTarget) for a in ctx.ancestors(node))
    return False
