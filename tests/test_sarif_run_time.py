"""SARIF for the run-time codes (build and behaviour GK6xx, timing GK7xx): each rule
descriptor links its docs/rules.md section (helpUri) and carries a clean description (no
indentation, no unfilled {placeholder}) and its fix, as for the static rules. The first test
builds Reports from the pydantic models for every run-time code; the second runs a real CPU
submission through the behaviour stage and renders its SARIF from the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.catalogue import DOCS_URL, catalogue
from gatekeeper.render.sarif import to_sarif
from gatekeeper.report import Environment, FileRef, Finding, Location, Report, StageName
from gatekeeper.runtime.checks import finding

ROOT = Path(__file__).resolve().parent.parent
RULES_MD = (ROOT / "docs" / "rules.md").read_text("utf-8")
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _report(findings: list[Finding]) -> Report:
    return Report(verdict="reject", submission=FileRef(path="k.py", sha256="0"), profile="default",
                  findings=findings, environment=Environment(gatekeeper="0", python="3"))


def _assert_clean_descriptor(rule: dict, expected_stage: str) -> None:
    code = rule["id"]
    entry = catalogue()[code]
    assert rule["name"] == entry.name
    assert rule["helpUri"] == f"{DOCS_URL}#{code.lower()}"
    assert f'<a id="{code.lower()}"></a>' in RULES_MD, f"helpUri of {code} points at no section"
    text = rule["fullDescription"]["text"]
    assert text and text == text.strip() and text[0].isupper(), (code, text)
    assert not re.search(r"\n[ \t]", text), f"{code}: description keeps its indentation"
    assert not re.search(r"\{[a-z_]+\}", text), f"{code}: unfilled placeholder in {text!r}"
    assert rule["shortDescription"]["text"].strip()
    assert rule["help"]["text"] == f"Fix: {entry.hint}" and entry.hint.strip()
    assert rule["defaultConfiguration"]["level"] == _LEVEL[entry.severity.value]
    assert rule["properties"]["stage"] == expected_stage and expected_stage in rule["properties"]["tags"]


def test_every_run_time_code_has_a_described_sarif_rule():
    entries = [e for e in catalogue().values() if e.stage != StageName.STATIC]
    assert {e.stage for e in entries} == {StageName.BUILD, StageName.BEHAVIOUR, StageName.TIMING}
    findings = [Finding(rule=e.code, name=e.name, category=e.category, severity=e.severity, stage=e.stage,
                        message=f"{e.name} happened", hint=e.hint) for e in entries]
    run = to_sarif([_report(findings)])["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [e.code for e in entries]
    for rule, entry in zip(rules, entries):
        _assert_clean_descriptor(rule, entry.stage.value)
    for result, entry in zip(run["results"], entries):
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"] == entry.code
        assert result["message"]["text"] == f"{entry.name} happened Fix: {entry.hint}"
        assert result["properties"]["stage"] == entry.stage.value


def test_a_behaviour_finding_made_by_the_run_time_catalogue():
    """finding() as the behaviour stage calls it, with a location in the submission."""
    made = finding("GK610", StageName.BEHAVIOUR, what="was overwritten by the second call",
                   location=Location(path="k.py", line=12, column=5))
    run = to_sarif([_report([made])])["runs"][0]
    _assert_clean_descriptor(run["tool"]["driver"]["rules"][0], "behaviour")
    result = run["results"][0]
    assert result["level"] == "error" and "was overwritten by the second call" in result["message"]["text"]
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": 12, "startColumn": 5}


@pytest.mark.slow  # runs a submission in the sandbox
def test_cli_sarif_of_a_real_behaviour_reject():
    submission = ROOT / "fixtures" / "submissions" / "cpu_reuse_stale_python.py"  # stale values: GK610
    problem = ROOT / "fixtures" / "problems" / "cpu_mean.py"
    proc = subprocess.run([sys.executable, "-m", "gatekeeper", "check", str(submission), "-p", str(problem),
                           "--select", "GK6", "-f", "sarif"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 1, proc.stderr
    run = json.loads(proc.stdout)["runs"][0]
    assert run["invocations"][0]["executionSuccessful"] is True
    rules = run["tool"]["driver"]["rules"]
    assert "GK610" in [r["id"] for r in rules]
    assert all(r["id"].startswith("GK6") for r in rules)  # --select GK6: the static findings are left out
    for rule in rules:
        _assert_clean_descriptor(rule, rule["properties"]["stage"])
