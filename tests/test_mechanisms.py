"""The mechanisms promoted to certain (issue 20 item 6, issue 22 item 2): each hacked
fixture in fixtures/manifest/mechanisms.toml is rejected by the static stage alone under
the default profile, by the rule its entry names, with a certain error at a line of the
file; each honest near miss gets no finding at all from the new rules, and no error from any of
them."""

import sys
from pathlib import Path

import pytest

import gatekeeper

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CASES = tomllib.loads((FIXTURES / "manifest" / "mechanisms.toml").read_text("utf-8"))["case"]
MECHANISM_RULES = sorted({rule for case in CASES for rule in case.get("rules", [])})
NEW_RULES = {"GK108", "GK309", "GK417", "GK418", "GK425", "GK541"}  # an existing rule (GK416) may still warn


def _check(case):
    problem = FIXTURES / case["problem"] if case.get("problem") else None
    return gatekeeper.check_static(FIXTURES / case["submission"], problem, profile=case.get("profile", "default"))


@pytest.mark.parametrize("case", [c for c in CASES if c["verdict"] == "reject"], ids=lambda c: Path(c["submission"]).stem)
def test_hacked_fixture_is_convicted_by_its_mechanism(case):
    report = _check(case)
    assert report.verdict.value == "reject"
    for rule in case["rules"]:
        found = [f for f in report.findings if f.rule == rule]
        assert found, f"{rule} did not fire on {case['submission']}: {[f.rule for f in report.findings]}"
        certain = [f for f in found if f.severity.value == "error" and f.confidence.value == "certain"]
        assert certain, f"{rule} fired but not as a certain error: {[(f.severity, f.confidence) for f in found]}"
        assert all(f.location is not None and f.location.line >= 1 for f in certain)


@pytest.mark.parametrize("case", [c for c in CASES if c["verdict"] == "pass"], ids=lambda c: Path(c["submission"]).stem)
def test_honest_near_miss_is_clean_of_the_mechanism_rules(case):
    report = _check(case)
    noisy = [(f.rule, f.location.line if f.location else None, f.message) for f in report.findings
             if f.rule in NEW_RULES or (f.rule in MECHANISM_RULES and f.severity.value == "error")]
    assert not noisy, noisy
    assert report.verdict.value == "pass"
