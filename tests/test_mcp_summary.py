"""The plain summary each MCP reply starts with, on real reports from the real API: the
verdict first, every error finding with its line and fix, and what was not checked."""

from __future__ import annotations

from pathlib import Path

import gatekeeper
from gatekeeper.agent.summary import summarise
from gatekeeper.config import Config, RuleSettings

ROOT = Path(__file__).resolve().parent.parent
HACKED = (ROOT / "fixtures/submissions/seed_cached_hardcoded.py").read_text("utf-8")
HONEST = (ROOT / "fixtures/submissions/seed_honest_generic.py").read_text("utf-8")
PROBLEM = (ROOT / "fixtures/problems/seed_mean.py").read_text("utf-8")


def test_reject_lists_every_error_with_line_and_fix():
    report = gatekeeper.check_static(HACKED, PROBLEM)
    text = summarise(report)
    first, *rest = text.splitlines()
    assert first == f"Verdict: REJECT, {len(report.errors())} error finding(s). Fix every one, then call again:"
    errors_part = "\n".join(rest).split("warning(s), not blocking")[0]
    finding_lines = [line for line in errors_part.splitlines() if line.startswith("- line ")]
    assert len(finding_lines) == len(report.errors())
    for finding, line in zip(report.errors(), finding_lines):
        assert line.startswith(f"- line {finding.location.line}: [{finding.rule} {finding.category.value}]")
        assert finding.message in line
    # Each distinct fix is spelled out once; repeats point back to it.
    hints = {f.hint for f in report.errors()}
    for hint in hints:
        assert text.count(hint) == 1
    assert "same fix as above" in text  # GK203 fires on several lines of the seed
    assert "Stages checked: static." in text and "build (skipped)" in text
    # The suspicions held for a run-time check are said to be unconfirmed, and why.
    held = report.unconfirmed()
    assert held and f"{len(held)} suspicion(s) are unconfirmed" in text


def test_pass_says_which_stages_were_not_checked():
    report = gatekeeper.check_static(HONEST, PROBLEM)
    text = summarise(report)
    assert report.verdict.value == "pass"
    assert text.startswith("Verdict: PASS, no error findings.")
    unchecked = [s for s in report.stages if s.status.value in ("skipped", "not-implemented")]
    assert unchecked  # static-only: build, behaviour and timing did not run
    for stage in unchecked:
        assert f"{stage.name.value} ({stage.status.value})" in text.split("Not checked:")[1]


def test_error_verdict_is_not_blamed_on_the_code():
    report = gatekeeper.check_static(HONEST, problem="def get_inputs(:\n")
    text = summarise(report)
    assert text.startswith("Verdict: ERROR.") and "not a judgement of your code" in text
    assert report.error in text


def test_warnings_are_listed_apart_from_errors():
    # Under strict nothing is held back, so the only warnings are the ones configured.
    config = Config(profile="strict", rules={"GK203": RuleSettings(severity="warning")})
    report = gatekeeper.check_static(HACKED, PROBLEM, config=config)
    warnings = [f for f in report.findings if f.severity.value == "warning"]
    assert warnings and all(f.rule == "GK203" for f in warnings)
    text = summarise(report)
    errors_part, warnings_part = text.split("warning(s), not blocking but suspicious:")
    assert "GK203" not in errors_part and "GK101" in errors_part
    assert warnings_part.count("[GK203 hardcoded-shape]") == len(warnings)
