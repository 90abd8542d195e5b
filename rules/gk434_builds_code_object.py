from __future__ import annotations

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_support import UseRule
from gatekeeper.static.examples import Invalid, Valid, snippet

CODE_ATTRIBUTES = frozenset({"__code__", "co_code", "co_consts", "co_names", "func_code"})


class BuildsCodeObject(UseRule):
    """Builds or edits function code at run time: `types.FunctionType(...)`,
    `types.CodeType(...)`, `types.LambdaType(...)`, and any use of `__code__`, `co_code`,
    `co_consts`, `co_names` (swapping a function's code, or `code.replace(co_code=...)`).

    Why it games the benchmark: code assembled from bytes or swapped into an existing
    function is not in the source, so a function that looks honest (or the harness's own
    function) runs something else.

    Not flagged: `types.SimpleNamespace`, `types.MethodType` (binding a function written in
    the file to an object).
    """

    code = "GK434"
    name = "BuildsCodeObject"
    category = Category.DYNAMIC_CODE
    severity = Severity.ERROR
    summary = "builds function or code objects at run time"
    message = "`{name}` builds or rewrites code at run time, so what runs is not what the source shows."
    hint = "Define the function with `def` in the submission and call it; never construct or swap code objects."
    NAMES = ("types.FunctionType", "types.CodeType", "types.LambdaType")
    VALID = [
        Valid(snippet("""
            import types
            cfg = types.SimpleNamespace(block=256)
        """)),
        Valid(snippet("""
            import types
            class A:
                pass
            def f(self):
                return 1
            a = A()
            a.f = types.MethodType(f, a)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import types
            f = types.FunctionType(CODE, globals())
        """), line=2, message="`types.FunctionType` builds or rewrites code at run time"),
        Invalid(snippet("""
            def honest(x):
                return x
            def fake(x):
                return 0
            honest.__code__ = fake.__code__
        """), line=5, message="`.__code__` builds or rewrites code at run time"),
        Invalid(snippet("""
            from types import CodeType as C
            co = C(0, 0, 0, 0, 0, 0, b'', (), (), (), '', '', 0, b'')
        """), line=2, message="`types.CodeType` builds or rewrites code at run time"),
        Invalid(snippet("""
            def f():
                pass
            co = f.__code__.replace(co_consts=(None, 1))
        """), line=3, message="`.__code__` builds or rewrites code at run time"),
    ]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in CODE_ATTRIBUTES:
            self._emit(node, f".{node.attr.value}", node.attr.value)
        super().visit_Attribute(node)  # the hub leader also dispatches for the other rules
