"""Per-file state shared by all rules during the one traversal."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import libcst as cst

from gatekeeper.report import Confidence, Finding, Location, Severity, StageName
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.names import NameResolver
from gatekeeper.static.positions import positions_for
from gatekeeper.static.problem_facts import ProblemFacts

if TYPE_CHECKING:
    from gatekeeper.static.rule import Rule

MODULE_KEY = "<module>"


@dataclass
class _Pending:
    rule: "Rule"
    message: str
    hint: str
    severity: Severity
    evidence: dict[str, Any]
    node: Optional[cst.CSTNode] = None
    cpp: Optional[tuple[CppSource, int]] = None
    confidence: Confidence = Confidence.CERTAIN


def weigh(severity: Severity, confidence: Confidence, profile: str) -> Severity:
    """A suspect pattern alone does not reject outside `strict`: honest code writes it
    too, so it is a warning until the run-time check named in `confirmed_by` confirms it."""
    if confidence == Confidence.SUSPECT and severity == Severity.ERROR and profile != "strict":
        return Severity.WARNING
    return severity


@dataclass
class FileContext:
    path: str
    text: str
    module: cst.Module
    profile: str
    problem: Optional[ProblemFacts]
    folder: Optional[Path]
    resolver: NameResolver = field(default_factory=NameResolver)
    parents: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)
    # Enclosing definitions, innermost last.
    functions: list[cst.FunctionDef] = field(default_factory=list)
    classes: list[cst.ClassDef] = field(default_factory=list)
    function_keys: list[str] = field(default_factory=list)
    # Module-level `NAME = value` (every value assigned, in order).
    constants: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    cpp_sources: list[CppSource] = field(default_factory=list)
    calls: dict[str, set[str]] = field(default_factory=dict)  # callee -> callers
    defined: set[str] = field(default_factory=set)
    pending: list[_Pending] = field(default_factory=list)

    # structure ---------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.parents.get(node)

    def ancestors(self, node: cst.CSTNode):
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)

    @property
    def function_key(self) -> str:
        return self.function_keys[-1] if self.function_keys else MODULE_KEY

    @property
    def class_name(self) -> Optional[str]:
        return self.classes[-1].name.value if self.classes else None

    def qualname(self, expr: Optional[cst.BaseExpression]) -> Optional[str]:
        # Not memoised: a rule may resolve a node before the traversal reaches it (a
        # pre-scan), and the answer depends on the bindings seen so far.
        return self.resolver.qualname(expr)

    def in_method(self, name: str, cls: Optional[str] = None) -> bool:
        if not self.functions or self.functions[-1].name.value != name:
            return False
        return cls is None or self.class_name == cls

    def is_init_only(self, key: str) -> bool:
        """True when `key` does not run inside the model's call: `__init__`, module level,
        harness glue, or functions only those reach (see static/forward_path.py)."""
        from gatekeeper.static.forward_path import in_forward

        return not in_forward(self, key)

    # findings ------------------------------------------------------------------
    def add_finding(
        self,
        rule: "Rule",
        *,
        message: str,
        hint: str,
        evidence: dict[str, Any],
        severity: Severity,
        node: Optional[cst.CSTNode] = None,
        cpp: Optional[tuple[CppSource, int]] = None,
        confidence: Optional[Confidence] = None,
    ) -> None:
        confidence = confidence or rule.confidence
        severity = weigh(severity, confidence, self.profile)
        self.pending.append(_Pending(rule, message, hint, severity, evidence, node, cpp, confidence))

    def materialise(self) -> list[Finding]:
        """Turn pending findings into Findings, computing positions in one pass."""
        nodes = [p.node for p in self.pending if p.node is not None]
        for p in self.pending:
            if p.cpp is not None:
                segment = p.cpp[0].segment_at(p.cpp[1])
                if segment.node is not None:
                    nodes.append(segment.node)
        ranges = positions_for(self.module, nodes, self.parents, self.text)
        out: list[Finding] = []
        seen: set[tuple[str, int, int]] = set()
        for p in self.pending:
            location = self._locate(p, ranges)
            key = (p.rule.code, location.line if location else 0, location.column if location else 0)
            if key in seen:
                continue
            seen.add(key)
            if location is not None and "source_line" not in p.evidence:
                p.evidence["source_line"] = self.line_text(location.line)
            out.append(Finding(
                rule=p.rule.code, name=p.rule.name, category=p.rule.category,
                severity=p.severity, stage=StageName.STATIC, message=p.message,
                hint=p.hint, location=location, evidence=p.evidence,
                confidence=p.confidence, confirmed_by=p.rule.confirmed_by,
            ))
        out.sort(key=lambda f: (f.location.line if f.location else 0, f.rule))
        return out

    def _locate(self, p: _Pending, ranges: dict[int, Any]) -> Optional[Location]:
        if p.node is not None:
            rng = ranges.get(id(p.node))
            if rng is None:
                return None
            return Location(path=self.path, line=rng.start.line, column=rng.start.column + 1,
                            end_line=rng.end.line, end_column=rng.end.column + 1)
        assert p.cpp is not None
        source, offset = p.cpp
        segment = source.segment_at(offset)
        if segment.file is not None:
            line = source.text.count("\n", segment.start, offset) + 1
            return Location(path=str(Path(self.path).parent / segment.file), line=line, column=1)
        rng = ranges.get(id(segment.node)) if segment.node is not None else None
        if rng is None:
            return None
        # Pieces of one literal (an f-string's parts) count lines from the literal's start.
        first = next(s for s in source.segments if s.node is segment.node)
        newlines = source.text.count("\n", first.start, offset)
        span = max(rng.end.line - rng.start.line, 0)
        line = rng.start.line + min(newlines, span)
        if newlines and line <= rng.end.line:
            column = offset - source.text.rfind("\n", 0, offset)
        else:
            column = rng.start.column + 1
        return Location(path=self.path, line=line, column=max(column, 1))

    def line_text(self, line: int) -> str:
        lines = self.text.splitlines()
        return lines[line - 1].rstrip() if 0 < line <= len(lines) else ""
