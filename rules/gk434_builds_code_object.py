from __future__ import annotations

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_support import UseRule

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
        "import types\ncfg = types.SimpleNamespace(block=256)\n",
        "import types\nclass A:\n    pass\ndef f(self):\n    return 1\na = A()\na.f = types.MethodType(f, a)\n",
    ]
    INVALID = [
        "import types\nf = types.FunctionType(CODE, globals())\n",
        "def honest(x):\n    return x\ndef fake(x):\n    return 0\nhonest.__code__ = fake.__code__\n",
        "from types import CodeType as C\nco = C(0, 0, 0, 0, 0, 0, b'', (), (), (), '', '', 0, b'')\n",
        "def f():\n    pass\nco = f.__code__.replace(co_consts=(None, 1))\n",
    ]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in CODE_ATTRIBUTES:
            self._emit(node, f".{node.attr.value}", node.attr.value)
        super().visit_Attribute(node)  # the hub leader also dispatches for the other rules
