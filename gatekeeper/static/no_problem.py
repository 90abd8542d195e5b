"""GK006: the notice that the rules which need the problem did not run.

Without the problem (no `--problem`, no problem mapping in the configuration) the rules
that compare the submission with the problem's sizes and source are skipped. A skipped
check must never look like a passed one, so the report says it, as a warning by default
(set `[rules.GK006] severity = "error"` to require a problem).
"""

from __future__ import annotations

from typing import Optional, Sequence

from gatekeeper.report import Category, Finding, Severity, StageName
from gatekeeper.static.rule import Rule


class NoProblemGiven(Rule):
    """No problem was given, so the rules that need it did not run: the hardcoded-shape
    rules that compare literals with the problem's sizes (GK202, GK203, GK204, GK206) and
    the reference-copy rule (GK403). A submission that bakes the problem's shapes into its
    kernel passes the static stage unnoticed without them.

    Give the problem with `--problem PATH`, or map submissions to problems once in the
    configuration (`[[tool.gatekeeper.problem_map]]`, see docs/configuration.md)."""

    code = "GK006"
    name = "NoProblemGiven"
    category = Category.NOT_CHECKED  # a notice about skipped rules, not a hack (was hardcoded-shape)
    severity = Severity.WARNING
    summary = "no problem given: the rules that need it did not run"
    message = "No problem was given, so {count} rule(s) that need it did not run: {codes}."
    hint = ("Give the reference problem (--problem PATH on the command line, `problem=` in the Python API "
            "and the MCP tools), or map submissions to problems in the configuration ([[problem_map]]).")
    source_file = __file__


def no_problem_notice(rules: Sequence[type[Rule]], problem: object, path: str, config) -> Optional[Finding]:
    """GK006 when a problem-needing rule is enabled but no problem was given; else None."""
    if problem is not None:
        return None
    settings = config.rule(NoProblemGiven.code)
    skipped = sorted(r.code for r in rules if r.needs_problem)
    if not skipped or not settings.enabled:
        return None
    return Finding(
        rule=NoProblemGiven.code, name=NoProblemGiven.name, category=NoProblemGiven.category,
        severity=settings.severity or NoProblemGiven.severity_for(config.profile), stage=StageName.STATIC,
        message=NoProblemGiven.message.format(count=len(skipped), codes=", ".join(skipped)),
        hint=NoProblemGiven.hint, evidence={"skipped_rules": skipped},
    )
