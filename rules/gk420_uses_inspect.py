from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_support import UseRule
from gatekeeper.static.examples import Invalid, Valid, snippet

# inspect functions that look at objects the caller hands them, never at frames or source.
_HARMLESS = frozenset({
    "inspect.cleandoc", "inspect.signature", "inspect.Signature", "inspect.Parameter",
    "inspect.isclass", "inspect.isfunction", "inspect.ismethod", "inspect.isroutine",
    "inspect.ismodule", "inspect.iscoroutinefunction", "inspect.isgeneratorfunction",
    "inspect.isbuiltin", "inspect.getdoc",
})


class UsesInspect(UseRule):
    """Uses the `inspect` module: `inspect.stack()`, `inspect.currentframe()`,
    `inspect.getouterframes()`, `inspect.getsource(Model)`, `inspect.getmembers(module)`,
    through any import form (`from inspect import currentframe as cf`).

    Why it games the benchmark: `inspect` reaches the caller's frames, where the harness
    keeps the reference output and the inputs it will compare with, and the reference's
    source; a submission can copy the expected answer instead of computing it.

    Not flagged: `inspect` in comments and strings. Every use in code is reported; helpers that only look at an object the submission holds
    (`inspect.cleandoc`, `inspect.signature`, `inspect.isclass`, ...) are a warning, not an
    error: they cannot reach the harness, but they have no place in a kernel either.
    """

    code = "GK420"
    name = "UsesInspect"
    category = Category.INTROSPECTION
    severity = Severity.ERROR
    summary = "uses the inspect module"
    message = "`{name}` is used: `inspect` can read the harness's frames and the reference's source."
    hint = (
        "Remove `inspect`. A kernel needs only its inputs: read sizes from the tensors passed to "
        "`forward`, and write C++ sources as plain string literals (use `textwrap.dedent`)."
    )
    NAMES = ("inspect",)
    VALID = [
        Valid(snippet("""
            import torch
            def f(x):
                return x  # inspect.stack() in a comment is not code
        """)),
        Valid("s = 'inspect.currentframe'\n"),
    ]
    INVALID = [
        Invalid(snippet("""
            import inspect
            def forward(x):
                frame = inspect.currentframe().f_back
                return frame
        """), line=3, message="`inspect.currentframe` is used"),
        Invalid(snippet("""
            from inspect import stack as st
            def steal():
                return [f.frame for f in st()]
        """), line=3, message="`inspect.stack` is used"),
        Invalid(snippet("""
            import inspect as _i
            src = _i.getsource
        """), line=2, message="`inspect.getsource` is used"),
        Invalid(snippet("""
            import inspect
            body = inspect.cleandoc('''
              __global__ void k() {}
            ''')
        """), line=2, message="`inspect.cleandoc` is used"),
    ]

    def describe(self, qual: str, entry: str, node: cst.CSTNode) -> Optional[tuple[str, Optional[Severity]]]:
        if qual in _HARMLESS:
            return (f"`{qual}` is used; it only looks at an object the submission holds, but `inspect` "
                    "has no place in a kernel submission.", Severity.WARNING)
        return self.message.format(name=qual), None
