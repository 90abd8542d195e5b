"""The static stage for one submission: decode, guard, parse, run every rule."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Sequence

import libcst as cst

from gatekeeper.config import Config
from gatekeeper.report import Finding, Location, Severity, StageName
from gatekeeper.static import python_ast
from gatekeeper.static.collector_pause import collector_paused
from gatekeeper.static.discovery import discover_rules
from gatekeeper.static.engine import run_rules
from gatekeeper.static.load_checks import (
    LOAD_RULES,     SubmissionEmpty, SubmissionNotText, SubmissionSyntaxError, SubmissionTooLarge,
)
from gatekeeper.static.no_problem import no_problem_notice
from gatekeeper.static.shapes_notice import shapes_notice
from gatekeeper.static.parse_screen import ParseRefused, safe_parse, syntax_location
from gatekeeper.static.problem_facts import ProblemFacts
from gatekeeper.static.rule import Rule

_SUPPRESS = re.compile(r"#\s*gatekeeper:\s*ignore\[([A-Z0-9, ]+)\]")


def _load_finding(rule: type[Rule], path: str, detail: str = "", line: Optional[int] = None,
                  column: Optional[int] = None) -> Finding:
    return Finding(
        rule=rule.code, name=rule.name, category=rule.category, severity=Severity.ERROR,
        stage=StageName.STATIC, message=f"{rule.message} {detail}".strip(), hint=rule.hint,
        location=Location(path=path, line=line, column=column or 1) if line else None,
    )


def active_rules(config: Config) -> list[type[Rule]]:
    """Enabled rules that inspect source (the load checks run before parsing)."""
    return [
        r for r in discover_rules(config.rule_dirs)
        if r not in LOAD_RULES and config.rule(r.code).enabled
    ]


def severities(rules: Sequence[type[Rule]], config: Config) -> dict[str, Severity]:
    out = {}
    for rule in rules:
        override = config.rule(rule.code).severity
        out[rule.code] = override or rule.severity_for(config.profile)
    return out


_Plan = tuple[list[type[Rule]], dict[str, dict], dict[str, Severity]]
_PLANS: dict[int, tuple[Config, tuple, _Plan]] = {}


def _rule_plan(config: Config) -> _Plan:
    """The active rules, their options and severities for `config`, worked out once per
    configuration rather than per file (a batch checks thousands of files with one). Keyed
    by what they depend on, so a configuration changed in place is worked out again."""
    token = (config.profile, tuple(config.select), tuple(config.ignore), tuple(config.rule_dirs),
             tuple((code, s.enabled, s.severity, id(s.options)) for code, s in config.rules.items()))
    hit = _PLANS.get(id(config))
    if hit is not None and hit[0] is config and hit[1] == token:
        return hit[2]
    rules = active_rules(config)
    plan = (rules, {code: s.options for code, s in config.rules.items()}, severities(rules, config))
    if len(_PLANS) >= 16:
        _PLANS.clear()
    _PLANS[id(config)] = (config, token, plan)
    return plan


def run_static(data: bytes, path: str, config: Config, problem: Optional[ProblemFacts]) -> list[Finding]:
    with collector_paused():
        try:
            return _run_static(data, path, config, problem)
        finally:
            python_ast.forget()


def _run_static(data: bytes, path: str, config: Config, problem: Optional[ProblemFacts]) -> list[Finding]:
    if len(data) > config.max_file_bytes:
        return [_load_finding(SubmissionTooLarge, path,
                              f"It is {len(data):,} bytes; the limit is {config.max_file_bytes:,}.")]
    from gatekeeper.static.source_text import Undecodable, decode_source

    text = decode_source(data)  # PEP 263: a declared latin-1 file is text, as Python imports it
    if isinstance(text, Undecodable):
        finding = _load_finding(SubmissionNotText, path, text.detail, text.line, text.column)
        if text.source_line is not None:
            finding.evidence["source_line"] = text.source_line
        return [finding]
    if "\x00" in text:
        return [_load_finding(SubmissionNotText, path, "It contains NUL bytes.")]
    if not text.strip():
        return [_load_finding(SubmissionEmpty, path)]
    lines = text.count("\n") + 1
    if lines > config.max_file_lines:
        return [_load_finding(SubmissionTooLarge, path,
                              f"It has {lines:,} lines; the limit is {config.max_file_lines:,}.")]
    text = text.removeprefix("\ufeff")  # a byte-order mark is valid Python; positions count without it
    try:
        module = safe_parse(text, data)
    except ParseRefused as exc:
        return [_load_finding(SubmissionSyntaxError, path, exc.reason, exc.line, exc.column)]
    except cst.ParserSyntaxError as exc:
        line, column, message = syntax_location(text)  # CPython's location is the accurate one
        if line is None:
            line, column, message = exc.raw_line, exc.raw_column + 1, exc.message
        found = _load_finding(SubmissionSyntaxError, path, message, line, column)
        if line is not None and 0 < line <= len(text.splitlines()):
            found.evidence["source_line"] = text.splitlines()[line - 1]  # the line and a caret under the column
        return [found]
    rules, settings, severity = _rule_plan(config)
    try:
        findings = run_rules(
            module, path=path, text=text, rule_classes=rules, profile=config.profile,
            settings=settings, severities=severity, problem=problem, folder=lambda: _folder_of(path),
        )
    except RecursionError:
        # The file parsed and passed the nesting screen: a rule that recursed is the
        # gatekeeper's bug (e.g. `k = (k, k, k)` followed forever), never the submission's fault.
        from gatekeeper.errors import InfrastructureError
        raise InfrastructureError(f"a static rule recursed without end on {path}: a gatekeeper bug, "
                                  "not a finding about the submission") from None
    if config.allow_suppressions:
        findings = _apply_suppressions(findings, text)
    notice = no_problem_notice(rules, problem, path, config)  # skipped rules are said, never silent
    unread = shapes_notice(problem, config)  # GK007: declared shapes a static read could not follow
    return findings + [n for n in (notice, unread) if n]


def _folder_of(path: str) -> Optional[Path]:
    """Where side files named by the submission are read from: beside it, when it is a
    file on disk (a source checked from memory reads none)."""
    return Path(path).parent if path and Path(path).exists() else None


def _apply_suppressions(findings: list[Finding], text: str) -> list[Finding]:
    lines = text.splitlines()
    kept = []
    for finding in findings:
        line = finding.location.line if finding.location else 0
        match = _SUPPRESS.search(lines[line - 1]) if 0 < line <= len(lines) else None
        codes = {c.strip() for c in match.group(1).split(",")} if match else set()
        if finding.rule not in codes:
            kept.append(finding)
    return kept
