from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_support import UseRule, resolve, use_verb
from gatekeeper.static.examples import Invalid, Valid, snippet

TRACEBACK_ATTRIBUTES = frozenset({"__traceback__", "tb_frame", "tb_next"})


class WalksTraceback(UseRule):
    """Walks a traceback or the current stack: `exc.__traceback__`, `tb.tb_frame`,
    `tb.tb_next`, `sys.exc_info()[2]` (or unpacking its third item),
    `traceback.extract_stack()`, `traceback.walk_stack()`, `traceback.walk_tb()`,
    `traceback.format_stack()`, `sys.last_traceback`.

    Why it games the benchmark: a traceback leads to frames, and frames to the harness's
    locals (the expected output, the inputs) just as `sys._getframe` does; raising and
    catching an exception is a way to get there without naming `sys._getframe`.

    Not flagged: printing an error (`traceback.print_exc()`, `traceback.format_exc()`,
    `sys.exc_info()[1]`).
    """

    code = "GK424"
    name = "WalksTraceback"
    category = Category.INTROSPECTION
    severity = Severity.ERROR
    summary = "walks a traceback or the call stack"
    message = "`{name}` is {verb}: tracebacks lead to the harness's frames and the expected output they hold."
    hint = (
        "Remove the traceback walk. Let exceptions propagate, or log them with "
        "`traceback.print_exc()`; never read frames from a traceback."
    )
    NAMES = ("traceback.extract_stack", "traceback.walk_stack", "traceback.walk_tb",
             "traceback.format_stack", "traceback.print_stack", "traceback.extract_tb",
             "traceback.StackSummary", "traceback.FrameSummary", "sys.last_traceback", "sys.last_exc")
    VALID = [
        Valid(snippet("""
            import traceback
            try:
                pass
            except Exception:
                traceback.print_exc()
        """)),
        Valid(snippet("""
            import sys
            try:
                pass
            except Exception:
                err = sys.exc_info()[1]
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            def grab():
                try:
                    raise RuntimeError
                except RuntimeError as e:
                    return e.__traceback__.tb_frame.f_back.f_locals
        """), line=5, message="`.tb_frame` is read"),
        Invalid(snippet("""
            import sys
            try:
                1 / 0
            except ZeroDivisionError:
                tb = sys.exc_info()[2]
        """), line=5, message="`sys.exc_info()[2]` is read"),
        Invalid(snippet("""
            import traceback as tb
            names = [f.name for f in tb.extract_stack()]
        """), line=2, message="`traceback.extract_stack` is called"),
        Invalid(snippet("""
            import sys
            try:
                1 / 0
            except Exception:
                kind, err, trace = sys.exc_info()
        """), line=5, message="`sys.exc_info()` is unpacked with its traceback"),
    ]

    def describe(self, qual: str, entry: str, node: cst.CSTNode) -> Optional[tuple[str, Optional[Severity]]]:
        # `_, _, tb = sys.exc_info()` reports the assignment: the call itself is harmless
        verb = "unpacked with its traceback" if (type(node) is cst.Assign) else use_verb(self.ctx, node)
        return self.message.format(name=qual, verb=verb), None

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in TRACEBACK_ATTRIBUTES:
            self._emit(node, f".{node.attr.value}", node.attr.value)
        super().visit_Attribute(node)  # the hub leader also dispatches for the other rules

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if _exc_info(self.ctx, node.value) and len(node.slice) == 1:
            index = node.slice[0].slice
            if type(index) is cst.Index and type(index.value) is cst.Integer and index.value.value in ("2",):
                self._emit(node, "sys.exc_info()[2]", "sys.exc_info")
            elif type(index) is cst.Index and type(index.value) is cst.UnaryOperation:
                self._emit(node, "sys.exc_info()[-1]", "sys.exc_info")
        super().visit_Subscript(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if not _exc_info(self.ctx, node.value):
            return
        for target in node.targets:
            t = target.target
            if type(t) in (cst.Tuple, cst.List) and len(t.elements) == 3:
                third = t.elements[2].value
                if not (type(third) is cst.Name and third.value == "_"):
                    self._emit(node, "sys.exc_info()", "sys.exc_info")


def _exc_info(ctx, expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Call and resolve(ctx, expr.func) == "sys.exc_info"
