"""The rule base class. One small class per file under rules/ (the top-level rule pack).

A rule declares its code, name (the bad pattern), category, severity, message and hint,
its documentation (the class docstring) and VALID / INVALID examples, which become tests.
It implements libcst-style `visit_<Node>` / `leave_<Node>` methods, which the engine calls
during its single traversal, `check_cpp` for each extracted C++/CUDA source, and `finish`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.static.examples import Example

if TYPE_CHECKING:
    from gatekeeper.static.context import FileContext
    from gatekeeper.static.cpp_sources import CppSource


_INHERITED: dict[tuple[type, type, tuple[str, ...]], frozenset[str]] = {}
SWITCHED_OFF = "_switched_off"  # instance attribute: handlers switch_off_inherited turned off


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    category: ClassVar[Category]
    severity: ClassVar[Severity] = Severity.ERROR
    # Severity under other profiles; None means the same as `severity`.
    strict_severity: ClassVar[Optional[Severity]] = None
    lenient_severity: ClassVar[Optional[Severity]] = None
    # How sure the pattern is (see report.Confidence); a `suspect` finding is a warning
    # outside `strict` unless `confirmed_by` (a run-time check code) confirms it.
    confidence: ClassVar[Confidence] = Confidence.CERTAIN
    confirmed_by: ClassVar[Optional[str]] = None
    summary: ClassVar[str]
    message: ClassVar[str]
    hint: ClassVar[str]
    # Rules that only make sense with the reference problem at hand.
    needs_problem: ClassVar[bool] = False
    options: ClassVar[dict[str, Any]] = {}
    # Valid(...) / Invalid(..., line=, message=) objects (gatekeeper/static/examples.py);
    # plain strings are still accepted from user rule folders.
    VALID: ClassVar[list[Example]] = []
    INVALID: ClassVar[list[Example]] = []
    # Problem source the examples are checked against (when needs_problem or useful).
    EXAMPLE_PROBLEM: ClassVar[Optional[str]] = None
    # Where the rule was loaded from, set by discovery.
    source_file: ClassVar[str] = ""

    def __init__(self, ctx: "FileContext", settings: dict[str, Any], severity: Severity) -> None:
        self.ctx = ctx
        self.settings = {**self.options, **settings}
        self.active_severity = severity

    @classmethod
    def severity_for(cls, profile: str) -> Severity:
        if profile == "strict" and cls.strict_severity is not None:
            return cls.strict_severity
        if profile == "lenient" and cls.lenient_severity is not None:
            return cls.lenient_severity
        return cls.severity

    @classmethod
    def docs(cls) -> str:
        return (cls.__doc__ or "").strip()

    def switch_off_inherited(self, base: type, names: tuple[str, ...]) -> None:
        """Switch off, for this file, the handlers among `names` that this rule's class takes
        unchanged from `base`: the engine does not call them. They are listed under
        SWITCHED_OFF (one set per class, the same object every file), not set to None one
        by one, so the engine sees that nothing changed since the last file in one look."""
        key = (type(self), base, names)
        off = _INHERITED.get(key)
        if off is None:
            off = _INHERITED[key] = frozenset(n for n in names if getattr(type(self), n) is getattr(base, n))
        held = self.__dict__.get(SWITCHED_OFF)
        self.__dict__[SWITCHED_OFF] = off if held is None or held is off else held | off

    def report(
        self,
        node: cst.CSTNode,
        message: Optional[str] = None,
        hint: Optional[str] = None,
        *,
        evidence: Optional[dict[str, Any]] = None,
        severity: Optional[Severity] = None,
        confidence: Optional[Confidence] = None,
    ) -> None:
        self.ctx.add_finding(
            self, node=node, message=message or self.message, hint=hint or self.hint,
            evidence=evidence or {}, severity=severity or self.active_severity, confidence=confidence,
        )

    def report_cpp(
        self,
        source: "CppSource",
        offset: int,
        message: Optional[str] = None,
        hint: Optional[str] = None,
        *,
        evidence: Optional[dict[str, Any]] = None,
        severity: Optional[Severity] = None,
        confidence: Optional[Confidence] = None,
    ) -> None:
        ev = {"cpp_line": source.line_in_source(offset), "origin": source.origin, **(evidence or {})}
        self.ctx.add_finding(
            self, cpp=(source, offset), message=message or self.message, hint=hint or self.hint,
            evidence=ev, severity=severity or self.active_severity, confidence=confidence,
        )

    def check_cpp(self, source: "CppSource") -> None:
        """Called once for each C++/CUDA source the submission compiles or carries."""

    def finish(self) -> None:
        """Called after the traversal and the C++ checks."""
