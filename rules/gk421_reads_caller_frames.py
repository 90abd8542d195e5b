from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_support import UseRule, literal, resolve, use_verb
from gatekeeper.static.syntax import argument
from gatekeeper.static.examples import Invalid, Valid, snippet

FRAME_ATTRIBUTES = frozenset({
    "f_back", "f_locals", "f_globals", "f_code", "f_builtins", "f_trace", "f_lineno",
    "gi_frame", "cr_frame", "ag_frame",
})


class ReadsCallerFrames(UseRule):
    """Reads interpreter frames: `sys._getframe()`, `sys._current_frames()`, the frame
    attributes `f_back`, `f_locals`, `f_globals`, `f_code` (also through
    `getattr(frame, "f_back")`), generator frames, or installs a trace or profile hook
    (`sys.settrace`, `sys.setprofile`, `threading.settrace`, `sys.monitoring`) that sees
    every frame.

    Why it games the benchmark: the harness's frames hold the reference output, the inputs
    and the tolerance; walking up from `forward` finds them, so the submission can return
    the expected answer or learn when it is being timed.

    Not flagged: attributes with these names on nothing at all cannot occur; a local
    variable named `frame` is fine as long as no frame attribute is read.
    """

    code = "GK421"
    name = "ReadsCallerFrames"
    category = Category.INTROSPECTION
    severity = Severity.ERROR
    summary = "reads caller frames or installs a trace hook"
    message = "`{name}` is {verb}: it exposes the caller's frames, where the harness keeps the expected output."
    hint = (
        "Remove the frame access. `forward` must compute its result from its arguments only; it "
        "must not look at who called it or at their variables."
    )
    NAMES = ("sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile",
             "sys.monitoring", "threading.settrace", "threading.setprofile",
             "threading.settrace_all_threads", "threading.setprofile_all_threads")
    VALID = [
        Valid(snippet("""
            import sys
            print(sys.version_info, sys.platform)
        """)),
        Valid(snippet("""
            class Frame:
                pass
            frame = Frame()
            frame.back = 1
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import sys
            def forward(x):
                return sys._getframe(1).f_locals['expected']
        """), line=3, message="`.f_locals` is read"),
        Invalid(snippet("""
            from sys import _getframe as gf
            caller = gf(2)
        """), line=2, message="`sys._getframe` is called"),
        Invalid(snippet("""
            def steal(f):
                while f is not None:
                    if 'ref' in f.f_locals:
                        return f.f_locals['ref']
                    f = f.f_back
        """), line=3, message="`.f_locals` is read"),
        Invalid(snippet("""
            def up(frame):
                return getattr(frame, 'f_back')
        """), line=2, message="`getattr(..., 'f_back')` is read"),
        Invalid(snippet("""
            import sys
            sys.settrace(lambda *a: None)
        """), line=2, message="`sys.settrace` is called"),
    ]

    def describe(self, qual: str, entry: str, node: cst.CSTNode) -> Optional[tuple[str, Optional[Severity]]]:
        return self.message.format(name=qual, verb=use_verb(self.ctx, node)), None

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in FRAME_ATTRIBUTES:
            self._emit(node, f".{node.attr.value}", node.attr.value)
        super().visit_Attribute(node)  # the hub leader also dispatches for the other rules

    def visit_Call(self, node: cst.Call) -> None:
        if resolve(self.ctx, node.func) in ("builtins.getattr", "builtins.hasattr"):
            name = literal(self.ctx, argument(node, 1))
            if name in FRAME_ATTRIBUTES:
                self._emit(node, f"getattr(..., {name!r})", name)
        super().visit_Call(node)
