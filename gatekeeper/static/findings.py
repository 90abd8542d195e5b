"""The findings store of one checked file: what rules report during the traversal, turned
into report Findings (with positions, computed in one pass) at the end.

Its own module so that the file context (context.py) and the rule base (rule.py) do not
import each other: a rule reports into the store through its context, and the store only
needs what `RuleFacts` names of a rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Optional, Protocol

import libcst as cst

from gatekeeper.report import (
    Category, Confidence, Finding, Location, ProbeLink, ProbeOutcome, Severity, StageName,
)
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.positions import positions_for


class RuleFacts(Protocol):
    """What the store reads of the rule behind a finding (gatekeeper.static.rule.Rule)."""

    code: str
    name: str
    category: Category
    confidence: Confidence
    confirmed_by: Optional[str]


@dataclass
class PendingFinding:
    rule: RuleFacts
    message: str
    hint: str
    severity: Severity
    evidence: dict[str, Any]
    node: Optional[cst.CSTNode] = None
    cpp: Optional[tuple[CppSource, int]] = None
    confidence: Confidence = Confidence.CERTAIN
    static_severity: Severity = Severity.ERROR  # what the rule said, before the verdict policy


def weigh(severity: Severity, confidence: Confidence, profile: str) -> Severity:
    """The verdict policy, enforced here for every rule: a finding that is not certain in
    every honest reading never rejects on its own outside `strict`. It is a warning, held
    until the run-time check named in `confirmed_by` settles it (gatekeeper.settle)."""
    if confidence != Confidence.CERTAIN and severity == Severity.ERROR and profile != "strict":
        return Severity.WARNING
    return severity


def probe_link(check: Optional[str], confidence: Confidence, static_severity: Severity,
               severity: Severity) -> Optional[ProbeLink]:
    """The evidence link a static finding starts with: unconfirmed, with what would settle it."""
    held = severity != static_severity
    if check is None and not held:
        return None
    if check is None:
        detail = ("no run-time check settles this pattern: it does not reject under this profile; "
                  "review it by hand")
    elif held:
        detail = (f"{confidence.value}, not certain: it rejects only if the run-time check {check} confirms "
                  f"it (run the behaviour stage, i.e. without --static-only)")
    else:
        detail = f"the run-time check {check} can corroborate this when the behaviour stage runs"
    return ProbeLink(check=check, outcome=ProbeOutcome.UNCONFIRMED, detail=detail,
                     static_severity=static_severity)


@dataclass
class FindingStore:
    path: str
    text: str
    module: cst.Module
    profile: str
    parents: dict[cst.CSTNode, cst.CSTNode]
    pending: list[PendingFinding] = field(default_factory=list)

    def add(
        self,
        rule: RuleFacts,
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
        weighed = weigh(severity, confidence, self.profile)
        self.pending.append(PendingFinding(rule, message, hint, weighed, evidence, node, cpp, confidence, severity))

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
                # a side file's line (`load(sources=[...])`) is the C++ line, not the .py's
                beside = location.path != self.path and "cpp_line" in p.evidence
                p.evidence["source_line"] = p.evidence["cpp_line"] if beside else self.line_text(location.line)
            out.append(Finding(
                rule=p.rule.code, name=p.rule.name, category=p.rule.category,
                severity=p.severity, stage=StageName.STATIC, message=p.message,
                hint=p.hint, location=location, evidence=p.evidence,
                confidence=p.confidence, confirmed_by=p.rule.confirmed_by,
                probe=probe_link(p.rule.confirmed_by, p.confidence, p.static_severity, p.severity),
            ))
        out.sort(key=lambda f: (f.location.line if f.location else 0, f.rule))
        return out

    def _locate(self, p: PendingFinding, ranges: dict[int, Any]) -> Optional[Location]:
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

    @cached_property
    def _lines(self) -> list[str]:
        """Split once per file, not once per finding (a file may have dozens); text never changes."""
        return self.text.splitlines()

    def line_text(self, line: int) -> str:
        lines = self._lines
        return lines[line - 1].rstrip() if 0 < line <= len(lines) else ""
